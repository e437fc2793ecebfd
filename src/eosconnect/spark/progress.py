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
import time
import uuid
import zlib
from dataclasses import asdict, dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from eosconnect.api.errors import ConnectException
from eosconnect.storage.transient import retry_transient

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


def ensure_progress_topic(connection: dict[str, Any], topic: str, partitions: int, replication: int) -> int:
    """Create the progress topic if missing; its partition count. Raises `ConnectException` naming
    `kafka.bootstrap.servers` when no broker answers."""
    from confluent_kafka.admin import AdminClient

    from eosconnect.storage.topics import ensure_topic

    admin = AdminClient({**connection, "log_level": 0})
    servers = connection.get("bootstrap.servers")
    try:
        admin.list_topics(timeout=15)
    except KafkaException as exc:
        raise ConnectException(
            f"no Kafka broker answered at kafka.bootstrap.servers={servers!r} within 15s ({exc.args[0]}); "
            "check the address and that the brokers are running. Nothing was written."
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

    Reads to the high watermark taken now: a transaction open at that moment (another partition's
    marker about to commit) holds the reader back until it ends, so nothing committed is missed.
    """
    consumer = Consumer(
        {
            **connection,
            "group.id": f"eosconnect-progress-{uuid.uuid4()}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 20,
            "log_level": 0,
        }
    )
    try:
        tp = TopicPartition(topic, partition)
        _, high = retry_transient(
            lambda: consumer.get_watermark_offsets(tp, timeout=10, cached=False),
            timeout=timeout,
            doing=f"reading the end of {topic}[{partition}]",
        )
        if high <= 0:
            return None
        consumer.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        last: Marker | None = None
        deadline = time.monotonic() + timeout
        while True:
            if time.monotonic() > deadline:
                raise ConnectException(
                    f"could not read the progress topic {topic!r} partition {partition} to offset {high} "
                    f"within {timeout:.0f}s with read_committed (a transaction stays open on it)"
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    if msg.offset() >= high:
                        return last
                    continue
                raise KafkaException(err)
            if msg.key() == key and msg.value() is not None:
                last = Marker.decode(msg.value())
            if msg.offset() + 1 >= high:
                return last
    finally:
        consumer.close()
