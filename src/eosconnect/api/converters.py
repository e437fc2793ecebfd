"""Converters: record keys and values (with their schemas) <-> the bytes stored in Kafka.

The built-ins write exactly what Kafka Connect's converters write (JSON with or without the
schema envelope, UTF-8 strings, raw bytes, big-endian numbers), so topics filled by eosconnect read
the same in kcat, console consumers and Java Connect sinks, and the other way round.
`converter_from_config` maps the usual `key.converter`/`value.converter` settings (Kafka class
names, short names or Python paths) to a configured instance.

A converter writes a value with its schema (`from_connect_data(topic, schema, value)`) and reads
bytes back into a `SchemaAndValue` (`to_connect_data`), as Kafka's `Converter` interface does.
`from_connect`/`to_connect` are the schemaless forms that older converters implement; the base
class maps one pair onto the other, so a converter written for either keeps working.
"""

from __future__ import annotations

import base64
import decimal
import json
import math
import struct as _binary
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data.json_format import (
    JsonCodec,
    JsonCodecConfig,
    jackson_escapes,
    java_double_text,
    java_float_text,
)
from eosconnect.api.data.schema import (
    OPTIONAL_BOOLEAN_SCHEMA,
    OPTIONAL_BYTES_SCHEMA,
    OPTIONAL_FLOAT32_SCHEMA,
    OPTIONAL_FLOAT64_SCHEMA,
    OPTIONAL_INT16_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    Schema,
    SchemaAndValue,
    Type,
)
from eosconnect.api.data.struct import Struct
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.plugins import import_class
from eosconnect.api.validators import Range, ValidString

__all__ = [
    "CONVERTER_ALIASES",
    "BooleanConverter",
    "ByteArrayConverter",
    "Converter",
    "DoubleConverter",
    "FloatConverter",
    "IntegerConverter",
    "JsonConverter",
    "LongConverter",
    "ShortConverter",
    "StringConverter",
    "converter_from_config",
    "resolve_converter_class",
]


