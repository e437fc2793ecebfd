"""Skipping what Kafka already holds after a restart or a reconnection, for `PostgresCdcTask` (a
mixin over its state): after the task's own offset, or after Debezium's (a connector switched over)."""

from __future__ import annotations

import logging
import threading

from eosconnect.api.records import SourceRecord
from eosconnect.connectors.postgres_cdc.pgoutput import Begin, Commit

__all__ = ["ResumeSkips"]

log = logging.getLogger("eosconnect.connectors.postgres_cdc.task")


class ResumeSkips:
    """`_skipped` and `_after_debezium` of the task; the attributes are its own."""

    prefix: str
    _flush_to: int
    _lock: threading.Lock
    _skips: tuple[int, int]
    _debezium_resume: tuple[int, int | None, int] | None

    def _skipped(
        self, records: list[SourceRecord], kept: list[SourceRecord], begin: Begin, commit: Commit, why: str
    ) -> None:
        """After a restart or a reconnection: a transaction delivered whole before lets the slot pass
        it; the skips are logged once, when the first transaction with something new arrives."""
        if not kept:
            with self._lock:
                self._flush_to = max(self._flush_to, commit.end_lsn)
        if len(kept) < len(records):
            transactions, events = self._skips
            self._skips = (transactions + 1, events + len(records) - len(kept))
        if kept and self._skips[0]:
            transactions, events = self._skips
            log.info(
                "PostgresCdcSource %s: skipped %d event(s) of %d transaction(s) %s; new events from "
                "transaction %d on",
                self.prefix,
                events,
                transactions,
                why,
                begin.xid,
            )
            self._skips = (0, 0)

    def _after_debezium(
        self, records: list[SourceRecord], lsns: list[tuple[int, int]], commit: Commit
    ) -> list[SourceRecord]:
        """The records Debezium did not send before it was stopped. Its offset holds `lsn_commit`
        (the end of the last transaction it finished), `lsn_proc` (its last change) and
        `lsn_events_processed` (how many changes at that LSN it had done: several changes share one
        LSN in a COPY): transactions ending at or before `lsn_commit` are skipped whole; in the first
        one after it (the one Debezium may have been inside), the changes before `lsn_proc` and, at
        it, the first `lsn_events_processed` (all of them when that is 0 or 1, as Debezium's
        WalPositionLocator does). `lsns` holds each record's change LSN and its count at that LSN."""
        assert self._debezium_resume is not None
        done_commit, done_event, done_at_lsn = self._debezium_resume
        if commit.end_lsn <= done_commit:
            return []
        self._debezium_resume = None
        if done_event is None:
            return records

        def delivered(lsn: int, at_lsn: int) -> bool:
            return lsn < done_event or (lsn == done_event and (done_at_lsn <= 1 or at_lsn <= done_at_lsn))

        return [r for r, (lsn, at) in zip(records, lsns, strict=True) if not delivered(lsn, at)]
