"""Writing offsets outside a task's transaction, waiting for Kafka's acknowledgement of each.

Inside a transaction the runtime sends `encode_offset_records` with the task's own producer; the
at-least-once path and the global-topic copier use `OffsetWriter`.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import Primitive, SourceOffset, SourcePartition
from eosconnect.storage.producing import produce_waiting
from eosconnect.storage.serialization import encode_key, encode_value

__all__ = ["OffsetWriteError", "OffsetWriter", "PartitionOffsets", "encode_offset_records", "write_offsets"]

log = logging.getLogger(__name__)

#: Offsets by source partition, as plain maps or as the frozen ones records carry (None: deleted).
PartitionOffsets = (
    Mapping[SourcePartition, SourceOffset | None]
    | Mapping[Mapping[str, Primitive], Mapping[str, Primitive] | None]
)


def encode_offset_records(connector: str, offsets: PartitionOffsets) -> list[tuple[bytes, bytes | None]]:
    """(key, value) pairs for the offsets topic; a None offset becomes a tombstone (value None).

    The runtime sends them with its own producer, e.g. inside the task's transaction. Raises
    `DataException` for partitions/offsets that are not flat maps of primitives.
    """
    return [(encode_key(connector, partition), encode_value(offset)) for partition, offset in offsets.items()]


class OffsetWriteError(ConnectException):
    """Some offsets were not acknowledged; `failed` maps each to the reason."""

    def __init__(self, message: str, failed: Mapping[SourcePartition, str], *, fatal: bool = False) -> None:
        super().__init__(message)
        self.failed = dict(failed)
        #: The producer is unusable (a fatal librdkafka error) and must be replaced.
        self.fatal = fatal


def non_transactional(config: Mapping[str, Any]) -> dict[str, Any]:
    """Producer settings for offsets written outside a task's transaction (`OffsetWriter`, the
    global copier): idempotent, never transactional, never auto-creating the offsets topic."""
    cfg = dict(config)
    if "transactional.id" in cfg:
        log.warning(
            "Ignoring transactional.id=%r: offsets outside a task's transaction are written "
            "by a non-transactional producer.",
            cfg.pop("transactional.id"),
        )
    cfg.setdefault("enable.idempotence", True)
    cfg.setdefault("partitioner", "murmur2_random")  # Java's choice of partition for a key
    # A missing offsets topic must be created compacted (ensure_topic), not by the broker's defaults.
    cfg.setdefault("allow.auto.create.topics", False)
    return cfg


class OffsetWriter:
    """Writes offsets outside any transaction and waits until Kafka acknowledged each of them.

    For the at-least-once path and the global-topic copier. Given a `Producer`, it borrows it
    (and leaves it open); given a config, it owns an idempotent, non-transactional producer.
    """

    def __init__(self, producer_or_config: Producer | Mapping[str, Any], topic: str) -> None:
        self.topic = topic
        if isinstance(producer_or_config, Producer):
            self.producer, self._owned = producer_or_config, False
        else:
            self.producer, self._owned = Producer(non_transactional(producer_or_config)), True

    def write(
        self,
        connector: str,
        offsets: PartitionOffsets,
        timeout: float | None = 30.0,
        *,
        cancel: threading.Event | None = None,
    ) -> None:
        """Produce the offsets (None: tombstone) and wait for every acknowledgement.

        Raises `OffsetWriteError` naming the partitions that failed or were not acknowledged within
        `timeout` (None: wait as long as the producer retries, i.e. `message.timeout.ms`) or
        before `cancel` was set.
        """
        records = [
            (SourcePartition.of(p), key, value)
            for (p, _), (key, value) in zip(
                offsets.items(), encode_offset_records(connector, offsets), strict=True
            )
        ]
        if not records:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        outstanding: set[SourcePartition] = set()
        failed: dict[SourcePartition, str] = {}
        fatal = False

        def delivered(partition: SourcePartition, err: KafkaError | None, _msg: Any) -> None:
            nonlocal fatal
            outstanding.discard(partition)
            if err is not None:
                failed[partition] = err.str()
                fatal = fatal or err.fatal()

        def expired() -> bool:
            return (deadline is not None and time.monotonic() > deadline) or (
                cancel is not None and cancel.is_set()
            )

        def wait_for_room() -> bool:
            """The producer's queue is full: serve deliveries and try again, unless out of time."""
            if expired():
                return False
            self.producer.poll(0.1)
            return True

        for partition, key, value in records:
            outstanding.add(partition)
            try:
                if not produce_waiting(
                    self.producer,
                    self.topic,
                    value,
                    key,
                    on_delivery=functools.partial(delivered, partition),
                    while_full=wait_for_room,
                ):
                    outstanding.discard(partition)
                    failed[partition] = "the producer's queue stayed full"
            except KafkaException as exc:
                outstanding.discard(partition)
                failed[partition] = str(exc.args[0])
                fatal = fatal or (isinstance(exc.args[0], KafkaError) and exc.args[0].fatal())
            self.producer.poll(0)
        while outstanding and not expired():
            self.producer.flush(0.2)
        for partition in outstanding:
            failed[partition] = "not acknowledged in time"
        if failed:
            first = next(iter(failed.values()))
            raise OffsetWriteError(
                f"{len(failed)} of {len(records)} offsets of connector {connector!r} were not written to "
                f"{self.topic!r}: {first}",
                failed,
                fatal=fatal,
            )

    def close(self, timeout: float = 5.0) -> None:
        """Flush and drop the producer if this writer owns it."""
        if self._owned:
            self.producer.flush(timeout)
            self.producer.purge()
            self.producer.close()


def write_offsets(
    producer_or_config: Producer | Mapping[str, Any],
    topic: str,
    connector: str,
    offsets: PartitionOffsets,
    timeout: float = 30.0,
) -> None:
    """Write `offsets` non-transactionally and wait for the acks (see `OffsetWriter.write`)."""
    writer = OffsetWriter(producer_or_config, topic)
    try:
        writer.write(connector, offsets, timeout)
    finally:
        writer.close()
