"""The signal side of `PostgresCdcTask` (a mixin over its state): newly captured tables, the Kafka
signal channel, and the signal table's rows acted on at their transaction's commit.

The incremental snapshot's state lives in the source offset, which only a record commits. A
signal that changes it (stop-snapshot, pause-snapshot, an empty table's chunk, ...) in a
transaction that leaves no record after it to carry the new state gets a heartbeat record of its
own (`<heartbeat.topics.prefix>.<topic.prefix>`, as `heartbeat.interval.ms` writes), in that
transaction's place: otherwise a restart before the next change would run the old state again
(a stopped snapshot would resume)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from eosconnect.api.records import Primitive, SourceOffset, SourcePartition, SourceRecord
from eosconnect.connectors.postgres_cdc.config import CdcConfig
from eosconnect.connectors.postgres_cdc.events import SourceInfo, TableEvents
from eosconnect.connectors.postgres_cdc.heartbeat import heartbeat_record
from eosconnect.connectors.postgres_cdc.incremental import IncrementalSnapshot
from eosconnect.connectors.postgres_cdc.offsets import CAPTURED
from eosconnect.connectors.postgres_cdc.pgoutput import Begin
from eosconnect.connectors.postgres_cdc.signal_channels import KafkaSignals, SignalDispatcher
from eosconnect.connectors.postgres_cdc.signals import CLOSE_WINDOW, OPEN_WINDOW, ExecuteSnapshot, Signal

__all__ = ["SignalHooks"]

log = logging.getLogger("eosconnect.connectors.postgres_cdc.task")


class SignalHooks:
    """`_new_tables`, `_kafka_signals` and `_act_on_signals` of the task; the attributes are its own."""

    cfg: CdcConfig
    prefix: str
    db: str
    partition: SourcePartition
    _captured_offset: str
    _last_commit_lsn: int | None
    captured: list[tuple[str, str]]
    signal_table: tuple[str, str] | None
    incremental: IncrementalSnapshot
    signals: SignalDispatcher
    kafka_signals: KafkaSignals | None
    _txn_signals: list[Signal]

    def _record(self, table: TableEvents, key: Any, value: Any, begin: Begin, index: int) -> SourceRecord:
        raise NotImplementedError

    def _new_tables(self, stored: Mapping[str, Primitive]) -> None:
        """Say, per table that the configuration captures since the stored offset, whether it gets
        its existing rows (snapshot.new.tables=incremental queues it for an incremental snapshot)."""
        before = stored.get(CAPTURED)
        if not isinstance(before, str):
            return  # an offset from before the list was kept (or Debezium's): nothing to compare
        known = set(before.split(",")) if before else set()
        new = [f"{s}.{t}" for s, t in self.captured if f"{s}.{t}" not in known]
        if not new:
            return
        if self.cfg["snapshot.new.tables"] == "incremental" and self.signal_table is not None:
            for name in new:
                log.info(
                    "PostgresCdcSource %s: table %s is newly captured: its existing rows will be read by an "
                    "incremental snapshot (snapshot.new.tables=incremental), its changes streamed",
                    self.prefix, name,
                )  # fmt: skip
            request = ExecuteSnapshot(tuple(re.escape(n) for n in new))
            self.signals.execute(request, "(snapshot.new.tables=incremental)")
            return
        for name in new:
            log.warning(
                "PostgresCdcSource %s: table %s is newly captured: only its changes from now on are "
                "streamed; its existing rows will NOT be in the topic. To get them, send an "
                "execute-snapshot signal for it, or set snapshot.new.tables=incremental%s",
                self.prefix, name, "" if self.signal_table else " and signal.data.collection",
            )  # fmt: skip

    def _kafka_signals(self) -> None:
        if self.kafka_signals is not None:
            found = self.kafka_signals.poll(self.signals)
            for signal in found:
                self.signals.handle(signal)
            if found:
                self.kafka_signals.done()

    def _act_on_signals(self, begin: Begin, records: list[SourceRecord], lsns: list[tuple[int, int]]) -> None:
        """The signal table's rows of a transaction, at its commit: a high watermark of the chunk in
        flight adds the chunk's rows to the transaction's records; other signals are acted on."""
        signals, self._txn_signals = self._txn_signals, []
        state_before = self.incremental.offset()
        carried = False  # whether a record made after the signals carries the snapshot's state
        for signal in signals:
            if signal.type not in (OPEN_WINDOW, CLOSE_WINDOW):
                self.signals.handle(signal)
                continue
            chunk = self.incremental.watermark(signal.type, signal.id)
            if chunk is None:
                continue
            events, rows = chunk
            now = dt.datetime.now(dt.UTC)
            source = SourceInfo(self.prefix, self.db, now, "incremental", None, begin.final_lsn)
            for after in rows:
                value = events.envelope("r", None, after, source, now)
                records.append(self._record(events, events.key(after), value, begin, len(records)))
                lsns.append((begin.final_lsn, 0))
                carried = True
        if not carried and self.incremental.offset() != state_before:
            records.append(self._state_carrier(begin, len(records)))
            lsns.append((begin.final_lsn, 0))

    def _state_carrier(self, begin: Begin, index: int) -> SourceRecord:
        """A heartbeat record at this transaction's place whose offset holds the snapshot's state."""
        topic = f"{self.cfg['heartbeat.topics.prefix']}.{self.prefix}"
        now_ms = int(time.time() * 1000)
        record = heartbeat_record(self.partition, topic, self.prefix, begin.final_lsn, now_ms)
        offset: dict[str, Primitive] = {"lsn": begin.final_lsn, "txId": begin.xid, "event": index}
        if self._last_commit_lsn is not None:
            offset["lsn_commit"] = self._last_commit_lsn
        offset[CAPTURED] = self._captured_offset
        offset.update(self.incremental.offset())
        return dataclasses.replace(record, source_offset=SourceOffset(offset))
