"""Connect schemas and values <-> Avro, as Confluent's `io.confluent.connect.avro.AvroData` maps them.

So that a record written here reads in Java's AvroConverter as the same Connect record (and the other
way round), the mapping follows AvroData (with `connect.meta.data=true`, its default):

- INT8/INT16 are Avro `int` with `"connect.type": "int8"/"int16"`; INT32 `int`, INT64 `long`, FLOAT32
  `float`, FLOAT64 `double`, BOOLEAN, STRING, BYTES as their Avro namesakes;
- Decimal is `bytes` with `logicalType: decimal`, its `scale` and a `precision` (the
  `connect.decimal.precision` parameter, else 64); Date `int`/`date`, Time `int`/`time-millis`,
  Timestamp `long`/`timestamp-millis`;
- ARRAY is `array`; MAP with STRING keys is `map`, any other MAP an array of `MapEntry` records
  (`key`, `value`) in the namespace `io.confluent.connect.avro`;
- STRUCT is a `record` named after the schema (`io.confluent.connect.avro.ConnectDefault` if unnamed,
  then `ConnectDefault2`, ... for further unnamed records in one schema); fields keep their order;
- an optional schema is a union with `null`: `["null", T]`, or `[T, "null"]` when it has a non-null
  default (Avro requires a default to match the union's first branch); an optional field without a
  default gets `default: null`;
- a Connect schema's name, version, doc, parameters and default travel as `connect.name`,
  `connect.version`, `connect.doc`, `connect.parameters` and `connect.default` on the Avro schema.

Reading maps back, including Avro that Connect did not write: `enum` reads as STRING (the symbols in
the `io.confluent.connect.avro.Enum` parameters), `fixed` as BYTES, and a union other than
`["null", T]` as Confluent's `io.confluent.connect.avro.Union` STRUCT (one optional field per branch,
named after its type or a named type's simple name; `UNION_NAME`), written back as that union.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Callable, Mapping
from typing import Any

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, Type
from eosconnect.api.errors import DataException
from eosconnect.converters.schema_registry.value_walk import value_converter

__all__ = [
    "AVRO_NAMESPACE",
    "avro_value_converter",
    "from_avro_schema",
    "from_avro_value",
    "to_avro_schema",
    "to_avro_value",
]

AVRO_NAMESPACE = "io.confluent.connect.avro"
DEFAULT_RECORD_NAME = "ConnectDefault"
#: Confluent's Connect schema name for an Avro union other than ["null", T]: a STRUCT with one optional
#: field per branch (named after the branch: its type, or a named type's simple name), one of them set.
UNION_NAME = f"{AVRO_NAMESPACE}.Union"
MAP_ENTRY_NAME = "MapEntry"
ENUM_PARAMETER = f"{AVRO_NAMESPACE}.Enum"
PRECISION_PARAMETER = "connect.decimal.precision"
DEFAULT_DECIMAL_PRECISION = 64

_PRIMITIVES = {
    Type.INT8: "int",
    Type.INT16: "int",
    Type.INT32: "int",
    Type.INT64: "long",
    Type.FLOAT32: "float",
    Type.FLOAT64: "double",
    Type.BOOLEAN: "boolean",
    Type.STRING: "string",
    Type.BYTES: "bytes",
}
_CONNECT_TYPE_PROP = {Type.INT8: "int8", Type.INT16: "int16"}


# ---------------------------------------------------------------------------------------------- schemas
class _Names:
    """Gives unnamed records `ConnectDefault`, `ConnectDefault2`, ... and map entries `MapEntry`,
    `MapEntry2`, ..., as AvroData does, and remembers records already defined (Avro defines a
    named type once and refers to it by name afterwards)."""

    def __init__(self) -> None:
        self.defaults = 0
        self.map_entries = 0
        self.defined: dict[str, Schema] = {}

    def next_default(self) -> str:
        self.defaults += 1
        return DEFAULT_RECORD_NAME if self.defaults == 1 else f"{DEFAULT_RECORD_NAME}{self.defaults}"

    def next_map_entry(self) -> str:
        self.map_entries += 1
        return MAP_ENTRY_NAME if self.map_entries == 1 else f"{MAP_ENTRY_NAME}{self.map_entries}"


def to_avro_schema(schema: Schema) -> dict[str, Any] | str | list[Any]:
    """The Avro schema (as parsed JSON) for a Connect schema."""
    return _to_avro(schema, _Names())


def _split_name(full_name: str) -> tuple[str | None, str]:
    namespace, _, name = full_name.rpartition(".")
    return (namespace or None), name


def _to_avro(schema: Schema, names: _Names) -> Any:
    if schema.type is Type.STRUCT and schema.name == UNION_NAME:
        return _union_to_avro(schema, names)
    base = _to_avro_base(schema, names)
    if isinstance(base, dict):
        _add_connect_meta(schema, base)
    elif schema.type is Type.STRUCT:
        pass  # a record defined before, referred to by its name: its properties are on the definition
    elif _has_connect_meta(schema):
        base = _add_connect_meta(schema, {"type": base})
    if not schema.optional:
        return base
    if schema.default_value is not None:
        return [base, "null"]
    return ["null", base]


def _union_to_avro(schema: Schema, names: _Names) -> list[Any]:
    """Confluent's `fromConnectSchema` of a union STRUCT: null first if it is optional, then each
    field's schema as required (its field only says which branch a value took)."""
    branches: list[Any] = ["null"] if schema.optional else []
    for f in schema.fields:
        avro = _to_avro(f.schema, names)
        if isinstance(avro, list) and "null" in avro and len(avro) == 2 and f.schema.name != UNION_NAME:
            avro = next(branch for branch in avro if branch != "null")
        branches.append(avro)
    return branches


