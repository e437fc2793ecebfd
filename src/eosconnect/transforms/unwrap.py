"""Debezium's `io.debezium.transforms.ExtractNewRecordState` ("unwrap"): a change event's envelope
replaced by the row it leaves, so sinks that want plain rows (JdbcSink, with `insert.mode=upsert` and
`delete.enabled`) read CDC topics as Debezium users configure them::

    transforms=unwrap
    transforms.unwrap.type=io.debezium.transforms.ExtractNewRecordState
    transforms.unwrap.delete.tombstone.handling.mode=rewrite
    transforms.unwrap.add.fields=op,source.lsn

What Debezium 3.7 does, setting by setting (its AbstractExtractNewRecordState, ExtractNewRecordState
and DefaultDeleteHandlingStrategy):

- a create, read or update becomes its `after` struct;
- a delete, by `delete.tombstone.handling.mode`: `tombstone` (the default) a record whose value is null
  (and whose value schema is the `after` field's: "a flattened delete", what JDBC sinks delete by),
  `drop` nothing, `delete-to-tombstone` a true tombstone (value and schema null), `rewrite` and
  `rewrite-with-tombstone` the `before` struct with `__deleted="true"` (creates and updates then carry
  `__deleted="false"`);
- Debezium's own tombstones are dropped, except with `rewrite-with-tombstone`;
- `add.fields` / `add.headers`: envelope fields (`op`, `ts_ms`, `source.lsn`, `lsn` = `source.lsn`,
  `transaction.id`, `field:newName`) added to the row (named `__op`, `__source_lsn`, ... by
  `add.fields.prefix`) or as headers (`add.headers.prefix`); a tombstone gets only the `op` header (`d`);
- `route.by.field`: the topic becomes that column's value;
- records without an envelope schema (schemaless, heartbeats) pass unchanged.

Debezium 2.x's `drop.tombstones` and `delete.handling.mode` (none | drop | rewrite), removed in 3.0, are
read as 2.x read them when `delete.tombstone.handling.mode` is not set, so configs from 2.x keep their
behaviour (3.x would ignore them); a warning names the setting to use instead.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import Schema, SchemaBuilder, Struct, copy_schema_basics
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import R
from eosconnect.api.transforms import Transformation
from eosconnect.api.validators import ValidString
from eosconnect.transforms import ExtractField, InsertField
from eosconnect.transforms.base import SchemaUpdateCache, require_struct, values_to_string

__all__ = ["DeleteTombstoneHandling", "ExtractNewRecordState"]

log = logging.getLogger(__name__)

DELETED_FIELD = "__deleted"
_TRANSACTION_FIELDS = ("id", "total_order", "data_collection_order")
_TOP_LEVEL_FIELDS = ("op", "ts_ms", "ts_us", "ts_ns")
#: Debezium's ExtractNewRecordState.SCHEMA_CACHE_SIZE: its BoundedConcurrentHashMap (LRU) of
#: (value schema, op) -> schema with `add.fields`.
SCHEMA_CACHE_SIZE = 64


class DeleteTombstoneHandling(StrEnum):
    DROP = "drop"
    TOMBSTONE = "tombstone"
    REWRITE = "rewrite"
    REWRITE_WITH_TOMBSTONE = "rewrite-with-tombstone"
    DELETE_TO_TOMBSTONE = "delete-to-tombstone"


class _LegacyDeleteHandling(StrEnum):
    NONE = "none"
    DROP = "drop"
    REWRITE = "rewrite"


@dataclass(frozen=True)
class _FieldReference:
    """One entry of `add.fields`/`add.headers`: `[struct.]field[:newName]` (Debezium's FieldReference)."""

    struct: str | None  # "source", "transaction", or None for the envelope's own fields
    field: str
    new_field: str

    @classmethod
    def parse(cls, prefix: str, entry: str) -> _FieldReference:
        parts = entry.split(":")
        if len(parts) > 2:
            raise ValueError(f"Unexpected field name: {entry}")
        path = parts[0].split(".")
        field = path[0] if len(path) == 1 else path[1]
        if len(path) == 1:
            struct = (
                "transaction"
                if field in _TRANSACTION_FIELDS
                else None
                if field in _TOP_LEVEL_FIELDS
                else "updateDescription"
                if field == "updateDescription"
                else "source"
            )
        else:
            struct = path[0]
        if len(parts) == 2:
            new_field = prefix + parts[1]
        else:
            new_field = prefix + (field if len(path) == 1 else f"{struct}_{field}")
        return cls(struct, field, new_field)

    def schema(self, envelope: Schema) -> Schema | None:
        """The added field's schema (optional), or None when the envelope has no such field."""
        parent = envelope
        if self.struct is not None:
            holder = envelope.field(self.struct)
            if holder is None:
                return None
            parent = holder.schema
        found = parent.field(self.field) or envelope.field(self.field)
        if found is None:
            return None
        return copy_schema_basics(found.schema).optional().build()

    def value(self, envelope: Struct) -> Any:
        parent: Struct | None = envelope
        if self.struct is not None:
            parent = envelope.get_without_default(self.struct)
        if parent is None:
            return None
        if parent.schema.field(self.field) is not None:
            return parent.get_without_default(self.field)
        return envelope.get_without_default(self.field)


def _references(prefix: str, entries: list[str]) -> list[_FieldReference]:
    return [_FieldReference.parse(prefix, e.strip()) for e in entries if e.strip()]


class ExtractNewRecordState(Transformation[R]):
    """Debezium's `io.debezium.transforms.ExtractNewRecordState`: a change event reduced to its row
    (`after`); deletes and tombstones as `delete.tombstone.handling.mode` says (docs/cdc.md)."""

    def config_def(self) -> ConfigDef:
        """Debezium's settings of the transformation, one `define` each: a long declaration, kept in
        one expression so it reads as the table of settings it is."""
        return (
            ConfigDef()
            .define(
                "delete.tombstone.handling.mode",
                ConfigType.STRING,
                None,
                Importance.MEDIUM,
                "How deletes and tombstones come out: tombstone (the default: a delete becomes a record "
                "with a null value, tombstones are dropped); drop (both dropped); rewrite (a delete "
                "becomes its `before` row with __deleted=true, tombstones dropped); rewrite-with-tombstone "
                "(the same, tombstones kept); delete-to-tombstone (a delete becomes a tombstone, "
                "Debezium's tombstones dropped).",
                ValidString.in_(*(m.value for m in DeleteTombstoneHandling)),
            )
            .define(
                "drop.tombstones",
                ConfigType.BOOLEAN,
                None,
                Importance.LOW,
                "Debezium 2.x, removed in 3.0: whether tombstones are dropped (default true). Read only "
                "when delete.tombstone.handling.mode is not set; use that instead.",
            )
            .define(
                "delete.handling.mode",
                ConfigType.STRING,
                None,
                Importance.LOW,
                "Debezium 2.x, removed in 3.0: none (a delete becomes a null value) | drop (the default) "
                "| rewrite (__deleted field). Read only when delete.tombstone.handling.mode is not set; use "
                "that instead.",
                ValidString.in_(*(m.value for m in _LegacyDeleteHandling)),
            )
            .define(
                "route.by.field",
                ConfigType.STRING,
                "",
                Importance.LOW,
                "A column whose value becomes the record's topic (the `before` row's for deletes).",
            )
            .define(
                "add.fields.prefix", ConfigType.STRING, "__", Importance.LOW, "Prefix of the added fields."
            )
            .define(
                "add.fields",
                ConfigType.LIST,
                [],
                Importance.LOW,
                "Envelope fields added to the row: op, ts_ms, source fields (lsn, source.ts_ms, ...), "
                "transaction fields; `field:name` names the new field (then only the prefix is added).",
            )
            .define(
                "add.headers.prefix",
                ConfigType.STRING,
                "__",
                Importance.LOW,
                "Prefix of the added headers.",
            )
            .define(
                "add.headers",
                ConfigType.LIST,
                [],
                Importance.LOW,
                "Envelope fields added as headers, named as in add.fields.",
            )
            .define(
                "replace.null.with.default",
                ConfigType.BOOLEAN,
                True,
                Importance.LOW,
                "Whether null fields with a default get the default when __deleted is added.",
            )
            .define(
                "drop.fields.header.name",
                ConfigType.STRING,
                None,
                Importance.LOW,
                "Not supported by eosconnect (it comes with Debezium's ExtractChangedRecordState and "
                "HeaderToValue); leave unset.",
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        cfg = self.config
        if cfg["drop.fields.header.name"]:
            raise ConfigException(
                errors={
                    "drop.fields.header.name": [
                        "is not supported by eosconnect's ExtractNewRecordState. Remove it (and drop the "
                        "fields with ReplaceField instead)."
                    ]
                }
            )
        self.legacy: tuple[bool, _LegacyDeleteHandling] | None = None
        mode = cfg["delete.tombstone.handling.mode"]
        if mode is None and (cfg["drop.tombstones"] is not None or cfg["delete.handling.mode"] is not None):
            drop_tombstones = True if cfg["drop.tombstones"] is None else bool(cfg["drop.tombstones"])
            self.legacy = (drop_tombstones, _LegacyDeleteHandling(cfg["delete.handling.mode"] or "drop"))
            log.warning(
                'ExtractNewRecordState: "drop.tombstones" and "delete.handling.mode" were removed in '
                'Debezium 3.0; read as Debezium 2.x did. Use "delete.tombstone.handling.mode" instead.'
            )
        self.mode = DeleteTombstoneHandling(mode or DeleteTombstoneHandling.TOMBSTONE)
        try:
            self.fields = _references(cfg["add.fields.prefix"], cfg["add.fields"])
            self.headers = _references(cfg["add.headers.prefix"], cfg["add.headers"])
        except ValueError as exc:
            raise ConfigException(
                errors={"add.fields": [f"{exc}. Use field or struct.field[:newName]."]}
            ) from exc
        self.route_by = cfg["route.by.field"] or None
        self._after, self._before = ExtractField[Any](), ExtractField[Any]()
        self._after.configure({"field": "after"})
        self._before.configure({"field": "before"})
        replace = "true" if cfg["replace.null.with.default"] else "false"
        self._removed, self._updated = InsertField[Any](), InsertField[Any]()
        for delegate, flag in ((self._removed, "true"), (self._updated, "false")):
            delegate.configure(
                {"static.field": DELETED_FIELD, "static.value": flag, "replace.null.with.default": replace}
            )
        self._schemas: SchemaUpdateCache[tuple[Schema, str | None]] = SchemaUpdateCache(SCHEMA_CACHE_SIZE)

    @property
    def _rewrite(self) -> bool:
        if self.legacy is not None:
            return self.legacy[1] is _LegacyDeleteHandling.REWRITE
        return self.mode in (DeleteTombstoneHandling.REWRITE, DeleteTombstoneHandling.REWRITE_WITH_TOMBSTONE)

    def apply(self, record: R) -> R | None:
        envelope = record.value
        tombstone = envelope is None
        schema = record.value_schema
        name = schema.name if schema is not None else None
        valid = name is not None and name.endswith(".Envelope")  # Debezium's SmtManager.isValidEnvelope
        if (valid or tombstone) and self.headers:
            record = record.new_record(headers=(*record.headers, *self._make_headers(envelope)))
        if tombstone:
            return self._tombstone(record)
        if not valid:
            return record
        new = self._after.apply(record)
        assert new is not None
        if new.value is None:
            before = self._before.apply(record)
            if before is None or before.value is None:
                return None  # a truncate: dropped
            deleted = self._delete(record)
            if deleted is None:
                return None
            if self.route_by is not None:
                before_row = require_struct(envelope, "ExtractNewRecordState routing").get("before")
                deleted = self._routed(deleted, before_row.get(self.route_by))
            if deleted.value is not None:
                deleted = self._add_fields(record, deleted)
            return deleted
        if self._rewrite and isinstance(new.value, Struct):
            new = self._updated.apply(new)
            assert new is not None
        if self.route_by is not None:
            new = self._routed(
                new, require_struct(new.value, "ExtractNewRecordState routing").get(self.route_by)
            )
        return self._add_fields(record, new)

    def _tombstone(self, record: R) -> R | None:
        if self.legacy is not None:
            return None if self.legacy[0] else record
        return record if self.mode is DeleteTombstoneHandling.REWRITE_WITH_TOMBSTONE else None

    def _delete(self, record: R) -> R | None:
        mode: str = self.legacy[1].value if self.legacy is not None else self.mode.value
        if mode == "drop":
            return None
        if mode in ("tombstone", "none"):
            return self._after.apply(record)  # value null, schema the `after` field's
        if mode == DeleteTombstoneHandling.DELETE_TO_TOMBSTONE:
            return record.new_record(value=None, value_schema=None)
        old = self._before.apply(record)  # rewrite
        assert old is not None
        return self._removed.apply(old) if isinstance(old.value, Struct) else old

    def _routed(self, record: R, topic: Any) -> R:
        return record if topic is None or not str(topic).strip() else record.new_record(topic=str(topic))

    def _make_headers(self, envelope: Struct | None) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for ref in self.headers:
            if envelope is None:
                if ref.field == "op":
                    out.append((ref.new_field, "d"))
                continue
            schema = ref.schema(envelope.schema)
            if schema is not None:
                value = ref.value(envelope)
                out.append((ref.new_field, None if value is None else values_to_string(value, schema=schema)))
        return out

    def _add_fields(self, original: R, unwrapped: R) -> R:
        if not self.fields:
            return unwrapped
        value = require_struct(unwrapped.value, "source field insertion")
        envelope: Struct = original.value

        def build(key: tuple[Schema, str | None]) -> Schema:
            builder = copy_schema_basics(value.schema, SchemaBuilder.struct())
            for field in value.schema.fields:
                builder.field(field.name, field.schema)
            for ref in self.fields:
                field_schema = ref.schema(envelope.schema)
                if field_schema is not None:
                    builder.field(ref.new_field, field_schema)
            return builder.build()

        schema = self._schemas.get_or_build((value.schema, envelope.get_without_default("op")), build)
        updated = Struct(schema)
        for field in value.schema.fields:
            updated.put(field.name, value.get_without_default(field.name))
        for ref in self.fields:
            if schema.field(ref.new_field) is not None and ref.schema(envelope.schema) is not None:
                updated.put(ref.new_field, ref.value(envelope))
        return unwrapped.new_record(value=updated, value_schema=schema)