class Converter(ABC):
    """Turns record keys or values into bytes for Kafka and back.

    One instance serves either keys or values (`is_key`), as in Kafka Connect, because the two
    are configured separately (`key.converter.*` vs `value.converter.*`).
    """

    def __init__(self) -> None:
        self.is_key = False
        self.config: dict[str, Any] = self.config_def().parse({})

    def config_def(self) -> ConfigDef:
        """The converter's own settings (without the `value.converter.` prefix)."""
        return ConfigDef()

    def configure(self, config: Mapping[str, Any], is_key: bool) -> None:
        """Apply settings (prefix already stripped). The default validates them against
        `config_def()`; override and call `super().configure` to keep that."""
        self.is_key = is_key
        self.config = self.config_def().parse(config, prefix=self._prefix())

    def preflight(self) -> dict[str, list[str]]:
        """Checks of a configured converter that need the world outside the config (a registry
        that answers), run by connector validation: problems by setting name, {} if none."""
        return {}

    @abstractmethod
    def from_connect(self, topic: str, value: Any) -> bytes | None:
        """Serialise a key/value for `topic`; None stays None (a null key or a tombstone)."""

    @abstractmethod
    def to_connect(self, topic: str, data: bytes | None) -> Any:
        """Deserialise bytes read from `topic`."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        """Serialise a key/value and its schema (None: schemaless), Kafka's `fromConnectData`.
        The default ignores the schema and calls `from_connect`: override it to write schemas."""
        return self.from_connect(topic, value)

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        """Deserialise bytes into a value and its schema, Kafka's `toConnectData`. The default calls
        `to_connect` and reports no schema."""
        return SchemaAndValue(None, self.to_connect(topic, data))

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        """`from_connect_data` for a whole column of a `SourceBatch` (one schema for all), in order.
        Override where a column converts much faster than value by value (the built-ins do)."""
        if schema is None:
            return [self.from_connect(topic, value) for value in values]
        return [self.from_connect_data(topic, schema, value) for value in values]

    def _prefix(self) -> str:
        return "key.converter." if self.is_key else "value.converter."

    def _what(self) -> str:
        return "key" if self.is_key else "value"


def _as_bytes(data: Any) -> bytes:
    if isinstance(data, bytes):
        return data
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(type(data).__name__)


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
        self._codec = JsonCodec(
            JsonCodecConfig(
                decimal_numeric=str(cfg["decimal.format"]).upper() == "NUMERIC",
                replace_null_with_default=bool(cfg["replace.null.with.default"]),
                cache_size=int(cfg["schemas.cache.size"]),
            )
        )
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
                self._content_schema, self._content_reader = self._codec.schema_from_json(node)
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
                return self._codec.writer(schema)(value).encode()
            return (self._envelope_prefix(schema) + self._codec.writer(schema)(value) + "}").encode()
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
        write = self._codec.writer(schema)
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
            prefix = '{"schema":' + self._codec.schema_text(schema) + ',"payload":'
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
            raw = data if data.__class__ is bytes else _as_bytes(data)
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
                    cached = self._codec._to_connect_cache.get(schema_text)
                try:
                    if cached is None:
                        node = _DECIMAL_JSON(schema_text.decode())
                        cached = self._codec.schema_from_json(node, schema_text)
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
        schema, read = self._codec.schema_from_json(node, key)
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


class StringConverter(Converter):
    """Kafka's `org.apache.kafka.connect.storage.StringConverter`: text in `converter.encoding`
    (UTF-8 by default). Numbers, decimals and booleans are written as their text, like Java's
    `toString` (`1.0E7`); what it reads has the schema `OPTIONAL_STRING_SCHEMA`, as in Kafka."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "converter.encoding",
            ConfigType.STRING,
            "UTF-8",
            Importance.LOW,
            "The character encoding of the strings.",
            validator=_known_encoding,
        )

    @property
    def encoding(self) -> str:
        return str(self.config["converter.encoding"])

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        return self.from_connect_data(topic, None, value)

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, str):
            text = str(value)
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, float):
            single = schema is not None and schema.type is Type.FLOAT32
            text = _java_float_string(value, single)
        elif isinstance(value, int | decimal.Decimal):
            text = str(value)
        else:
            raise DataException(
                f"StringConverter cannot write a {type(value).__name__} record {self._what()} to topic "
                f"{topic!r}; it writes strings (and numbers/booleans as text). Use JsonConverter for "
                "dicts and lists or ByteArrayConverter for bytes."
            )
        try:
            return text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            raise DataException(
                f"StringConverter cannot encode a record for topic {topic!r}: {exc}"
            ) from None

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        # Strings are the common case: encode the column in one comprehension and fall back to the
        # value-by-value path (numbers, None, the error messages) when anything else is in it.
        encoding = self.encoding
        try:
            return [value.encode(encoding) for value in values]
        except (AttributeError, UnicodeEncodeError):
            return [self.from_connect_data(topic, schema, value) for value in values]

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_STRING_SCHEMA, self.to_connect(topic, data))

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return _as_bytes(data).decode(self.encoding)
        except TypeError as exc:
            raise DataException(f"StringConverter expects bytes from topic {topic!r}, got {exc}") from None
        except UnicodeDecodeError as exc:
            raise DataException(
                f"StringConverter could not decode the record {self._what()} from topic {topic!r} as "
                f"{self.encoding}: {exc}. For binary data use ByteArrayConverter."
            ) from None


def _java_float_string(value: float, single: bool) -> str:
    """`Double.toString`/`Float.toString` of a value (`1.0E7`, `NaN`, `Infinity`)."""
    if not math.isfinite(value):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    return java_float_text(value) if single else java_double_text(value)


def _known_encoding(name: str, value: Any) -> None:
    try:
        "".encode(value)
    except LookupError:
        raise ValueError(f"unknown encoding {value!r}. Set {name} to an encoding such as UTF-8.") from None


