"""Proto3 `.proto` text <-> `FileDescriptorProto`: what a Protobuf schema is registered as.

`render_proto` writes the file `protobuf_data.to_proto` built, with Confluent's `(confluent.field_meta)`
options; `parse_proto` reads a registered schema: the proto3 subset that `protobuf_data` maps, plus
enums, `reserved` and options, which are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from confluent_kafka.schema_registry.confluent import meta_pb2
from google.protobuf import descriptor_pb2

from eosconnect.api.errors import DataException

__all__ = ["FDP", "FIELD_META", "TYPE_NAMES", "camel", "field_meta_params", "parse_proto", "render_proto"]

FDP = descriptor_pb2.FieldDescriptorProto
TYPE_NAMES = {
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
_BY_NAME = {v: k for k, v in TYPE_NAMES.items()}

#: The `(confluent.field_meta)` option: the generated module adds its extensions at run time, so its
#: type stub does not declare them.
FIELD_META: Any = meta_pb2.field_meta  # type: ignore[attr-defined]


def camel(name: str) -> str:
    """`snake_name` as protoc's `SnakeName` (a map field's entry message is `<SnakeName>Entry`)."""
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
    if not field.options.HasExtension(FIELD_META):
        return ""
    params = field.options.Extensions[FIELD_META].params
    entries = ", ".join(f'{{ key: "{k}", value: "{v}" }}' for k, v in params.items())
    return f" [(confluent.field_meta) = {{ params: [{entries}] }}]"


def _type_text(field: Any) -> str:
    if field.type in TYPE_NAMES:
        return TYPE_NAMES[field.type]
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
                    member.options.Extensions[FIELD_META].params[key] = value
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
            entry = message.nested_type.add(name=f"{camel(name)}Entry")
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
                field.options.Extensions[FIELD_META].params[key] = value
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
