"""The replication connection: the slot, its exported snapshot, and the pgoutput stream.

psycopg 3 does not speak the streaming replication protocol, so this uses psycopg2's
`LogicalReplicationConnection` (psycopg2-binary). Only this module touches it.
"""

from __future__ import annotations

import contextlib
import select
import time
from dataclasses import dataclass
from typing import Any

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.postgres_cdc.config import CdcConfig
from eosconnect.connectors.postgres_cdc.refusal import ConnectionRefused, refusal

__all__ = [
    "ReplicationLost",
    "ReplicationStream",
    "SlotSnapshot",
    "format_lsn",
    "loss_reason",
    "parse_lsn",
    "retained_wal",
]


def parse_lsn(text: str) -> int:
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def format_lsn(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


class ReplicationLost(ConnectException):
    """The replication connection could not be opened or was lost; `reason` is the server's or
    libpq's word for it. A streaming task retries (reconnect.py); starting, it fails."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


def loss_reason(exc: Exception) -> str:
    """What ended a connection, in the server's or libpq's words (a `ReplicationLost` keeps the first)."""
    if isinstance(exc, ReplicationLost):
        return exc.reason
    return str(exc).strip() or type(exc).__name__


@dataclass(frozen=True)
class SlotSnapshot:
    """A new slot's consistent point and the snapshot it exported (valid while the replication
    connection stays idle)."""

    consistent_lsn: int
    snapshot_name: str | None


@dataclass(frozen=True)
class WalMessage:
    payload: bytes
    data_start: int
    wal_end: int


class ReplicationStream:
    def __init__(self, config: CdcConfig) -> None:
        import psycopg2
        import psycopg2.extras

        self.slot: str = config["slot.name"]
        self.publication: str = config["publication.name"]
        try:
            self.conn = psycopg2.connect(
                config.dsn(), connection_factory=psycopg2.extras.LogicalReplicationConnection
            )
        except psycopg2.Error as exc:
            found = refusal(exc, config)
            if found is not None:
                raise ConnectionRefused(found) from exc
            raise ReplicationLost(
                f"cannot open a replication connection to {config.describe()}: {exc}", loss_reason(exc)
            ) from exc
        self.cursor = self.conn.cursor()
        #: The walsender serving this connection: after a loss, the slot's reader while the server has
        #: not noticed yet; any other reader is another instance.
        self.backend_pid: int = self.conn.get_backend_pid()
        self.started = False
        self.lost_reason: str | None = None  # the first failure's (later ones say "cursor already closed")

    def create_slot(self, *, export_snapshot: bool) -> SlotSnapshot:
        """CREATE_REPLICATION_SLOT <slot> LOGICAL pgoutput, exporting its snapshot if asked."""
        mode = "EXPORT_SNAPSHOT" if export_snapshot else "NOEXPORT_SNAPSHOT"
        self.cursor.execute(f'CREATE_REPLICATION_SLOT "{self.slot}" LOGICAL pgoutput {mode}')
        row = self.cursor.fetchone()
        return SlotSnapshot(parse_lsn(row[1]), row[2] if export_snapshot else None)

    def start(self, start_lsn: int = 0) -> None:
        """START_REPLICATION from the slot's confirmed position (or `start_lsn` if later)."""
        self.cursor.start_replication(
            slot_name=self.slot,
            decode=False,
            start_lsn=start_lsn,
            options={"proto_version": "1", "publication_names": self.publication},
        )
        self.started = True

    def read(self, timeout: float) -> WalMessage | None:
        """The next pgoutput message, waiting up to `timeout` seconds for one."""
        import psycopg2

        try:
            message = self.cursor.read_message()
            if message is None:
                ready = select.select([self.conn], [], [], timeout)[0]
                if ready:
                    message = self.cursor.read_message()
        except psycopg2.Error as exc:
            raise self._lost("reading", exc) from exc
        if message is None:
            return None
        return WalMessage(bytes(message.payload), message.data_start, message.wal_end)

    @property
    def wal_end(self) -> int:
        """The server's WAL position as of its latest message or keepalive."""
        return int(self.cursor.wal_end or 0)

    def confirm(self, flush_lsn: int) -> None:
        """Tell PostgreSQL everything up to `flush_lsn` is safely stored: the slot moves, the WAL
        before it can go."""
        import psycopg2

        try:
            self.cursor.send_feedback(flush_lsn=flush_lsn, write_lsn=flush_lsn, force=True)
        except psycopg2.Error as exc:
            raise self._lost("confirming on", exc) from exc

    def close(self) -> None:
        self.started = False
        with contextlib.suppress(Exception):
            self.conn.close()

    def _lost(self, doing: str, exc: Exception) -> ReplicationLost:
        reason = self.lost_reason = self.lost_reason or loss_reason(exc)
        return ReplicationLost(
            f"lost the replication connection {doing} slot {self.slot!r} ({reason}); the server also ends "
            "a reader that did not answer for wal_sender_timeout",
            reason,
        )


def slot_info(conn: Any, slot: str) -> tuple[str, int | None] | None:
    """(plugin, confirmed_flush_lsn) of a slot, or None if there is none (a psycopg 3 connection)."""
    row = conn.execute(
        "SELECT plugin, confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s", (slot,)
    ).fetchone()
    if row is None:
        return None
    return row[0], None if row[1] is None else parse_lsn(row[1])


def retained_wal(conn: Any, slot: str) -> str | None:
    """How much WAL a slot keeps the server from removing ("12 MB"), or None if there is no slot."""
    row = conn.execute(
        "SELECT pg_size_pretty(COALESCE(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)) "
        "FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    return None if row is None else str(row[0])


def release_timeout_s(conn: Any) -> float:
    """How long a slot's previous reader may hold on to it: the server ends a walsender that has
    not answered for wal_sender_timeout (a frozen, e.g. SIGSTOPped, instance), plus a margin."""
    row = conn.execute(
        "SELECT setting::float / 1000 FROM pg_settings WHERE name = 'wal_sender_timeout'"
    ).fetchone()
    timeout = float(row[0]) if row and row[0] and row[0] > 0 else 60.0
    return timeout + 5.0


def wait_released(conn: Any, slot: str, wait_s: float | None = None) -> int | None:
    """Wait until no connection reads the slot (up to `wait_s`, by default wal_sender_timeout plus
    a margin); the reader's pid if one still does. After a crash the server notices the dead
    connection a moment later; a frozen reader is ended by the server after wal_sender_timeout."""
    deadline = time.monotonic() + (release_timeout_s(conn) if wait_s is None else wait_s)
    while True:
        row = conn.execute(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s", (slot,)
        ).fetchone()
        if row is None or row[0] is None:
            return None
        if time.monotonic() > deadline:
            return int(row[0])
        time.sleep(0.2)


def drop_slot(
    conn: Any, slot: str, wait_s: float | None = None, doing: str = "to take a new snapshot"
) -> None:
    """Drop a slot once its previous reader let go of it; `doing` says why, should it fail."""
    reader = wait_released(conn, slot, wait_s)
    try:
        conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
    except Exception as exc:
        raise ConnectException(
            f"cannot drop replication slot {slot!r} {doing}: {exc}. Stop whatever reads it "
            f"(pg_replication_slots.active_pid {reader}) and restart the connector."
        ) from exc
