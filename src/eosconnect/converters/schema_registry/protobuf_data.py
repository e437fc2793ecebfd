"""Connect schemas and values <-> Protobuf (proto3), after Confluent's `ProtobufData`, to a working depth.

Writing: a STRUCT schema becomes one proto3 file with one top-level message (named after the schema:
`com.example.Order` is `message Order` in `package com.example`, an unnamed one `ConnectDefault1`); fields
are numbered by position (1, 2, ...); INT8/INT16/INT32 are `int32`, INT64 `int64`, FLOAT32 `float`,
FLOAT64 `double`, BOOLEAN `bool`, STRING `string`, BYTES `bytes`; an optional primitive is a proto3
`optional` field (it has presence, so null survives); ARRAY is `repeated`; MAP with string, integer or
boolean keys is `map<K, V>`; a nested STRUCT is a nested message; Timestamp is
`google.protobuf.Timestamp`, Date `google.type.Date`, Time `google.type.TimeOfDay` and Decimal
`confluent.type.Decimal` (unscaled two's complement bytes, precision, scale; the schema's scale and
precision as `(confluent.field_meta)` params), as Confluent's ProtobufData writes them and reads them
back. The `.proto` text is what is registered (schema type PROTOBUF), and the same file, as a
`FileDescriptorProto`, gives the message class that encodes the payload.

Reading: the registered `.proto` text is parsed (`protobuf_text.parse_proto`: the proto3 subset above
plus enums, `reserved` and options, which are skipped) and the message the record's message indexes name is
decoded. Message-typed fields read as optional STRUCTs (a message field may be absent), enums as STRING,
and a `oneof` group as Confluent's ProtobufData reads it: a field `<group>_<index>` (before the
message's other fields) holding the optional STRUCT `io.confluent.connect.protobuf.Union.<group>`, one
optional field per member, the member that is set filled in; such a STRUCT is written as a `oneof`.

Not supported yet (a clear error says so): arrays of arrays or of maps, maps with other keys, and
top-level schemas other than STRUCT.
"""

from __future__ import annotations

import datetime
from typing import Any

from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.confluent.type import decimal_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.type import date_pb2, timeofday_pb2

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, Type
from eosconnect.api.errors import DataException
from eosconnect.converters.schema_registry.protobuf_text import (
    FDP,
    FIELD_META,
    camel,
    render_proto,
)

__all__ = ["ProtoFile", "from_message", "message_descriptor", "to_message", "to_proto"]

TIMESTAMP_TYPE = "google.protobuf.Timestamp"
TIMESTAMP_IMPORT = "google/protobuf/timestamp.proto"
DATE_TYPE = "google.type.Date"
TIME_TYPE = "google.type.TimeOfDay"
DECIMAL_TYPE = "confluent.type.Decimal"
META_IMPORT = "confluent/meta.proto"
#: Connect's logical types that Confluent's ProtobufData writes as these well-known messages: logical
#: name -> (message full name, the file that defines it, its generated module).
_LOGICAL_MESSAGES: dict[str, tuple[str, str, Any]] = {
    Timestamp.LOGICAL_NAME: (TIMESTAMP_TYPE, TIMESTAMP_IMPORT, timestamp_pb2),
    Date.LOGICAL_NAME: (DATE_TYPE, "google/type/date.proto", date_pb2),
    Time.LOGICAL_NAME: (TIME_TYPE, "google/type/timeofday.proto", timeofday_pb2),
    Decimal.LOGICAL_NAME: (DECIMAL_TYPE, "confluent/type/decimal.proto", decimal_pb2),
}
#: Imports a registered schema may have, with the modules that define them (and their own imports).
_KNOWN_IMPORTS = {
    **{path: module for _, path, module in _LOGICAL_MESSAGES.values()},
    META_IMPORT: meta_pb2,  # `(confluent.field_meta)` options: a Decimal's precision and scale
    "google/protobuf/descriptor.proto": descriptor_pb2,
}
#: Confluent's ProtobufData names a `oneof` group's Connect STRUCT this prefix + the group's name; the
#: field holding it is `<group>_<index of the group>`, before the message's other fields.
UNION_PREFIX = "io.confluent.connect.protobuf.Union."
#: Connect's Decimal parameter for the precision (Confluent's `connect.decimal.precision`).
PRECISION_PARAMETER = "connect.decimal.precision"
_SCALARS = {
    Type.INT8: FDP.TYPE_INT32,
    Type.INT16: FDP.TYPE_INT32,
    Type.INT32: FDP.TYPE_INT32,
    Type.INT64: FDP.TYPE_INT64,
    Type.FLOAT32: FDP.TYPE_FLOAT,
    Type.FLOAT64: FDP.TYPE_DOUBLE,
    Type.BOOLEAN: FDP.TYPE_BOOL,
    Type.STRING: FDP.TYPE_STRING,
    Type.BYTES: FDP.TYPE_BYTES,
}
_MAP_KEYS = (Type.STRING, Type.INT32, Type.INT64, Type.BOOLEAN, Type.INT8, Type.INT16)


