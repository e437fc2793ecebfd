"""The offsets topic's record format, byte-compatible with Kafka Connect.

Kafka Connect writes source offsets with its JsonConverter (`schemas.enable=false`): the key is
`["<connector>",{<source partition>}]`, the value `{<source offset>}`, and a null value deletes
the offset (a tombstone). Compaction keeps the latest record *per key bytes*, so the same partition
must always serialise to the same bytes: fields are sorted and separators compact. Non-ASCII text
is written as UTF-8, not `\\u` escapes, as Jackson does.

Reading is lenient about order (records written by Java Connect or by hand may order fields
differently) and strict about shape: anything that is not a string connector name, a flat map of
primitives and an offset of primitives is rejected with `OffsetRecordError`, which readers log and
skip rather than crash on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from eosconnect.api.errors import DataException
from eosconnect.api.records import Primitive, SourceOffset, SourcePartition

__all__ = [
    "OffsetRecordError",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
]

_PRIMITIVES = (str, int, float, bool, type(None))


class OffsetRecordError(ValueError):
    """A record in an offsets topic is not a Kafka Connect offset record."""


def _dumps(obj: Any) -> bytes:
    try:
        text = json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False, allow_nan=False)
        return text.encode("utf-8")
    except (ValueError, UnicodeEncodeError) as exc:
        raise DataException(f"cannot store {obj!r} in the offsets topic as JSON: {exc}") from exc


def encode_key(connector: str, partition: Mapping[str, Primitive]) -> bytes:
    """`["<connector>",{<partition>}]`; raises `DataException` for non-string keys or non-primitives."""
    if not isinstance(connector, str) or not connector:
        raise DataException(f"connector name must be a non-empty str, got {connector!r}")
    return _dumps([connector, SourcePartition.of(partition).to_dict()])


def encode_value(offset: Mapping[str, Primitive] | None) -> bytes | None:
    """`{<offset>}`, or None (a tombstone) for None; raises `DataException` for invalid offsets."""
    if offset is None:
        return None
    return _dumps(SourceOffset.of(offset).to_dict())


def _loads(data: bytes, what: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise OffsetRecordError(f"{what} is not JSON ({exc}): {data[:200]!r}") from None


def _check_flat(obj: Any, what: str) -> dict[str, Primitive]:
    if not isinstance(obj, dict):
        raise OffsetRecordError(f"{what} must be a JSON object, got {type(obj).__name__}: {obj!r}")
    for key, value in obj.items():
        if not isinstance(value, _PRIMITIVES):
            raise OffsetRecordError(f"{what} field {key!r} is not a primitive: {value!r}")
        if isinstance(value, float) and not math.isfinite(value):
            raise OffsetRecordError(f"{what} field {key!r} is not finite: {value!r}")
    return obj


def decode_key(data: bytes | None) -> tuple[str, SourcePartition]:
    """The connector name and source partition of an offsets-topic key, in any field order."""
    if data is None:
        raise OffsetRecordError("key is null")
    obj = _loads(data, "key")
    if not (isinstance(obj, list) and len(obj) == 2 and isinstance(obj[0], str)):
        raise OffsetRecordError(f'key must be ["<connector>",{{<partition>}}], got {obj!r}')
    return obj[0], SourcePartition(_check_flat(obj[1], "source partition"))


def decode_value(data: bytes | None) -> SourceOffset | None:
    """The source offset of an offsets-topic value; None for a tombstone (or a JSON `null`)."""
    if data is None:
        return None
    obj = _loads(data, "value")
    if obj is None:
        return None
    return SourceOffset(_check_flat(obj, "source offset"))
