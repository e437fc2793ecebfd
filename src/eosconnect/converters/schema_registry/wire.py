"""The Confluent wire format: what every Schema Registry serializer puts in front of the payload.

    byte 0      magic byte 0
    bytes 1-4   the schema id, a big-endian signed 32-bit integer
    (Protobuf)  the message indexes: a zig-zag varint count, then one zig-zag varint per index
                (the single index list [0], the first message of the file, is written as one 0 byte)
    the rest    the payload: Avro binary, JSON text or Protobuf binary

Java's converters, Confluent's Python serializers and ours all frame records this way, which is why a
topic written by one is readable by the others.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from eosconnect.api.errors import DataException

__all__ = ["MAGIC_BYTE", "frame", "read_message_indexes", "unframe", "write_message_indexes"]

MAGIC_BYTE = 0
_HEADER = struct.Struct(">bI")


def frame(schema_id: int, payload: bytes, message_indexes: bytes = b"") -> bytes:
    """Magic byte + schema id (+ Protobuf message indexes) + payload."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + message_indexes + payload


def unframe(data: bytes, topic: str, what: str) -> tuple[int, memoryview]:
    """The schema id and the rest of a framed record; a clear error for anything else (the classic
    "Unknown magic byte!": a topic written by another converter, or plain JSON/strings)."""
    if len(data) < _HEADER.size or data[0] != MAGIC_BYTE:
        first = f"0x{data[0]:02x}" if data else "nothing"
        raise DataException(
            f"Unknown magic byte! The record {what} from topic {topic!r} does not start with the Schema "
            f"Registry wire format (magic byte 0 and a 4-byte schema id; got {first}, {len(data)} bytes): "
            "it was not written by a Schema Registry serializer. Use the converter the topic was written "
            "with (JsonConverter, StringConverter, ByteArrayConverter ...) for this side of the record."
        )
    _, schema_id = _HEADER.unpack_from(data)
    return schema_id, memoryview(data)[_HEADER.size :]


def _zigzag_varint(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        bits = n & 0x7F
        n >>= 7
        if n:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def write_message_indexes(indexes: Sequence[int]) -> bytes:
    """The Protobuf message-index prefix; `[0]` (the file's first message) is the single byte 0."""
    if list(indexes) == [0]:
        return b"\x00"
    return _zigzag_varint(len(indexes)) + b"".join(_zigzag_varint(i) for i in indexes)


def _read_zigzag(data: memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data):
            raise DataException("truncated Protobuf message indexes in a Schema Registry record")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def read_message_indexes(data: memoryview) -> tuple[list[int], memoryview]:
    """The message indexes at the start of a Protobuf payload and the rest of it."""
    count, pos = _read_zigzag(data, 0)
    if count == 0:
        return [0], data[pos:]
    indexes = []
    for _ in range(count):
        index, pos = _read_zigzag(data, pos)
        indexes.append(index)
    return indexes, data[pos:]
