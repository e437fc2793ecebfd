"""The records that flow between connectors, transformations, converters and Kafka.

Source partitions and offsets end up as JSON keys and values in the offsets topic, where keys are
compared byte for byte. That is why they are restricted to flat maps of primitives and frozen on
construction: a nested or later-mutated offset would silently break "resume where you left off".
Freezing also makes partitions hashable, so they can key the `dict`s the runtime passes to
`SourceTask.update_offsets`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, ClassVar, NamedTuple, Protocol, Self, TypeAlias, TypeVar

from eosconnect.api.data.schema import Schema
from eosconnect.api.errors import DataException

__all__ = [
    "ConnectRecord",
    "Header",
    "HeaderValue",
    "Headers",
    "HeadersLike",
    "OffsetAndMetadata",
    "Primitive",
    "RecordMetadata",
    "SinkRecord",
    "SourceOffset",
    "SourcePartition",
    "SourceRecord",
    "TopicPartition",
]

Primitive: TypeAlias = str | int | float | bool | None
"""The only value types allowed in source partitions and offsets."""

HeaderValue: TypeAlias = bytes | str | None
"""Header values as the Kafka producer takes them (str is sent as UTF-8)."""

_PRIMITIVE_TYPES = (str, int, float, bool, type(None))
#: Exact types that need no further check (floats must be finite, subclasses are checked in full).
_FAST_PRIMITIVE_TYPES = frozenset({str, int, bool, type(None)})


class _Unset(Enum):
    UNSET = "UNSET"


_UNSET = _Unset.UNSET


class _FrozenPrimitiveMap(Mapping[str, Primitive]):
    """An immutable, hashable, validated `str -> primitive` map that compares equal to a plain dict."""

    __slots__ = ("_data", "_hash")
    _what: ClassVar[str] = "map"

    def __init__(self, data: Mapping[str, Primitive] | None = None, /, **fields: Primitive) -> None:
        if data is not None and type(data) is not dict and not isinstance(data, Mapping):
            raise DataException(
                f"{self._what} must be a dict of str to str/int/float/bool/None, got {type(data).__name__}: "
                f"{data!r}"
            )
        items = dict(data) if data else {}
        if fields:
            items.update(fields)
        for key, value in items.items():
            # Every record builds two of these: check the common exact types first, cheaply.
            if type(key) is not str or type(value) not in _FAST_PRIMITIVE_TYPES:
                self._check_item(key, value)
        self._data: dict[str, Primitive] = items
        self._hash: int | None = None

    @classmethod
    def _check_item(cls, key: Any, value: Any) -> None:
        if not isinstance(key, str):
            raise DataException(
                f"{cls._what} has a non-string key {key!r} ({type(key).__name__}); only string keys "
                "are allowed because partitions and offsets are stored as JSON objects in the "
                f"offsets topic. Use str({key!r}) as the key."
            )
        if not isinstance(value, _PRIMITIVE_TYPES):
            raise DataException(
                f"{cls._what} key {key!r} has a value of type {type(value).__name__} ({value!r}); "
                "only str, int, float, bool or None values are allowed in source partitions and "
                "offsets. Flatten it into primitives, e.g. one key per field or a string."
            )
        if isinstance(value, float) and not math.isfinite(value):
            raise DataException(
                f"{cls._what} key {key!r} is {value!r}, which JSON cannot store; use a finite number."
            )

    @classmethod
    def of(cls, data: Mapping[str, Primitive]) -> Self:
        """Return `data` itself if it already is one of these, else a validated frozen copy."""
        return data if type(data) is cls else cls(data)

    def __getitem__(self, key: str) -> Primitive:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._data.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if type(other) is type(self):  # the runtime's offset maps compare these per record
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._data!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self._data,))

    def to_dict(self) -> dict[str, Primitive]:
        """A mutable copy in the original key order (the order the offsets store serialises)."""
        return dict(self._data)


class SourcePartition(_FrozenPrimitiveMap):
    """Where in the source system a record came from, e.g. `{"table": "orders"}`.

    Build one explicitly only to add a partition in `SourceTask.update_offsets`; records convert
    plain dicts for you.
    """

    __slots__ = ()
    _what = "source_partition"


class SourceOffset(_FrozenPrimitiveMap):
    """How far into a source partition a record is, e.g. `{"id": 42}`."""

    __slots__ = ()
    _what = "source_offset"


class Header(NamedTuple):
    """One Kafka record header; a plain tuple, so it can go straight to the producer."""

    key: str
    value: HeaderValue


Headers: TypeAlias = tuple[tuple[str, HeaderValue], ...]
"""Record headers in order; records accept a dict, a list of pairs or None and store `Header` tuples."""

HeadersLike: TypeAlias = Headers | Mapping[str, HeaderValue] | Iterable[tuple[str, HeaderValue]] | None
"""What record constructors accept for headers: pairs, a dict, or None."""


_HEADER_VALUE_TYPES = frozenset((str, bytes, type(None)))


def _normalize_headers(headers: Any) -> Headers:
    if headers is None:
        return ()
    if type(headers) is tuple and all(
        type(h) is Header and type(h[0]) is str and type(h[1]) in _HEADER_VALUE_TYPES for h in headers
    ):
        return headers  # already `Header`s (a task handing the same headers to every record)
    pairs: Iterable[Any] = headers.items() if isinstance(headers, Mapping) else headers
    result = []
    for pair in pairs:
        try:
            key, value = pair
        except (TypeError, ValueError):
            raise DataException(f"headers must be (key, value) pairs or a dict, got {pair!r}") from None
        if not isinstance(key, str):
            raise DataException(f"header key {key!r} must be a str, got {type(key).__name__}")
        if isinstance(value, bytearray | memoryview):
            value = bytes(value)
        if not isinstance(value, bytes | str | type(None)):
            raise DataException(
                f"header {key!r} has a value of type {type(value).__name__}; header values must be bytes, "
                "str or None (encode other values yourself, e.g. str(value) or json.dumps(value))"
            )
        result.append(Header(key, value))
    return tuple(result)


def _check_topic(topic: Any) -> None:
    if not isinstance(topic, str) or not topic:
        raise DataException(f"topic must be a non-empty str, got {topic!r}")


def _check_optional_int(name: str, value: Any, minimum: int) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise DataException(f"{name} must be None or an int >= {minimum}, got {value!r}")


class ConnectRecord(Protocol):
    """What transformations and converters may rely on for both source and sink records."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int | None: ...
    @property
    def key(self) -> Any: ...
    @property
    def value(self) -> Any: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def headers(self) -> Headers: ...
    @property
    def key_schema(self) -> Schema | None: ...
    @property
    def value_schema(self) -> Schema | None: ...

    def new_record(
        self,
        *,
        topic: str = ...,
        partition: int | None = ...,
        key: Any = ...,
        value: Any = ...,
        timestamp: int | None = ...,
        headers: HeadersLike = ...,
        key_schema: Schema | None = ...,
        value_schema: Schema | None = ...,
    ) -> Self: ...


