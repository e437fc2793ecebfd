"""`PostgresCdcTask`: the initial snapshot, then the pgoutput stream, as Debezium change events.

**Offsets.** One source partition, `{"server": <topic.prefix>}`. A streamed event's offset is
`{"lsn": <commit LSN of its transaction>, "txId": <xid>, "event": <its position in the
transaction>}`, plus `"lsn_end"` (the end of the commit record) on the last event of the
transaction. On restart every event at or before the stored (lsn, event) is skipped, so a
transaction whose events were partly committed to Kafka resumes exactly after the last committed
one. Snapshot events carry `{"lsn": <the slot's consistent point>, "event": -1}` and Debezium's
snapshot keys (`snapshot: "INITIAL"`, `snapshot_completed` and `last_snapshot_record` true on the
final one; offsets stored before read `snapshot: "true"` / `"last"`): a restart with an unfinished
snapshot drops the slot and takes the snapshot again (the exported snapshot died with the task).
Streamed events also carry Debezium's `lsn_proc`, `lsn_commit`, `lsn_events_processed` and
`messageType` (INSERT, UPDATE or DELETE: the pgoutput message), so Debezium's connector can take
over from any of these offsets (docs/cdc.md). `messageType` matters: when PostgreSQL sends the
transaction of the stored change again, Debezium's WalPositionLocator meets its BEGIN at the same
LSN as a transaction's first change, and without a DML `messageType` it replays the transaction
from that BEGIN (sending the change once more).

**Exactly once.** The slot's confirmed flush LSN moves (to `lsn_end`) only after `commit_record`,
which the runtime calls after the Kafka transaction holding the record committed: PostgreSQL keeps
every transaction not yet in Kafka. The confirmation is sent in `commit()`, right after those
callbacks, when it runs on the polling thread (the exactly-once runtime's), otherwise on the next
poll, and in `stop()`: a task stopped right after its last commit leaves the slot at what Kafka
holds, so whatever reads the slot next (this task again, or Debezium after a switch) is not sent
that transaction again.
With `transaction.boundary=connector` the task asks for a commit after the last event of each
PostgreSQL transaction (and after the whole snapshot), so a read_committed consumer sees each
database transaction all or nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from eosconnect.api.data import Struct
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import (
    Header,
    Primitive,
    RecordMetadata,
    SourceOffset,
    SourcePartition,
    SourceRecord,
)
from eosconnect.api.source import SourceTask
from eosconnect.connectors.debezium.headers import NEWKEY, OLDKEY, context_headers, pk_change_header
from eosconnect.connectors.debezium.modes import DecimalHandling, TimePrecision
from eosconnect.connectors.postgres_cdc import catalog
from eosconnect.connectors.postgres_cdc.config import CdcConfig, SnapshotMode
from eosconnect.connectors.postgres_cdc.events import (
    CONNECTOR_NAME,
    SourceInfo,
    TableEvents,
    TransactionSource,
    fill_unchanged,
)
from eosconnect.connectors.postgres_cdc.heartbeat import heartbeat_record
from eosconnect.connectors.postgres_cdc.incremental import IncrementalSnapshot
from eosconnect.connectors.postgres_cdc.incremental_state import IncrementalState
from eosconnect.connectors.postgres_cdc.offsets import CAPTURED, StoredPosition, event_position
from eosconnect.connectors.postgres_cdc.outages import StreamOutages
from eosconnect.connectors.postgres_cdc.pgoutput import (
    Begin,
    Commit,
    Delete,
    Insert,
    Relation,
    TupleValue,
    Update,
    parse,
)
from eosconnect.connectors.postgres_cdc.reconnect import Reconnection, is_connection_loss
from eosconnect.connectors.postgres_cdc.replication import (
    ReplicationStream,
    drop_slot,
    format_lsn,
    slot_info,
    wait_released,
)
from eosconnect.connectors.postgres_cdc.resume import ResumeSkips
from eosconnect.connectors.postgres_cdc.signal_channels import KafkaSignals, SignalDispatcher
from eosconnect.connectors.postgres_cdc.signal_hooks import SignalHooks
from eosconnect.connectors.postgres_cdc.signals import Signal
from eosconnect.connectors.postgres_cdc.snapshot import Snapshot, table_events
from eosconnect.connectors.postgres_cdc.types import IntervalHandling

__all__ = ["VERSION", "PostgresCdcTask"]

VERSION = "1.0.0"
log = logging.getLogger(__name__)


class _Change(NamedTuple):
    """One row change of the open transaction, before it becomes records at its commit (a tuple:
    one is made per change)."""

    op: str
    table: TableEvents
    before: Struct | None
    after: Struct | None
    lsn: int  # the change's own WAL position
    message: str  # the pgoutput message (Debezium's messageType): INSERT, UPDATE or DELETE
    headers: tuple[Header, ...] = ()
    continues: bool = False  # the create of a key change: the same pgoutput message as the delete before


class PostgresCdcTask(SignalHooks, ResumeSkips, StreamOutages, SourceTask):
    #: commit_record() needs only the record's own lsn_end: no delivery report per record.
    commit_record_metadata = False

    def version(self) -> str:
        return VERSION

    # ------------------------------------------------------------------------------------ start

    def start(self, config: dict[str, str]) -> None:
        self.cfg = CdcConfig.parse(config)
        self.prefix: str = self.cfg["topic.prefix"]
        self.db: str = self.cfg["database.dbname"]
        self.partition = SourcePartition({"server": self.prefix})
        self.decimal_mode = DecimalHandling(self.cfg["decimal.handling.mode"])
        self.time_mode = TimePrecision(self.cfg["time.precision.mode"])
        self.interval_mode = IntervalHandling(self.cfg["interval.handling.mode"])
        self.placeholder = str(self.cfg["unavailable.value.placeholder"])
        self.tombstones: bool = self.cfg["tombstones.on.delete"]
        self.context_headers = (
            context_headers(self.prefix, CONNECTOR_NAME) if self.cfg["extended.headers.enabled"] else ()
        )
        self.batch_size: int = self.cfg["max.batch.size"]
        self.poll_s = self.cfg["poll.interval.ms"] / 1000
        self.group_size: int = self.cfg["database.transactions.per.kafka.transaction"]
        self.heartbeat_s = self.cfg["heartbeat.interval.ms"] / 1000
        self.filter = self.cfg.tables
        self.column_filter = self.cfg.columns
        self.key_columns = self.cfg.key_columns
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ready: deque[SourceRecord] = deque()
        self._relations: dict[int, TableEvents | None] = {}
        self._txn: tuple[Begin, list[_Change]] | None = None
        self._last_commit_lsn: int | None = None
        self._flush_to = 0  # confirmed once the Kafka transaction with it committed
        self._confirmed = 0
        self._owner = threading.get_ident()  # the polling thread: the only one to use the stream
        self._last_activity = time.monotonic()
        self._snapshot: Snapshot | None = None
        self._done = False
        self._outage: Reconnection | None = None  # the replication connection is lost, being retried
        self._assembled: tuple[int, int] | None = None  # (lsn, event) of the last record made ready
        self._resume_why = "already in Kafka"  # why events before `_resume` are skipped (logged)
        self._skips = (0, 0)  # transactions and events skipped and not logged yet
        self.catalog = catalog.connect(self.cfg)
        catalog.ensure_publication(self.catalog, self.cfg)
        self.captured = catalog.published_tables(self.catalog, self.cfg)
        self._captured_offset = ",".join(f"{s}.{t}" for s, t in self.captured)
        self.stream = ReplicationStream(self.cfg)
        self._resume: tuple[int, int] | None = None
        self._debezium_resume: tuple[int, int | None, int] | None = None
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.signal_table = self.cfg.signal_table
        self._signal_oids: set[int] = set()
        self._txn_signals: list[Signal] = []
        self.incremental = IncrementalSnapshot(
            self.prefix,
            lambda: self.catalog,
            self.signal_table,
            self.cfg["incremental.snapshot.chunk.size"],
            self.cfg.key_columns,
            lambda conn, meta: table_events(self, conn, meta),
            None if stored is None else IncrementalState.of(stored),
        )
        if self.incremental.state is not None:
            log.info(
                "PostgresCdcSource %s: resuming the incremental snapshot at %s",
                self.prefix,
                self.incremental.progress(),
            )
        self.signals = SignalDispatcher(self.prefix, self.incremental, lambda: self.captured)
        self.kafka_signals = KafkaSignals(self.cfg) if "kafka" in self.cfg.signal_channels else None
        self._open_slot()
        if stored is not None and self._snapshot is None:
            self._new_tables(stored)

    def _open_slot(self) -> None:
        """Where reading starts: the stream after a stored offset whose snapshot completed, else a
        (new) snapshot in a fresh slot's exported snapshot, else the stream from the slot's position."""
        stored = self.context.offset_storage_reader.offset(self.partition)
        mode = SnapshotMode(self.cfg["snapshot.mode"])
        slot = slot_info(self.catalog, self.stream.slot)
        if slot is not None and slot[0] != "pgoutput":
            raise ConnectException(
                f"replication slot {self.stream.slot!r} uses the {slot[0]!r} plugin, not pgoutput. Drop it "
                f"(SELECT pg_drop_replication_slot('{self.stream.slot}');) or set slot.name to another slot."
            )
        position = None if stored is None else StoredPosition.of(stored)
        if stored is not None and position is not None and position.snapshot_done:
            if slot is None:
                raise ConnectException(
                    f"replication slot {self.stream.slot!r} is gone, so the changes since the stored offset "
                    f"(LSN {format_lsn(position.lsn)}) are lost. Reset the connector's offsets to take "
                    "a new snapshot (snapshot.mode=initial)."
                )
            self._last_commit_lsn = position.last_commit_lsn
            self._resume = position.resume
            self._debezium_resume = position.debezium_resume
            if position.debezium_resume is not None:  # Debezium's own offset (a connector switched over)
                log.info("PostgresCdcSource: resuming after Debezium's stored offset %s", dict(stored))
            if mode is SnapshotMode.INITIAL_ONLY:
                self._done = True
                return
            reader = wait_released(self.catalog, self.stream.slot)
            if reader is not None:
                raise ConnectException(
                    f"replication slot {self.stream.slot!r} is still read by server process {reader} (another"
                    " instance of this connector, or a different client). Stop it (SELECT "
                    f"pg_terminate_backend({reader});) or give this connector its own slot.name."
                )
            self.stream.start()
            log.info("PostgresCdcSource: streaming slot %s after %s", self.stream.slot, dict(stored))
        elif mode in (SnapshotMode.INITIAL, SnapshotMode.INITIAL_ONLY):
            if slot is not None:
                log.info("PostgresCdcSource: dropping slot %s to take a (new) snapshot", self.stream.slot)
                drop_slot(self.catalog, self.stream.slot)
            created = self.stream.create_slot(export_snapshot=True)
            self._snapshot = Snapshot(self, created.consistent_lsn, created.snapshot_name or "")
        else:
            if slot is None:
                self.stream.create_slot(export_snapshot=False)
            self.stream.start()

    # ------------------------------------------------------------------------------------ poll

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.is_set() or self._done:
            self._stopping.wait(self.poll_s)
            return None
        self._owner = threading.get_ident()
        if self._snapshot is not None:
            return self._poll_snapshot()
        if self._outage is None or self._reconnect():
            try:
                self._confirm()
                self._kafka_signals()
                if self.incremental.pending:
                    self.incremental.start_chunk()
                self._read_stream(time.monotonic() + self.poll_s)
            except Exception as exc:
                if not is_connection_loss(exc):
                    raise
                self._lose_stream(exc)
        elif not self._ready:  # hand out what was read before the loss; otherwise wait for the next try
            self._stopping.wait(min(self.poll_s, max(self._outage.next_try - time.monotonic(), 0.0)))
        txn = self.context.transaction_context
        if self._ready:
            self._last_activity = time.monotonic()
            batch = self._take_batch(at_transaction_end=txn is not None)
        else:
            batch = self._heartbeat() if self._outage is None else []
        if not batch:
            return None
        if txn is not None:  # end Kafka transactions where database transactions end
            for record in self._kafka_commit_points(batch):
                txn.commit_transaction(record)
        return batch

    def _read_stream(self, deadline: float) -> None:
        while len(self._ready) < self.batch_size and not self._stopping.is_set():
            # Wait for WAL only while there is nothing to hand over (or a transaction is half read).
            waiting = not self._ready or self._txn is not None
            remaining = deadline - time.monotonic() if waiting else 0.0
            if waiting and remaining <= 0:
                break
            message = self.stream.read(max(remaining, 0.0))
            if message is None:
                if not waiting:
                    break
                continue
            self._handle(parse(message.payload), message.data_start)

    def _kafka_commit_points(self, batch: list[SourceRecord]) -> list[SourceRecord]:
        """The records a Kafka transaction ends with: every `database.transactions.per.kafka.
        transaction`-th database transaction end in the batch, and the batch's last one (a poll
        never waits for more to fill a group)."""
        ends = [record for record in batch if "lsn_end" in (record.source_offset or ())]
        group = self.group_size
        return [r for count, r in enumerate(ends, 1) if count % group == 0 or count == len(ends)]

    def _take_batch(self, *, at_transaction_end: bool) -> list[SourceRecord]:
        """The next ready records, up to max.batch.size. With connector-defined boundaries the batch
        ends with the first database transaction that ends once it holds a quarter of that: the
        runtime has one Kafka transaction open at a time, so a commit in the middle of a batch holds
        up the sending of the rest, where a commit at its end runs while the next poll reads and
        converts."""
        ready = self._ready
        count = min(len(ready), self.batch_size)
        while count < len(ready) and _in_chunk(ready[count - 1]):  # a chunk is never split
            count += 1
        if at_transaction_end:
            enough = max(1, self.batch_size // 4)
            for position, record in enumerate(itertools.islice(ready, count), 1):
                if position >= enough and "lsn_end" in (record.source_offset or ()):
                    count = position
                    break
        return [ready.popleft() for _ in range(count)]

    def _poll_snapshot(self) -> list[SourceRecord] | None:
        assert self._snapshot is not None
        records, finished = self._snapshot.next_batch()
        if finished:
            self._snapshot.close()
            self._snapshot = None
            if SnapshotMode(self.cfg["snapshot.mode"]) is SnapshotMode.INITIAL_ONLY:
                self._done = True
            else:
                self.stream.start()
        txn = self.context.transaction_context
        if finished and records and txn is not None:
            txn.commit_transaction(records[-1])  # the whole snapshot is one Kafka transaction
        return records or None

    # ------------------------------------------------------------------------------------ stream

    def _handle(self, message: Any, lsn: int) -> None:
        """One pgoutput message; `lsn` is where it is in the WAL (a change's own record: source.lsn)."""
        if isinstance(message, Begin):
            self._txn = (message, [])
            self._txn_signals = []
        elif isinstance(message, Relation):
            self._relations[message.oid] = self._table_events(message)
        elif isinstance(message, Insert | Update | Delete):
            self._change(message, lsn)
        elif isinstance(message, Commit):
            self._commit(message)

    def _table_events(self, relation: Relation) -> TableEvents | None:
        if (relation.namespace, relation.name) == self.signal_table:
            self._signal_oids.add(relation.oid)
            return None
        if not self.filter(relation.namespace, relation.name):
            return None
        nullable, key = catalog.relation_meta(self.catalog, relation.oid)
        return TableEvents(
            self.prefix,
            relation.namespace,
            relation.name,
            relation.columns,
            [nullable.get(c.name, True) for c in relation.columns],
            self.key_columns.get(f"{relation.namespace}.{relation.name}")
            or key
            or tuple(c.name for c in relation.columns if c.key and relation.replica_identity != "f"),
            self.decimal_mode,
            self.time_mode,
            self.column_filter,
            catalog.type_names(self.catalog, (c.type_oid for c in relation.columns)),
            self.interval_mode,
            self.placeholder,
        )

    def _change(self, message: Insert | Update | Delete, lsn: int) -> None:
        table = self._relations.get(message.relation_oid)
        if table is None or self._txn is None:
            if isinstance(message, Insert) and message.relation_oid in self._signal_oids:
                signal_id, kind, data = (*message.new, None, None, None)[:3]
                found = self.signals.parse(signal_id, kind, data, "source")
                if found is not None:
                    self._txn_signals.append(found)
            return
        events = self._txn[1]
        if isinstance(message, Insert):
            events.append(_Change("c", table, None, table.row(message.new), lsn, "INSERT"))
        elif isinstance(message, Update):
            new: Sequence[TupleValue] = message.new
            if message.old is not None and not message.old_is_key:
                new = fill_unchanged(new, message.old)
            after = table.row(new)
            before = None if message.old is None else table.row(message.old, key_only=message.old_is_key)
            old_key, new_key = table.key(before), table.key(after)
            if before is not None and old_key != new_key:
                # A primary key change, as Debezium emits it: a delete (and its tombstone) under the old
                # key naming the new one, then a create under the new key naming the old one.
                on_delete, on_create = pk_change_header(NEWKEY, new_key), pk_change_header(OLDKEY, old_key)
                events.append(_Change("d", table, before, None, lsn, "UPDATE", on_delete))
                events.append(_Change("c", table, None, after, lsn, "UPDATE", on_create, True))
            else:
                events.append(_Change("u", table, before, after, lsn, "UPDATE"))
        else:
            before = table.row(message.old, key_only=message.old_is_key)
            events.append(_Change("d", table, before, None, lsn, "DELETE"))

    def _commit(self, commit: Commit) -> None:
        if self._txn is None:
            return
        begin, events = self._txn
        self._txn = None
        now_micros = time.time_ns() // 1000
        source = TransactionSource(
            SourceInfo(
                self.prefix, self.db, begin.commit_time, "false", begin.xid, None, self._last_commit_lsn
            )
        )
        records: list[SourceRecord] = []
        lsns: list[tuple[int, int]] = []  # each record's change LSN, and the how-manieth change at it
        window = self.incremental if self.incremental.window is not None else None
        at_lsn, previous_lsn = 0, None
        for change in events:
            # Debezium's lsn_events_processed: changes at one LSN (a COPY's rows share theirs) so far
            if not change.continues:
                at_lsn = at_lsn + 1 if change.lsn == previous_lsn else 1
            previous_lsn = change.lsn
            position: dict[str, Primitive] = {
                "lsn_proc": change.lsn,
                "lsn_events_processed": at_lsn,
                "messageType": change.message,
            }
            table, before, after = change.table, change.before, change.after
            key = table.key(after if after is not None else before)
            if window is not None:
                window.streamed(f"{table.schema_name}.{table.table}", key)
            source_struct = source.struct(table.schema_name, table.table, change.lsn)
            value = table.envelope_at(change.op, before, after, source_struct, now_micros)
            records.append(self._record(table, key, value, begin, len(records), change.headers, position))
            lsns.append((change.lsn, at_lsn))
            if change.op == "d" and self.tombstones:  # the tombstone keeps the delete's headers
                records.append(self._record(table, key, None, begin, len(records), change.headers, position))
                lsns.append((change.lsn, at_lsn))
        if self._txn_signals and not self._acted_on(begin, commit):
            self._act_on_signals(begin, records, lsns)
        self._last_commit_lsn = commit.end_lsn  # Debezium's lastCommitLsn: source.sequence[0] after it
        if not records:
            return
        last = records[-1]
        records[-1] = dataclasses.replace(
            last, source_offset=SourceOffset({**(last.source_offset or {}), "lsn_end": commit.end_lsn})
        )
        if self._debezium_resume is not None:
            kept = self._after_debezium(records, lsns, commit)
            self._skipped(records, kept, begin, commit, "Debezium delivered")
            records = kept
        elif self._resume is not None:
            # The records after the resume point: each record's offset is (begin.final_lsn, its index).
            lsn, event = self._resume
            if begin.final_lsn != lsn:
                kept = records if begin.final_lsn > lsn else []
            else:
                kept = records[event + 1 :]
            self._skipped(records, kept, begin, commit, self._resume_why)
            records = kept
        if records:
            self._assembled = event_position(records[-1].source_offset)
        self._ready.extend(records)

    def _acted_on(self, begin: Begin, commit: Commit) -> bool:
        """Whether a transaction's signals were acted on before (it is sent again after a restart
        because the slot moves only with records: a signal is not acted on twice)."""
        if self._debezium_resume is not None:
            return commit.end_lsn <= self._debezium_resume[0]
        return self._resume is not None and begin.final_lsn <= self._resume[0]

    def _record(
        self,
        table: TableEvents,
        key: Struct | None,
        value: Struct | None,
        begin: Begin,
        index: int,
        headers: tuple[Header, ...] = (),
        position: Mapping[str, Primitive] | None = None,
    ) -> SourceRecord:
        offset: dict[str, Primitive] = {"lsn": begin.final_lsn, "txId": begin.xid, "event": index}
        offset.update(position or {})  # Debezium's keys for the change itself (lsn_proc, messageType, ...)
        if self._last_commit_lsn is not None:  # restores source.sequence's first half after a restart
            offset["lsn_commit"] = self._last_commit_lsn
        offset[CAPTURED] = self._captured_offset
        if self.incremental.state is not None:
            offset.update(self.incremental.offset())
        return SourceRecord(
            source_partition=self.partition,
            source_offset=offset,
            topic=table.topic,
            key=key,
            value=value,
            key_schema=table.key_schema,
            value_schema=table.envelope_schema if value is not None else None,
            headers=(*headers, *self.context_headers) if headers else self.context_headers,
        )

    def _heartbeat(self) -> list[SourceRecord]:
        """After heartbeat.interval.ms without changes, a heartbeat record (heartbeat.py)."""
        if self.heartbeat_s <= 0 or self._txn is not None:
            return []
        if time.monotonic() - self._last_activity < self.heartbeat_s:
            return []
        self._last_activity = time.monotonic()
        wal_end = self.stream.wal_end
        if not wal_end:
            return []
        topic = f"{self.cfg['heartbeat.topics.prefix']}.{self.prefix}"
        record = heartbeat_record(self.partition, topic, self.prefix, wal_end, int(time.time() * 1000))
        extra = {CAPTURED: self._captured_offset, **self.incremental.offset()}
        return [
            dataclasses.replace(record, source_offset=SourceOffset({**(record.source_offset or {}), **extra}))
        ]

    # ------------------------------------------------------------------------------------ commits

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        end = None if record.source_offset is None else record.source_offset.get("lsn_end")
        if isinstance(end, int) and record.source_partition == self.partition:
            with self._lock:
                self._flush_to = max(self._flush_to, end)

    def commit(self) -> None:
        """After the commit_record calls of a Kafka transaction: confirm once for all of them."""
        self._confirm_now("after a Kafka commit")

    def _confirm(self) -> None:
        """Move the slot to what Kafka holds (called on the polling thread, which owns the connection)."""
        with self._lock:
            target = self._flush_to
        if target > self._confirmed and self.stream.started:
            self.stream.confirm(target)
            self._confirmed = target

    def _confirm_now(self, when: str) -> None:
        """`_confirm` right away if this is the polling thread (the exactly-once runtime calls
        `commit` and `stop` there); from any other thread (the at-least-once runtime's offset
        flusher) the next poll does it. A failure is left to the next poll, which then fails on the
        lost connection and restarts from the committed offset."""
        if threading.get_ident() != self.__dict__.get("_owner") or "stream" not in self.__dict__:
            return
        try:
            self._confirm()
        except Exception as exc:
            log.warning("PostgresCdcSource: could not confirm slot %s %s: %s", self.stream.slot, when, exc)

    def stop(self) -> None:
        self._stopping.set()
        self._confirm_now("on stop")  # the last committed transaction, before the connection closes
        snapshot = self.__dict__.get("_snapshot")
        if snapshot is not None:
            snapshot.close()
        kafka_signals = self.__dict__.get("kafka_signals")
        if kafka_signals is not None:
            with contextlib.suppress(Exception):
                kafka_signals.close()
        for name in ("stream", "catalog"):
            resource = self.__dict__.get(name)
            if resource is not None:
                with contextlib.suppress(Exception):
                    resource.close()


def _in_chunk(record: SourceRecord) -> bool:
    """Whether a record is an incremental snapshot chunk's and not its last (which ends its
    transaction): a batch, and so a Kafka transaction, never ends inside a chunk."""
    offset: Mapping[str, Primitive] = record.source_offset or {}
    if "lsn_end" in offset or not isinstance(record.value, Struct):
        return False
    source = record.value.get("source")
    return isinstance(source, Struct) and source.get("snapshot") == "incremental"
