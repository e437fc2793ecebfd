"""Iceberg tables' side of the lake sink protocol (`lake.positions`): the snapshot summary.

Every snapshot the sink commits carries, in its summary, the property
`eosconnect.positions.<connector>`: JSON with, per partition the connector writes, the next offset,
the leader epoch, the connector and the generation (`lake.positions.encode_positions`). Each commit
carries every partition of the connector the table knows (those it does not touch copied from the
snapshot it builds on), so the latest snapshot with the property is the whole state; other writers'
snapshots (compaction, a Spark job) lack it, and a restart walks the ancestry of the current
snapshot back to the first that has it, as Iceberg's own Kafka Connect sink finds its
`kafka.connect.offsets.*` summary property. The same commit also sets the table property of that
name (one metadata update with the snapshot): expiring the snapshots that carry the summary
(`expire_snapshots` after compactions) loses nothing, and the property is what a restart reads
first.

A claim is a snapshot of no rows whose property raises the claimed partitions' generations. Every
commit requires the table's current snapshot to be the one it read (PyIceberg's `AssertRefSnapshotId`
through the catalog's compare-and-swap of the metadata location); PyIceberg's own retry, which
would re-apply the commit on a newer snapshot with the summary it computed from the older one, is
turned off (`commit.retry.num-retries` = 0 on the table object the transaction is built from, never
on the table itself): this sink retries, reading the positions again, so a claim that landed in
between fences the commit instead of being overwritten. With several tables (`iceberg.tables`)
each commits on its own; a table whose stored offset for a partition is past a change's offset
already has it (a crash between two tables' commits), and the change is not written again there.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import CommitFailedException, NamespaceAlreadyExistsError, NoSuchTableError
from pyiceberg.expressions import And, BooleanExpression, EqualTo, In, Or
from pyiceberg.table import Table
from pyiceberg.table.snapshots import Snapshot

from eosconnect.api.errors import DataException
from eosconnect.api.records import OffsetAndMetadata, TopicPartition
from eosconnect.connectors.iceberg.config import IcebergSettings
from eosconnect.connectors.lake.batch import OPERATION_COLUMN, latest_per_key, to_arrow
from eosconnect.connectors.lake.changes import Change
from eosconnect.connectors.lake.positions import Position, decode_positions, encode_positions, fenced
from eosconnect.connectors.lake.task import CommitResult

__all__ = ["IcebergTables", "positions_property"]

log = logging.getLogger(__name__)

COMMIT_ATTEMPTS = 30
_NO_RETRIES = {"commit.retry.num-retries": "0"}


def positions_property(connector: str) -> str:
    """The snapshot summary property holding a connector's positions."""
    return f"eosconnect.positions.{connector}"


def _ancestry(table: Table) -> Iterator[Snapshot]:
    snapshot = table.current_snapshot()
    while snapshot is not None:
        yield snapshot
        parent = snapshot.parent_snapshot_id
        snapshot = None if parent is None else table.snapshot_by_id(parent)