def _has_connect_meta(schema: Schema) -> bool:
    return any(
        v is not None
        for v in (schema.name, schema.version, schema.doc, schema.parameters, schema.default_value)
    )


def _add_connect_meta(schema: Schema, avro: dict[str, Any]) -> dict[str, Any]:
    if schema.doc is not None:
        avro["connect.doc"] = schema.doc
    if schema.version is not None:
        avro["connect.version"] = schema.version
    if schema.parameters:
        avro["connect.parameters"] = dict(schema.parameters)
    if schema.default_value is not None:
        avro["connect.default"] = _default_json(schema, schema.default_value)
    if schema.name is not None:
        avro["connect.name"] = schema.name
    return avro


def _to_avro_base(schema: Schema, names: _Names) -> Any:
    t = schema.type
    if schema.name == Decimal.LOGICAL_NAME:
        params = schema.parameters or {}
        precision = int(params.get(PRECISION_PARAMETER, DEFAULT_DECIMAL_PRECISION))
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": precision,
            "scale": Decimal.scale(schema),
        }
    if schema.name == Date.LOGICAL_NAME:
        return {"type": "int", "logicalType": "date"}
    if schema.name == Time.LOGICAL_NAME:
        return {"type": "int", "logicalType": "time-millis"}
    if schema.name == Timestamp.LOGICAL_NAME:
        return {"type": "long", "logicalType": "timestamp-millis"}
    if t in _CONNECT_TYPE_PROP:
        return {"type": "int", "connect.type": _CONNECT_TYPE_PROP[t]}
    if t in _PRIMITIVES:
        return _PRIMITIVES[t]
    if t is Type.ARRAY:
        return {"type": "array", "items": _to_avro(_not_none(schema.value_schema), names)}
    if t is Type.MAP:
        key_schema = _not_none(schema.key_schema)
        value_schema = _not_none(schema.value_schema)
        if key_schema.type is Type.STRING and not key_schema.optional:
            return {"type": "map", "values": _to_avro(value_schema, names)}
        entry = {
            "type": "record",
            "name": names.next_map_entry(),
            "namespace": AVRO_NAMESPACE,
            "fields": [
                {"name": "key", "type": _to_avro(key_schema, names)},
                {"name": "value", "type": _to_avro(value_schema, names)},
            ],
        }
        return {"type": "array", "items": entry}
    # STRUCT
    full_name = schema.name or f"{AVRO_NAMESPACE}.{names.next_default()}"
    if full_name in names.defined:
        if names.defined[full_name] != schema:
            raise DataException(
                f"Two different struct schemas are both named {full_name!r}; Avro needs one schema per "
                "record name. Rename one of them."
            )
        return full_name
    names.defined[full_name] = schema
    namespace, name = _split_name(full_name)
    record: dict[str, Any] = {"type": "record", "name": name}
    if namespace:
        record["namespace"] = namespace
    if schema.doc is not None:
        record["doc"] = schema.doc
    record["fields"] = [_avro_field(f.name, f.schema, names) for f in schema.fields]
    return record


