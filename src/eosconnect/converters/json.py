"""Kafka's `JsonConverter`: record keys and values as JSON, with or without the schema envelope.

It writes exactly what Kafka Connect's converter writes, so topics filled by eosconnect read the
same in kcat, console consumers and Java Connect sinks, and the other way round.
"""

from __future__ import annotations

import base64
import decimal
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.converter import Converter
from eosconnect.api.data.schema import (
    Schema,
    SchemaAndValue,
)
from eosconnect.api.data.struct import Struct
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.validators import Range, ValidString
from eosconnect.converters.json_format import JsonCodecConfig
from eosconnect.converters.json_reader import JsonReader
from eosconnect.converters.json_text import jackson_escapes
from eosconnect.converters.json_writer import JsonWriter
from eosconnect.converters.primitives import as_bytes

__all__ = [
    "JsonConverter",
]


class JsonConverter(Converter):
    """Kafka's `org.apache.kafka.connect.json.JsonConverter`: compact JSON, with the schema in a
    `{"schema":...,"payload":...}` envelope when `schemas.enable=true`.

    With `schemas.enable=true` every key/value is written as Kafka's envelope
    `{"schema":{...},"payload":...}` and read back into a schema and a value (Structs, logical
    types), byte for byte as Java Connect does; `schema.content` (KIP-1054) gives the schema of
    plain JSON messages instead. `schemas.enable` defaults to true, as in Kafka, so that a topic
    written with the defaults carries what a schema-aware sink (JdbcSink, Debezium's JDBC sink)
    needs. With `schemas.enable=false` values are compact JSON with no envelope; a value that has
    a schema is still written following it (a Struct as an object, a Date as its day number), as
    Kafka does. Non-ASCII is written as UTF-8, bytes as base64, maps with non-string keys as arrays
    of `[key, value]` pairs.
    """

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "schemas.enable",
                ConfigType.BOOLEAN,
                True,
                Importance.HIGH,
                'Write (and expect) the schema with each key/value in a {"schema":...,"payload":...} '
                "envelope, as Kafka's JsonConverter does (same default). Set false to write and read plain "
                "JSON without an envelope.",
            )
            .define(
                "schemas.cache.size",
                ConfigType.INT,
                1000,
                Importance.HIGH,
                "The maximum number of schemas that can be cached in this converter instance.",
                validator=Range.at_least(0),
            )
            .define(
                "schema.content",
                ConfigType.STRING,
                None,
                Importance.HIGH,
                "When set (with schemas.enable=true), the JSON schema of every message read, which is then "
                "plain JSON without an envelope (KIP-1054). Applies to reading (sink connectors) only.",
            )
            .define(
                "decimal.format",
                ConfigType.STRING,
                "BASE64",
                Importance.LOW,
                "How Decimal values are written: BASE64 (the unscaled bytes, Kafka's default) or NUMERIC "
                "(a JSON number). Case insensitive.",
                validator=ValidString(["BASE64", "NUMERIC"], case_sensitive=False),
            )
            .define(
                "replace.null.with.default",
                ConfigType.BOOLEAN,
                True,
                Importance.LOW,
                "Whether a null field with a default value is written and read as its default (true) or as "
                "null (false).",
            )
        )

    def __init__(self) -> None:
        super().__init__()
        self._setup()

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:
        super().configure(config, is_key)
        self._setup()

    def _setup(self) -> None:
        cfg = self.config
        self.schemas_enabled = bool(cfg["schemas.enable"])
        codec_config = JsonCodecConfig(
            decimal_numeric=str(cfg["decimal.format"]).upper() == "NUMERIC",
            replace_null_with_default=bool(cfg["replace.null.with.default"]),
            cache_size=int(cfg["schemas.cache.size"]),
        )
        self._writing = JsonWriter(codec_config)
        self._reading = JsonReader(codec_config)
        self._prefixes: dict[Schema | None, str] = {}
        self._content_schema: Schema | None = None
        self._content_reader: Any = None
        #: The schema text of the last envelope read and its (schema, reader), see `_read_envelope`.
        self._last_schema: tuple[bytes, Any] | None = None
        content = cfg["schema.content"]
        if content and self.schemas_enabled:
            setting = self._prefix() + "schema.content"
            try:
                node = json.loads(content, parse_float=decimal.Decimal)
                self._content_schema, self._content_reader = self._reading.schema_from_json(node)
            except (ValueError, DataException) as exc:
                raise ConfigException(
                    errors={
                        setting: [
                            f"is not a Kafka Connect JSON schema: {exc}. Set it to one, e.g. "
                            '{"type":"struct","fields":[{"field":"id","type":"int64"}]}.'
                        ]
                    }
                ) from None

    # -- writing --

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        return self.from_connect_data(topic, None, value)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is None:
            if value is None:
                return None
            if not self.schemas_enabled:
                if _is_flat_json(value):
                    # The common case (a flat dict of JSON primitives) needs no preparation walk.
                    try:
                        text = _PYTHON_COMPACT_JSON(value)
                    except ValueError:
                        pass  # NaN or infinity: the full path below reports it properly
                    else:
                        return (jackson_escapes(text) if "\\u00" in text else text).encode()
                if not isinstance(value, Struct):
                    return self._schemaless(topic, value)
            if isinstance(value, Struct):
                schema = value.schema  # a Struct knows its schema (Java would refuse it without one)
        try:
            if not self.schemas_enabled:
                return self._writing.writer(schema)(value).encode()
            return (self._envelope_prefix(schema) + self._writing.writer(schema)(value) + "}").encode()
        except DataException as exc:
            raise DataException(
                f"JsonConverter cannot serialise the record {self._what()} for topic {topic!r}: {exc}"
            ) from None

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        if schema is None:
            convert = self.from_connect_data
            return [convert(topic, None, value) for value in values]
        write = self._writing.writer(schema)
        try:
            if not self.schemas_enabled:
                return [write(value).encode() for value in values]
            prefix = self._envelope_prefix(schema)
            return [(prefix + write(value) + "}").encode() for value in values]
        except DataException:
            return [self.from_connect_data(topic, schema, value) for value in values]  # names the value

    def _envelope_prefix(self, schema: Schema | None) -> str:
        prefix = self._prefixes.get(schema)
        if prefix is None:
            prefix = '{"schema":' + self._writing.schema_text(schema) + ',"payload":'
            if len(self._prefixes) >= 1000:
                self._prefixes.clear()
            self._prefixes[schema] = prefix
        return prefix

    def _schemaless(self, topic: str, value: Any) -> bytes:
        try:
            plain = _to_json_ready(value, "")
            return _COMPACT_JSON(plain).encode()
        except _NotJsonable as exc:
            raise DataException(
                f"JsonConverter cannot serialise the record {self._what()} for topic {topic!r}: {exc}. "
                "Convert it to JSON types (dict, list, str, int, float, bool, None, bytes) first."
            ) from None

    # -- reading --

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        return self.to_connect_data(topic, data).value

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        if data is None:
            return _NULL
        try:
            raw = data if data.__class__ is bytes else as_bytes(data)
        except TypeError as exc:
            raise DataException(
                f"JsonConverter expects bytes from topic {topic!r}, got {exc} for the record {self._what()}"
            ) from None
        if not raw:
            return _NULL
        try:
            if not self.schemas_enabled:
                return SchemaAndValue(None, json.loads(raw))
            if self._content_schema is not None:
                node = (
                    _DECIMAL_JSON(raw.decode())
                    if raw.isascii()
                    else json.loads(raw, parse_float=decimal.Decimal)
                )
                return SchemaAndValue(self._content_schema, self._content_reader(node))
            return self._read_envelope(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataException(
                f"JsonConverter could not parse the record {self._what()} from topic {topic!r} as JSON: "
                f"{exc}. If the topic holds plain strings or binary data, use StringConverter or "
                f"ByteArrayConverter for {self._prefix().rstrip('.')}."
            ) from None
        except DataException as exc:
            raise DataException(
                f"JsonConverter could not read the record {self._what()} from topic {topic!r}: {exc}"
            ) from None

    def _read_envelope(self, raw: bytes) -> SchemaAndValue:
        # Fast path: {"schema":S,"payload":P} as Kafka writes it, the schema looked up by its text
        # (the last one first: a topic's records mostly share one schema, so a byte comparison
        # saves the cache's lookup).
        if raw.startswith(b'{"schema":') and raw.endswith(b"}"):
            split = raw.find(b',"payload":')
            if split > 0:
                schema_text = raw[10:split]
                last = self._last_schema
                if last is not None and last[0] == schema_text:
                    cached = last[1]
                else:
                    cached = self._reading.cached(schema_text)
                try:
                    if cached is None:
                        node = _DECIMAL_JSON(schema_text.decode())
                        cached = self._reading.schema_from_json(node, schema_text)
                    payload = _decimal_json(raw[split + 11 : -1].decode())
                except (json.JSONDecodeError, UnicodeDecodeError):
                    pass  # not the plain layout (or not UTF-8): parse it whole below
                else:
                    self._last_schema = (schema_text, cached)
                    schema, read = cached
                    return _SCHEMA_AND_VALUE(SchemaAndValue, (schema, read(payload)))
        envelope = json.loads(raw, parse_float=decimal.Decimal)
        if not isinstance(envelope, dict) or envelope.keys() != {"schema", "payload"}:
            # Kafka's wording first (it is what users search for), then the setting by its full name:
            # plain JSON on a topic is usually the work of a writer with schemas.enable=false,
            # eosconnect's own default in earlier versions among them.
            setting = self._prefix() + "schemas.enable"
            raise DataException(
                'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not '
                "contain additional fields. If you are trying to deserialize plain JSON data, set "
                f"schemas.enable=false in your converter configuration: {setting}=false on the "
                "connector (plain JSON is what a JsonConverter with schemas.enable=false writes, as "
                "eosconnect's did by default in earlier versions)."
            )
        node = envelope["schema"]
        key = None if node is None else json.dumps(node, separators=(",", ":"), default=str)
        schema, read = self._reading.schema_from_json(node, key)
        return SchemaAndValue(schema, read(envelope["payload"]))


_NULL = SchemaAndValue(None, None)
#: `json.loads(text, parse_float=decimal.Decimal)` without building a decoder per call (Kafka reads
#: fractions as BigDecimal: exact for Decimal fields, converted for FLOAT fields).
_DECIMAL_JSON = json.JSONDecoder(parse_float=decimal.Decimal).decode
_DECIMAL_SCAN = json.JSONDecoder(parse_float=decimal.Decimal).scan_once  # type: ignore[attr-defined]
#: `SchemaAndValue(schema, value)` without the Python-level `__new__` of a NamedTuple (per record).
_SCHEMA_AND_VALUE = tuple.__new__


def _decimal_json(text: str) -> Any:
    """`_DECIMAL_JSON(text)`, scanning directly when the text is one JSON value without surrounding
    whitespace (what Kafka's writers produce); anything else goes the whole way, with its errors."""
    try:
        value, end = _DECIMAL_SCAN(text, 0)
    except (StopIteration, json.JSONDecodeError):
        return _DECIMAL_JSON(text)
    return value if end == len(text) else _DECIMAL_JSON(text)


_JSON_SCALARS = (str, int, float, bool, type(None))
#: What `json.dumps(..., separators=(",", ":"), ensure_ascii=False, allow_nan=False)` does, without
#: building a new encoder per call (json.dumps only caches its default-settings encoder).
_PYTHON_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def _COMPACT_JSON(value: Any) -> str:
    """Compact JSON as Jackson writes it (control characters escaped in upper-case hex)."""
    return jackson_escapes(_PYTHON_COMPACT_JSON(value))


def _is_flat_json(value: Any) -> bool:
    """A JSON scalar, or a dict with string keys and scalar values (checked by exact type)."""
    if type(value) in _JSON_SCALARS:
        return True
    if type(value) is not dict:
        return False
    return all(type(k) is str and type(v) in _JSON_SCALARS for k, v in value.items())


class _NotJsonable(Exception):
    pass


def _to_json_ready(value: Any, path: str) -> Any:
    """Mirror Kafka's schemaless JsonConverter: validate types and reshape what JSON can't hold."""
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _NotJsonable(f"{value!r} at {path or 'the top level'} is not a finite number")
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _to_json_ready(v, f"{path}.{k}" if path else k) for k, v in value.items()}
        return [
            [_to_json_ready(k, f"{path}[key]"), _to_json_ready(v, f"{path}[{k!r}]")] for k, v in value.items()
        ]
    if isinstance(value, list | tuple):
        return [_to_json_ready(item, f"{path}[{i}]") for i, item in enumerate(value)]
    where = f"at {path}" if path else "at the top level"
    raise _NotJsonable(f"the value of type {type(value).__name__} {where} has no JSON form")
