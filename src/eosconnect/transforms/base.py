"""What Kafka's transformations share: the key-or-value operand, type checks, Java's value rules.

Schemaless records carry what JSON gives: dict, list, str, int (Kafka's INT64), float (FLOAT64), bool,
bytes and None. Where Kafka's result depends on Java's own conversions (narrowing an int, printing a
double, `Values.convertToString` for headers), the helpers here do the same, so a record gives the same
output as under Kafka's classes; the differential tests hold both to it.
"""

from __future__ import annotations

import base64
import math
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import Date, Schema, SchemaBuilder, Struct, Time, Timestamp, Type, copy_schema_basics
from eosconnect.api.errors import DataException
from eosconnect.api.records import R, SinkRecord
from eosconnect.api.transforms import Transformation
from eosconnect.converters.json_text import java_double_text, java_float_text
from eosconnect.transforms.javadate import JavaDateFormat

if TYPE_CHECKING:
    from eosconnect.api.batch import SourceBatch


class KeyOrValueTransformation(Transformation[R]):
    """A transformation of a record's value, or of its key in the `...Key` subclass (Kafka's `$Key`)."""

    target: ClassVar[str] = "value"

    def __init__(self) -> None:
        super().__init__()
        self.schema_cache: SchemaUpdateCache[Schema] = SchemaUpdateCache()

    def operand(self, record: R) -> Any:
        return record.value if self.target == "value" else record.key

    def operand_schema(self, record: R) -> Schema | None:
        return record.value_schema if self.target == "value" else record.key_schema

    def with_operand(self, record: R, schema: Schema | None, new: Any) -> R:
        """The record with the operand (and its schema: None for schemaless results) replaced."""
        if self.target == "value":
            return record.new_record(value=new, value_schema=schema)
        return record.new_record(key=new, key_schema=schema)

    def operand_column(self, batch: SourceBatch) -> tuple[Sequence[Any], Schema | None]:
        """`operand` and `operand_schema` for a whole batch (a batch without keys: every key null)."""
        if self.target == "value":
            return batch.values, batch.value_schema
        return ([None] * len(batch) if batch.keys is None else batch.keys), batch.key_schema

    def with_operand_column(
        self, batch: SourceBatch, schema: Schema | None, column: list[Any]
    ) -> SourceBatch:
        """`with_operand` for a whole batch."""
        if self.target == "value":
            return batch.replace(values=column, value_schema=schema)
        return batch.replace(keys=column, key_schema=schema)

    def field_value(self, struct: Struct, name: str) -> Any:
        """A struct field as Kafka's `replace.null.with.default` says: its default where null, or null."""
        if self.config.get("replace.null.with.default", True):
            return struct.get(name)
        return struct.get_without_default(name)


def define_replace_null_with_default(config: ConfigDef) -> ConfigDef:
    """Kafka's `replace.null.with.default` (KIP-1040), which most transformations of struct fields take."""
    return config.define(
        "replace.null.with.default",
        ConfigType.BOOLEAN,
        True,
        Importance.MEDIUM,
        "Whether null fields that have a default value are replaced by it (records with schemas); "
        "schemaless records have no defaults.",
    )


def non_empty_list(name: str, value: Any) -> None:
    """Validator: a LIST setting that needs at least one entry (Kafka's NonEmptyListValidator)."""
    if not value:
        raise ValueError(f"Empty list. Set {name} to at least one name, e.g. id.")


K = TypeVar("K")