class ByteArrayConverter(Converter):
    """Kafka's `org.apache.kafka.connect.converters.ByteArrayConverter`: bytes pass through as-is;
    a schema, if given, must be BYTES, and what it reads has the schema `OPTIONAL_BYTES_SCHEMA`."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not Type.BYTES:
            raise DataException(
                f"Invalid schema type for ByteArrayConverter: {schema.type} (record {self._what()} for topic "
                f"{topic!r}). It writes BYTES values; use JsonConverter or a converter for {schema.type}."
            )
        return self.from_connect(topic, value)

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BYTES_SCHEMA, self.to_connect(topic, data))

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        try:
            return _as_bytes(value)
        except TypeError:
            raise DataException(
                f"ByteArrayConverter needs bytes, but the record {self._what()} for topic {topic!r} is a "
                f"{type(value).__name__}. Produce bytes in the connector or use JsonConverter or "
                "StringConverter."
            ) from None

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        # The identity for a column of bytes (what the mirrors copy): no new list, no call per value.
        if schema is not None:
            self.from_connect_data(topic, schema, None)  # checks the schema's type once
        for value in values:
            if value.__class__ is not bytes and value is not None:
                return super().from_connect_batch(topic, values)
        return values

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        try:
            return _as_bytes(data)
        except TypeError as exc:
            raise DataException(f"ByteArrayConverter expects bytes from topic {topic!r}, got {exc}") from None


class _NumberConverter(Converter):
    """Kafka's `NumberConverter`s: one number as its big-endian bytes, as Kafka's serializers write it."""

    type_name: str
    schema: Schema
    _format: str
    _range: tuple[int, int] | None = None

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise DataException(
                f"Failed to serialize to {self.type_name} (was {type(value).__name__}): the record "
                f"{self._what()} for topic {topic!r} must be a number"
            )
        if self._range is not None:
            low, high = self._range
            if not isinstance(value, int) or not low <= value <= high:
                raise DataException(
                    f"Failed to serialize to {self.type_name}: {value!r} (record {self._what()} for topic "
                    f"{topic!r}) is not an integer in {low}..{high}"
                )
        return _binary.pack(self._format, value)

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        raw = _as_bytes(data)
        size = _binary.calcsize(self._format)
        if len(raw) != size:
            raise DataException(
                f"Failed to deserialize {self.type_name}: Size of data received by "
                f"{self.type_name.capitalize()}Deserializer is not {size} (record {self._what()} from topic "
                f"{topic!r} has {len(raw)} bytes)"
            )
        return _binary.unpack(self._format, raw)[0]

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(self.schema, self.to_connect(topic, data))


class ShortConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.ShortConverter`: INT16 as 2 big-endian bytes."""

    type_name, schema, _format, _range = "short", OPTIONAL_INT16_SCHEMA, ">h", (-(2**15), 2**15 - 1)


class IntegerConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.IntegerConverter`: INT32 as 4 big-endian bytes."""

    type_name, schema, _format, _range = "integer", OPTIONAL_INT32_SCHEMA, ">i", (-(2**31), 2**31 - 1)


class LongConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.LongConverter`: INT64 as 8 big-endian bytes."""

    type_name, schema, _format, _range = "long", OPTIONAL_INT64_SCHEMA, ">q", (-(2**63), 2**63 - 1)


_FLOAT32_MAX = 3.4028234663852886e38


class FloatConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.FloatConverter`: FLOAT32 as 4 IEEE 754 bytes."""

    type_name, schema, _format = "float", OPTIONAL_FLOAT32_SCHEMA, ">f"

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if isinstance(value, float) and math.isfinite(value) and abs(value) > _FLOAT32_MAX:
            value = math.copysign(math.inf, value)  # what Java's narrowing gives; struct.pack refuses it
        return super().from_connect(topic, value)


class DoubleConverter(_NumberConverter):
    """Kafka's `org.apache.kafka.connect.converters.DoubleConverter`: FLOAT64 as 8 IEEE 754 bytes."""

    type_name, schema, _format = "double", OPTIONAL_FLOAT64_SCHEMA, ">d"


class BooleanConverter(Converter):
    """Kafka's `org.apache.kafka.connect.converters.BooleanConverter`: one byte, 1 for true, 0 for false."""

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if schema is not None and schema.type is not Type.BOOLEAN:
            raise DataException(f"Invalid schema type for BooleanConverter: {schema.type}")
        return self.from_connect(topic, value)

    def from_connect(self, topic: str, value: Any) -> bytes | None:
        if value is None:
            return None
        if value is True:
            return b"\x01"
        if value is False:
            return b"\x00"
        raise DataException(
            f"BooleanConverter is not compatible with objects of type {type(value).__name__} (record "
            f"{self._what()} for topic {topic!r})"
        )

    def to_connect(self, topic: str, data: bytes | None) -> Any:
        if data is None:
            return None
        raw = _as_bytes(data)
        if len(raw) != 1:
            raise DataException(
                "Failed to deserialize boolean: Size of data received by BooleanDeserializer is not 1"
            )
        if raw[0] > 1:
            raise DataException(
                f"Failed to deserialize boolean: Unexpected byte received by BooleanDeserializer: {raw[0]}"
            )
        return raw[0] == 1

    def to_connect_data(self, topic: str, data: bytes | None) -> SchemaAndValue:
        return SchemaAndValue(OPTIONAL_BOOLEAN_SCHEMA, self.to_connect(topic, data))


