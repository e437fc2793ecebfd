"""Commit markers of the `eosconnect-kafka` sink in a compacted progress topic.

Each (micro-batch, Spark partition) is one Kafka transaction; the last record of that transaction
is a marker keyed `<query>/<partition>` whose value names the batch, exactly as KIP-618 puts a
source task's offsets into its data transaction. So a marker is visible to read_committed readers
if and only if the partition's rows are. Batches of one query commit in order, so the newest marker
of a key tells which batches of that Spark partition are done, and compaction keeps one per key.

A key always goes to the same progress partition (crc32 of the key), so a task reads one partition
of the progress topic, after `init_transactions()` has settled its predecessor's transaction.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import KafkaException

from eosconnect.api.errors import ConnectException
from eosconnect.storage.topic_reader import ReadTimeout, TopicRecord, read_to_end

__all__ = ["Marker", "ensure_progress_topic", "marker_key", "progress_partition", "read_last_marker"]

#: Settings of a created progress topic: compacted, with segments that roll often, so that the
#: newest marker per key is all a task has to read.
PROGRESS_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "60000",
    "min.cleanable.dirty.ratio": "0.1",
    "delete.retention.ms": "60000",
}


@dataclass(frozen=True)
class Marker:
    """One committed (query, batch, partition); `rows` and `checksum` let a replay check itself."""

    query: str
    batch: int
    partition: int
    rows: int
    checksum: int
    transactional_id: str
    attempt: int = 0

    def encode(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def decode(cls, raw: bytes) -> Marker:
        data = json.loads(raw)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def marker_key(query: str, partition: int) -> bytes:
    return f"{query}/{partition}".encode()


def progress_partition(key: bytes, partitions: int) -> int:
    return zlib.crc32(key) % partitions


def ensure_progress_topic(
    connection: dict[str, Any], topic: str, partitions: int, replication: int, wait_ms: int
) -> int:
    """Create the progress topic if missing; its partition count. Raises `ConnectException` naming
    `kafka.bootstrap.servers` when no broker answers within `wait_ms` (the writer is planned again
    for every micro-batch, so a short wait would fail a query on any broker restart)."""
    from confluent_kafka.admin import AdminClient

    from eosconnect.storage.topics import ensure_topic

    admin = AdminClient({**connection, "log_level": 0})
    servers = connection.get("bootstrap.servers")
    try:
        admin.list_topics(timeout=wait_ms / 1000)
    except KafkaException as exc:
        raise ConnectException(
            f"no Kafka broker answered at kafka.bootstrap.servers={servers!r} within {wait_ms} ms "
            f"(broker.wait.ms; {exc.args[0]}); check the address and that the brokers are running. "
            "Nothing was written."
        ) from exc
    config = {k: v for k, v in PROGRESS_TOPIC_CONFIG.items() if k != "cleanup.policy"}
    ensure_topic(
        admin,
        topic,
        partitions,
        replication,
        config,
        partitions_setting="progress.topic.partitions",
        replication_setting="progress.topic.replication.factor",
        require_compaction=True,
    )
    metadata = admin.list_topics(topic, timeout=15).topics[topic]
    return len(metadata.partitions)


def read_last_marker(
    connection: dict[str, Any], topic: str, partition: int, key: bytes, timeout: float = 60.0
) -> Marker | None:
    """The newest committed marker of `key` in one progress partition (read_committed), or None.

    Reads to the high watermark taken now (`topic_reader.read_to_end`): a transaction open at that
    moment (another partition's marker about to commit) holds the reader back until it ends, so
    nothing committed is missed.
    """
    last: Marker | None = None

    def keep(record: TopicRecord) -> None:
        nonlocal last
        if record.key == key and record.value is not None:
            last = Marker.decode(record.value)

    try:
        read_to_end(dict(connection), topic, partitions=[partition], timeout=timeout, on_record=keep)
    except ReadTimeout as exc:
        raise ConnectException(
            f"could not read the progress topic {topic!r} partition {partition} to its end "
            f"within {timeout:.0f}s with read_committed (a transaction stays open on it)"
        ) from exc
    return last