class ProtoFile:
    """One generated `.proto` file: its text (what is registered) and its descriptor."""

    def __init__(self, file: descriptor_pb2.FileDescriptorProto) -> None:
        self.file = file
        self.text = render_proto(file)
        self.descriptor = message_descriptor(file, [0])
        self.message_class = message_factory.GetMessageClass(self.descriptor)

    @property
    def full_name(self) -> str:
        return self.descriptor.full_name


# ---------------------------------------------------------------------------------------- Connect -> proto


def to_proto(schema: Schema) -> ProtoFile:
    if schema.type is not Type.STRUCT:
        raise DataException(
            f"ProtobufConverter writes STRUCT schemas only got {schema.type}: wrap the value in a Struct."
        )
    full_name = schema.name or "ConnectDefault1"
    package, _, name = full_name.rpartition(".")
    file = descriptor_pb2.FileDescriptorProto(name=f"{full_name}.proto", syntax="proto3")
    if package:
        file.package = package
    message = file.message_type.add(name=name)
    _fill_message(message, schema, file)
    return ProtoFile(file)


def _fill_message(message: descriptor_pb2.DescriptorProto, schema: Schema, file: Any) -> None:
    """Fields numbered in order (1, 2, ...); a union STRUCT (Confluent's `...protobuf.Union.<name>`)
    is a `oneof <name>` whose members take the next numbers."""
    number = 0
    for f in schema.fields:
        if is_union(f.schema):
            oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f.schema.name[len(UNION_PREFIX) :])  # type: ignore[index]
            for member in f.schema.fields:
                number += 1
                field = message.field.add(name=member.name, number=number, label=FDP.LABEL_OPTIONAL)
                _set_field_type(field, _required(member.schema), message, file, member.name)
                field.oneof_index = oneof_index
            continue
        number += 1
        field = message.field.add(name=f.name, number=number, label=FDP.LABEL_OPTIONAL)
        _set_field_type(field, f.schema, message, file, f.name)


def is_union(schema: Schema) -> bool:
    """Whether `schema` is Confluent's Connect form of a `oneof` group (a STRUCT named
    `io.confluent.connect.protobuf.Union.<oneof name>`, one optional field per member)."""
    return schema.type is Type.STRUCT and (schema.name or "").startswith(UNION_PREFIX)


#: `(confluent.field_meta)` param keys that carry what proto3 has no place for: Confluent's
#: `connect.type` (INT8/INT16, both written as int32) and, ours beside it, a schema's name, version and
#: parameters. Confluent's ProtobufData reads only the keys it knows and ignores the rest, so a topic
#: stays readable by it; without them a named primitive (Debezium's `io.debezium.time.Date` on an
#: int32) reaches a sink as a bare number.
CONNECT_TYPE_PARAM = "connect.type"
CONNECT_NAME_PARAM = "connect.name"
CONNECT_VERSION_PARAM = "connect.version"
CONNECT_PARAMETER_PREFIX = "connect.parameters."
_SMALL_INTS = {Type.INT8: "int8", Type.INT16: "int16"}