def _avro_field(name: str, schema: Schema, names: _Names) -> dict[str, Any]:
    field: dict[str, Any] = {"name": name, "type": _to_avro(schema, names)}
    if schema.doc is not None:
        field["doc"] = schema.doc
    if schema.default_value is not None:
        field["default"] = _default_json(schema, schema.default_value)
    elif schema.optional:
        field["default"] = None
    return field


def _default_json(schema: Schema, value: Any) -> Any:
    """A default value as Avro JSON (bytes as ISO-8859-1 strings, as Avro's JSON encoding has them)."""
    avro_value = to_avro_value(schema, value)
    return _jsonable(avro_value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("iso-8859-1")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _not_none(schema: Schema | None) -> Schema:
    if schema is None:
        raise DataException("an ARRAY or MAP schema without element schemas cannot be written as Avro")
    return schema


# ----------------------------------------------------------------------------------------------- values
def to_avro_value(schema: Schema, value: Any) -> Any:
    """A Connect value (Struct, list, dict, logical Python types) as the plain data fastavro writes."""
    return avro_value_converter(schema)(value)


def avro_value_converter(schema: Schema) -> Callable[[Any], Any]:
    """`to_avro_value` compiled for one schema (see `value_walk`): the converters keep one per schema."""
    return value_converter(schema, _avro_special, _avro_null)


def _avro_null(schema: Schema) -> str:
    return f"a required {schema.type} value is null (schema {schema!r})"


def _avro_special(schema: Schema, child: Callable[[Schema], Callable[[Any], Any]]) -> Any:
    """Avro's own: Decimal as its unscaled bytes, BYTES as bytes, a union STRUCT as its branch."""
    if schema.name == Decimal.LOGICAL_NAME:
        return lambda value: Decimal.from_logical(schema, _as_decimal(value))
    if schema.type is Type.STRUCT and schema.name == UNION_NAME:
        return _union_converter(schema, child)
    if schema.type is Type.BYTES:
        return bytes
    return None


def _union_converter(schema: Schema, child: Callable[[Schema], Callable[[Any], Any]]) -> Callable[[Any], Any]:
    """A union STRUCT's value: its first set field's, as that branch. A named record branch is given
    to fastavro as `(record name, value)`, so it takes that branch and no other with the same fields."""
    branches = [
        (f.name, child(f.schema), f.schema.name if f.schema.type is Type.STRUCT else None)
        for f in schema.fields
    ]

    def union(value: Any) -> Any:
        get = value._values.__getitem__ if isinstance(value, Struct) else None
        for i, (name, convert, record_name) in enumerate(branches):
            branch = get(i) if get is not None else value.get(name)
            if branch is not None:
                converted = convert(branch)
                return (record_name, converted) if record_name else converted
        if schema.optional:
            return None
        raise DataException(f"a union value ({UNION_NAME}) has none of its fields set: {value!r}")

    return union


def _as_decimal(value: Any) -> decimal.Decimal:
    if isinstance(value, decimal.Decimal):
        return value
    raise DataException(f"a Decimal value must be a decimal.Decimal, got {type(value).__name__}")


def from_avro_value(schema: Schema, value: Any) -> Any:
    """Decoded Avro data as a Connect value of `schema`. Logical values may come raw (ints, bytes: from
    defaults) or already converted by fastavro (Decimal, date, time, datetime); both give Connect's."""
    if value is None:
        return None
    name = schema.name
    if name in _LOGICAL_RAW:
        logical, raw_type = _LOGICAL_RAW[name]
        if isinstance(value, raw_type) and not isinstance(value, bool):
            return logical.to_logical(
                schema, bytes(value) if isinstance(value, bytes | bytearray | memoryview) else value
            )
        return logical.to_logical(schema, logical.from_logical(schema, value))
    t = schema.type
    if t is Type.STRUCT and name == UNION_NAME:
        return _union_from_avro(schema, value)
    if t is Type.STRUCT:
        struct = Struct(schema)
        for f in schema.fields:
            struct.put(f, from_avro_value(f.schema, value.get(f.name)))
        return struct
    if t is Type.ARRAY:
        items = _not_none(schema.value_schema)
        return [from_avro_value(items, v) for v in value]
    if t is Type.MAP:
        key_schema = _not_none(schema.key_schema)
        value_schema = _not_none(schema.value_schema)
        if isinstance(value, dict):
            return {k: from_avro_value(value_schema, v) for k, v in value.items()}
        return {
            _hashable(from_avro_value(key_schema, e["key"])): from_avro_value(value_schema, e["value"])
            for e in value
        }
    if t in (Type.FLOAT32, Type.FLOAT64):
        return float(value)
    return value


#: The Connect types a decoded Avro value of a union may be, by Python type, in the order tried.
_UNION_CANDIDATES: dict[type, tuple[Type, ...]] = {
    bool: (Type.BOOLEAN,),
    int: (Type.INT32, Type.INT64, Type.INT16, Type.INT8),
    float: (Type.FLOAT64, Type.FLOAT32),
    str: (Type.STRING,),
    bytes: (Type.BYTES,),
    list: (Type.ARRAY,),
    dict: (Type.MAP, Type.STRUCT),
}


def _union_from_avro(schema: Schema, value: Any) -> Struct:
    """A decoded union value as Confluent's union STRUCT: the field of the branch it came from set. A
    record comes as `(record name, fields)` (the reader's `return_record_name`); other values are
    matched by Python type to the first field that takes them (an int fits INT32 before INT64), as
    AvroData matches a Java value's class."""
    struct = Struct(schema)
    if isinstance(value, tuple):
        record_name, value = value
        simple = record_name.rpartition(".")[2]
        for f in schema.fields:
            if f.schema.type is Type.STRUCT and f.name == simple:
                return struct.put(f, from_avro_value(f.schema, value))
        raise DataException(f"the record {record_name!r} is not a branch of the union {schema!r}")
    for logical, (_, python_type) in _LOGICAL_CLASSES.items():
        if isinstance(value, python_type):
            for f in schema.fields:
                if f.schema.name == logical:
                    return struct.put(f, from_avro_value(f.schema, value))
    for wanted in _UNION_CANDIDATES.get(type(value), ()):
        for f in schema.fields:
            if f.schema.type is wanted and f.schema.name not in _LOGICAL_RAW:
                try:
                    return struct.put(f, from_avro_value(f.schema, value))
                except DataException:
                    continue  # out of this branch's range (an INT32 for a long): the next one
    raise DataException(f"the value {value!r:.80} fits none of the branches of the union {schema!r}")


_LOGICAL_RAW: dict[str, tuple[Any, type]] = {
    Decimal.LOGICAL_NAME: (Decimal, bytes),
    Date.LOGICAL_NAME: (Date, int),
    Time.LOGICAL_NAME: (Time, int),
    Timestamp.LOGICAL_NAME: (Timestamp, int),
}


#: Logical values as fastavro decodes them, by logical name (a union's branch is found by them).
_LOGICAL_CLASSES: dict[str, tuple[Any, type]] = {
    Decimal.LOGICAL_NAME: (Decimal, decimal.Decimal),
    Timestamp.LOGICAL_NAME: (Timestamp, datetime.datetime),
    Date.LOGICAL_NAME: (Date, datetime.date),
    Time.LOGICAL_NAME: (Time, datetime.time),
}


def _hashable(key: Any) -> Any:
    if isinstance(key, Struct | list | dict):
        raise DataException("MAP keys of STRUCT, ARRAY or MAP type cannot be read into Python dicts")
    return key


# --------------------------------------------------------------------------------- Avro -> Connect schema
def from_avro_schema(avro: Any) -> Schema:
    """The Connect schema of an Avro schema (parsed JSON, as the registry returns it)."""
    return _from_avro(avro, {}, None).build()


def _from_avro(avro: Any, named: dict[str, Any], namespace: str | None) -> SchemaBuilder:
    """The builder of one Avro schema node; `named` holds the records, enums and fixeds defined so
    far (by full name) for references, `namespace` the enclosing one.

    Long: one branch per kind of Avro node (union, reference, record, enum, fixed, array, map,
    primitive with its logical types), kept together so the mapping reads as one table."""
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) == 1 and len(avro) == 2:
            return _from_avro(branches[0], named, namespace).optional()
        union = SchemaBuilder.struct().name(UNION_NAME)
        seen: set[str] = set()
        for branch in branches:
            field_name = _union_field_name(branch, named, namespace)
            if field_name in seen:
                raise DataException(
                    f"the Avro union {json.dumps(avro)} has two branches named {field_name!r}"
                )
            seen.add(field_name)
            union.field(field_name, _from_avro(branch, named, namespace).optional().build())
        return union.optional() if len(branches) < len(avro) else union
    if isinstance(avro, str):
        if avro in named:
            return _from_avro(named[avro], named, namespace)
        qualified = f"{namespace}.{avro}" if namespace and "." not in avro else avro
        if qualified in named:
            return _from_avro(named[qualified], named, namespace)
        return _primitive(avro, {})
    t = avro["type"]
    if isinstance(t, list | dict):
        return _from_avro(t, named, namespace)
    logical = avro.get("logicalType")
    if logical == "decimal" and t == "bytes":
        builder = Decimal.builder(int(avro.get("scale", 0)))
        precision = int(avro.get("precision", DEFAULT_DECIMAL_PRECISION))
        if precision != DEFAULT_DECIMAL_PRECISION:
            builder.parameter(PRECISION_PARAMETER, str(precision))
    elif logical == "date" and t == "int":
        builder = Date.builder()
    elif logical == "time-millis" and t == "int":
        builder = Time.builder()
    elif logical == "timestamp-millis" and t == "long":
        builder = Timestamp.builder()
    elif t == "array":
        items = avro["items"]
        entry = _map_entry(items, named)
        if entry is not None:
            builder = SchemaBuilder.map(
                _from_avro(entry[0], named, AVRO_NAMESPACE).build(),
                _from_avro(entry[1], named, AVRO_NAMESPACE).build(),
            )
        else:
            builder = SchemaBuilder.array(_from_avro(items, named, namespace).build())
    elif t == "map":
        builder = SchemaBuilder.map(
            SchemaBuilder.string().build(), _from_avro(avro["values"], named, namespace).build()
        )
    elif t == "record":
        record_namespace = avro.get("namespace", namespace)
        name = avro["name"]
        full = name if "." in name or not record_namespace else f"{record_namespace}.{name}"
        named[full] = avro
        builder = SchemaBuilder.struct()
        if not full.startswith(f"{AVRO_NAMESPACE}.{DEFAULT_RECORD_NAME}"):
            builder.name(full)
        if "doc" in avro:
            builder.doc(avro["doc"])
        for f in avro["fields"]:
            field_builder = _from_avro(f["type"], named, record_namespace)
            draft = field_builder.build()
            if "doc" in f and draft.doc is None:
                field_builder.doc(f["doc"])
            if f.get("default") is not None and draft.default_value is None:
                field_builder.default_value(_default_from_json(draft, f["default"]))
            builder.field(f["name"], field_builder.build())
    elif t == "enum":
        full = _full_name(avro, namespace)
        named[full] = avro
        builder = SchemaBuilder.string().name(full)
        builder.parameter(ENUM_PARAMETER, full)
        for symbol in avro["symbols"]:
            builder.parameter(f"{ENUM_PARAMETER}.{symbol}", symbol)
    elif t == "fixed":
        named[_full_name(avro, namespace)] = avro
        builder = SchemaBuilder.bytes()
    else:
        builder = _primitive(t, avro)
    return _apply_connect_meta(builder, avro)


