"""Connect data <-> JSON text exactly as Kafka's `JsonConverter` writes and reads it: what writing
(`json_writer.py`) and reading (`json_reader.py`) share - the JSON type names, the settings, the cache.

Kafka's converter turns a schema into a JSON object (`{"type":"struct","fields":[...],
"optional":false,"name":...}`) and a value into JSON following its schema: logical types as their
encoded primitive (Decimal as base64 bytes or a plain number), bytes as base64, maps with string
keys as objects and any other map as an array of `[key, value]` pairs. Jackson writes compact JSON,
non-ASCII characters as UTF-8 and numbers as Java prints them (`1.0E7`, `1.0E-4`, float32 values
with float32 precision); this module writes the same text so a topic is byte-identical whichever
side filled it.

For speed, what a schema implies is worked out once: `JsonWriter.writer(schema)` and
`JsonReader.reader(schema)` return functions compiled for that schema (cached per converter), and
the schema's own JSON text is cached too, so an envelope costs one payload walk.
"""

from __future__ import annotations

import decimal
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eosconnect.api.data.schema import (
    Schema,
    Type,
)

__all__ = [
    "INT32_MAX",
    "INT32_MIN",
    "INT_BITS",
    "LRU",
    "TYPES_BY_NAME",
    "TYPE_NAMES",
    "JsonCodecConfig",
    "Reader",
    "Writer",
    "json_kind",
    "plain_guard",
    "wrap",
]

Writer = Callable[[Any], str]
Reader = Callable[[Any], Any]

#: Kafka's JSON type names (float32/float64 are "float"/"double" in JSON schemas).
TYPE_NAMES = {
    Type.BOOLEAN: "boolean",
    Type.INT8: "int8",
    Type.INT16: "int16",
    Type.INT32: "int32",
    Type.INT64: "int64",
    Type.FLOAT32: "float",
    Type.FLOAT64: "double",
    Type.BYTES: "bytes",
    Type.STRING: "string",
    Type.ARRAY: "array",
    Type.MAP: "map",
    Type.STRUCT: "struct",
}
TYPES_BY_NAME = {name: t for t, name in TYPE_NAMES.items()}

INT_BITS = {Type.INT8: 8, Type.INT16: 16, Type.INT32: 32, Type.INT64: 64}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def wrap(value: int, bits: int) -> int:
    """Java's narrowing of an integer to `bits` (what `(byte) node.intValue()` does)."""
    mask = (1 << bits) - 1
    value &= mask
    return value - (1 << bits) if value >> (bits - 1) else value


def json_kind(node: Any) -> str:
    """Jackson's node type names, for error messages."""
    if node is None:
        return "NULL"
    if isinstance(node, bool):
        return "BOOLEAN"
    if isinstance(node, int | float | decimal.Decimal):
        return "NUMBER"
    if isinstance(node, str):
        return "STRING"
    if isinstance(node, list):
        return "ARRAY"
    if isinstance(node, dict):
        return "OBJECT"
    return type(node).__name__


# --- configuration and cache -----------------------------------------------------------------------


@dataclass(frozen=True)
class JsonCodecConfig:
    """The JsonConverter settings that change the JSON (`decimal.format`, `replace.null.with.default`)."""

    decimal_numeric: bool = False
    replace_null_with_default: bool = True
    cache_size: int = 1000


class LRU:
    """Kafka's `LRUCache` of `schemas.cache.size` entries (0 disables caching)."""

    __slots__ = ("_data", "_size")

    def __init__(self, size: int) -> None:
        self._size = size
        self._data: OrderedDict[Any, Any] = OrderedDict()

    def get(self, key: Any) -> Any:
        value = self._data.get(key)
        if value is not None:
            self._data.move_to_end(key)
        return value

    def put(self, key: Any, value: Any) -> None:
        if self._size <= 0:
            return
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self._size:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)


def plain_guard(schema: Schema, var: str) -> str | None:
    """A Python condition under which `var` is a plain value of this schema (an int in range, a str,
    a bool): the generated struct reader takes such a node as it is, the generated struct writer
    writes it inline; None if no value of the schema is plain."""
    if schema.name is not None:
        return None  # logical types convert
    if schema.type in INT_BITS:
        bits = INT_BITS[schema.type]
        return f"{var}.__class__ is int and {-(1 << (bits - 1))} <= {var} < {1 << (bits - 1)}"
    if schema.type is Type.STRING:
        return f"{var}.__class__ is str"
    if schema.type is Type.BOOLEAN:
        return f"{var} is True or {var} is False"
    return None