class IcebergTables:
    """Claims and commits for one connector into the tables `iceberg.tables` names."""

    def __init__(self, settings: IcebergSettings, connector: str) -> None:
        self.settings = settings
        self.connector = connector
        self.key = positions_property(connector)
        self.catalog: Catalog = load_catalog(settings.catalog_name, **settings.catalog)

    # ----------------------------------------------------------------------------- reading
    def _table(self, name: str) -> Table | None:
        try:
            table = self.catalog.load_table(name)
        except NoSuchTableError:
            return None
        metadata = table.metadata.model_copy(
            update={"properties": {**table.metadata.properties, **_NO_RETRIES}}
        )
        return Table(table.name(), metadata, table.metadata_location, table.io, table.catalog)

    def stored(self, table: Table | None) -> tuple[Snapshot | None, dict[TopicPartition, Position]]:
        """The table's current snapshot and the connector's positions as of it."""
        if table is None:
            return None, {}
        current = table.current_snapshot()
        kept = table.properties.get(self.key)
        if kept:
            return current, decode_positions(kept)
        for snapshot in _ancestry(table):
            text = snapshot.summary[self.key] if snapshot.summary is not None else None
            if text:
                return current, decode_positions(text)
        return current, {}

    def _default(self, tp: TopicPartition) -> Position:
        return Position(tp.topic, tp.partition, None, None, self.connector, 0)

    # ----------------------------------------------------------------------------- claims
    def claim(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Position]:
        """Raise each partition's generation to one number in every table, above any table's: a
        table where another claim got that number first restarts the claim with a higher one, so
        one claimer ends up holding every table. The position to resume from is the lowest offset
        of the tables (one behind the others gets the records again, and skips those it has)."""
        for _ in range(COMMIT_ATTEMPTS):
            stored = {name: self.stored(self._table(name))[1] for name in self.settings.tables}
            target = {
                tp: 1 + max(s[tp].generation if tp in s else 0 for s in stored.values()) for tp in partitions
            }
            claims: dict[TopicPartition, Position] = {}
            for name in self.settings.tables:
                got = self._claim_in(name, partitions, target)
                if got is None:
                    break
                for tp, p in got.items():
                    known = claims.get(tp)
                    if known is None or (
                        known.offset is not None and (p.offset is None or p.offset < known.offset)
                    ):
                        claims[tp] = p
            else:
                return claims
        raise DataException(
            f"could not claim {partitions} in {self.settings.tables}: other claims kept landing"
        )

    def _claim_in(
        self, name: str, partitions: list[TopicPartition], target: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, Position] | None:
        """Set these partitions' generations in this table to `target`; None if another claim
        reached it first."""
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            table = self._table(name)
            _, stored = self.stored(table)
            if any(stored[tp].generation >= target[tp] for tp in partitions if tp in stored):
                return None
            claims = {}
            for tp in partitions:
                p = stored.get(tp, self._default(tp))
                claims[tp] = Position(
                    p.topic, p.partition, p.offset, p.leader_epoch, self.connector, target[tp]
                )
            if table is None:
                return claims  # created by the first commit, with these generations
            try:
                summary = self._summary(stored, claims)
                with table.transaction() as txn:
                    txn.set_properties(summary)
                    txn.append(self._empty(table), snapshot_properties=summary)
                return claims
            except CommitFailedException as exc:
                self._retrying(f"claim in {name}", attempt, exc)
        raise AssertionError("unreachable")

    def _summary(
        self, stored: Mapping[TopicPartition, Position], updates: Mapping[TopicPartition, Position]
    ) -> dict[str, str]:
        return {self.key: encode_positions({**stored, **updates}.values())}

    @staticmethod
    def _empty(table: Table) -> pa.Table:
        return table.schema().as_arrow().empty_table()

    # ----------------------------------------------------------------------------- commits
    def commit(self, changes: list[Change], positions: Mapping[TopicPartition, Position]) -> CommitResult:
        result = CommitResult()
        routed = self._route(changes)
        for name in self.settings.tables:
            part = self._commit_to(name, routed.get(name, []), positions)
            result.rows += part.rows
            result.fenced.update(part.fenced)
        result.committed = {
            tp: OffsetAndMetadata(p.offset, leader_epoch=p.leader_epoch)
            for tp, p in positions.items()
            if tp not in result.fenced and p.offset is not None
        }
        return result

    def _route(self, changes: list[Change]) -> dict[str, list[Change]]:
        field = self.settings.route_field
        if not field:
            return {name: changes for name in self.settings.tables}
        routed: dict[str, list[Change]] = {}
        known = set(self.settings.tables)
        for change in changes:
            target = change.values.get(field)
            if target in known:
                routed.setdefault(str(target), []).append(change)
        return routed

    def _commit_to(
        self, name: str, changes: list[Change], positions: Mapping[TopicPartition, Position]
    ) -> CommitResult:
        for attempt in range(1, COMMIT_ATTEMPTS + 1):
            table = self._table(name)
            _, stored = self.stored(table)
            result = CommitResult()
            result.fenced = {
                tp: stored[tp].generation if tp in stored else 0
                for tp, p in positions.items()
                if table is not None and fenced(stored.get(tp), p)
            }

            rows = [c for c in changes if c.topic_partition not in result.fenced and _new(c, stored)]
            moving = {
                tp: p
                for tp, p in positions.items()
                if tp not in result.fenced and (stored.get(tp) is None or stored[tp].offset != p.offset)
            }
            if not moving or (table is None and not rows):  # no table yet for records without rows
                return result
            try:
                table = self._write(name, table, rows, self._summary(stored, moving))
            except CommitFailedException as exc:
                self._retrying(f"commit to {name}", attempt, exc)
                continue
            result.rows = len(rows)
            return result
        raise AssertionError("unreachable")

    def _write(self, name: str, table: Table | None, rows: list[Change], summary: dict[str, str]) -> Table:
        upsert = self.settings.upsert
        keys = self.settings.id_columns
        data = to_arrow(latest_per_key(rows, keys) if upsert else rows, with_operation=upsert)
        data = _iceberg_types(data)
        if table is None:
            table = self._create(name, data.drop_columns([OPERATION_COLUMN]) if upsert else data)
        with table.transaction() as txn:
            txn.set_properties(summary)  # survives snapshot expiry (see the module doc)
            if self.settings.evolve and len(data):
                columns = data.drop_columns([OPERATION_COLUMN]) if upsert else data
                try:
                    with txn.update_schema() as update:
                        update.union_by_name(columns.schema)
                except (ValueError, TypeError) as exc:
                    raise DataException(
                        f"table {name}: the records' schema cannot evolve the table's: {exc}"
                    ) from exc
            target = txn.table_metadata.schema().as_arrow()
            if not upsert:
                txn.append(_conform(data, target), snapshot_properties=summary)
                return table
            ops = data.column(OPERATION_COLUMN)
            deletes = data.filter(pc.equal(ops, "delete"))
            upserts = _conform(data.filter(pc.equal(ops, "upsert")).drop_columns([OPERATION_COLUMN]), target)
            if len(deletes):
                txn.delete(_key_filter(deletes, keys), snapshot_properties=summary)
            if len(upserts):
                txn.upsert(upserts, join_cols=list(keys), snapshot_properties=summary)
            if not len(deletes) and not len(upserts):
                txn.append(target.empty_table(), snapshot_properties=summary)
        return table

    def _create(self, name: str, data: pa.Table) -> Table:
        if not self.settings.auto_create:
            raise DataException(
                f"table {name} does not exist: create it, or set iceberg.tables.auto-create-enabled=true"
            )
        namespace = name.rsplit(".", 1)[0]
        with contextlib.suppress(NamespaceAlreadyExistsError):
            self.catalog.create_namespace(namespace)
        schema = data.schema
        try:
            created = self.catalog.create_table(name, schema=schema)
            if self.settings.partition_by:
                with created.update_spec() as spec:
                    for column in self.settings.partition_by:
                        spec.add_identity(column)
        except Exception as exc:
            if "exist" not in str(exc).lower():
                raise
        table = self._table(name)
        assert table is not None
        return table

    def _retrying(self, what: str, attempt: int, exc: Exception) -> None:
        if attempt == COMMIT_ATTEMPTS:
            raise exc
        log.info("%s conflicted with another commit (attempt %d), retrying: %s", what, attempt, exc)
        time.sleep(random.uniform(0.02, 0.1) * min(attempt, 10))

    def close(self) -> None:
        engine: Any = getattr(self.catalog, "engine", None)
        if engine is not None:
            engine.dispose()