def _union_field_name(branch: Any, named: dict[str, Any], namespace: str | None) -> str:
    """Confluent's `unionMemberFieldName`: a record's, enum's or fixed's simple name, else the type."""
    if isinstance(branch, str):
        qualified = f"{namespace}.{branch}" if namespace and "." not in branch else branch
        found = named.get(branch) or named.get(qualified)
        return found["name"].rpartition(".")[2] if found is not None else branch
    t = branch.get("type")
    if t in ("record", "enum", "fixed"):
        return str(branch["name"]).rpartition(".")[2]
    return t if isinstance(t, str) else _union_field_name(t, named, namespace)


def _full_name(avro: Mapping[str, Any], namespace: str | None) -> str:
    name = avro["name"]
    ns = avro.get("namespace", namespace)
    return name if "." in name or not ns else f"{ns}.{name}"


def _map_entry(items: Any, named: dict[str, Any]) -> tuple[Any, Any] | None:
    """(key type, value type) if `items` is Connect's MapEntry record, else None."""
    if isinstance(items, str):
        items = named.get(items, items)
    if not isinstance(items, dict) or items.get("type") != "record":
        return None
    if not str(items.get("name", "")).startswith(MAP_ENTRY_NAME):
        return None
    if items.get("namespace", AVRO_NAMESPACE) != AVRO_NAMESPACE:
        return None
    fields = items.get("fields", [])
    if [f["name"] for f in fields] != ["key", "value"]:
        return None
    return fields[0]["type"], fields[1]["type"]