class SchemaUpdateCache(Generic[K]):
    """Input schema -> output schema, as Kafka's `LRUCache(16)` in each transformation: records with the
    same schema get the very same output schema object (converters and sinks cache by it). The key is
    the input schema, or whatever else decides the output (Debezium's unwrap: the schema and the op);
    the least recently used entry goes when `size` is reached, so the cache stays bounded however
    many schemas pass (ALTER TABLE after ALTER TABLE, or many tables)."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self._entries: OrderedDict[K, Schema] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get_or_build(self, key: K, build: Callable[[K], Schema]) -> Schema:
        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            return found
        built = build(key)
        self._entries[key] = built
        if len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return built


LOGICAL_TYPES: dict[str, Any] = {
    Date.LOGICAL_NAME: Date,
    Time.LOGICAL_NAME: Time,
    Timestamp.LOGICAL_NAME: Timestamp,
}
_MILLIS_PER_DAY = 86_400_000


def logical_millis(schema: Schema, value: Any) -> int:
    """A Date, Time or Timestamp value as the milliseconds of its `java.util.Date`."""
    if schema.name == Date.LOGICAL_NAME:
        return int(Date.from_logical(schema, value)) * _MILLIS_PER_DAY
    return int(LOGICAL_TYPES[schema.name or ""].from_logical(schema, value))


def iso_date_string(millis: int) -> str:
    """Kafka's `Values.dateFormatFor`: a time before the first day's end, a date at midnight, else a
    full timestamp (UTC)."""
    if millis < _MILLIS_PER_DAY:
        return JavaDateFormat("HH:mm:ss.SSS'Z'").format(millis)
    if millis % _MILLIS_PER_DAY == 0:
        return JavaDateFormat("yyyy-MM-dd").format(millis)
    return JavaDateFormat("yyyy-MM-dd'T'HH:mm:ss.SSS'Z'").format(millis)


def require_struct(value: Any, purpose: str) -> Struct:
    """Kafka's `Requirements.requireStruct`: a schema'd operand must be a Struct."""
    if not isinstance(value, Struct):
        raise DataException(
            f"Only Struct objects supported for [{purpose}], found: {java_class_name(value)} "
            f"(Python {type(value).__name__}). A record with a schema needs a Struct value."
        )
    return value


def require_sink_record(record: Any, purpose: str) -> SinkRecord:
    if not isinstance(record, SinkRecord):
        raise DataException(
            f"Only SinkRecord supported for [{purpose}], found: {type(record).__name__}: only sink records "
            "have a Kafka offset (remove the offset setting for source connectors)."
        )
    return record


def builder_like(source: Schema) -> SchemaBuilder:
    """Kafka's one-argument `SchemaUtil.copySchemaBasics`: a builder of `source`'s type (arrays keep
    their element schema) with its name, version, doc and parameters."""
    if source.type is Type.ARRAY:
        assert source.value_schema is not None
        return copy_schema_basics(source, SchemaBuilder.array(source.value_schema))
    return copy_schema_basics(source)


def require_map(value: Any, purpose: str) -> Mapping[str, Any]:
    """Kafka's `Requirements.requireMap`: a schemaless operand must be a map (a JSON object)."""
    if not isinstance(value, Mapping):
        raise DataException(
            f"Only Map objects supported in absence of schema for [{purpose}], found: "
            f"{java_class_name(value)} (Python {type(value).__name__}). Limit the transformation to records "
            "with object values using a predicate, or produce dicts."
        )
    return value


def require_map_or_null(value: Any, purpose: str) -> Mapping[str, Any] | None:
    return None if value is None else require_map(value, purpose)


def java_class_name(value: Any) -> str:
    """The Java class Kafka would name for a schemaless value, in error messages."""
    if value is None:
        return "null"
    return {
        bool: "java.lang.Boolean",
        int: "java.lang.Long",
        float: "java.lang.Double",
        str: "java.lang.String",
        bytes: "[B",
        Struct: "org.apache.kafka.connect.data.Struct",
        list: "java.util.ArrayList",
        dict: "java.util.HashMap",
    }.get(type(value), type(value).__name__)


def schema_type_of(value: Any) -> str | None:
    """Kafka's `ConnectSchema.schemaType(value.getClass())` for a schemaless Python value."""
    if isinstance(value, bool):
        return "BOOLEAN"
    if isinstance(value, int):
        return "INT64"
    if isinstance(value, float):
        return "FLOAT64"
    if isinstance(value, str):
        return "STRING"
    if isinstance(value, bytes | bytearray):
        return "BYTES"
    if isinstance(value, list | tuple):
        return "ARRAY"
    if isinstance(value, Mapping):
        return "MAP"
    return None