def _new(change: Change, stored: Mapping[TopicPartition, Position]) -> bool:
    """Whether the table lacks this change (its stored offset for the partition is not past it)."""
    have = stored.get(change.topic_partition)
    return have is None or have.offset is None or change.offset >= have.offset


def _iceberg_types(data: pa.Table) -> pa.Table:
    """Iceberg has no 8- or 16-bit integers: they are ints (int32), as Iceberg's sink writes them."""
    fields = []
    for f in data.schema:
        if pa.types.is_int8(f.type) or pa.types.is_int16(f.type):
            fields.append(pa.field(f.name, pa.int32(), nullable=True))
        else:
            fields.append(f)
    target = pa.schema(fields)
    return data if target == data.schema else data.cast(target)


def _conform(data: pa.Table, target: pa.Schema) -> pa.Table:
    """The data with the table's columns in its order: a column the records lack is null, one the
    table lacks (no schema evolution) is not written."""
    columns = []
    for f in target:
        if f.name in data.column_names:
            column = data.column(f.name)
            columns.append(column if column.type == f.type else column.cast(f.type))
        else:
            columns.append(pa.nulls(len(data), f.type))
    return pa.Table.from_arrays(columns, schema=target)


#: PyIceberg's predicates are pydantic models whose positional constructors mypy does not see.
_IN: Any = In
_EQUAL_TO: Any = EqualTo


def _key_filter(deletes: pa.Table, keys: tuple[str, ...]) -> BooleanExpression:
    """The rows of these keys (the deletes of an upsert batch)."""
    if len(keys) == 1:
        return _IN(keys[0], set(deletes.column(keys[0]).to_pylist()))
    rows = deletes.select(list(keys)).to_pylist()
    expression: BooleanExpression | None = None
    for row in rows:
        term: BooleanExpression = _EQUAL_TO(keys[0], row[keys[0]])
        for k in keys[1:]:
            term = And(term, _EQUAL_TO(k, row[k]))
        expression = term if expression is None else Or(expression, term)
    assert expression is not None
    return expression