def _primitive(t: str, avro: Mapping[str, Any]) -> SchemaBuilder:
    connect_type = avro.get("connect.type")
    if t == "int" and connect_type == "int8":
        return SchemaBuilder.int8()
    if t == "int" and connect_type == "int16":
        return SchemaBuilder.int16()
    factories = {
        "int": SchemaBuilder.int32,
        "long": SchemaBuilder.int64,
        "float": SchemaBuilder.float32,
        "double": SchemaBuilder.float64,
        "boolean": SchemaBuilder.bool,
        "string": SchemaBuilder.string,
        "bytes": SchemaBuilder.bytes,
    }
    if t not in factories:
        raise DataException(f"Avro type {t!r} has no Connect equivalent")
    return factories[t]()


def _apply_connect_meta(builder: SchemaBuilder, avro: Mapping[str, Any]) -> SchemaBuilder:
    draft = builder.build()
    if "connect.name" in avro and draft.name is None:
        builder.name(avro["connect.name"])
    if "connect.version" in avro:
        builder.version(int(avro["connect.version"]))
    if "connect.doc" in avro and draft.doc is None:
        builder.doc(avro["connect.doc"])
    builder.parameters({k: str(v) for k, v in (avro.get("connect.parameters") or {}).items()})
    if "connect.default" in avro:
        builder.default_value(_default_from_json(builder.build(), avro["connect.default"]))
    return builder


def _default_from_json(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.type is Type.BYTES and isinstance(value, str):
        value = value.encode("iso-8859-1")
    return from_avro_value(schema, value)