R = TypeVar("R", bound=ConnectRecord)


class _RecordMixin:
    """Helpers shared by both record types; they rely on the dataclass fields of the subclass."""

    __slots__ = ()
    headers: Headers

    def new_record(
        self,
        *,
        topic: str | _Unset = _UNSET,
        partition: int | _Unset | None = _UNSET,
        key: Any = _UNSET,
        value: Any = _UNSET,
        timestamp: int | _Unset | None = _UNSET,
        headers: HeadersLike | _Unset = _UNSET,
        key_schema: Schema | _Unset | None = _UNSET,
        value_schema: Schema | _Unset | None = _UNSET,
    ) -> Self:
        """A copy with some fields replaced; what transformations return instead of mutating.

        Everything not named (including the source partition/offset or Kafka offset) is kept, so
        the runtime can still commit the right position for a transformed record. A transformation
        that changes the shape of the key or value passes its new schema too (Kafka's `newRecord`).
        """
        # Transformations call this once per record and stage: copy the slots and check only what
        # changes, instead of dataclasses.replace re-running (and re-validating) the constructor.
        cls = type(self)
        clone = object.__new__(cls)
        setattr_ = object.__setattr__
        slots: tuple[str, ...] = cls.__slots__
        for name in slots:
            setattr_(clone, name, getattr(self, name))
        if topic is not _UNSET:
            if type(topic) is not str or not topic:
                _check_topic(topic)
            setattr_(clone, "topic", topic)
        if partition is not _UNSET:
            _check_optional_int("partition", partition, 0)
            setattr_(clone, "partition", partition)
        if timestamp is not _UNSET:
            _check_optional_int("timestamp", timestamp, 0)
            setattr_(clone, "timestamp", timestamp)
        if headers is not _UNSET:
            setattr_(clone, "headers", _normalize_headers(headers))
        for name, val in (
            ("key", key),
            ("value", value),
            ("key_schema", key_schema),
            ("value_schema", value_schema),
        ):
            if val is not _UNSET:
                setattr_(clone, name, val)
        return clone

    def last_header(self, key: str) -> HeaderValue:
        """The value of the last header named `key` (Kafka allows repeats), or None."""
        for name, value in reversed(self.headers):
            if name == key:
                return value
        return None


