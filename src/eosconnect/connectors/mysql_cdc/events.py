"""Debezium's MySQL/MariaDB change event format: per table a Key and a Value struct, and the Envelope.

Topic `<topic.prefix>.<database>.<table>`; key: the primary key columns as a struct named
`<topic>.Key` (null for a table without a primary key); value: the Envelope `<topic>.Envelope`
{before, after, source, transaction, op, ts_ms, ts_us, ts_ns}, `source` being
`io.debezium.connector.mysql.Source` (`io.debezium.connector.mariadb.Source` under the MariaDB
connector's class name). A delete is followed by a tombstone unless `tombstones.on.delete=false`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eosconnect.api.data import Schema, SchemaBuilder, Struct
from eosconnect.connectors.debezium.envelope import DEBEZIUM_VERSION, source_builder, table_schemas
from eosconnect.connectors.mysql_cdc.types import ColumnInfo, TypeModes, column_type

__all__ = ["SourceInfo", "TableEvents", "source_schema"]


def source_schema(connector: str) -> Schema:
    """`io.debezium.connector.<connector>.Source` (mysql or mariadb), the `source` block of every event."""
    return (
        source_builder(connector)
        .field("table", SchemaBuilder.string().optional().build())
        .field("server_id", SchemaBuilder.int64().build())
        .field("gtid", SchemaBuilder.string().optional().build())
        .field("file", SchemaBuilder.string().build())
        .field("pos", SchemaBuilder.int64().build())
        .field("row", SchemaBuilder.int32().build())
        .field("thread", SchemaBuilder.int64().optional().build())
        .field("query", SchemaBuilder.string().optional().build())
        .build()
    )


SOURCE_SCHEMAS = {name: source_schema(name) for name in ("mysql", "mariadb")}


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """The `source` block of one event: where in the binlog its row is (`file`, `pos` of its rows
    event, `row` within it) and its transaction's `gtid` and `thread`; the snapshot's point for op r."""

    connector: str  # mysql or mariadb
    server: str  # topic.prefix
    ts_ms: int  # the binlog event's time (streaming) or the snapshot's
    snapshot: str  # "false" while streaming; true/first/last in the snapshot
    server_id: int
    file: str
    pos: int
    row: int = 0
    gtid: str | None = None
    thread: int | None = None

    def struct(self, db: str, table: str) -> Struct:
        return Struct._of(
            SOURCE_SCHEMAS[self.connector],
            [
                DEBEZIUM_VERSION,
                self.connector,
                self.server,
                self.ts_ms,
                self.snapshot,
                db,
                None,
                self.ts_ms * 1000,
                self.ts_ms * 1_000_000,
                table,
                self.server_id,
                self.gtid,
                self.file,
                self.pos,
                self.row,
                self.thread,
                None,
            ],
        )


class TableEvents:
    """One table's schemas (as of a table map, or of the catalog for the snapshot) and its events'
    keys and values. Rows are dicts by column name (what both readers give)."""

    def __init__(
        self,
        prefix: str,
        connector: str,
        db: str,
        table: str,
        columns: Sequence[ColumnInfo],
        primary_key: Sequence[str],
        modes: TypeModes,
        keep_column: Callable[[str, str, str], bool] | None = None,
    ) -> None:
        self.db, self.table = db, table
        self.topic = f"{prefix}.{db}.{table}"
        self.columns = tuple(
            c
            for c in columns
            if keep_column is None or c.name in primary_key or keep_column(db, table, c.name)
        )
        kinds = [column_type(c, modes) for c in self.columns]
        self.converters: tuple[tuple[str, Callable[[Any], Any]], ...] = tuple(
            (c.name, k.convert) for c, k in zip(self.columns, kinds, strict=True)
        )
        schemas: dict[str, Schema] = {}
        for column, kind in zip(self.columns, kinds, strict=True):
            builder = kind.builder()
            if column.nullable:
                builder.optional()
            schemas[column.name] = builder.build()
        tables = table_schemas(self.topic, list(schemas.items()), primary_key, SOURCE_SCHEMAS[connector])
        self.value_schema = tables.value
        self.key_positions = tables.key_positions
        self.key_schema: Schema | None = tables.key
        self.envelope_schema = tables.envelope

    def row(self, values: dict[str, Any]) -> Struct:
        """A Value struct from a row (column name -> the reader's value; a missing column is null)."""
        out = []
        for name, convert in self.converters:
            value = values.get(name)
            out.append(None if value is None else convert(value))
        return Struct._of(self.value_schema, out)

    def key(self, row: Struct | None) -> Struct | None:
        if self.key_schema is None or row is None:
            return None
        values = row._values
        return Struct._of(self.key_schema, [values[i] for i in self.key_positions])

    def envelope(
        self, op: str, before: Struct | None, after: Struct | None, source: SourceInfo, now_micros: int
    ) -> Struct:
        return Struct._of(
            self.envelope_schema,
            [
                before,
                after,
                source.struct(self.db, self.table),
                None,
                op,
                now_micros // 1000,
                now_micros,
                now_micros * 1000,
            ],
        )