def _write_schema_meta(field: Any, schema: Schema, file: Any) -> None:
    """The params that let the read side rebuild `schema` exactly (see `CONNECT_NAME_PARAM`)."""
    meta: dict[str, str] = {}
    if schema.type in _SMALL_INTS:
        meta[CONNECT_TYPE_PARAM] = _SMALL_INTS[schema.type]
    if schema.name is not None and schema.name not in _LOGICAL_MESSAGES and not is_union(schema):
        meta[CONNECT_NAME_PARAM] = schema.name
        if schema.version is not None:
            meta[CONNECT_VERSION_PARAM] = str(schema.version)
        for key, value in (schema.parameters or {}).items():
            meta[CONNECT_PARAMETER_PREFIX + key] = value
    if not meta:
        return
    field.options.Extensions[FIELD_META].params.update(meta)
    if META_IMPORT not in file.dependency:
        file.dependency.append(META_IMPORT)


def _read_schema_meta(field: FieldDescriptor, builder: SchemaBuilder, name: bool = True) -> SchemaBuilder:
    """`builder` with the name (unless already given), version and parameters `_write_schema_meta`
    stored on `field`."""
    params = _field_meta(field)
    if name and CONNECT_NAME_PARAM in params:
        builder.name(params[CONNECT_NAME_PARAM])
    if CONNECT_VERSION_PARAM in params:
        builder.version(int(params[CONNECT_VERSION_PARAM]))
    for key, value in params.items():
        if key.startswith(CONNECT_PARAMETER_PREFIX):
            builder.parameter(key[len(CONNECT_PARAMETER_PREFIX) :], value)
    return builder


def _field_meta(field: FieldDescriptor) -> dict[str, str]:
    options = field.GetOptions()
    if not options.HasExtension(FIELD_META):
        return {}
    return dict(options.Extensions[FIELD_META].params)


def _set_field_type(field: Any, schema: Schema, message: Any, file: Any, name: str) -> None:
    if schema.type is not Type.ARRAY:
        _write_schema_meta(field, schema, file)
    if schema.name == Decimal.LOGICAL_NAME:
        # Confluent's: the message, the precision (if the schema has one) and scale as field_meta params.
        params = field.options.Extensions[FIELD_META].params
        precision = (schema.parameters or {}).get(PRECISION_PARAMETER)
        if precision is not None:
            params["precision"] = precision
        params["scale"] = str(Decimal.scale(schema))
        if META_IMPORT not in file.dependency:
            file.dependency.append(META_IMPORT)
    if schema.name in _LOGICAL_MESSAGES:
        type_name, path, _ = _LOGICAL_MESSAGES[schema.name]
        field.type = FDP.TYPE_MESSAGE
        field.type_name = f".{type_name}"
        if path not in file.dependency:
            file.dependency.append(path)
        return
    t = schema.type
    if t in _SCALARS:
        field.type = _SCALARS[t]
        if schema.optional:
            field.proto3_optional = True
            field.oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=f"_{field.name}")
        return
    if t is Type.STRUCT:
        nested_name = (schema.name or f"{name.title().replace('_', '')}Struct").rpartition(".")[2]
        if nested_name not in [m.name for m in message.nested_type]:
            _fill_message(message.nested_type.add(name=nested_name), schema, file)
        field.type = FDP.TYPE_MESSAGE
        field.type_name = nested_name
        return
    if t is Type.ARRAY:
        element = schema.value_schema
        assert element is not None
        if element.type in (Type.ARRAY, Type.MAP):
            raise DataException(
                f"field {name!r}: ProtobufConverter does not support arrays of {element.type}"
            )
        field.label = FDP.LABEL_REPEATED
        _set_field_type(field, _required(element), message, file, name)
        return
    # MAP
    key_schema, value_schema = schema.key_schema, schema.value_schema
    assert key_schema is not None and value_schema is not None
    if key_schema.type not in _MAP_KEYS or value_schema.type in (Type.ARRAY, Type.MAP):
        raise DataException(
            f"field {name!r}: ProtobufConverter writes maps with string, integer or boolean keys and "
            f"non-collection values; got MAP<{key_schema.type}, {value_schema.type}>"
        )
    entry = message.nested_type.add(name=f"{camel(name)}Entry")
    entry.options.map_entry = True
    key = entry.field.add(name="key", number=1, label=FDP.LABEL_OPTIONAL)
    _set_field_type(key, _required(key_schema), entry, file, name)
    value = entry.field.add(name="value", number=2, label=FDP.LABEL_OPTIONAL)
    _set_field_type(value, _required(value_schema), entry, file, name)
    field.label = FDP.LABEL_REPEATED
    field.type = FDP.TYPE_MESSAGE
    field.type_name = entry.name


