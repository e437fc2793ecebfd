"""The replication connection lost and found again, for `PostgresCdcTask` (a mixin over its state).

A lost connection keeps the finished transactions, drops the half-read one (PostgreSQL sends it
again, whole) and resumes after the last record made ready; each try to stream again checks the
slot is still there and read by no other instance.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from typing import Any

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import SourceRecord
from eosconnect.connectors.postgres_cdc import catalog
from eosconnect.connectors.postgres_cdc.config import CdcConfig
from eosconnect.connectors.postgres_cdc.incremental import IncrementalSnapshot
from eosconnect.connectors.postgres_cdc.reconnect import Reconnection, is_connection_loss
from eosconnect.connectors.postgres_cdc.replication import (
    ReplicationStream,
    format_lsn,
    loss_reason,
    release_timeout_s,
    slot_info,
    wait_released,
)

__all__ = ["StreamOutages"]

log = logging.getLogger("eosconnect.connectors.postgres_cdc.task")


class StreamOutages:
    """`_lose_stream` and `_reconnect` of the task; the attributes are the task's own."""

    cfg: CdcConfig
    prefix: str
    stream: ReplicationStream
    catalog: Any
    _txn: Any
    _assembled: tuple[int, int] | None
    _resume: tuple[int, int] | None
    _resume_why: str
    _ready: deque[SourceRecord]
    _outage: Reconnection | None
    _confirmed: int
    incremental: IncrementalSnapshot

    def _lose_stream(self, exc: Exception) -> None:
        """The replication (or catalog) connection is gone: keep the finished transactions, drop the
        half-read one (PostgreSQL sends it again, whole) and resume after the last record made ready,
        as a restarted task resumes after its committed offset."""
        reason = loss_reason(exc)
        self._txn = None
        self.incremental.read_chunk_again()
        if self._assembled is not None:
            self._resume, self._resume_why = self._assembled, "read before the connection was lost"
        self.stream.close()
        self._outage = Reconnection(  # with errors.max.retries=0 this fails the task here
            self.stream.slot,
            reason,
            self.stream.backend_pid,
            self.cfg["errors.max.retries"],
            self.cfg["retriable.restart.connector.wait.ms"] / 1000,
        )
        log.warning(
            "PostgresCdcSource %s: lost the replication connection to slot %s (%s); %d record(s) read "
            "before it are handed out, and the stream resumes after %s once PostgreSQL answers "
            "(errors.max.retries=%d, a try every %.1f s)",
            self.prefix,
            self.stream.slot,
            reason,
            len(self._ready),
            f"LSN {format_lsn(self._resume[0])}" if self._resume else "the stored offset",
            self.cfg["errors.max.retries"],
            self.cfg["retriable.restart.connector.wait.ms"] / 1000,
        )

    def _reconnect(self) -> bool:
        """One try to stream again (when due): a new catalog and replication connection, the slot
        still there and free. The lost connection's server process may hold the slot until the server
        notices (at most wal_sender_timeout); any other reader is another instance, which took over
        (a zombie thawed after its successor started): this task then fails at once."""
        outage = self._outage
        assert outage is not None
        if not outage.due():
            return False
        slot = self.stream.slot
        try:
            with contextlib.suppress(Exception):
                self.catalog.close()
            self.catalog = catalog.connect(self.cfg)
            if slot_info(self.catalog, slot) is None:
                raise ConnectException(
                    f"replication slot {slot!r} is gone after the replication connection was lost, so the "
                    "changes after the committed offset are lost. Reset the connector's offsets to take a "
                    "new snapshot (snapshot.mode=initial)."
                )
            reader = wait_released(self.catalog, slot, wait_s=0)
            if reader is not None:
                if reader != outage.lost_reader or outage.outage_s() > release_timeout_s(self.catalog):
                    raise ConnectException(
                        f"lost the replication connection reading slot {slot!r} ({outage.cause}), and the "
                        f"slot is now read by server process {reader} (another instance of this connector, "
                        f"or a different client). Stop it (SELECT pg_terminate_backend({reader});) or give "
                        "this connector its own slot.name, then restart the task."
                    )
                outage.failed(f"{outage.cause}; the slot is still read by server process {reader}")
                return False
            stream = ReplicationStream(self.cfg)
            try:
                stream.start()
            except Exception:
                stream.close()
                raise
        except Exception as exc:
            if not is_connection_loss(exc):
                raise
            outage.failed(loss_reason(exc))
            return False
        self.stream, self._outage, self._confirmed = stream, None, 0
        log.info(
            "PostgresCdcSource %s: streaming slot %s again after %.1f s and %d failed tr%s",
            self.prefix,
            slot,
            outage.outage_s(),
            outage.attempts,
            "y" if outage.attempts == 1 else "ies",
        )
        return True
