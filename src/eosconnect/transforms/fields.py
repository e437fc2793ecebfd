"""Kafka's transformations of fields: InsertField, ReplaceField, ExtractField, HoistField.

Each works on the record value, or the key in its `...Key` class (Kafka's `$Key`). As in Kafka, a null
operand passes through where Kafka lets it (InsertField, ReplaceField, ExtractField) and any other
non-map operand fails with a `DataException` naming what was found.
"""

from __future__ import annotations

import datetime
import functools
import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import (
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    Schema,
    SchemaBuilder,
    Struct,
    Timestamp,
    Type,
    copy_schema_basics,
)
from eosconnect.api.data.schema import INT32_SCHEMA, INT64_SCHEMA, STRING_SCHEMA, validate_value
from eosconnect.api.errors import DataException
from eosconnect.api.records import R
from eosconnect.transforms.base import (
    KeyOrValueTransformation,
    define_replace_null_with_default,
    require_map,
    require_map_or_null,
    require_sink_record,
    require_struct,
)
from eosconnect.transforms.field_path import SYNTAX_SETTING, FieldPath, define_field_syntax

if TYPE_CHECKING:
    from eosconnect.api.batch import SourceBatch

log = logging.getLogger(__name__)


def _insertion(spec: str | None) -> tuple[str, bool] | None:
    """Kafka's InsertField names: `name!` is a required field, `name?` or `name` an optional one."""
    if not spec:
        return None
    if spec.endswith("!"):
        return spec[:-1], False
    return (spec[:-1] if spec.endswith("?") else spec), True


_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def all_str(column: Sequence[Any]) -> bool:
    """Whether every value is a `str`: valid for a STRING schema without checking each one."""
    return all(type(value) is str for value in column)


@functools.lru_cache(maxsize=256)
def millis_to_datetime(millis: int) -> datetime.datetime:
    """The UTC datetime of epoch milliseconds; cached, as the records of one poll share a timestamp
    (datetimes are immutable, so sharing one is safe)."""
    return _EPOCH + datetime.timedelta(milliseconds=millis)


