"""Log truncation (KIP-320) as the sink runtime sees it through librdkafka: detecting it, reading it.

Why this exists: an unclean leader election can make a partition's new leader lack records a
sink already consumed and committed past; the new leader then writes *other* records at those
offsets. A consumer that simply resumes at its committed offset skips the new records (or, if the
log is now shorter, resets per `auto.offset.reset`), and nobody learns that anything was lost.
KIP-320 has consumers check a position against the leader's log (OffsetsForLeaderEpoch) using the
leader epoch stored with it. What librdkafka 2.16 actually does, observed on Kafka 4.3 brokers
(docs/truncation.md):

- A subscribed group member that starts from its committed offset is *not* validated, even though
  the commit carries the epoch; neither is a position given to `assign` inside the rebalance
  callback. So the runtime checks committed positions itself, on every assignment, with
  `validate_positions`: a short-lived consumer that never joins a group assigns the positions with
  their epochs, which librdkafka does validate, and reports what it finds.
- A *running* consumer (subscribed or assigned) is validated after a leader change: with
  `auto.offset.reset=error` it reports the truncation as an `_AUTO_OFFSET_RESET` error; with
  `earliest`/`latest` it silently seeks to the divergence offset. So the task's consumer runs with
  `error`, the runtime applies the user's `auto.offset.reset` itself (`OffsetReset`) and sends
  truncations to `log.truncation.policy`.

The error texts, as librdkafka 2.16 words them (checked against a real broker):

- truncation: "Partition log truncation detected at offset 15 (leader epoch 0): broker end offset
  is 10 (offset leader epoch 0). Reset to INVALID.: Local: Partition log truncation detected
  (broker 2)"; when the leader knows no epoch that old: "No epoch found less or equal to offset 15
  (leader epoch 7): broker end offset is -1 (offset leader epoch -1). Reset using configured
  policy.: Local: Partition log truncation detected (broker 2)"
- no committed offset: "no previously committed offset available: Local: No offset stored"
- out of range: "fetch failed due to requested offset not available on the broker: Broker: Offset
  out of range (broker 2)"
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.records import OffsetAndMetadata, TopicPartition, known_or_none
from eosconnect.runtime.config import LogTruncationPolicy
from eosconnect.runtime.metrics import SinkTaskMetrics

__all__ = ["LogTruncation", "OffsetReset", "TruncationRepair", "parse_truncation", "validate_positions"]

log = logging.getLogger(__name__)

#: How long `validate_positions` waits for the leaders' answers before the task fails.
VALIDATION_TIMEOUT_S = 60.0
#: Settings of the validating consumer that must not come from the task's consumer.
_VALIDATOR_SETTINGS: dict[str, Any] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "auto.offset.reset": "error",  # report a truncation instead of repairing it
    "enable.partition.eof": True,  # a validated position at the log end says so
    "max.partition.fetch.bytes": 1024,  # one record per partition is the answer, not a backlog
}
#: Task consumer settings the validator drops: it is no group member and commits nothing.
_VALIDATOR_DROPS = ("group.instance.id", "on_commit", "stats_cb")

_TRUNCATION_MARK = "log truncation detected"
_POSITION = r"offset (?P<offset>-?\d+)(?: \(leader epoch (?P<epoch>-?\d+)\))?"
_END = r"broker end offset is (?P<end>-?\d+)(?: \(offset leader epoch (?P<end_epoch>-?\d+)\))?"
_TRUNCATION_RE = re.compile(rf"(?:detected at|less or equal to) {_POSITION}: {_END}", re.IGNORECASE)
_BROKER_RE = re.compile(r"\(broker (?P<broker>-?\d+)\)\s*$")


@dataclass(frozen=True)
class LogTruncation:
    """A detected truncation of one partition: where the consumer was and where the logs diverge.

    `divergence_offset` is None when the leader could not say (no epoch that old on it). The
    records from `divergence_offset` up to `consumed_offset` were consumed from the old leader and
    are gone; whatever the new leader wrote at those offsets has not been consumed.
    """

    topic: str
    partition: int
    consumed_offset: int | None
    consumed_epoch: int | None
    divergence_offset: int | None
    divergence_epoch: int | None
    broker: int | None
    detail: str

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def where(self) -> str:
        return f"topic {self.topic!r} partition {self.partition}"

    @property
    def records_affected(self) -> int | None:
        """How many consumed records are gone (and as many offsets now hold unconsumed ones)."""
        if self.consumed_offset is None or self.divergence_offset is None:
            return None
        return max(self.consumed_offset - self.divergence_offset, 0)

    @property
    def divergence(self) -> OffsetAndMetadata | None:
        """The position to continue from: the divergence offset, with the epoch of the record before."""
        if self.divergence_offset is None:
            return None
        return OffsetAndMetadata(self.divergence_offset, leader_epoch=self.divergence_epoch)

    def affected_range(self) -> str:
        """The consumed records that are gone, for a log line: "5 records (offsets 10..14)"."""
        count = self.records_affected
        if count is None or self.divergence_offset is None:
            return "records"
        if count == 0:
            return "no records"
        if count == 1:
            return f"1 record (offset {self.divergence_offset})"
        return f"{count} records (offsets {self.divergence_offset}..{self.divergence_offset + count - 1})"

    def describe(self, position: str = "consumed") -> str:
        """One sentence an operator can act on: partition, `position` ("committed", "consumed")
        and divergence offsets."""
        at = "an unknown offset" if self.consumed_offset is None else f"offset {self.consumed_offset}"
        if self.consumed_epoch is not None:
            at += f" (leader epoch {self.consumed_epoch})"
        if self.divergence_offset is None:
            diverge = "the leader knows no leader epoch that old, so the divergence offset is unknown"
        else:
            diverge = f"the log diverges at offset {self.divergence_offset}"
            if self.divergence_epoch is not None:
                diverge += f" (end of leader epoch {self.divergence_epoch})"
        broker = "" if self.broker is None else f" on broker {self.broker}"
        return (
            f"log truncation detected on {self.where}: the {position} position is {at}, but {diverge}{broker}"
        )


def _int(value: str | None) -> int | None:
    return None if value is None else int(value)


def parse_truncation(text: str, topic: str, partition: int) -> LogTruncation | None:
    """The truncation an `_AUTO_OFFSET_RESET` error text reports, or None for any other reset."""
    if _TRUNCATION_MARK not in text.lower():
        return None
    match = _TRUNCATION_RE.search(text)
    broker = _BROKER_RE.search(text)
    if match is None:
        return LogTruncation(topic, partition, None, None, None, None, None, text)
    return LogTruncation(
        topic=topic,
        partition=partition,
        consumed_offset=known_or_none(_int(match["offset"])),
        consumed_epoch=known_or_none(_int(match["epoch"])),
        divergence_offset=known_or_none(_int(match["end"])),
        divergence_epoch=known_or_none(_int(match["end_epoch"])),
        broker=_int(broker["broker"]) if broker else None,
        detail=text,
    )


# ----------------------------------------------------------------------------------- validation
def validation_consumer_config(consumer_config: Mapping[str, Any]) -> dict[str, Any]:
    """The validating consumer's settings: the task consumer's connection and security settings
    (so it reaches the same cluster as the same principal), never committing, reporting truncations.

    It keeps the task's `group.id`: it never subscribes, so it joins no group and disturbs no
    member, and a cluster with ACLs has authorised that group already.
    """
    config = {k: v for k, v in consumer_config.items() if k not in _VALIDATOR_DROPS}
    config.setdefault("group.id", "eosconnect-truncation-check")
    config.update(_VALIDATOR_SETTINGS)
    return config


def validate_positions(
    consumer_config: Mapping[str, Any],
    positions: Mapping[TopicPartition, OffsetAndMetadata],
    *,
    timeout_s: float = VALIDATION_TIMEOUT_S,
    logger: logging.Logger | logging.LoggerAdapter[Any] = log,
) -> dict[TopicPartition, LogTruncation]:
    """Check each position against its partition leader's log (KIP-320); the truncated ones.

    A position is checked when it carries a leader epoch (the epoch of the record before it, as
    stored with committed offsets): a consumer that is no group member assigns them all at once and
    reads until each partition gives a record or its end (the position is valid: librdkafka fetches
    only after validating) or a truncation error (it is not). Positions without an epoch cannot be
    checked and are skipped. Other resets (offset out of range) are left to the task's consumer.
    Raises ConnectException if the leaders do not answer within `timeout_s`.
    """
    checkable = {
        tp: om
        for tp, om in positions.items()
        if om.offset >= 0 and known_or_none(om.leader_epoch) is not None
    }
    unchecked = sorted(str(tp) for tp in positions if tp not in checkable)
    if unchecked:
        logger.debug("not validating %s against the log: no leader epoch stored with the offset", unchecked)
    if not checkable:
        return {}
    started = time.monotonic()
    consumer = Consumer(validation_consumer_config(consumer_config))
    try:
        consumer.assign(
            [
                KafkaTopicPartition(tp.topic, tp.partition, om.offset, leader_epoch=om.leader_epoch)
                for tp, om in sorted(checkable.items())
            ]
        )
        truncations = _await_validation(consumer, set(checkable), timeout_s, logger)
    finally:
        consumer.close()
    logger.debug(
        "validated %d positions against the log in %.2fs: %d truncated",
        len(checkable),
        time.monotonic() - started,
        len(truncations),
    )
    return truncations


def _await_validation(
    consumer: Consumer,
    pending: set[TopicPartition],
    timeout_s: float,
    logger: logging.Logger | logging.LoggerAdapter[Any],
) -> dict[TopicPartition, LogTruncation]:
    found: dict[TopicPartition, LogTruncation] = {}
    last_error: dict[TopicPartition, str] = {}
    deadline = time.monotonic() + timeout_s
    while pending:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            waiting = ", ".join(f"{tp} ({last_error.get(tp, 'no answer')})" for tp in sorted(pending))
            raise ConnectException(
                f"could not check the consumed positions against the partition leaders' logs (KIP-320) "
                f"within {timeout_s:.0f}s: {waiting}. The partitions' leaders must be available; the "
                "task is restarted to try again."
            )
        for message in consumer.consume(num_messages=max(len(pending), 1), timeout=min(remaining, 0.5)):
            error = message.error()
            topic, partition = message.topic(), message.partition()
            if topic is None or partition is None or partition < 0:
                if error is not None and error.fatal():
                    raise KafkaException(error)
                logger.debug("validating positions: %s", error.str() if error else message)
                continue
            tp = TopicPartition(topic, partition)
            if tp not in pending:
                continue
            if error is None or error.code() == KafkaError._PARTITION_EOF:
                pending.discard(tp)  # librdkafka fetches only from a validated position
                consumer.pause([KafkaTopicPartition(tp.topic, tp.partition)])
            elif error.code() == KafkaError._AUTO_OFFSET_RESET:
                pending.discard(tp)
                truncation = parse_truncation(error.str(), tp.topic, tp.partition)
                if truncation is not None:
                    found[tp] = truncation
                else:  # e.g. out of range: the task's consumer applies auto.offset.reset to it
                    logger.debug("%s: %s; not a truncation", tp, error.str())
            elif error.fatal():
                raise KafkaException(error)
            else:
                last_error[tp] = error.str()
    return found


# ----------------------------------------------------------------------------------- repair
@dataclass(frozen=True)
class TruncationRepair:
    """What a sink task does about a truncation it found, and about a partition without a usable
    position: per `log.truncation.policy` and the user's `auto.offset.reset`, never silently.

    Kept apart from the task loop (runtime/sink_task.py), which only asks where each partition
    starts again and restarts it there.
    """

    task_id: str
    connector: str
    policy: LogTruncationPolicy
    offset_reset: OffsetReset
    metrics: SinkTaskMetrics
    log: logging.Logger | logging.LoggerAdapter[logging.Logger]

    def reset_offset(self, tp: TopicPartition, reason: str) -> int:
        """No usable position (none committed, or out of range): what `auto.offset.reset` says, as a
        librdkafka logical offset; with `error` the task fails naming the way out."""
        target = self.offset_reset.logical_offset
        if target is None:
            raise ConnectException(
                f"{self.task_id}: no valid position on topic {tp.topic!r} partition {tp.partition} "
                f"({reason}) and auto.offset.reset=error. Set consumer.override.auto.offset.reset to "
                f"earliest or latest, or set the connector's offsets (PUT /connectors/{self.connector}"
                f"/stop, then PATCH /connectors/{self.connector}/offsets)."
            )
        self.log.warning(
            "%s partition %s: %s; auto.offset.reset=%s", tp.topic, tp.partition, reason, self.offset_reset
        )
        return target

    def starts(
        self, truncations: list[LogTruncation], position: str
    ) -> dict[TopicPartition, KafkaTopicPartition]:
        """KIP-320: records this task consumed are gone from these partitions; never silently.

        Counts each, then per `log.truncation.policy` fails the task naming them all, or returns
        where each continues: the divergence offset (the new leader's records from there on are
        delivered), or `auto.offset.reset` when the leader could not say where the logs diverge.
        `position` says which position was checked ("committed" on assignment, "consumed" later).
        """
        for _ in truncations:
            self.metrics.record_log_truncation()
        if self.policy is LogTruncationPolicy.FAIL:
            for t in truncations:
                self.log.error("%s (log.truncation.policy=fail)", t.describe(position))
            raise ConnectException(self.failure(truncations, position))
        starts: dict[TopicPartition, KafkaTopicPartition] = {}
        for t in truncations:
            tp = t.topic_partition
            divergence = t.divergence
            if divergence is None:
                self.log.warning(
                    "%s; log.truncation.policy=continue-from-divergence cannot continue from it, applying "
                    "auto.offset.reset=%s",
                    t.describe(position),
                    self.offset_reset,
                )
                starts[tp] = KafkaTopicPartition(
                    tp.topic, tp.partition, self.reset_offset(tp, "log truncated, divergence offset unknown")
                )
                continue
            self.log.warning(
                "%s; continuing from offset %s (log.truncation.policy=continue-from-divergence): %s "
                "consumed from the old leader are gone from Kafka, and the new leader's records from offset "
                "%s on are delivered",
                t.describe(position),
                divergence.offset,
                t.affected_range(),
                divergence.offset,
            )
            epoch: dict[str, Any] = (
                {} if divergence.leader_epoch is None else {"leader_epoch": divergence.leader_epoch}
            )
            starts[tp] = KafkaTopicPartition(tp.topic, tp.partition, divergence.offset, **epoch)
        return starts

    def failure(self, truncations: list[LogTruncation], position: str) -> str:
        """The FAILED task's message: what happened, where, and how an operator gets going again."""
        name = self.connector
        entries = [
            {
                "partition": {"kafka_topic": t.topic, "kafka_partition": t.partition},
                "offset": {
                    "kafka_offset": t.divergence_offset if t.divergence_offset is not None else "<offset>"
                },
            }
            for t in truncations
        ]
        found = "; ".join(t.describe(position) for t in truncations)
        return (
            f"{self.task_id}: {found}. An unclean leader election lost records this connector had already "
            "consumed, and the records the new leader wrote at the same offsets would be skipped "
            f"(log.truncation.policy=fail). To go on: PUT /connectors/{name}/stop, then either "
            f"PATCH /connectors/{name}/offsets with {json.dumps({'offsets': entries})} to continue from the "
            f"divergence, or DELETE /connectors/{name}/offsets to start over per auto.offset.reset, then "
            f"PUT /connectors/{name}/resume; or set log.truncation.policy=continue-from-divergence. "
            f"librdkafka said: {' | '.join(t.detail for t in truncations)}"
        )


# ----------------------------------------------------------------------------------- resets
class OffsetReset(StrEnum):
    """The user's `auto.offset.reset`, which the runtime applies itself (librdkafka gets `error`)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    ERROR = "error"

    @classmethod
    def parse(cls, value: object, setting: str = "auto.offset.reset") -> OffsetReset:
        """librdkafka's spellings (smallest/beginning, largest/end) and Java's `none` are accepted."""
        text = str(value).strip().lower()
        for reset, names in _RESET_NAMES.items():
            if text in names:
                return reset
        allowed = sorted(n for names in _RESET_NAMES.values() for n in names)
        raise ConfigException.for_field(setting, f"must be one of {', '.join(allowed)}, got {value!r}")

    @property
    def logical_offset(self) -> int | None:
        """The librdkafka offset to seek to, or None when the task must fail instead."""
        return {OffsetReset.EARLIEST: OFFSET_BEGINNING, OffsetReset.LATEST: OFFSET_END}.get(self)


_RESET_NAMES = {
    OffsetReset.EARLIEST: ("earliest", "smallest", "beginning"),
    OffsetReset.LATEST: ("latest", "largest", "end"),
    OffsetReset.ERROR: ("error", "none"),
}