def _required(schema: Schema) -> Schema:
    """Elements, keys and values have no presence in proto3: write them as required."""
    if not schema.optional:
        return schema
    if schema.type is Type.STRUCT:
        return schema  # a message element is written as it is
    return Schema(
        schema.type,
        False,
        None,
        schema.name,
        schema.version,
        schema.doc,
        schema.parameters,
        None,
        None,
        None,
    )


def message_descriptor(file: descriptor_pb2.FileDescriptorProto, indexes: list[int]) -> Descriptor:
    """The message that `indexes` (the wire format's message indexes) name in `file`."""
    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add_known(path: str) -> None:
        if path in added or path not in _KNOWN_IMPORTS:
            return
        added.add(path)
        module_file = _KNOWN_IMPORTS[path].DESCRIPTOR
        for dependency in module_file.dependencies:
            add_known(dependency.name)
        well_known = descriptor_pb2.FileDescriptorProto()
        module_file.CopyToProto(well_known)
        pool.Add(well_known)

    for dependency in file.dependency:
        add_known(dependency)
    unknown = [d for d in file.dependency if d not in _KNOWN_IMPORTS]
    if unknown:
        raise DataException(f"Protobuf schemas importing {', '.join(unknown)} are not supported yet")
    try:
        file_descriptor = pool.Add(file)
    except TypeError:
        pool.AddSerializedFile(file.SerializeToString())
        file_descriptor = pool.FindFileByName(file.name)
    except Exception as exc:
        raise DataException(f"the Protobuf schema does not build: {exc}") from None
    messages = list(file_descriptor.message_types_by_name.values())
    descriptor = messages[indexes[0]]
    for index in indexes[1:]:
        descriptor = descriptor.nested_types[index]
    return descriptor


# --------------------------------------------------------------------------------------------- values
def to_message(schema: Schema, value: Any, message: Message) -> Message:
    """Fill `message` (of the class `to_proto` built for `schema`) from a Connect value."""
    for f in schema.fields:
        item = value.get(f.name)
        if item is None:
            if not f.schema.optional and f.schema.default_value is None:
                raise DataException(f"field {f.name!r} is required and has no value")
            continue
        if is_union(f.schema):  # the oneof's member that is set (the first, should several be)
            for member in f.schema.fields:
                if (member_value := item.get(member.name)) is not None:
                    _set(message, member.name, member.schema, member_value)
                    break
            continue
        _set(message, f.name, f.schema, item)
    return message


def _set_logical(target: Message, schema: Schema, value: Any) -> None:
    """A Timestamp, Date or Time into its well-known message, as Confluent's ProtobufData writes it."""
    if schema.name == Timestamp.LOGICAL_NAME:
        target.FromDatetime(value.astimezone(datetime.UTC).replace(tzinfo=None))
    elif schema.name == Date.LOGICAL_NAME:
        target.year, target.month, target.day = value.year, value.month, value.day
    elif schema.name == Decimal.LOGICAL_NAME:  # Confluent's DecimalUtils.fromBigDecimal
        unscaled = Decimal.from_logical(schema, value)  # two's complement, as BigInteger.toByteArray
        target.value = unscaled
        target.precision = max(len(str(abs(int.from_bytes(unscaled, "big", signed=True)))), 1)
        target.scale = Decimal.scale(schema)
    else:  # Time: Connect's are milliseconds of the (UTC) day
        millis = Time.from_logical(schema, value)
        seconds, target.nanos = divmod(millis, 1000)
        target.nanos *= 1_000_000
        minutes, target.seconds = divmod(seconds, 60)
        target.hours, target.minutes = divmod(minutes, 60)


def _get_logical(raw: Any, schema: Schema) -> Any:
    if schema.name == Timestamp.LOGICAL_NAME:
        return raw.ToDatetime(tzinfo=datetime.UTC)
    if schema.name == Date.LOGICAL_NAME:
        return datetime.date(raw.year, raw.month, raw.day)
    if schema.name == Decimal.LOGICAL_NAME:  # the message's own scale, as DecimalUtils.toBigDecimal
        return Decimal.from_unscaled(int.from_bytes(raw.value, "big", signed=True), raw.scale)
    millis = ((raw.hours * 60 + raw.minutes) * 60 + raw.seconds) * 1000 + raw.nanos // 1_000_000
    return Time.to_logical(schema, millis)


