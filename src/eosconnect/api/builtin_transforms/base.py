"""What Kafka's transformations share: the key-or-value operand, type checks, Java's value rules.

Schemaless records carry what JSON gives: dict, list, str, int (Kafka's INT64), float (FLOAT64), bool,
bytes and None. Where Kafka's result depends on Java's own conversions (narrowing an int, printing a
double, `Values.convertToString` for headers), the helpers here do the same, so a record gives the same
output as under Kafka's classes; the differential tests hold both to it.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any, ClassVar

from eosconnect.api.errors import DataException
from eosconnect.api.records import R
from eosconnect.api.transforms import Transformation

KAFKA_SMT = "org.apache.kafka.connect.transforms"


class KeyOrValueTransformation(Transformation[R]):
    """A transformation of a record's value, or of its key in the `...Key` subclass (Kafka's `$Key`)."""

    target: ClassVar[str] = "value"

    def operand(self, record: R) -> Any:
        return record.value if self.target == "value" else record.key

    def with_operand(self, record: R, new: Any) -> R:
        return record.new_record(value=new) if self.target == "value" else record.new_record(key=new)


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
    computerised scientific notation such as 1.0E10."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    point = len(text) + int(exponent)  # where the decimal point falls after the first digit of `text`
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            body = "0." + "0" * -point + text
        elif point >= len(text):
            body = text + "0" * (point - len(text)) + ".0"
        else:
            body = text[:point] + "." + text[point:]
    else:
        body = f"{text[0]}.{text[1:] or '0'}E{point - 1}"
    return ("-" if sign else "") + body


def java_to_string(value: Any) -> str:
    """Java's `String.valueOf` for a schemaless value (Cast to string, HeaderFrom of primitives)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode("ascii")
    return values_to_string(value)


def values_to_string(value: Any, embedded: bool = False) -> str:
    """Kafka's `Values.convertToString`: what `SimpleHeaderConverter` writes for a header value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double_str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' if embedded else value
    if isinstance(value, bytes | bytearray):
        text = base64.b64encode(bytes(value)).decode("ascii")
        return f'"{text}"' if embedded else text
    if isinstance(value, list | tuple):
        return "[" + ",".join(values_to_string(item, True) for item in value) + "]"
    if isinstance(value, Mapping):
        return (
            "{"
            + ",".join(f"{values_to_string(k, True)}:{values_to_string(v, True)}" for k, v in value.items())
            + "}"
        )
    raise DataException(f"Failed to serialize unexpected value type {type(value).__name__}: {value!r}")
