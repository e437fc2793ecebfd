"""MirrorMaker 2's record formats (org.apache.kafka.connect.mirror.OffsetSync, Checkpoint, Heartbeat).

They are Kafka protocol structs (`org.apache.kafka.common.protocol.types.Schema`): STRING is an
int16 length plus UTF-8 bytes, INT16/INT32/INT64 big-endian. Checkpoint and heartbeat values start
with an int16 version header (0); offset syncs have none. Keeping the bytes identical lets MM2's
own readers (RemoteClusterUtils.translateOffsets, MirrorCheckpointTask) read what we write.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = [
    "HEARTBEATS_TOPIC",
    "Checkpoint",
    "Heartbeat",
    "OffsetSync",
    "checkpoints_topic",
    "offset_syncs_topic",
]

HEARTBEATS_TOPIC = "heartbeats"
VERSION = 0


def checkpoints_topic(source_alias: str) -> str:
    """Where checkpoints of groups on `source_alias` land on the target (MM2's naming)."""
    return f"{source_alias}.checkpoints.internal"


def offset_syncs_topic(alias: str) -> str:
    """MM2's offset-syncs topic name. Our mirrors keep it on the target cluster (MM2's
    `offset-syncs.topic.location=target`), where MM2 names it after the *source* alias."""
    return f"mm2-offset-syncs.{alias}.internal"


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack(">h", len(data)) + data


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, fmt: str) -> int:
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return int(value)

    def string(self) -> str:
        size = self.take(">h")
        if size < 0:
            raise ValueError("null STRING where MM2 writes a value")
        text = self.data[self.pos : self.pos + size].decode("utf-8")
        self.pos += size
        return text


@dataclass(frozen=True, order=True)
class OffsetSync:
    """The record at `upstream_offset` of the source partition was copied to `downstream_offset`."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        k = _Reader(key)
        topic, partition = k.string(), k.take(">i")
        upstream, downstream = struct.unpack(">qq", value[:16])
        return cls(topic, partition, upstream, downstream)


@dataclass(frozen=True)
class Checkpoint:
    """Group `group`'s committed `upstream_offset` on the source partition is `downstream_offset`
    on the target copy; `topic` is the *target* topic name (MM2 renames it with the replication
    policy, so `RemoteClusterUtils.translateOffsets` returns offsets ready to commit there)."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">hqq", VERSION, self.upstream_offset, self.downstream_offset) + _string(
            self.metadata
        )

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        k = _Reader(key)
        group, topic, partition = k.string(), k.string(), k.take(">i")
        v = _Reader(value)
        version = v.take(">h")
        if version != VERSION:
            raise ValueError(f"checkpoint version {version} is not MM2's version 0")
        upstream, downstream = v.take(">q"), v.take(">q")
        return cls(group, topic, partition, upstream, downstream, v.string())


@dataclass(frozen=True)
class Heartbeat:
    """`source_alias` -> `target_alias` was alive at `timestamp` (ms)."""

    source_alias: str
    target_alias: str
    timestamp: int

    def key(self) -> bytes:
        return _string(self.source_alias) + _string(self.target_alias)

    def value(self) -> bytes:
        return struct.pack(">hq", VERSION, self.timestamp)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        k = _Reader(key)
        source, target = k.string(), k.string()
        v = _Reader(value)
        if v.take(">h") != VERSION:
            raise ValueError("heartbeat version is not MM2's version 0")
        return cls(source, target, v.take(">q"))
