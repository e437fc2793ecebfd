"""A throwaway PostgreSQL server from Debian's binaries (`make postgres`), for tests and demos.

`LocalPostgres` runs one in a directory of its own on a free loopback port (as the `postgres`
system user when started by root, since initdb and pg_ctl refuse root), with `wal_level=logical`
for the change data capture connector and without fsync (a test bed, not a store). It is stopped
through its own data directory (`pg_ctl stop`, which signals the postmaster's pid), never by name.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

from eosconnect.devkafka.ports import free_port

__all__ = ["LocalPostgres", "PostgresSetupError", "postgres_bindir"]


class PostgresSetupError(RuntimeError):
    """No PostgreSQL binaries, or the server could not be set up."""


def postgres_bindir() -> Path | None:
    """The directory holding initdb and pg_ctl (EOSCONNECT_PG_BINDIR, PATH, /usr/lib/postgresql/*)."""
    candidates = [os.environ.get("EOSCONNECT_PG_BINDIR", "")]
    if found := shutil.which("pg_ctl"):
        candidates.append(str(Path(found).resolve().parent))
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for candidate in candidates:
        if candidate and (Path(candidate) / "initdb").exists() and (Path(candidate) / "pg_ctl").exists():
            return Path(candidate)
    return None


class LocalPostgres:
    """One PostgreSQL server in a fresh temporary directory; `url` has no database name."""

    def __init__(self, bindir: Path | None = None, base: Path | None = None) -> None:
        """`base`: where the data directory, socket and log live (default: a new temporary directory)."""
        found = bindir or postgres_bindir()
        if found is None:
            raise PostgresSetupError(
                "PostgreSQL server binaries (initdb, pg_ctl) not found: install them with `make postgres` "
                "(or `apt-get install -y postgresql`), or set EOSCONNECT_PG_BINDIR"
            )
        self.bindir = found
        self.base: Path | None = base
        self._initialised = False
        self.port = 0
        self._prefix: list[str] = []

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}"

    @property
    def data_dir(self) -> Path:
        assert self.base is not None, "server not started"
        return self.base / "data"

    @property
    def log_path(self) -> Path:
        assert self.base is not None, "server not started"
        return self.base / "server.log"

    def _run(self, *args: str) -> None:
        result = subprocess.run([*self._prefix, *args], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            raise PostgresSetupError(f"{' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")

    def start(self) -> str:
        """initdb (first time only) and start; returns the URL once the server accepts connections."""
        if not self._initialised:
            if self.base is None:
                self.base = Path(tempfile.mkdtemp(prefix="eosconnect-pg-"))
            else:
                self.base.mkdir(parents=True, exist_ok=True)
            if os.geteuid() == 0:
                try:
                    shutil.chown(self.base, "postgres", "postgres")
                except LookupError as exc:
                    shutil.rmtree(self.base)
                    raise PostgresSetupError(
                        "running as root and there is no `postgres` user to run PostgreSQL as"
                    ) from exc
                self._prefix = ["runuser", "-u", "postgres", "--"]
            self.port = free_port()
            initdb = [str(self.bindir / "initdb"), "-D", str(self.data_dir), "-U", "postgres"]
            self._run(*initdb, "--auth=trust", "-E", "UTF8", "--no-sync")
            self._initialised = True
        options = f"-p {self.port} -k {self.base} -c listen_addresses=127.0.0.1 -c fsync=off"
        options += " -c full_page_writes=off -c wal_level=logical"
        pg_ctl = [str(self.bindir / "pg_ctl"), "-D", str(self.data_dir)]
        self._run(*pg_ctl, "-o", options, "-l", str(self.log_path), "-w", "start")
        return self.url

    def pid(self) -> int | None:
        """The postmaster's pid (from its pid file), or None when it is not running."""
        try:
            return int((self.data_dir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        """Stop at once, as a crash would (`pg_ctl -m immediate`: no checkpoint, clients cut off)."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data_dir), "-m", "immediate", "-w", "stop")

    def stop(self, remove: bool = True) -> None:
        """Stop the server (fast shutdown) and, by default, remove its directory."""
        if self.base is None:
            return
        if self.pid() is not None:
            subprocess.run(
                [
                    *self._prefix,
                    str(self.bindir / "pg_ctl"),
                    "-D",
                    str(self.data_dir),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ],
                capture_output=True,
                timeout=60,
            )
        if remove:
            shutil.rmtree(self.base, ignore_errors=True)

    def new_database(self) -> str:
        """A new, empty database; its SQLAlchemy URL."""
        return new_database(self.url)

    def create_database(self, name: str) -> str:
        """A new, empty database called `name`; its SQLAlchemy URL."""
        import sqlalchemy as sa

        admin = sa.create_engine(f"{self.url}/postgres", isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {name}")
        finally:
            admin.dispose()
        return f"{self.url}/{name}"


def new_database(server: str) -> str:
    """A new, empty database on the server at `server` (a URL without database name); its URL."""
    import sqlalchemy as sa

    name = f"t_{uuid.uuid4().hex[:10]}"
    admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(f"CREATE DATABASE {name}")
    finally:
        admin.dispose()
    return f"{server}/{name}"
