"""`MySqlCdcTask`: the initial snapshot, then the binlog, as Debezium change events.

**Offsets.** One source partition, `{"server": <topic.prefix>}`, and Debezium's offset keys: `file`
and `pos` (a binlog position), `gtids` (the GTID set executed there), `ts_sec`, `server_id`, and
while the snapshot runs `snapshot: INITIAL` (Debezium 3's marker; none on its last record, whose
offset is where streaming starts; Debezium 2's `snapshot: true` is read as the same). The
last record of a database transaction carries the position after the transaction's commit event
and the GTID set including it: a restart from there reads the next transaction. A record inside
a transaction carries, as Debezium's, the position where the transaction begins and the GTID set
before it, with `event` (the rows event's index in the transaction as Debezium counts: BEGIN is 0,
table maps count) and `row` (how many of its rows were delivered): a restart from there skips
exactly those. On MariaDB the reader starts from the GTID position at the stored file and
position, so Debezium's MySQL connector's offsets (no GTIDs, see `resume`) and ours resume alike.

**Exactly once.** The runtime stores the offset in the Kafka transaction that holds the records
(`exactly.once.source.support=enabled`); with `transaction.boundary=connector` the task ends a
Kafka transaction after the last record of each database transaction (and after the whole
snapshot), so a read_committed consumer sees each database transaction all or nothing, and a
restarted task resumes exactly after the last one Kafka holds.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from eosconnect.api.data import Struct
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import Header, Primitive, SourcePartition, SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.connectors.debezium.headers import NEWKEY, OLDKEY, context_headers, pk_change_header
from eosconnect.connectors.debezium.heartbeat import HEARTBEAT_KEY, HEARTBEAT_VALUE
from eosconnect.connectors.mysql_cdc import catalog
from eosconnect.connectors.mysql_cdc.binlog import (
    BinlogReader,
    Position,
    RowChange,
    Transaction,
    is_connection_loss,
)
from eosconnect.connectors.mysql_cdc.config import MySqlCdcConfig, SnapshotMode
from eosconnect.connectors.mysql_cdc.events import SourceInfo, TableEvents
from eosconnect.connectors.mysql_cdc.resume import resume_point
from eosconnect.connectors.mysql_cdc.snapshot import Snapshot, binlog_files, current_position

__all__ = ["VERSION", "MySqlCdcTask"]

VERSION = "1.0.0"
log = logging.getLogger(__name__)


class MySqlCdcTask(SourceTask):
    #: The runtime stores offsets itself: no delivery report per record is needed.
    commit_record_metadata = False

    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        self.cfg = MySqlCdcConfig.parse(config)
        self.prefix: str = self.cfg["topic.prefix"]
        self.partition = SourcePartition({"server": self.prefix})
        self.modes = self.cfg.modes
        self.tombstones: bool = self.cfg["tombstones.on.delete"]
        self.context_headers = (
            context_headers(self.prefix, self.cfg.connector) if self.cfg["extended.headers.enabled"] else ()
        )
        self.batch_size: int = self.cfg["max.batch.size"]
        self.poll_s = self.cfg["poll.interval.ms"] / 1000
        self.column_filter = self.cfg.columns
        self._tables: dict[tuple[Any, ...], TableEvents] = {}
        self._ready: deque[SourceRecord] = deque()
        self._snapshot: Snapshot | None = None
        self._snapshot_rows: Iterator[tuple[TableEvents, Struct]] | None = None
        self._pending: tuple[TableEvents, Struct] | None = None
        self._snapshot_count = 0
        self._reader: BinlogReader | None = None
        self._done = False
        #: (file, pos) of the transaction a stored offset is inside, and its rows events and rows delivered
        self._skip: tuple[str, int, int, int] | None = None
        self.heartbeat_s = self.cfg["heartbeat.interval.ms"] / 1000
        self._last_activity = time.monotonic()
        self._beaten: Position | None = None  # the position of the last heartbeat or record
        self._tries = 0  # tries of a lost binlog connection
        self._lost: BaseException | None = None
        self._next_try = 0.0
        if self.cfg["include.schema.changes"]:
            log.info(
                "MySqlCdcSource %s: include.schema.changes=true, but schema change events are not written; "
                "row events follow DDL through the binlog's table maps",
                self.prefix,
            )
        self.catalog = catalog.connect(self.cfg)
        self.server = catalog.Server.of(self.catalog)
        self._open()

    # ------------------------------------------------------------------------------------ start

    def _open(self) -> None:
        stored = self.context.offset_storage_reader.offset(self.partition)
        mode = SnapshotMode(self.cfg["snapshot.mode"])
        done = stored is not None and (not stored.get("snapshot") or stored.get("snapshot_completed") is True)
        position = None
        if stored is not None and done:
            position = Position(str(stored["file"]), _int(stored, "pos"), _str(stored.get("gtids")))
            done = not self._purged(position, mode)
        if stored is not None and done and position is not None:
            event = _int(stored, "event") if "event" in stored else None
            if self.server.mariadb:
                position, event = resume_point(self.catalog, position, event, _int(stored, "row", 0))
            if event is not None or "row" in stored:
                self._skip = (position.file, position.pos, event or 0, _int(stored, "row", 0))
            log.info("MySqlCdcSource %s: streaming after the stored offset %s", self.prefix, dict(stored))
            if mode is SnapshotMode.INITIAL_ONLY:
                self._done = True
                return
            self._stream_from(position)
        elif mode in (SnapshotMode.INITIAL, SnapshotMode.INITIAL_ONLY, SnapshotMode.WHEN_NEEDED):
            self._skip = None
            tables = catalog.captured_tables(self.catalog, self.cfg)
            self._snapshot = Snapshot(self.cfg, self.server.mariadb, tables)
            events_of = {}
            for table in tables:
                meta = self._snapshot.meta[table]
                events_of[table] = self._table_events(table[0], table[1], meta.columns, meta.primary_key)
            self._snapshot_rows = self._snapshot.rows(events_of)
            log.info(
                "MySqlCdcSource %s: snapshot of %d table(s) at %s",
                self.prefix,
                len(tables),
                self._snapshot.position,
            )
        else:
            self._stream_from(current_position(self.catalog, self.server.mariadb))

    def _purged(self, position: Position, mode: SnapshotMode) -> bool:
        """Whether the stored position's binlog file is gone (snapshot.mode=when_needed: take a
        new snapshot; otherwise the task fails, naming the position and the fixes)."""
        files = binlog_files(self.catalog)
        if position.file in files:
            return False
        where = f"{position.file}:{position.pos}" + (f" (GTIDs {position.gtids})" if position.gtids else "")
        if mode is not SnapshotMode.WHEN_NEEDED:
            oldest = files[0] if files else "none"
            raise ConnectException(
                f"MySqlCdcSource {self.prefix}: the stored binlog position {where} is not on "
                f"{self.cfg.describe()} (purged; its oldest binlog is {oldest}), so the changes since are "
                "lost. Reset the connector's offsets to take a new snapshot, or set "
                "snapshot.mode=when_needed "
                "to take one by itself; keep binlogs (binlog_expire_logs_seconds) longer than the connector "
                "may be stopped."
            )
        log.warning(
            "MySqlCdcSource %s: %s was purged; taking a new snapshot (when_needed)", self.prefix, where
        )
        return True

    def _stream_from(self, position: Position) -> None:
        self._gtids_before = position.gtids
        self._read_to = position  # after the last whole transaction read: where a new reader starts
        self._beaten = position
        self._reader = BinlogReader(
            self.cfg.connection(),
            self.cfg["database.server.id"],
            self.server.mariadb,
            position,
            self.cfg.captured,
        )
        self._reader.open()

    def _table_events(self, db: str, table: str, columns: Any, key: Any) -> TableEvents:
        """The events of a table with these columns, made once per shape (a table map repeats it)."""
        cache_key = (db, table, columns, key)
        found = self._tables.get(cache_key)
        if found is None:
            found = self._tables[cache_key] = TableEvents(
                self.prefix, self.cfg.connector, db, table, columns, key, self.modes, self.column_filter
            )
        return found

    # ------------------------------------------------------------------------------------ poll

    def poll(self) -> list[SourceRecord] | None:
        if self._done:
            time.sleep(self.poll_s)
            return None
        if self._snapshot is not None:
            return self._poll_snapshot()
        if self._reader is None and not self._retry():
            return None
        assert self._reader is not None
        deadline = time.monotonic() + self.poll_s
        while len(self._ready) < self.batch_size:
            remaining = deadline - time.monotonic() if not self._ready else 0.0
            try:
                item = (
                    self._reader.transactions.get(timeout=max(remaining, 0.0))
                    if remaining > 0
                    else (self._reader.transactions.get_nowait())
                )
            except queue.Empty:
                break
            if isinstance(item, BaseException) and is_connection_loss(item):
                self._lose_stream(item)
                break
            if isinstance(item, BaseException):
                raise ConnectException(
                    f"MySqlCdcSource {self.prefix}: reading the binlog of {self.cfg.describe()} failed: "
                    f"{item}. "
                    "The task resumes from its committed offset when restarted."
                ) from item
            self._ready.extend(self._transaction(item))
        txn = self.context.transaction_context
        if not self._ready:
            beat = self._heartbeat()
            if beat is not None and txn is not None:
                txn.commit_transaction(beat)
            return None if beat is None else [beat]
        # at most max.batch.size records a poll: a large transaction spans polls (and one Kafka transaction)
        batch = [self._ready.popleft() for _ in range(min(len(self._ready), self.batch_size))]
        self._last_activity = time.monotonic()
        if txn is not None:
            for record in batch:  # one Kafka transaction per database transaction: end it at its last record
                if "event" not in (record.source_offset or {}):
                    txn.commit_transaction(record)
        return batch

    def _heartbeat(self) -> SourceRecord | None:
        """After heartbeat.interval.ms without change events, a heartbeat whose offset is the
        position after the last transaction read (when it moved since the last record)."""
        if self.heartbeat_s <= 0 or time.monotonic() - self._last_activity < self.heartbeat_s:
            return None
        self._last_activity = time.monotonic()
        position = self._read_to
        if position == self._beaten:
            return None
        self._beaten = position
        now_ms = int(time.time() * 1000)
        offset: dict[str, Primitive] = {
            "file": position.file,
            "pos": position.pos,
            "ts_sec": now_ms // 1000,
            "server_id": self.server.server_id,
        }
        if position.gtids:
            offset["gtids"] = self._kept_gtids(position.gtids)
        return SourceRecord(
            source_partition=self.partition,
            source_offset=offset,
            topic=f"{self.cfg['heartbeat.topics.prefix']}.{self.prefix}",
            key=Struct(HEARTBEAT_KEY).put("serverName", self.prefix),
            value=Struct(HEARTBEAT_VALUE).put("ts_ms", now_ms),
            key_schema=HEARTBEAT_KEY,
            value_schema=HEARTBEAT_VALUE,
        )

    def _lose_stream(self, exc: BaseException) -> None:
        """The binlog connection is gone: the transactions read before it are handed out, and a new
        reader starts after the last of them (`_retry`)."""
        assert self._reader is not None
        self._reader.close()
        self._reader, self._lost, self._next_try = None, exc, time.monotonic()
        log.warning(
            "MySqlCdcSource %s: lost the binlog connection to %s (%s); reading again after %s once it "
            "answers (errors.max.retries=%d)",
            self.prefix, self.cfg.describe(), exc, self._read_to, self.cfg["errors.max.retries"],
        )  # fmt: skip

    def _retry(self) -> bool:
        """One try (when due) of a new binlog reader after the last whole transaction read: at once,
        then every retriable.restart.connector.wait.ms, errors.max.retries times (-1: no limit)."""
        limit = self.cfg["errors.max.retries"]
        if 0 <= limit <= self._tries:
            raise ConnectException(
                f"MySqlCdcSource {self.prefix}: lost the binlog connection to {self.cfg.describe()} "
                f"({self._lost}) and gave up after {self._tries} retries (errors.max.retries={limit}). "
                "Once the server is reachable, restart the task: it resumes from its committed offset."
            ) from self._lost
        wait = self._next_try - time.monotonic()
        if wait > 0:
            time.sleep(min(wait, self.poll_s))
            return False
        self._tries += 1
        self._next_try = time.monotonic() + self.cfg["retriable.restart.connector.wait.ms"] / 1000
        try:
            with contextlib.suppress(Exception):
                self.catalog.close()
            self.catalog = catalog.connect(self.cfg)
            self._stream_from(self._read_to)
        except Exception as exc:
            if not is_connection_loss(exc):
                raise
            self._lost = exc
            return False
        log.info("MySqlCdcSource %s: reading the binlog again after %d tr%s", self.prefix, self._tries,
                 "y" if self._tries == 1 else "ies")  # fmt: skip
        self._tries = 0
        return True

    def _poll_snapshot(self) -> list[SourceRecord] | None:
        assert self._snapshot is not None and self._snapshot_rows is not None
        snapshot = self._snapshot
        records: list[SourceRecord] = []
        finished = False
        if self._pending is None:
            self._pending = next(self._snapshot_rows, None)
        while self._pending is not None and len(records) < self.batch_size:
            following = next(self._snapshot_rows, None)
            table, after = self._pending
            last = following is None
            marker = "first" if self._snapshot_count == 0 else "last" if last else "true"
            if self._snapshot_count == 0 and last:
                marker = "last"
            self._snapshot_count += 1
            position = snapshot.position
            source = SourceInfo(
                self.cfg.connector, self.prefix, snapshot.started_ms, marker, 0,  # as Debezium: no event read
                position.file, position.pos,
            )  # fmt: skip
            offset: dict[str, Primitive] = {
                "file": position.file,
                "pos": position.pos,
                "ts_sec": snapshot.started_ms // 1000,
                "server_id": self.server.server_id,
            }
            if not last:  # Debezium 3's marker; its last snapshot record's offset has none
                offset["snapshot"] = "INITIAL"
            if position.gtids:
                offset["gtids"] = self._kept_gtids(position.gtids)
            value = table.envelope("r", None, after, source, time.time_ns() // 1000)
            records.append(self._record(table, table.key(after), value, offset))
            self._pending = following
        if self._pending is None:
            finished = True
            position = snapshot.position
            snapshot.close()
            self._snapshot = self._snapshot_rows = None
            log.info("MySqlCdcSource %s: snapshot done, %d row(s)", self.prefix, self._snapshot_count)
            if SnapshotMode(self.cfg["snapshot.mode"]) is SnapshotMode.INITIAL_ONLY:
                self._done = True
            else:
                self._stream_from(position)
        txn = self.context.transaction_context
        if finished and records and txn is not None:
            txn.commit_transaction(records[-1])  # the whole snapshot is one Kafka transaction
        return records or None

    # ------------------------------------------------------------------------------------ stream

    def _transaction(self, txn: Transaction) -> list[SourceRecord]:
        """The records of one database transaction (none for one without captured changes)."""
        assert txn.end is not None
        before_gtids, self._gtids_before = self._gtids_before, txn.end.gtids
        self._read_to = txn.end
        skip = None
        if self._skip is not None and self._skip[:2] == (txn.file, txn.pos):
            skip, self._skip = self._skip[2:], None
        records: list[SourceRecord] = []
        now_micros = time.time_ns() // 1000
        for change in txn.changes:
            if skip is not None and (change.event, change.row) < skip:
                continue  # delivered before the restart
            offset: dict[str, Primitive] = {
                "file": txn.file,
                "pos": txn.pos,
                "ts_sec": change.ts_ms // 1000,
                "server_id": self.server.server_id,
                "event": change.event,
                "row": change.row + 1,
            }
            if before_gtids:
                offset["gtids"] = self._kept_gtids(before_gtids)
            records.extend(self._change_records(txn, change, offset, now_micros))
        if records:
            self._beaten = txn.end
            last = records[-1]
            end: dict[str, Primitive] = {
                "file": txn.end.file,
                "pos": txn.end.pos,
                "ts_sec": dict(last.source_offset or {}).get("ts_sec", 0),
                "server_id": self.server.server_id,
            }
            if txn.end.gtids:
                end["gtids"] = self._kept_gtids(txn.end.gtids)
            records[-1] = SourceRecord(
                source_partition=last.source_partition,
                source_offset=end,
                topic=last.topic,
                key=last.key,
                value=last.value,
                key_schema=last.key_schema,
                value_schema=last.value_schema,
                headers=last.headers,
            )
        return records

    def _change_records(
        self, txn: Transaction, change: RowChange, offset: dict[str, Primitive], now_micros: int
    ) -> list[SourceRecord]:
        table = self._table_events(change.db, change.table, change.columns, change.primary_key)
        source = SourceInfo(
            self.cfg.connector, self.prefix, change.ts_ms, "false", self.server.server_id, txn.file,
            change.pos, change.row, txn.gtid, txn.thread,
        )  # fmt: skip
        before = None if change.before is None else table.row(change.before)
        after = None if change.after is None else table.row(change.after)
        out = []
        old_key, new_key = table.key(before), table.key(after)
        if change.op == "u" and old_key != new_key:
            # A primary key change, as Debezium emits it: a delete (and its tombstone) under the old
            # key naming the new one, then a create under the new key naming the old one.
            headers = pk_change_header(NEWKEY, new_key)
            out.append(
                self._record(
                    table, old_key, table.envelope("d", before, None, source, now_micros), offset, headers
                )
            )
            if self.tombstones:
                out.append(self._record(table, old_key, None, offset, headers))
            create = table.envelope("c", None, after, source, now_micros)
            out.append(self._record(table, new_key, create, offset, pk_change_header(OLDKEY, old_key)))
            return out
        key = new_key if after is not None else old_key
        out.append(
            self._record(table, key, table.envelope(change.op, before, after, source, now_micros), offset)
        )
        if change.op == "d" and self.tombstones:
            out.append(self._record(table, key, None, offset))
        return out

    def _kept_gtids(self, gtids: str) -> str:
        """`gtids` without the sources gtid.source.includes/excludes leave out: a source is the
        server UUID of a MySQL GTID set's part, the domain-server prefix of a MariaDB one."""
        if not (self.cfg["gtid.source.includes"] or self.cfg["gtid.source.excludes"]):
            return gtids
        keep = self.cfg.gtid_sources
        parts = [p.strip() for p in gtids.split(",") if p.strip()]
        if self.server.mariadb:
            return ",".join(p for p in parts if keep(p.rsplit("-", 1)[0]))
        return ",".join(p for p in parts if keep(p.split(":", 1)[0]))

    def _record(
        self,
        table: TableEvents,
        key: Struct | None,
        value: Struct | None,
        offset: dict[str, Primitive],
        headers: tuple[Header, ...] = (),
    ) -> SourceRecord:
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

    def stop(self) -> None:
        reader = self.__dict__.get("_reader")
        if reader is not None:
            reader.close()
        snapshot = self.__dict__.get("_snapshot")
        if snapshot is not None:
            snapshot.close()
        conn = self.__dict__.get("catalog")
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()


def _int(offset: Any, key: str, default: int | None = None) -> int:
    value = offset.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConnectException(f"MySqlCdcSource: the stored offset's {key!r} is {value!r}, not a number")
    return int(value)


def _str(value: Any) -> str | None:
    return None if value in (None, "") else str(value)
