"""A throwaway PostgreSQL server (wal_level=logical) from Debian's binaries, for tests and demos.

`LocalPostgres(base).start()` runs initdb in `base` and starts the server on a free loopback port
(as the `postgres` system user when run as root, since initdb and pg_ctl refuse root). `kill()`
stops it as a crash would (`pg_ctl -m immediate`), `start()` brings it back on the same data, and
`stop()` ends it. The tests' `postgres` fixture (tests/support/postgres.py) and `make demo-cdc` use
it. Binaries: `apt-get install -y postgresql` (`make postgres`), or `EOSCONNECT_PG_BINDIR`.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["LocalPostgres", "PostgresUnavailable", "postgres_bindir"]


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries (or no `postgres` user to run them as root); says what to install."""


def postgres_bindir() -> Path | None:
    candidates = [os.environ.get("EOSCONNECT_PG_BINDIR", "")]
    if found := shutil.which("pg_ctl"):
        candidates.append(str(Path(found).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class LocalPostgres:
    """One server whose data directory and socket live under `base` (removed by `stop()`)."""

    base: Path
    port: int = field(default_factory=_free_port)
    _prefix: list[str] = field(default_factory=list, init=False)
    _bindir: Path | None = field(default=None, init=False)

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def url(self) -> str:
        """The SQLAlchemy URL without a database name."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    def _run(self, *args: str, check: bool = True) -> None:
        result = subprocess.run([*self._prefix, *args], capture_output=True, text=True, timeout=120)
        if check and result.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")

    def init(self) -> LocalPostgres:
        """initdb (once); raises PostgresUnavailable without the binaries."""
        self._bindir = postgres_bindir()
        if self._bindir is None:
            raise PostgresUnavailable(
                "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with "
                "`apt-get install -y postgresql` (or `make postgres`, or set EOSCONNECT_PG_BINDIR)"
            )
        self.base.mkdir(parents=True, exist_ok=True)
        if os.geteuid() == 0:
            try:
                shutil.chown(self.base, "postgres", "postgres")
            except LookupError as exc:
                raise PostgresUnavailable("running as root and there is no `postgres` user") from exc
            self._prefix = ["runuser", "-u", "postgres", "--"]
        initdb = str(self._bindir / "initdb")
        self._run(initdb, "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        return self

    def start(self) -> LocalPostgres:
        """Start the server (initdb first if needed); waits until it accepts connections."""
        if self._bindir is None:
            self.init()
        assert self._bindir is not None
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
        options += " -c full_page_writes=off -c wal_level=logical"  # change data capture reads slots
        log = str(self.base / "server.log")
        self._run(str(self._bindir / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", log, "-w", "start")
        return self

    def kill(self) -> None:
        """Stop at once, as a crash would (`pg_ctl -m immediate`: no checkpoint, clients cut off)."""
        if self._bindir is not None:
            self._run(str(self._bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop")

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        if self._bindir is not None:
            self._run(
                str(self._bindir / "pg_ctl"),
                "-D",
                str(self.data),
                "-m",
                "immediate",
                "-w",
                "stop",
                check=False,
            )
        shutil.rmtree(self.base, ignore_errors=True)

    def create_database(self, name: str) -> str:
        """A new, empty database; its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(host="127.0.0.1", port=self.port, user="postgres", dbname="postgres") as conn:
            conn.autocommit = True
            conn.execute(f"CREATE DATABASE {name}")
        return f"{self.url}/{name}"