@dataclass(frozen=True, slots=True, init=False)
class SourceRecord(_RecordMixin):
    """A record produced by a `SourceTask.poll()`, with the source position it advances to.

    `source_offset=None` asks the runtime to delete the stored offset of `source_partition` (a
    tombstone in the offsets topic), as in Kafka Connect. `partition=None` lets the producer's
    partitioner choose; `timestamp` is milliseconds since the epoch (None: the producer's time).
    Plain dicts are accepted for the partition/offset and stored as validated frozen copies.
    """

    source_partition: SourcePartition
    source_offset: SourceOffset | None
    topic: str
    value: Any
    key: Any
    partition: int | None
    headers: Headers
    timestamp: int | None
    key_schema: Schema | None
    value_schema: Schema | None

    def __init__(
        self,
        source_partition: Mapping[str, Primitive],
        source_offset: Mapping[str, Primitive] | None,
        topic: str,
        value: Any,
        key: Any = None,
        partition: int | None = None,
        headers: HeadersLike = None,
        timestamp: int | None = None,
        key_schema: Schema | None = None,
        value_schema: Schema | None = None,
    ) -> None:
        # Connectors build one of these per record: skip the checks of fields left at None.
        if type(topic) is not str or not topic:
            _check_topic(topic)
        if partition is not None:
            _check_optional_int("partition", partition, 0)
        if timestamp is not None:
            _check_optional_int("timestamp", timestamp, 0)
        setattr_ = object.__setattr__
        setattr_(self, "source_partition", SourcePartition.of(source_partition))
        setattr_(self, "source_offset", None if source_offset is None else SourceOffset.of(source_offset))
        setattr_(self, "topic", topic)
        setattr_(self, "value", value)
        setattr_(self, "key", key)
        setattr_(self, "partition", partition)
        setattr_(self, "headers", () if headers is None else _normalize_headers(headers))
        setattr_(self, "timestamp", timestamp)
        setattr_(self, "key_schema", key_schema)
        setattr_(self, "value_schema", value_schema)


@dataclass(frozen=True, slots=True, init=False)
class SinkRecord(_RecordMixin):
    """A record consumed from Kafka for a `SinkTask`, with its position and leader epoch (KIP-320).

    `original_topic` and `original_partition` (Kafka's KIP-793) are where it was consumed from,
    whatever a transformation made of `topic` and `partition` (a RegexRouter routing it to a table,
    say): a sink that commits positions itself must commit them under the consumed partition."""

    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    timestamp: int | None
    headers: Headers
    leader_epoch: int | None
    key_schema: Schema | None
    value_schema: Schema | None
    original_topic: str
    original_partition: int

    def __init__(
        self,
        topic: str,
        partition: int,
        offset: int,
        key: Any,
        value: Any,
        timestamp: int | None = None,
        headers: HeadersLike = None,
        leader_epoch: int | None = None,
        key_schema: Schema | None = None,
        value_schema: Schema | None = None,
    ) -> None:
        # The checks' calls only where a value is not plainly valid: the sink loop builds one
        # record per consumed message.
        if topic.__class__ is not str or not topic:
            _check_topic(topic)
        if partition.__class__ is not int or partition < 0:
            _check_optional_int("partition", partition, 0)
        if offset.__class__ is not int or offset < 0:
            _check_optional_int("offset", offset, 0)
        if timestamp is not None and (timestamp.__class__ is not int or timestamp < 0):
            _check_optional_int("timestamp", timestamp, 0)
        if leader_epoch is not None and (leader_epoch.__class__ is not int or leader_epoch < 0):
            _check_optional_int("leader_epoch", leader_epoch, 0)
        setattr_ = object.__setattr__
        setattr_(self, "topic", topic)
        setattr_(self, "partition", partition)
        setattr_(self, "offset", offset)
        setattr_(self, "key", key)
        setattr_(self, "value", value)
        setattr_(self, "timestamp", timestamp)
        setattr_(self, "headers", () if headers is None else _normalize_headers(headers))
        setattr_(self, "leader_epoch", leader_epoch)
        setattr_(self, "key_schema", key_schema)
        setattr_(self, "value_schema", value_schema)
        setattr_(self, "original_topic", topic)
        setattr_(self, "original_partition", partition)

    @property
    def kafka_partition(self) -> int:
        """Kafka Connect's name for `partition` (`SinkRecord.kafkaPartition()`)."""
        return self.partition

    @property
    def kafka_offset(self) -> int:
        """Kafka Connect's name for `offset` (`SinkRecord.kafkaOffset()`)."""
        return self.offset

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def original_topic_partition(self) -> TopicPartition:
        """The partition it was consumed from (what its offset is a position in)."""
        return TopicPartition(self.original_topic, self.original_partition)


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where Kafka stored a source record; handed to `SourceTask.commit_record`."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    """A Kafka topic partition; our own type so connector code does not depend on a client library."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


def known_or_none(value: int | None) -> int | None:
    """An offset or leader epoch, with Kafka's "unknown" (-1, or any negative value) as None."""
    return value if value is not None and value >= 0 else None


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """A consumer position for a sink partition: the next offset to read, plus its leader epoch."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None
