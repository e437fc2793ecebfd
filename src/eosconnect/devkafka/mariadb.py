"""A throwaway MariaDB server from Debian's `mariadb-server` package, for tests.

`LocalMariaDB` initialises a data directory of its own (`mariadb-install-db`), runs `mariadbd` on a
free loopback port (as the `mysql` system user when started by root), creates a user `eos` with
every privilege, and is stopped by its own pid. Like `devkafka.postgres`, it is a test bed: no
durability settings beyond InnoDB's defaults matter here. `LocalMariaDB(binlog=True)` writes a binary
log in the form change data capture needs (`BINLOG_SETTINGS`: row events with full images and full
table map metadata, server id 1); without it the server keeps none.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

from eosconnect.devkafka.java_command import die_with_parent
from eosconnect.devkafka.ports import free_port

__all__ = ["BINLOG_SETTINGS", "LocalMariaDB", "MariaDBSetupError", "mariadb_binaries"]

#: The server options MySqlCdcSource requires (docs/mysql-cdc.md), besides a binary log of its own.
BINLOG_SETTINGS = (
    "--server-id=1",
    "--binlog-format=ROW",
    "--binlog-row-image=FULL",
    "--binlog-row-metadata=FULL",
)


class MariaDBSetupError(RuntimeError):
    """No MariaDB binaries, or the server could not be set up."""


def mariadb_binaries() -> tuple[str, str] | None:
    """(mariadb-install-db, mariadbd), or None where the server package is not installed."""
    install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
    server = shutil.which("mariadbd") or next(
        (p for p in ("/usr/sbin/mariadbd", "/usr/sbin/mysqld") if Path(p).exists()), None
    )
    return (install, server) if install and server else None


class LocalMariaDB:
    """One MariaDB server in a fresh temporary directory; `url` has no database name."""

    USER = "eos"

    def __init__(self, *, binlog: bool = False, options: tuple[str, ...] = ()) -> None:
        found = mariadb_binaries()
        if found is None:
            raise MariaDBSetupError(
                "MariaDB server binaries (mariadb-install-db, mariadbd) not found: install them with "
                "`apt-get install -y --no-install-recommends mariadb-server`"
            )
        self.install_db, self.mariadbd = found
        self.base = Path(tempfile.mkdtemp(prefix="eosconnect-mariadb-"))
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._user_args: list[str] = []
        self.binlog = binlog
        self.options = options  # more mariadbd options, e.g. `--version=...` for a client's version gate
        if os.geteuid() == 0:
            try:
                shutil.chown(self.base, "mysql", "mysql")
            except LookupError as exc:
                shutil.rmtree(self.base)
                raise MariaDBSetupError(
                    "running as root and there is no `mysql` user to run MariaDB as"
                ) from exc
            self._user_args = ["--user=mysql"]

    @property
    def url(self) -> str:
        return f"mysql+pymysql://{self.USER}@127.0.0.1:{self.port}"

    @property
    def socket_path(self) -> Path:
        return self.base / "mysqld.sock"

    def start(self, timeout: float = 120.0) -> str:
        """Initialise (first time only) and start; returns the URL once `eos` can connect."""
        data = self.base / "data"
        first = not data.exists()
        if first:
            result = subprocess.run(
                [
                    self.install_db,
                    "--no-defaults",
                    f"--datadir={data}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    *self._user_args,
                ],
                capture_output=True,
                text=True,
                timeout=300,
            )
            if result.returncode != 0:
                raise MariaDBSetupError(f"mariadb-install-db failed:\n{result.stdout}\n{result.stderr}")
            self.port = free_port()
        log = (self.base / "server.out").open("ab")
        self.proc = subprocess.Popen(
            [
                self.mariadbd,
                "--no-defaults",
                f"--datadir={data}",
                f"--port={self.port}",
                "--bind-address=127.0.0.1",
                f"--socket={self.socket_path}",
                f"--pid-file={self.base / 'mariadbd.pid'}",
                f"--log-error={self.base / 'error.log'}",
                *(
                    (f"--log-bin={self.base / 'data' / 'binlog'}", *BINLOG_SETTINGS)
                    if self.binlog
                    else ("--skip-log-bin",)
                ),
                "--innodb-buffer-pool-size=64M",
                *self.options,
                *self._user_args,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        self._wait_ready(timeout, create_user=first)
        return self.url

    def _wait_ready(self, timeout: float, create_user: bool) -> None:
        import pymysql

        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise MariaDBSetupError(
                    f"mariadbd exited with {self.proc.returncode}: see {self.base}/error.log"
                )
            try:
                conn = pymysql.connect(unix_socket=str(self.socket_path), user="root", autocommit=True)
                break
            except pymysql.err.OperationalError:
                if time.monotonic() > deadline:
                    raise MariaDBSetupError(f"MariaDB did not start in {timeout:.0f} s") from None
                time.sleep(0.3)
        try:
            if create_user:
                with conn.cursor() as cur:
                    cur.execute(f"CREATE USER IF NOT EXISTS '{self.USER}'@'%'")
                    cur.execute(f"GRANT ALL PRIVILEGES ON *.* TO '{self.USER}'@'%'")
        finally:
            conn.close()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)

    def stop(self, remove: bool = True) -> None:
        """SIGTERM (a clean shutdown), SIGKILL after 60 s; by default remove the directory."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.kill()
        if remove:
            shutil.rmtree(self.base, ignore_errors=True)

    def new_database(self) -> str:
        """A new, empty database; its SQLAlchemy URL."""
        import sqlalchemy as sa

        name = f"t_{uuid.uuid4().hex[:10]}"
        engine = sa.create_engine(self.url, isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f"CREATE DATABASE {name}")
        finally:
            engine.dispose()
        return f"{self.url}/{name}"