def _set(message: Message, name: str, schema: Schema, value: Any) -> None:
    if schema.name in _LOGICAL_MESSAGES:
        _set_logical(getattr(message, name), schema, value)
        return
    t = schema.type
    if t is Type.STRUCT:
        to_message(schema, value, getattr(message, name))
    elif t is Type.ARRAY:
        element = schema.value_schema
        assert element is not None
        container = getattr(message, name)
        for index, item in enumerate(value):
            if item is None:
                raise DataException(
                    f"field {name!r}: element {index} is null, and a Protobuf repeated field cannot hold "
                    "null (nor can it with Confluent's ProtobufConverter): write this topic with Avro or "
                    "JSON Schema, or keep NULLs out of the array"
                )
            if element.type is Type.STRUCT:
                to_message(element, item, container.add())
            elif element.name in _LOGICAL_MESSAGES:
                _set_logical(container.add(), element, item)
            else:
                container.append(item)
    elif t is Type.MAP:
        value_schema = schema.value_schema
        assert value_schema is not None
        container = getattr(message, name)
        for k, v in value.items():
            if value_schema.type is Type.STRUCT:
                to_message(value_schema, v, container[k])
            else:
                container[k] = v
    else:
        setattr(message, name, bytes(value) if t is Type.BYTES else value)


def connect_schema(descriptor: Descriptor) -> Schema:
    """The Connect STRUCT schema of a message (read side)."""
    return _struct_builder(descriptor).build()


def _struct_builder(descriptor: Descriptor, name: str | None = None) -> SchemaBuilder:
    """A message's fields; each `oneof` group first, as Confluent's ProtobufData orders them: a
    field `<group>_<index>` holding a union STRUCT of its members (optional, one set). The STRUCT is
    named `name` when the writer stored one, else after the message."""
    builder = SchemaBuilder.struct().name(name or descriptor.full_name)
    for oneof in _real_oneofs(descriptor):
        union = SchemaBuilder.struct().name(UNION_PREFIX + oneof.name).optional()
        for member in oneof.fields:
            union.field(member.name, _field_schema(member))
        builder.field(f"{oneof.name}_{oneof.index}", union.build())
    for field in descriptor.fields:
        if _real_oneof(field) is None:
            builder.field(field.name, _field_schema(field))
    return builder


def _real_oneofs(descriptor: Descriptor) -> list[Any]:
    return [o for o in descriptor.oneofs if not _synthetic(o)]


def _synthetic(oneof: Any) -> bool:
    """proto3 `optional` puts its field in a oneof of its own, named `_<field>` by protoc."""
    return len(oneof.fields) == 1 and oneof.name == f"_{oneof.fields[0].name}"


def _real_oneof(field: FieldDescriptor) -> Any:
    oneof = field.containing_oneof
    return None if oneof is None or _synthetic(oneof) else oneof


_LOGICAL_BUILDERS = {TIMESTAMP_TYPE: Timestamp.builder, DATE_TYPE: Date.builder, TIME_TYPE: Time.builder}


def _decimal_builder(field: FieldDescriptor) -> SchemaBuilder:
    """Confluent's: the scale (else 0) and precision from the field's `(confluent.field_meta)` params."""
    params = _field_meta(field)
    builder = Decimal.builder(int(params.get("scale", "0")))
    if "precision" in params:
        builder.parameter(PRECISION_PARAMETER, params["precision"])
    return builder


def _is_map(field: FieldDescriptor) -> bool:
    return (
        field.type == FieldDescriptor.TYPE_MESSAGE
        and field.message_type.GetOptions().map_entry
        and field.is_repeated
    )


