"""A `SinkRecord` to a table row and its operation.

A record's value is a `Struct` (any converter with schemas) or a schemaless JSON map. In append
mode each record is one new row of the value's fields. In merge (upsert) mode the operation comes
from the record, as CDC streams carry it:

- a Debezium envelope (a Struct or map with `op` and `after`/`before`): `c`, `r`, `u` upsert
  `after`; `d` deletes `before` (truncate events, `t`, are skipped);
- a flattened record (Debezium's ExtractNewRecordState): `__op` = `d` or `__deleted` = `true`
  deletes, anything else upserts; the `__`-prefixed fields are written as columns like any other;
- with a cdc field (IcebergSink's `iceberg.tables.cdc-field`): `D`/`d` there deletes, else upsert;
- a tombstone (null value) deletes the row of the record's key (a Struct or map of key fields).

Rows of one batch are applied in consumption order per key: of several changes to one key the last
decides (an upsert sets every column, so the state after it does not depend on the ones before).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import pyarrow as pa

from eosconnect.api.data import Schema, Struct, Type
from eosconnect.api.errors import DataException
from eosconnect.api.records import SinkRecord, TopicPartition
from eosconnect.connectors.lake.arrow_schema import Converter, Mapper, inferred_field

__all__ = ["Change", "ChangeMaker", "Operation"]


class Operation(StrEnum):
    APPEND = "append"
    UPSERT = "upsert"
    DELETE = "delete"


@dataclass(frozen=True)
class Change:
    """One row to write: its partition and offset, what to do, and its columns (Arrow-ready)."""

    topic_partition: TopicPartition
    offset: int
    operation: Operation
    fields: tuple[pa.Field, ...]
    values: dict[str, Any]


class ChangeMaker:
    """Turns records into changes; column types per value schema are worked out once per schema."""

    def __init__(
        self, mapper: Mapper, *, merge: bool, keys: tuple[str, ...] = (), cdc_field: str = ""
    ) -> None:
        self.mapper = mapper
        self.merge = merge
        self.keys = keys
        #: A value field holding the operation (Iceberg's `iceberg.tables.cdc-field`: I, U, D).
        self.cdc_field = cdc_field
        self._shapes: dict[Schema, tuple[tuple[pa.Field, ...], tuple[Converter, ...]]] = {}
        #: Schemaless columns as first typed: a later value of another type is cast or refused.
        self._inferred: dict[str, tuple[pa.Field, Converter]] = {}

    def change(self, record: SinkRecord) -> Change | None:
        """The change a record makes; None for one that makes none (a tombstone when appending)."""
        tp = record.topic_partition
        value = record.value
        if not self.merge:
            if value is None:
                return None
            fields, values = self._row(value, record)
            return Change(tp, record.offset, Operation.APPEND, fields, values)
        operation, row = self._cdc(record)
        if operation is None:
            return None
        if row is None:
            raise DataException(
                f"record {record.topic}-{record.partition}@{record.offset}: a delete needs the row's key, "
                "and the record has neither a `before` value nor a key"
            )
        fields, values = self._row(row, record)
        missing = [k for k in self.keys if values.get(k) is None]
        if missing:
            raise DataException(
                f"record {record.topic}-{record.partition}@{record.offset} has no value for the merge key "
                f"column(s) {missing}: every record of a merge table needs its key columns"
            )
        return Change(tp, record.offset, operation, fields, values)

    def _cdc(self, record: SinkRecord) -> tuple[Operation | None, Any]:
        value = record.value
        if value is None:
            return Operation.DELETE, record.key
        op = _get(value, "op")
        if op is not None and _has(value, "after"):  # a Debezium envelope
            if op == "d":
                return Operation.DELETE, _get(value, "before") or record.key
            if op in ("c", "r", "u"):
                return Operation.UPSERT, _get(value, "after")
            return None, None  # `t`, `m`: truncate and messages change no row
        if self.cdc_field:
            op = str(_get(value, self.cdc_field) or "").lower()
            return (Operation.DELETE if op == "d" else Operation.UPSERT), value
        if _get(value, "__op") == "d" or str(_get(value, "__deleted")).lower() == "true":
            return Operation.DELETE, value
        return Operation.UPSERT, value

    def _row(self, value: Any, record: SinkRecord) -> tuple[tuple[pa.Field, ...], dict[str, Any]]:
        if isinstance(value, Struct):
            fields, converters = self._shape(value.schema)
            get = value.get
            return fields, {
                f.name: None if (v := get(f.name)) is None else c(v)
                for f, c in zip(fields, converters, strict=True)
            }
        if isinstance(value, Mapping):
            return self._schemaless(value)
        raise DataException(
            f"record {record.topic}-{record.partition}@{record.offset}: its value is a "
            f"{type(value).__name__}, not a Struct or a JSON object, so it has no columns; use a converter "
            "that gives Structs (JsonConverter with schemas.enable=true, Avro) or JSON objects"
        )

    def _shape(self, schema: Schema) -> tuple[tuple[pa.Field, ...], tuple[Converter, ...]]:
        shape = self._shapes.get(schema)
        if shape is None:
            if schema.type is not Type.STRUCT:
                raise DataException(f"a {schema.type} value has no columns: only a STRUCT schema does")
            pairs = [self.mapper.field(f.name, f.schema) for f in schema.fields]
            shape = (tuple(p[0] for p in pairs), tuple(p[1] for p in pairs))
            self._shapes[schema] = shape
        return shape

    def _schemaless(self, value: Mapping[Any, Any]) -> tuple[tuple[pa.Field, ...], dict[str, Any]]:
        fields: list[pa.Field] = []
        values: dict[str, Any] = {}
        for raw_name, v in value.items():
            name = str(raw_name)
            known = self._inferred.get(name)
            if known is None:
                inferred = inferred_field(name, v)
                if inferred is None:
                    continue  # typed by the first non-null value
                self._inferred[name] = known = inferred
            fields.append(known[0])
            values[name] = None if v is None else known[1](v)
        return tuple(fields), values


def _get(value: Any, name: str) -> Any:
    if isinstance(value, Struct):
        return value.get(name) if value.schema.field(name) is not None else None
    if isinstance(value, Mapping):
        return value.get(name)
    return None


def _has(value: Any, name: str) -> bool:
    if isinstance(value, Struct):
        return value.schema.field(name) is not None
    return isinstance(value, Mapping) and name in value
