"""Kafka's field paths (KIP-821, `field.syntax.version`): V1 names a top-level field; V2 reads `a.b.c`
as nested fields, with backticks around a name that holds dots (`` `a.b`.c ``, `` \\` `` for a backtick
inside one). ExtractField and ValueToKey take it, as in Kafka 4."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import Field, Schema, Struct
from eosconnect.api.errors import ConfigException
from eosconnect.api.validators import ValidString
from eosconnect.transforms.base import require_map_or_null, require_struct

SYNTAX_SETTING = "field.syntax.version"


def define_field_syntax(config: ConfigDef) -> ConfigDef:
    return config.define(
        SYNTAX_SETTING,
        ConfigType.STRING,
        "V1",
        Importance.HIGH,
        "V1: field names are top-level fields. V2: dotted paths reach nested fields (a.b.c); wrap a name "
        "that contains dots in backticks (`a.b`.c).",
        ValidString(["V1", "V2"], case_sensitive=False),
    )


def _incomplete(path: str, at: int) -> ConfigException:
    return ConfigException(
        f"Incomplete backtick pair in path: [{path}], consider adding a backslash before backtick at "
        f"position {at} to escape it"
    )


def parse_path(path: str, version: str) -> list[str]:
    """The steps of `path`: one step in V1; V2 splits on dots outside backtick pairs, as Kafka does."""
    if version.upper() == "V1":
        return [path]
    steps: list[str] = []
    index = 0
    while 0 <= index < len(path):
        if path[index] != "`":
            dot = path.find(".", index)
            if dot < 0:
                steps.append(path[index:])
                index = len(path)
            else:
                steps.append(path[index:dot])
                index = dot + 1
            continue
        opened = index
        index += 1
        start = index
        name = ""
        while True:
            index = path.find("`", index)
            if index < 0:
                raise _incomplete(path, opened)
            escaped = path[index - 1] == "\\"
            if index >= len(path) - 1:
                if escaped:
                    raise _incomplete(path, opened)
                steps.append(name + path[start:index])
                index += 1
                break
            if path[index + 1] != ".":
                index += 1
                continue
            if escaped:
                name += path[start : index - 1] + "`"
                index += 1
                start = index
                continue
            steps.append(name + path[start:index])
            index += 2
            break
    if path.endswith("."):
        steps.append("")
    return steps


class FieldPath:
    """One parsed path: read a value from a map or a struct, or find the field in a schema."""

    def __init__(self, text: str, version: str) -> None:
        self.text = text
        self.steps = parse_path(text, version)

    def value_from_map(self, value: Mapping[str, Any] | None) -> Any:
        current = value
        for step in self.steps[:-1]:
            if current is None:
                return None
            current = require_map_or_null(current.get(step), "nested field access")
        return None if current is None else current.get(self.steps[-1])

    def field_from(self, schema: Schema) -> Field | None:
        current = schema
        for step in self.steps[:-1]:
            field = current.field(step)
            if field is None:
                return None
            current = field.schema
        return current.field(self.steps[-1])

    def value_from_struct(self, struct: Struct | None, with_default: bool = True) -> Any:
        current = struct
        for step in self.steps[:-1]:
            if current is None or current.schema.field(step) is None:
                return None
            sub = current.get(step)
            current = None if sub is None else require_struct(sub, "nested field access")
        if current is None or current.schema.field(self.steps[-1]) is None:
            return None
        last = self.steps[-1]
        return current.get(last) if with_default else current.get_without_default(last)
