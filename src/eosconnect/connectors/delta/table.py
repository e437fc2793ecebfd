"""A Delta table's side of the lake sink protocol (`lake.positions`): `txn` actions.

Every commit carries, per partition it covers, `txn` actions in the same commit as its data files,
as kafka-delta-ingest writes them (`appId` `<app>-<partition>`, here with `<app>` =
`<connector>-<topic>`, `version` = the next offset to read):

- `<connector>-<topic>-<partition>`: the next offset;
- `<connector>-<topic>-<partition>.generation`: the generation of the task that wrote it;
- `<connector>-<topic>-<partition>.leader-epoch`: the leader epoch of the record before it.

A claim is a commit of no rows whose `.generation` action raises the generation. delta-rs counts
the `txn` app ids a commit carries as read by it, so a commit conflicts with any commit that landed
since its snapshot and carries one of them (a `CommitFailedError`, "concurrent transaction"): a
claim makes the holder's commit in flight fail, whose retry then finds itself fenced. Commits of
other partitions (another task) share no app id and are rebased by delta-rs, so two tasks append to
one table without retries. A retry first looks whether the failed attempt landed after all (a
partition whose offset already reached the wanted one is not written again).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from eosconnect.api.errors import DataException
from eosconnect.api.records import OffsetAndMetadata, TopicPartition
from eosconnect.connectors.delta.config import DeltaMode, DeltaSettings
from eosconnect.connectors.lake.batch import OPERATION_COLUMN, latest_per_key, to_arrow
from eosconnect.connectors.lake.changes import Change
from eosconnect.connectors.lake.positions import Position, fenced
from eosconnect.connectors.lake.task import CommitResult

__all__ = ["DeltaLakeTable", "app_id"]

log = logging.getLogger(__name__)

#: Conflicting commits retried before the task fails (each retry reloads the table's state).
COMMIT_ATTEMPTS = 20


def app_id(connector: str, tp: TopicPartition) -> str:
    """The `txn` appId of a partition's next offset (kafka-delta-ingest's `<app>-<partition>`)."""
    return f"{connector}-{tp.topic}-{tp.partition}"


class DeltaLakeTable:
    """Claims and commits for one connector into one Delta table."""

    def __init__(self, settings: DeltaSettings, connector: str) -> None:
        self.settings = settings
        self.connector = connector
        self._table: DeltaTable | None = None

    # ----------------------------------------------------------------------------- reading
    def _load(self) -> DeltaTable | None:
        """The table at its latest version, None while it does not exist."""
        if self._table is not None:
            self._table.update_incremental()
            return self._table
        try:
            self._table = DeltaTable(
                self.settings.path, storage_options=self.settings.storage_options or None
            )
        except TableNotFoundError:
            return None
        return self._table

    def stored(self, table: DeltaTable | None, tp: TopicPartition) -> Position:
        """A partition's position as this table version records it (generation 0: never claimed)."""
        base = app_id(self.connector, tp)
        if table is None:
            return Position(tp.topic, tp.partition, None, None, self.connector, 0)
        return Position(
            tp.topic,
            tp.partition,
            table.transaction_version(base),
            table.transaction_version(base + ".leader-epoch"),
            self.connector,
            table.transaction_version(base + ".generation") or 0,
        )

    def positions(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Position]:
        table = self._load()
        return {tp: self.stored(table, tp) for tp in partitions}

    # ----------------------------------------------------------------------------- writing
    def _transactions(self, positions: Mapping[TopicPartition, Position]) -> list[Transaction]:
        now = int(time.time() * 1000)
        txns = []
        for tp, p in sorted(positions.items()):
            base = app_id(self.connector, tp)
            txns.append(Transaction(base + ".generation", p.generation, now))
            if p.offset is not None:
                txns.append(Transaction(base, p.offset, now))
            if p.leader_epoch is not None:
                txns.append(Transaction(base + ".leader-epoch", p.leader_epoch, now))
        return txns

    def claim(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Position]:
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            table = self._load()
            claims = {tp: self.stored(table, tp).claimed() for tp in partitions}
            if table is None:
                return claims  # no table yet: the first commit creates it, with these generations
            try:
                empty = pa.schema(table.schema()).empty_table()
                write_deltalake(
                    table,
                    empty,
                    mode="append",
                    commit_properties=CommitProperties(app_transactions=self._transactions(claims)),
                )
                return claims
            except CommitFailedError as exc:
                self._retrying("claim", attempt, exc)
        raise AssertionError("unreachable")

    def commit(self, changes: list[Change], positions: Mapping[TopicPartition, Position]) -> CommitResult:
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            table = self._load()
            result = CommitResult()
            stored = {tp: self.stored(table, tp) for tp in positions}
            result.fenced = {
                tp: s.generation for tp, s in stored.items() if table is not None and fenced(s, positions[tp])
            }
            done = {  # a lost acknowledgement: the attempt before landed after all
                tp
                for tp, s in stored.items()
                if tp not in result.fenced
                and s.offset is not None
                and s.offset >= (positions[tp].offset or 0)
            }
            writing = {tp: p for tp, p in positions.items() if tp not in result.fenced and tp not in done}
            rows = [c for c in changes if c.topic_partition in writing]
            result.committed = {tp: _offset(p) for tp, p in positions.items() if tp not in result.fenced}
            if not writing:
                return result
            try:
                self._write(table, rows, writing)
            except CommitFailedError as exc:
                self._retrying("commit", attempt, exc)
                continue
            except TableNotFoundError as exc:  # another task created it meanwhile ("already exists")
                self._retrying("create", attempt, exc)
                continue
            result.rows = len(rows)
            return result
        raise AssertionError("unreachable")

    def _write(
        self, table: DeltaTable | None, rows: list[Change], positions: Mapping[TopicPartition, Position]
    ) -> None:
        props = CommitProperties(app_transactions=self._transactions(positions))
        if not rows:  # records that made no change (filtered, tombstones when appending)
            if table is not None:  # still their positions move; before the table exists they are read again
                write_deltalake(
                    table, pa.schema(table.schema()).empty_table(), mode="append", commit_properties=props
                )
            return
        merge = self.settings.mode is DeltaMode.MERGE
        keys = self.settings.merge_keys
        data = to_arrow(latest_per_key(rows, keys) if merge else rows, with_operation=merge)
        if table is None or not merge:
            if merge:  # a new table: the upserts are its rows, the deletes have nothing to delete
                ops = data.column(OPERATION_COLUMN)
                data = data.filter(pc.equal(ops, "upsert")).drop_columns([OPERATION_COLUMN])
            try:
                write_deltalake(
                    self.settings.path if table is None else table,
                    data,
                    mode="error" if table is None else "append",
                    schema_mode=None if table is None else "merge",
                    partition_by=list(self.settings.partition_by) or None if table is None else None,
                    storage_options=self.settings.storage_options or None,
                    commit_properties=props,
                )
            except Exception as exc:
                if table is None and "exists" in str(exc).lower():
                    raise TableNotFoundError(str(exc)) from exc
                if isinstance(exc, CommitFailedError):
                    raise
                raise DataException(
                    f"writing {len(rows)} rows into {self.settings.path} failed: {exc}"
                ) from exc
            return
        if not len(data):
            write_deltalake(
                table, pa.schema(table.schema()).empty_table(), mode="append", commit_properties=props
            )
            return
        on = " AND ".join(f"t.`{k}` = s.`{k}`" for k in keys)
        deleting = f"s.`{OPERATION_COLUMN}` = 'delete'"
        upserting = f"s.`{OPERATION_COLUMN}` = 'upsert'"
        try:
            (
                table.merge(
                    data, on, source_alias="s", target_alias="t", merge_schema=True, commit_properties=props
                )
                .when_matched_delete(deleting)
                .when_matched_update_all(upserting, except_cols=[OPERATION_COLUMN])
                .when_not_matched_insert_all(upserting, except_cols=[OPERATION_COLUMN])
                .execute()
            )
        except CommitFailedError:
            raise
        except Exception as exc:
            raise DataException(f"merging {len(data)} rows into {self.settings.path} failed: {exc}") from exc

    def _retrying(self, what: str, attempt: int, exc: Exception) -> None:
        if attempt == COMMIT_ATTEMPTS:
            raise exc
        log.info("%s on %s conflicted (attempt %d), retrying: %s", what, self.settings.path, attempt, exc)
        self._table = None
        time.sleep(min(0.05 * attempt, 1.0))

    def close(self) -> None:
        self._table = None


def _offset(p: Position) -> OffsetAndMetadata:
    assert p.offset is not None
    return OffsetAndMetadata(p.offset, leader_epoch=p.leader_epoch)