class InsertField(KeyOrValueTransformation[R]):
    """Add fields: a fixed string (`static.field`/`static.value`) and/or record metadata (`topic.field`,
    `partition.field`, `offset.field` (sink records only), `timestamp.field`)."""

    def config_def(self) -> ConfigDef:
        doc = "Field name for the record's {} (leave unset to skip); a trailing ! or ? is accepted."
        return define_replace_null_with_default(
            ConfigDef()
            .define("topic.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("topic"))
            .define(
                "partition.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("Kafka partition")
            )
            .define(
                "offset.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("Kafka offset (sinks)")
            )
            .define(
                "timestamp.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("timestamp (ms)")
            )
            .define(
                "static.field", ConfigType.STRING, None, Importance.MEDIUM, "Field name for a static value."
            )
            .define("static.value", ConfigType.STRING, None, Importance.MEDIUM, "The static value to insert.")
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.fields = {
            name: _insertion(self.config[name])
            for name in ("topic.field", "partition.field", "offset.field", "timestamp.field", "static.field")
        }

    def apply(self, record: R) -> R | None:
        operand = self.operand(record)
        if operand is None:
            return record
        if self.operand_schema(record) is not None:
            return self._apply_with_schema(record, require_struct(operand, "field insertion"))
        updated = dict(require_map(operand, "field insertion"))
        fields = self.fields
        if topic := fields["topic.field"]:
            updated[topic[0]] = record.topic
        if partition := fields["partition.field"]:
            updated[partition[0]] = record.partition
        if offset := fields["offset.field"]:
            updated[offset[0]] = require_sink_record(record, "field insertion").offset
        if timestamp := fields["timestamp.field"]:
            updated[timestamp[0]] = record.timestamp
        if (static := fields["static.field"]) and self.config["static.value"] is not None:
            updated[static[0]] = self.config["static.value"]
        return self.with_operand(record, None, updated)

    def _apply_with_schema(self, record: R, value: Struct) -> R:
        schema = self.schema_cache.get_or_build(value.schema, self._updated_schema)
        copied = [self.field_value(value, field.name) for field in value.schema.fields]
        updated = copy_valid_fields(schema, copied + [None] * (len(schema.fields) - len(copied)), len(copied))
        fields = self.fields
        if topic := fields["topic.field"]:
            updated.put(topic[0], record.topic)
        if (partition := fields["partition.field"]) and record.partition is not None:
            updated.put(partition[0], record.partition)
        if offset := fields["offset.field"]:
            updated.put(offset[0], require_sink_record(record, "field insertion").offset)
        if (timestamp := fields["timestamp.field"]) and record.timestamp is not None:
            updated.put(timestamp[0], millis_to_datetime(record.timestamp))
        if (static := fields["static.field"]) and self.config["static.value"] is not None:
            updated.put(static[0], self.config["static.value"])
        return self.with_operand(record, schema, updated)

    def apply_columns(self, batch: SourceBatch) -> SourceBatch | None:
        column, schema = self.operand_column(batch)
        fields = self.fields
        static_value = self.config["static.value"] if fields["static.field"] else None
        if schema is None:
            if fields["offset.field"]:
                return None  # only sink records have offsets: `apply` says so
            topic, partition = fields["topic.field"], fields["partition.field"]
            timestamp, static = fields["timestamp.field"], fields["static.field"]
            times = batch.timestamps or [None] * len(batch)
            updated: list[Any] = []
            for value, millis in zip(column, times, strict=True):
                if value is None:
                    updated.append(None)
                    continue
                row = dict(require_map(value, "field insertion"))  # keys in `apply`'s order
                if topic:
                    row[topic[0]] = batch.topic
                if partition:
                    row[partition[0]] = batch.partition
                if timestamp:
                    row[timestamp[0]] = millis
                if static and static_value is not None:
                    row[static[0]] = static_value
                updated.append(row)
            return self.with_operand_column(batch, None, updated)
        structs = same_schema_structs(column)
        if structs is None or fields["offset.field"]:
            return None  # mixed schemas or nulls (kept as they are) would not stay one batch
        if not structs:
            return batch
        in_schema = structs[0].schema
        out_schema = self.schema_cache.get_or_build(in_schema, self._updated_schema)
        out_fields = out_schema.fields
        constants: list[Any] = []  # the inserted fields after the copied ones, in schema order
        timestamp_at = None
        for setting, value in (
            ("topic.field", batch.topic),
            ("partition.field", batch.partition),
            ("timestamp.field", None),
            ("static.field", static_value),
        ):
            if fields[setting]:
                if setting == "timestamp.field":
                    timestamp_at = len(in_schema.fields) + len(constants)
                elif value is not None:
                    field = out_fields[len(in_schema.fields) + len(constants)]
                    validate_value(field.schema, value, field.name)  # as `put` does, once per batch
                constants.append(value)
        rows = copied_rows(self, structs, in_schema, out_schema, range(len(in_schema.fields)))
        batch_times = batch.timestamps
        of = Struct._of
        structs_out = []
        for i, values in enumerate(rows):
            values.extend(constants)
            if timestamp_at is not None and batch_times is not None and (at := batch_times[i]) is not None:
                values[timestamp_at] = millis_to_datetime(at)
            structs_out.append(of(out_schema, values))
        return self.with_operand_column(batch, out_schema, structs_out)

    def _updated_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for field in schema.fields:
            builder.field(field.name, field.schema)
        added = (
            ("topic.field", OPTIONAL_STRING_SCHEMA, STRING_SCHEMA),
            ("partition.field", OPTIONAL_INT32_SCHEMA, INT32_SCHEMA),
            ("offset.field", OPTIONAL_INT64_SCHEMA, INT64_SCHEMA),
            ("timestamp.field", Timestamp.builder().optional().build(), Timestamp.SCHEMA),
            ("static.field", OPTIONAL_STRING_SCHEMA, STRING_SCHEMA),
        )
        for setting, optional_schema, required_schema in added:
            if spec := self.fields[setting]:
                builder.field(spec[0], optional_schema if spec[1] else required_schema)
        return builder.build()


class InsertFieldKey(InsertField[R]):
    """`InsertField` on the record key (Kafka's `InsertField$Key`)."""

    target = "key"


def copy_valid_fields(schema: Schema, values: list[Any], copied: int) -> Struct:
    """A Struct of `schema` holding `values`, whose first `copied` are taken from another Struct's fields
    of the very same field schemas (InsertField and ReplaceField keep each field's Schema object).

    Those values were validated when put into that Struct, so only their nulls are checked again (a
    required field left empty fails here, as Kafka's `put` makes it fail); validating every copied
    value once per transformation was the largest cost of a schema'd SMT chain.
    """
    struct = Struct.from_values(schema, values, validate=False)
    for field in schema.fields[:copied]:
        if values[field.index] is None:
            struct.put(field, None)
    return struct


def same_schema_structs(column: Sequence[Any]) -> list[Struct] | None:
    """The column as Structs of one and the same schema object, or None if it is not (a null, another
    type, another schema): then the records would not stay one batch of one schema."""
    if not column:
        return []
    first = column[0]
    if type(first) is not Struct:
        return None
    schema = first.schema
    for value in column:
        if type(value) is not Struct or value.schema is not schema:
            return None
    return column if isinstance(column, list) else list(column)


def copied_rows(
    transformation: KeyOrValueTransformation[Any],
    structs: Sequence[Struct],
    in_schema: Schema,
    out_schema: Schema,
    picks: Sequence[int],
) -> list[list[Any]]:
    """For each struct, the values of `out_schema`'s first fields taken from `in_schema`'s fields at
    `picks`: the batch form of `field_value` then `copy_valid_fields` (defaults where null when
    `replace.null.with.default`, a null in a required field fails as `put` makes it fail)."""
    in_fields = in_schema.fields
    picks = list(picks)
    if transformation.config.get("replace.null.with.default", True):
        defaults = [in_fields[i].schema.default_value for i in picks]
    else:
        defaults = [None] * len(picks)
    with_defaults = any(d is not None for d in defaults)
    required = [f for f in out_schema.fields[: len(picks)] if not f.schema.optional]
    whole = picks == list(range(len(in_fields)))
    rows = []
    for struct in structs:
        values = struct._values
        row = list(values) if whole else [values[i] for i in picks]
        if with_defaults:
            row = [d if v is None else v for v, d in zip(row, defaults, strict=True)]
        for field in required:
            if row[field.index] is None:
                validate_value(field.schema, None, field.name)  # raises, naming the field
        rows.append(row)
    return rows


def _renames(name: str, value: Any) -> None:
    bad = [item for item in value if item.count(":") != 1 or not all(item.split(":"))]
    if bad:
        raise ValueError(
            f"Invalid rename mapping: {', '.join(bad)}. "
            f"Set {name} to pairs such as old_name:new_name,other:renamed."
        )


class ReplaceField(KeyOrValueTransformation[R]):
    """Keep (`include`), drop (`exclude`) and rename (`renames=old:new,...`) fields. `include` and `exclude`
    name the original fields; an empty `include` keeps everything not excluded. Kafka 3.x's deprecated
    `whitelist`/`blacklist` are still read as `include`/`exclude` (Kafka 4 dropped them)."""

    def config_def(self) -> ConfigDef:
        return define_replace_null_with_default(
            ConfigDef()
            .define("exclude", ConfigType.LIST, "", Importance.MEDIUM, "Fields to drop.")
            .define("include", ConfigType.LIST, "", Importance.MEDIUM, "Fields to keep (empty: all).")
            .define("renames", ConfigType.LIST, "", Importance.MEDIUM, "Renames as old:new,...", _renames)
            .define("blacklist", ConfigType.LIST, None, Importance.LOW, "Deprecated: use exclude.")
            .define("whitelist", ConfigType.LIST, None, Importance.LOW, "Deprecated: use include.")
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        for old, new in (("blacklist", "exclude"), ("whitelist", "include")):
            if self.config[old] is not None:
                log.warning("ReplaceField: %s is deprecated (and gone in Kafka 4); use %s", old, new)
                if not config.get(new):
                    self.config[new] = self.config[old]
        self.exclude = set(self.config["exclude"])
        self.include = set(self.config["include"])
        self.renames = dict(item.split(":") for item in self.config["renames"])
        self.reverse_renames = {new: old for old, new in self.renames.items()}

    def _keeps(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, record: R) -> R | None:
        operand = self.operand(record)
        if operand is None:
            return record
        if self.operand_schema(record) is not None:
            value = require_struct(operand, "field replacement")
            schema = self.schema_cache.get_or_build(value.schema, self._updated_schema)
            renamed = self.reverse_renames
            copied = [self.field_value(value, renamed.get(field.name, field.name)) for field in schema.fields]
            return self.with_operand(record, schema, copy_valid_fields(schema, copied, len(copied)))
        updated = {
            self.renames.get(name, name): value
            for name, value in require_map(operand, "field replacement").items()
            if self._keeps(name)
        }
        return self.with_operand(record, None, updated)

    def apply_columns(self, batch: SourceBatch) -> SourceBatch | None:
        column, schema = self.operand_column(batch)
        if schema is None:
            renames, keeps = self.renames, self._keeps
            updated = [
                None
                if value is None
                else {
                    renames.get(name, name): item
                    for name, item in require_map(value, "field replacement").items()
                    if keeps(name)
                }
                for value in column
            ]
            return self.with_operand_column(batch, None, updated)
        structs = same_schema_structs(column)
        if structs is None:
            return None
        if not structs:
            return batch
        in_schema = structs[0].schema
        out_schema = self.schema_cache.get_or_build(in_schema, self._updated_schema)
        picks = []
        for field in out_schema.fields:
            source = in_schema.field(self.reverse_renames.get(field.name, field.name))
            if source is None:
                return None  # `apply` reports the unknown field
            picks.append(source.index)
        of = Struct._of
        rows = copied_rows(self, structs, in_schema, out_schema, picks)
        return self.with_operand_column(batch, out_schema, [of(out_schema, row) for row in rows])

    def _updated_schema(self, schema: Schema) -> Schema:
        builder = copy_schema_basics(schema, SchemaBuilder.struct())
        for field in schema.fields:
            if self._keeps(field.name):
                builder.field(self.renames.get(field.name, field.name), field.schema)
        return builder.build()


class ReplaceFieldKey(ReplaceField[R]):
    """`ReplaceField` on the record key (Kafka's `ReplaceField$Key`)."""

    target = "key"


class ExtractField(KeyOrValueTransformation[R]):
    """Replace the operand by one of its fields (`field`, a nested one with `field.syntax.version=V2`);
    a missing field gives null (an error with a schema)."""

    def config_def(self) -> ConfigDef:
        return define_replace_null_with_default(
            define_field_syntax(ConfigDef()).define(
                "field",
                ConfigType.STRING,
                importance=Importance.MEDIUM,
                documentation="Field name to extract.",
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.path = FieldPath(self.config["field"], self.config[SYNTAX_SETTING])

    def apply(self, record: R) -> R | None:
        schema = self.operand_schema(record)
        if schema is not None:
            operand = self.operand(record)
            struct = None if operand is None else require_struct(operand, "field extraction")
            field = self.path.field_from(schema)
            if field is None:
                raise DataException(
                    f"Unknown field: {self.path.text}. The record's fields are: "
                    + ", ".join(f.name for f in schema.fields)
                )
            with_default = self.config["replace.null.with.default"]
            return self.with_operand(record, field.schema, self.path.value_from_struct(struct, with_default))
        value = require_map_or_null(self.operand(record), "field extraction")
        return self.with_operand(record, None, self.path.value_from_map(value))


class ExtractFieldKey(ExtractField[R]):
    target = "key"


class HoistField(KeyOrValueTransformation[R]):
    """Wrap the operand in a map (or a struct, with a schema) of one field, `field`."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "field",
            ConfigType.STRING,
            importance=Importance.MEDIUM,
            documentation="Field name for the single field that will be created in the resulting map.",
        )

    def apply(self, record: R) -> R | None:
        name = self.config["field"]
        schema = self.operand_schema(record)
        if schema is None:
            return self.with_operand(record, None, {name: self.operand(record)})
        updated_schema = self.schema_cache.get_or_build(schema, self._updated_schema)
        return self.with_operand(
            record, updated_schema, Struct(updated_schema).put(name, self.operand(record))
        )

    def apply_columns(self, batch: SourceBatch) -> SourceBatch | None:
        name = self.config["field"]
        column, schema = self.operand_column(batch)
        if schema is None:
            return self.with_operand_column(batch, None, [{name: value} for value in column])
        updated_schema = self.schema_cache.get_or_build(schema, self._updated_schema)
        field_schema = updated_schema.fields[0].schema
        if not (field_schema.type is Type.STRING and field_schema.name is None and all_str(column)):
            for value in column:
                validate_value(field_schema, value, name)  # as `put` does
        of = Struct._of
        return self.with_operand_column(
            batch, updated_schema, [of(updated_schema, [value]) for value in column]
        )

    def _updated_schema(self, schema: Schema) -> Schema:
        return SchemaBuilder.struct().field(self.config["field"], schema).build()


class HoistFieldKey(HoistField[R]):
    target = "key"
