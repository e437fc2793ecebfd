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

Reading: the registered `.proto` text is parsed (`parse_proto`, the proto3 subset above plus enums,
`reserved` and options, which are skipped) and the message the record's message indexes name is
decoded. Message-typed fields read as optional STRUCTs (a message field may be absent), enums as STRING,
and a `oneof` group as Confluent's ProtobufData reads it: a field `<group>_<index>` (before the
message's other fields) holding the optional STRUCT `io.confluent.connect.protobuf.Union.<group>`, one
optional field per member, the member that is set filled in; such a STRUCT is written as a `oneof`.

Not supported yet (a clear error says so): arrays of arrays or of maps, maps with other keys, and
top-level schemas other than STRUCT.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from typing import Any

from confluent_kafka.schema_registry.confluent import meta_pb2
from confluent_kafka.schema_registry.confluent.type import decimal_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2
from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.type import date_pb2, timeofday_pb2

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp, Type
from eosconnect.api.errors import DataException

__all__ = ["ProtoFile", "from_message", "message_descriptor", "parse_proto", "to_message", "to_proto"]

FDP = descriptor_pb2.FieldDescriptorProto
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
_TYPE_NAMES = {
    FDP.TYPE_INT32: "int32",
    FDP.TYPE_INT64: "int64",
    FDP.TYPE_FLOAT: "float",
    FDP.TYPE_DOUBLE: "double",
    FDP.TYPE_BOOL: "bool",
    FDP.TYPE_STRING: "string",
    FDP.TYPE_BYTES: "bytes",
    FDP.TYPE_UINT32: "uint32",
    FDP.TYPE_UINT64: "uint64",
    FDP.TYPE_SINT32: "sint32",
    FDP.TYPE_SINT64: "sint64",
    FDP.TYPE_FIXED32: "fixed32",
    FDP.TYPE_FIXED64: "fixed64",
    FDP.TYPE_SFIXED32: "sfixed32",
    FDP.TYPE_SFIXED64: "sfixed64",
}
_BY_NAME = {v: k for k, v in _TYPE_NAMES.items()}
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


#: The `(confluent.field_meta)` option: the generated module adds its extensions at run time, so its
#: type stub does not declare them.
_FIELD_META: Any = meta_pb2.field_meta  # type: ignore[attr-defined]


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
    field.options.Extensions[_FIELD_META].params.update(meta)
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
    if not options.HasExtension(_FIELD_META):
        return {}
    return dict(options.Extensions[_FIELD_META].params)


def _set_field_type(field: Any, schema: Schema, message: Any, file: Any, name: str) -> None:
    if schema.type is not Type.ARRAY:
        _write_schema_meta(field, schema, file)
    if schema.name == Decimal.LOGICAL_NAME:
        # Confluent's: the message, the precision (if the schema has one) and scale as field_meta params.
        params = field.options.Extensions[_FIELD_META].params
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
    entry = message.nested_type.add(name=f"{_camel(name)}Entry")
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


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def render_proto(file: descriptor_pb2.FileDescriptorProto) -> str:
    lines = ['syntax = "proto3";']
    if file.package:
        lines.append(f"package {file.package};")
    lines += [f'import "{dep}";' for dep in file.dependency]
    for message in file.message_type:
        lines += _render_message(message, "")
    return "\n".join(lines) + "\n"


def _render_message(message: descriptor_pb2.DescriptorProto, indent: str) -> list[str]:
    entries = {m.name: m for m in message.nested_type if m.options.map_entry}
    lines = [f"{indent}message {message.name} {{"]
    inner = indent + "  "
    rendered_oneofs: set[int] = set()
    for field in message.field:
        if field.HasField("oneof_index") and not field.proto3_optional:
            if field.oneof_index not in rendered_oneofs:
                rendered_oneofs.add(field.oneof_index)
                lines.append(f"{inner}oneof {message.oneof_decl[field.oneof_index].name} {{")
                for member in message.field:
                    if member.HasField("oneof_index") and member.oneof_index == field.oneof_index:
                        lines.append(f"{inner}  {_type_text(member)} {member.name} = {member.number};")
                lines.append(f"{inner}}}")
            continue
        if field.type_name in entries:
            entry = entries[field.type_name]
            key, value = entry.field
            lines.append(f"{inner}map<{_type_text(key)}, {_type_text(value)}> {field.name} = {field.number};")
            continue
        label = (
            "repeated "
            if field.label == FDP.LABEL_REPEATED
            else ("optional " if field.proto3_optional else "")
        )
        lines.append(
            f"{inner}{label}{_type_text(field)} {field.name} = {field.number}{_options_text(field)};"
        )
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _render_message(nested, inner)
    lines.append(f"{indent}}}")
    return lines


def _options_text(field: Any) -> str:
    """A field's `(confluent.field_meta)` params as Confluent writes them, else nothing."""
    if not field.options.HasExtension(_FIELD_META):
        return ""
    params = field.options.Extensions[_FIELD_META].params
    entries = ", ".join(f'{{ key: "{k}", value: "{v}" }}' for k, v in params.items())
    return f" [(confluent.field_meta) = {{ params: [{entries}] }}]"


def _type_text(field: Any) -> str:
    if field.type in _TYPE_NAMES:
        return _TYPE_NAMES[field.type]
    return field.type_name


# ------------------------------------------------------------------------------------------ .proto parsing
_TOKEN = re.compile(
    r'\s+|//[^\n]*|/\*.*?\*/|("(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|[A-Za-z_][\w.]*|\.[\w.]+|-?\d+|[{}\[\]<>=;,():])',
    re.S,
)