CONVERTER_ALIASES: dict[str, type[Converter]] = {
    "json": JsonConverter,
    "JsonConverter": JsonConverter,
    "org.apache.kafka.connect.json.JsonConverter": JsonConverter,
    "string": StringConverter,
    "StringConverter": StringConverter,
    "org.apache.kafka.connect.storage.StringConverter": StringConverter,
    "bytes": ByteArrayConverter,
    "bytearray": ByteArrayConverter,
    "ByteArrayConverter": ByteArrayConverter,
    "org.apache.kafka.connect.converters.ByteArrayConverter": ByteArrayConverter,
    **{
        alias: cls
        for cls in (
            BooleanConverter,
            DoubleConverter,
            FloatConverter,
            IntegerConverter,
            LongConverter,
            ShortConverter,
        )
        for alias in (cls.__name__, f"org.apache.kafka.connect.converters.{cls.__name__}")
    },
}
"""Names accepted for converters besides Python class paths (Kafka's Java names map to ours)."""

_REGISTRY_CONVERTERS = "eosconnect.api.schema_registry."
CONVERTER_PATHS: dict[str, str] = {
    alias: _REGISTRY_CONVERTERS + path
    for path, aliases in {
        "avro.AvroConverter": ("avro", "AvroConverter", "io.confluent.connect.avro.AvroConverter"),
        "json_schema.JsonSchemaConverter": (
            "jsonschema",
            "JsonSchemaConverter",
            "io.confluent.connect.json.JsonSchemaConverter",
        ),
        "protobuf.ProtobufConverter": (
            "protobuf",
            "ProtobufConverter",
            "io.confluent.connect.protobuf.ProtobufConverter",
        ),
    }.items()
    for alias in aliases
}
"""Aliases of converters that live in their own modules (the Schema Registry converters and their
libraries are only imported when a connector uses them), by the Python path they stand for."""

_CONVERTER_CHOICES = (
    "json, string or bytes (or Kafka's org.apache.kafka.connect.json.JsonConverter, "
    "org.apache.kafka.connect.storage.StringConverter, "
    "org.apache.kafka.connect.converters.ByteArrayConverter, or its Integer/Long/Short/Float/Double/"
    "BooleanConverter), avro, jsonschema or protobuf (Confluent's io.confluent.connect.avro.AvroConverter, "
    "io.confluent.connect.json.JsonSchemaConverter, io.confluent.connect.protobuf.ProtobufConverter), "
    "or a Python class path such as mypackage.converters.MyConverter"
)


def resolve_converter_class(
    name: str | type[Converter], *, setting: str = "value.converter"
) -> type[Converter]:
    """The converter class for a name; raises `ConfigException` naming `setting` if unknown."""
    if isinstance(name, type):
        cls: type = name
    else:
        value = name.strip()
        if value in CONVERTER_ALIASES:
            return CONVERTER_ALIASES[value]
        value = CONVERTER_PATHS.get(value, value)
        try:
            cls = import_class(value)
        except ImportError as exc:
            raise ConfigException(
                errors={
                    setting: [
                        f"cannot load converter {value!r}: {exc}. Set {setting} to {_CONVERTER_CHOICES}."
                    ]
                }
            ) from exc
    if not issubclass(cls, Converter):
        raise ConfigException(
            errors={
                setting: [
                    f"{cls.__module__}.{cls.__qualname__} is not a converter: it must subclass "
                    f"eosconnect.api.Converter. Set {setting} to {_CONVERTER_CHOICES}."
                ]
            }
        )
    return cls


def converter_from_config(
    config: Mapping[str, Any], *, is_key: bool, default: str | None = "json"
) -> Converter:
    """A configured key or value converter from `key.converter`/`value.converter` and its
    `key.converter.*`/`value.converter.*` sub-settings.

    Pass the effective config (worker settings overlaid with the connector's). `default` is used
    when the setting is absent; None makes the setting required.
    """
    setting = "key.converter" if is_key else "value.converter"
    name = config.get(setting) or default
    if not name:
        raise ConfigException(errors={setting: [f"is required. Set {setting} to {_CONVERTER_CHOICES}."]})
    cls = resolve_converter_class(name, setting=setting)
    prefix = setting + "."
    sub_config = {k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}
    converter = cls()
    converter.configure(sub_config, is_key)
    return converter
