"""A sink task's consumer: its settings, where its consumed positions are committed, and the
group's committed positions it starts from.

Committing is a strategy (`OffsetCommitter`) so that the runner's loop is the same whether the source
group's offsets are the truth (at least once) or only information beside a KIP-656 sink's own
transactions (docs/architecture.md).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.records import OffsetAndMetadata, TopicPartition, known_or_none
from eosconnect.runtime.config import SinkConnectorConfig
from eosconnect.runtime.truncation import OffsetReset
from eosconnect.storage.clients import ClientConfig, client_config
from eosconnect.storage.transient import retry_transient
from eosconnect.worker_config import WorkerConfig

__all__ = [
    "ConsumerGroupCommitter",
    "InformationalGroupCommitter",
    "OffsetCommitter",
    "Offsets",
    "committed_positions",
    "incremental_assignment",
    "kafka_offsets",
    "kafka_tp",
    "sink_consumer_settings",
]

#: How long fetching the group's committed offsets on assignment may take.
COMMITTED_TIMEOUT_S = 30.0

Offsets = dict[TopicPartition, OffsetAndMetadata]


class OffsetCommitter(Protocol):
    """How a sink runner makes consumed positions durable (the seam for KIP-656's transactions)."""

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit these positions (next offset to read per partition) or raise."""
        ...


@dataclass
class ConsumerGroupCommitter:
    """At-least-once: a synchronous commit of the consumer group's offsets on the source cluster."""

    consumer: Consumer

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        if offsets:
            self.consumer.commit(offsets=kafka_offsets(offsets), asynchronous=False)


@dataclass
class InformationalGroupCommitter:
    """KIP-656: a transactional sink's positions live on its target cluster, in its transactions.

    The source group's offsets are still written after each target commit, as KIP-656 asks: they
    let operators measure the lag on the source cluster, and restore a lost target group with few
    duplicates (a partition without target offsets starts from them). Being information only, a
    failure to write them is logged and never fails the task, and they are committed asynchronously
    (librdkafka sends them on the task's next polls; closing the consumer waits for them): a
    synchronous commit has no time limit, and can wait minutes for a source coordinator that keeps
    loading, the task away from its loop and a REST restart of it stuck in RESTARTING.
    """

    consumer: Consumer
    log: logging.LoggerAdapter

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=kafka_offsets(offsets), asynchronous=True)
        except KafkaException as exc:
            self.log.warning(
                "could not record the consumed positions in the source cluster's group (used only to "
                "show lag there; the target's offsets are the truth): %s",
                exc.args[0] if exc.args else exc,
            )


def kafka_offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[KafkaTopicPartition]:
    result = []
    for tp, om in sorted(offsets.items()):
        extra: dict[str, Any] = {"metadata": om.metadata} if om.metadata else {}
        if om.leader_epoch is not None:
            extra["leader_epoch"] = om.leader_epoch
        result.append(KafkaTopicPartition(tp.topic, tp.partition, om.offset, **extra))
    return result


def kafka_tp(tp: TopicPartition) -> KafkaTopicPartition:
    return KafkaTopicPartition(tp.topic, tp.partition)


def sink_consumer_settings(
    worker: WorkerConfig, connector: SinkConnectorConfig
) -> tuple[ClientConfig, OffsetReset]:
    """The task consumer's settings (the worker's `consumer.*`, the connector's
    `consumer.override.*`, then what the runtime needs, warning when that overrides the user) and
    the user's `auto.offset.reset` (default earliest, as Kafka Connect's sink consumers), which the
    runtime applies itself: librdkafka gets `error` so that a log truncation is reported instead of
    silently repaired (KIP-320)."""
    config = client_config("consumer", worker.originals, connector.originals)
    setting = config.origin.get("auto.offset.reset", "consumer.override.auto.offset.reset")
    reset = OffsetReset.parse(config.pop("auto.offset.reset", "earliest"), setting)
    config.origin.pop("auto.offset.reset", None)
    config["auto.offset.reset"] = "error"
    config.force(
        "group.id", connector.consumer_group, "a sink connector's tasks share the group connect-<name>"
    )
    config.force("enable.auto.commit", False, "the sink runtime commits offsets after pre_commit()")
    config.force("isolation.level", "read_committed", "sinks deliver only records of committed transactions")
    return config.validate(), reset


def incremental_assignment(consumer_config: Mapping[str, Any]) -> bool:
    """Whether a group member changes its assignment with `incremental_*` (the cooperative
    protocol or KIP-848's) rather than `assign` (the eager protocol, librdkafka's default)."""
    strategy = str(consumer_config.get("partition.assignment.strategy", "")).lower()
    protocol = str(consumer_config.get("group.protocol", "classic")).lower()
    return "cooperative" in strategy or protocol == "consumer"


def committed_positions(
    consumer: Consumer, partitions: list[TopicPartition], logger: logging.LoggerAdapter
) -> Offsets:
    """The group's committed offsets *with their leader epochs* (partitions with one only).

    Fetched here rather than by librdkafka because the epochs are needed for the check; a
    coordinator that is loading or moving is waited for, as librdkafka would."""
    if not partitions:
        return {}
    committed = retry_transient(
        lambda: consumer.committed([kafka_tp(tp) for tp in partitions], timeout=10),
        timeout=COMMITTED_TIMEOUT_S,
        doing="reading the committed offsets",
        logger=logger,
        pause_s=0.5,
    )
    positions: Offsets = {}
    for c in committed:
        if c.offset >= 0:
            positions[TopicPartition(c.topic, c.partition)] = OffsetAndMetadata(
                c.offset, leader_epoch=known_or_none(c.leader_epoch)
            )
    logger.debug("committed positions %s", {str(tp): om for tp, om in positions.items()})
    return positions