def _tokens(text: str) -> Iterator[str]:
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise DataException(f"cannot parse the .proto schema at {text[pos : pos + 40]!r}")
        pos = m.end()
        if m.group(1):
            yield m.group(1)


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = list(_tokens(text))
        self.pos = 0

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def next(self) -> str:
        token = self.peek()
        if token is None:
            raise DataException("the .proto schema ends early")
        self.pos += 1
        return token

    def expect(self, token: str) -> None:
        got = self.next()
        if got != token:
            raise DataException(f"the .proto schema has {got!r} where {token!r} was expected")

    def skip_statement(self) -> None:
        depth = 0
        while True:
            token = self.next()
            if token in "{[(":
                depth += 1
            elif token in "}])":
                depth -= 1
                if depth == 0 and token == "}":
                    return
            elif token == ";" and depth == 0:
                return

    def skip_options(self) -> list[str]:
        """Skip a field's `[...]` options; their tokens are returned (for `field_meta_params`)."""
        tokens: list[str] = []
        if self.peek() == "[":
            depth = 0
            while True:
                token = self.next()
                tokens.append(token)
                depth += token == "["
                depth -= token == "]"
                if depth == 0:
                    break
        return tokens


def field_meta_params(tokens: list[str]) -> dict[str, str]:
    """The `key: "..."`, `value: "..."` pairs of a `(confluent.field_meta)` option (Confluent writes a
    Decimal's precision and scale so), from the option's tokens."""
    if "(" not in tokens or "confluent.field_meta" not in tokens:
        return {}
    params: dict[str, str] = {}
    key = None
    for i, token in enumerate(tokens[:-2]):
        if tokens[i + 1] == ":" and token in ("key", "value"):
            text = tokens[i + 2].strip("\"'")
            if token == "key":
                key = text
            elif key is not None:
                params[key], key = text, None
    return params


def parse_proto(text: str) -> descriptor_pb2.FileDescriptorProto:
    """A `FileDescriptorProto` for a proto3 file as registries hold them (see the module doc)."""
    p = _Parser(text)
    file = descriptor_pb2.FileDescriptorProto(name="registry.proto", syntax="proto3")
    while p.peek() is not None:
        token = p.next()
        if token == "syntax":
            p.expect("=")
            file.syntax = p.next().strip("\"'")
            p.expect(";")
        elif token == "package":
            file.package = p.next()
            p.expect(";")
        elif token == "import":
            dep = p.next()
            if dep in ("public", "weak"):
                dep = p.next()
            file.dependency.append(dep.strip("\"'"))
            p.expect(";")
        elif token == "message":
            _parse_message(p, file.message_type.add(name=p.next()))
        elif token == "enum":
            _parse_enum(p, file.enum_type.add(name=p.next()))
        elif token == ";":
            continue
        else:
            p.skip_statement()
    return file


def _parse_enum(p: _Parser, enum: descriptor_pb2.EnumDescriptorProto) -> None:
    p.expect("{")
    while (token := p.next()) != "}":
        if token in ("option", "reserved"):
            p.skip_statement()
            continue
        if token == ";":
            continue
        p.expect("=")
        enum.value.add(name=token, number=int(p.next()))
        p.skip_options()
        p.expect(";")


def _parse_message(p: _Parser, message: descriptor_pb2.DescriptorProto) -> None:
    p.expect("{")
    while (token := p.next()) != "}":
        if token == "message":
            _parse_message(p, message.nested_type.add(name=p.next()))
        elif token == "enum":
            _parse_enum(p, message.enum_type.add(name=p.next()))
        elif token in ("option", "reserved", "extensions", "extend"):
            p.skip_statement()
        elif token == "oneof":
            oneof_index = len(message.oneof_decl)
            message.oneof_decl.add(name=p.next())
            p.expect("{")
            while (member_type := p.next()) != "}":
                if member_type == "option":
                    p.skip_statement()
                    continue
                name = p.next()
                p.expect("=")
                number = int(p.next())
                params = field_meta_params(p.skip_options())
                p.expect(";")
                member = _add_field(message, name, number, member_type, FDP.LABEL_OPTIONAL)
                member.oneof_index = oneof_index
                for key, value in params.items():
                    member.options.Extensions[_FIELD_META].params[key] = value
        elif token == ";":
            continue
        elif token == "map":
            p.expect("<")
            key_type = p.next()
            p.expect(",")
            value_type = p.next()
            p.expect(">")
            name = p.next()
            p.expect("=")
            number = int(p.next())
            p.skip_options()
            p.expect(";")
            entry = message.nested_type.add(name=f"{_camel(name)}Entry")
            entry.options.map_entry = True
            _add_field(entry, "key", 1, key_type, FDP.LABEL_OPTIONAL)
            _add_field(entry, "value", 2, value_type, FDP.LABEL_OPTIONAL)
            _add_field(message, name, number, entry.name, FDP.LABEL_REPEATED)
        else:
            label, optional = FDP.LABEL_OPTIONAL, False
            if token in ("optional", "repeated", "required"):
                label = FDP.LABEL_REPEATED if token == "repeated" else FDP.LABEL_OPTIONAL
                optional = token == "optional"
                token = p.next()
            name = p.next()
            p.expect("=")
            number = int(p.next())
            params = field_meta_params(p.skip_options())
            p.expect(";")
            field = _add_field(message, name, number, token, label)
            for key, value in params.items():
                field.options.Extensions[_FIELD_META].params[key] = value
            if optional:
                field.proto3_optional = True
                field.oneof_index = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{name}")


def _add_field(message: Any, name: str, number: int, type_text: str, label: int) -> Any:
    field = message.field.add(name=name, number=number, label=label)
    if type_text in _BY_NAME:
        field.type = _BY_NAME[type_text]
    else:
        field.type_name = type_text  # message or enum: the pool resolves it in scope
    return field


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