def _field_schema(field: FieldDescriptor, element: bool = False) -> Schema:
    if _is_map(field):
        entry = field.message_type
        return SchemaBuilder.map(
            _field_schema(entry.fields_by_name["key"], True),
            _field_schema(entry.fields_by_name["value"], True),
        ).build()
    if field.is_repeated and not element:
        return SchemaBuilder.array(_field_schema(field, True)).build()
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        logical = _LOGICAL_BUILDERS.get(field.message_type.full_name)
        if field.message_type.full_name == DECIMAL_TYPE:
            builder = _decimal_builder(field)
        elif logical is not None:
            builder = logical()
        else:
            stored_name = _field_meta(field).get(CONNECT_NAME_PARAM)
            builder = _read_schema_meta(field, _struct_builder(field.message_type, stored_name), False)
        return builder.build() if element else builder.optional().build()
    small = _field_meta(field).get(CONNECT_TYPE_PARAM)
    if field.type == FieldDescriptor.TYPE_ENUM:
        builder = SchemaBuilder.string()
    elif small in ("int8", "int16") and field.type == FieldDescriptor.TYPE_INT32:
        builder = SchemaBuilder.int8() if small == "int8" else SchemaBuilder.int16()
        _read_schema_meta(field, builder)
    else:
        factory = {
            FieldDescriptor.TYPE_INT32: SchemaBuilder.int32,
            FieldDescriptor.TYPE_SINT32: SchemaBuilder.int32,
            FieldDescriptor.TYPE_SFIXED32: SchemaBuilder.int32,
            FieldDescriptor.TYPE_UINT32: SchemaBuilder.int64,
            FieldDescriptor.TYPE_FIXED32: SchemaBuilder.int64,
            FieldDescriptor.TYPE_INT64: SchemaBuilder.int64,
            FieldDescriptor.TYPE_SINT64: SchemaBuilder.int64,
            FieldDescriptor.TYPE_SFIXED64: SchemaBuilder.int64,
            FieldDescriptor.TYPE_UINT64: SchemaBuilder.int64,
            FieldDescriptor.TYPE_FIXED64: SchemaBuilder.int64,
            FieldDescriptor.TYPE_FLOAT: SchemaBuilder.float32,
            FieldDescriptor.TYPE_DOUBLE: SchemaBuilder.float64,
            FieldDescriptor.TYPE_BOOL: SchemaBuilder.bool,
            FieldDescriptor.TYPE_STRING: SchemaBuilder.string,
            FieldDescriptor.TYPE_BYTES: SchemaBuilder.bytes,
        }[field.type]
        builder = _read_schema_meta(field, factory())
    if not element and field.has_presence:
        builder.optional()
    return builder.build()


def from_message(schema: Schema, message: Message) -> Struct:
    struct = Struct(schema)
    fields = message.DESCRIPTOR.fields_by_name
    for f in schema.fields:
        if is_union(f.schema):
            member = message.WhichOneof(f.schema.name[len(UNION_PREFIX) :])  # type: ignore[index]
            if member is not None:
                union = Struct(f.schema)
                union.put(member, _get(message, fields[member], f.schema.field(member).schema))  # type: ignore[union-attr]
                struct.put(f, union)
            continue
        struct.put(f, _get(message, fields[f.name], f.schema))
    return struct


def _get(message: Message, field: FieldDescriptor, schema: Schema) -> Any:
    if not field.is_repeated and field.has_presence and not message.HasField(field.name):
        return None
    raw = getattr(message, field.name)
    return _convert(raw, field, schema)


def _convert(raw: Any, field: FieldDescriptor, schema: Schema) -> Any:
    if schema.type is Type.ARRAY:
        element = schema.value_schema
        assert element is not None
        return [_element(item, field, element) for item in raw]
    if schema.type is Type.MAP:
        value_schema = schema.value_schema
        assert value_schema is not None
        value_field = field.message_type.fields_by_name["value"]
        return {k: _element(v, value_field, value_schema) for k, v in raw.items()}
    return _element(raw, field, schema)


def _element(raw: Any, field: FieldDescriptor, schema: Schema) -> Any:
    if schema.name in _LOGICAL_MESSAGES:
        return _get_logical(raw, schema)
    if schema.type is Type.STRUCT:
        return from_message(schema, raw)
    if field.type == FieldDescriptor.TYPE_ENUM:
        return (
            field.enum_type.values_by_number[raw].name
            if raw in field.enum_type.values_by_number
            else str(raw)
        )
    if schema.type is Type.BYTES:
        return bytes(raw)
    return raw