def wrap_int(value: int, bits: int) -> int:
    """Java's narrowing of a long to `bits` bits (two's complement), as `(byte)`/`(short)`/`(int)` do."""
    mask = (1 << bits) - 1
    value &= mask
    return value - (1 << bits) if value >> (bits - 1) else value


def java_double_to_long(value: float, bits: int = 64) -> int:
    """Java's `(long) d` (or `(int) d` with bits=32): truncate toward zero, saturate, NaN is 0."""
    if math.isnan(value):
        return 0
    limit = 1 << (bits - 1)
    if value >= limit:
        return limit - 1
    if value <= -limit:
        return -limit
    return int(value)


def java_double_str(value: float) -> str:
    """Java's `Double.toString`: plain decimal in [1e-3, 1e7) with at least one fraction digit, else
    computerised scientific notation such as 1.0E10 (the digits as JsonConverter writes them)."""
    if not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return java_double_text(value)


def java_float_str(value: float) -> str:
    """Java's `Float.toString` for a float32 held in a Python float: the fewest digits that read back as
    the same float32."""
    if not math.isfinite(value):
        return java_double_str(value)
    return java_float_text(value)


def java_big_decimal_str(value: Decimal) -> str:
    """Java's `BigDecimal.toString`: plain unless the exponent is positive or the number very small."""
    sign, digits, exponent = value.as_tuple()
    assert isinstance(exponent, int)
    unscaled = "".join(map(str, digits))
    adjusted = len(unscaled) - 1 + exponent
    if exponent <= 0 and adjusted >= -6:
        return str(value)
    text = unscaled[0] + ("." + unscaled[1:] if len(unscaled) > 1 else "")
    return ("-" if sign else "") + text + f"E{'+' if adjusted >= 0 else ''}{adjusted}"


def java_to_string(value: Any) -> str:
    """Java's `String.valueOf` for a schemaless value (Cast to string, HeaderFrom of primitives)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    return values_to_string(value)


def values_to_string(value: Any, embedded: bool = False, schema: Schema | None = None) -> str:
    """Kafka's `Values.convertToString`: what `SimpleHeaderConverter` writes for a header value. `schema`
    tells a float32 (printed as Java's Float) and the logical types (dates as ISO 8601) apart."""
    if value is None:
        return "null"
    if schema is not None and schema.name in LOGICAL_TYPES:
        return iso_date_string(logical_millis(schema, value))
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return (
            java_float_str(value)
            if schema is not None and schema.type is Type.FLOAT32
            else java_double_str(value)
        )
    if isinstance(value, Decimal):
        return java_big_decimal_str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' if embedded else value
    if isinstance(value, bytes | bytearray):
        text = base64.b64encode(bytes(value)).decode("ascii")
        return f'"{text}"' if embedded else text
    if isinstance(value, Struct):
        return (
            "{"
            + ",".join(
                f"{values_to_string(f.name, True)}:{values_to_string(value.get(f.name), True, f.schema)}"
                for f in value.schema.fields
            )
            + "}"
        )
    item_schema = (
        schema.value_schema if schema is not None and schema.type in (Type.ARRAY, Type.MAP) else None
    )
    if isinstance(value, list | tuple):
        return "[" + ",".join(values_to_string(item, True, item_schema) for item in value) + "]"
    if isinstance(value, Mapping):
        key_schema = schema.key_schema if schema is not None and schema.type is Type.MAP else None
        return (
            "{"
            + ",".join(
                f"{values_to_string(k, True, key_schema)}:{values_to_string(v, True, item_schema)}"
                for k, v in value.items()
            )
            + "}"
        )
    raise DataException(f"Failed to serialize unexpected value type {type(value).__name__}: {value!r}")
