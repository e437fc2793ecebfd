"""Where a sink task's partitions start, and where a partition librdkafka stopped starts again.

Why an object of its own: the sink consumer runs with `auto.offset.reset=error` (see
runtime/truncation.py), so librdkafka stops fetching a partition whose position it cannot use - a
detected truncation, or no usable offset - and then refuses `seek` on it ("Erroneous state"): only a
new assignment starts it again. The same KIP-320 rules decide a partition's start on assignment
(committed positions checked against the leaders' logs) and after such a stop (the truncation or the
user's `auto.offset.reset`). This object owns those decisions and the two maps they need; the task
loop (runtime/sink_task.py) owns the consumer's polling and the pauses.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.records import OffsetAndMetadata, TopicPartition, known_or_none
from eosconnect.runtime.sink_consumer import (
    Offsets,
    committed_positions,
    incremental_assignment,
    kafka_offsets,
    kafka_tp,
)
from eosconnect.runtime.truncation import (
    LogTruncation,
    TruncationRepair,
    parse_truncation,
    validate_positions,
)

__all__ = ["PartitionRestarts"]


class PartitionRestarts:
    """The start positions of one sink task's partitions, and the restarts of stopped ones.

    `start_positions` says where newly assigned partitions start; `stopped` records where a
    partition librdkafka stopped starts again; `restart` starts those by a new assignment. A
    truncated partition continued from its divergence offset is reported to `moved`, so that the
    task's next commit moves the group back to it.
    """

    def __init__(
        self,
        consumer: Consumer,
        consumer_config: Mapping[str, Any],
        repair: TruncationRepair,
        *,
        static: bool,
        moved: Callable[[TopicPartition, OffsetAndMetadata], None],
        log: logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self.consumer = consumer
        #: The consumer's settings, which the positions' validating consumer shares (KIP-320).
        self.consumer_config = consumer_config
        self.repair = repair
        #: Partitions the connector assigned itself (`assign`, no group): restarted one by one.
        self.static = static
        self.moved = moved
        self.log = log
        #: Partitions librdkafka stopped, and where each starts again.
        self.pending: dict[TopicPartition, KafkaTopicPartition] = {}
        #: Where each assigned partition was (re)started, for an eager group's re-assignment.
        self.starts: dict[TopicPartition, KafkaTopicPartition] = {}

    def start_positions(
        self,
        partitions: list[TopicPartition],
        requested: Callable[[TopicPartition], OffsetAndMetadata | None],
    ) -> list[KafkaTopicPartition]:
        """Where each newly assigned partition starts, checked against the log (KIP-320).

        A rewind the task asked for in `open()` (`requested`) wins over the group's committed
        offset; a partition with neither starts per `auto.offset.reset`. Positions with a leader
        epoch (committed ones, and rewinds that came with one) are validated before the consumer
        fetches from them, since librdkafka does not validate a group member's start position; a
        truncated one goes to `log.truncation.policy` (fail, or start at the divergence offset).
        """
        known: Offsets = {}
        for tp in partitions:
            rewind = requested(tp)
            if rewind is not None:
                known[tp] = rewind
        unknown = [tp for tp in partitions if tp not in known]
        known.update(committed_positions(self.consumer, unknown, self.log))
        truncations = validate_positions(self.consumer_config, known, logger=self.log)
        moved = self._continue_after(list(truncations.values()), "committed") if truncations else {}
        starts = []
        for tp in partitions:
            if tp in moved:
                starts.append(moved[tp])
            elif tp in known:
                starts.append(kafka_offsets({tp: known[tp]})[0])
            else:  # nothing committed: auto.offset.reset (error: librdkafka reports it, see above)
                start = self.repair.offset_reset.logical_offset
                starts.append(
                    KafkaTopicPartition(tp.topic, tp.partition, OFFSET_INVALID if start is None else start)
                )
        self.starts.update({TopicPartition(p.topic, p.partition): p for p in starts})
        return starts

    def stopped(self, topic: str, partition: int, text: str) -> OffsetAndMetadata | None:
        """librdkafka stopped fetching a partition (its `_AUTO_OFFSET_RESET` error, worded `text`):
        a truncation goes to `log.truncation.policy`, anything else to the user's
        `auto.offset.reset`. The partition restarts where that says at the next `restart`; returns
        that position unless it is a logical one (then the next record gives it)."""
        tp = TopicPartition(topic, partition)
        truncation = parse_truncation(text, topic, partition)
        if truncation is None:
            start = KafkaTopicPartition(topic, partition, self.repair.reset_offset(tp, text))
        else:
            start = self._continue_after([truncation], "consumed")[tp]
        self.pending[tp] = start
        if start.offset < 0:
            return None
        return OffsetAndMetadata(start.offset, leader_epoch=known_or_none(start.leader_epoch))

    def restart(self) -> bool:
        """Start the stopped partitions again where `stopped` decided; whether any was restarted
        (the caller then applies its pauses again: a new assignment fetches).

        Statically assigned partitions and cooperative groups replace just those partitions
        (`incremental_*`); an eager group member may only `assign` its whole assignment, so the
        others are assigned at their positions (all records consumed so far were handled).
        """
        restarts, self.pending = self.pending, {}
        assigned = {TopicPartition(p.topic, p.partition) for p in self.consumer.assignment()}
        restarts = {tp: start for tp, start in restarts.items() if tp in assigned}
        if not restarts:
            return False
        if self.static or incremental_assignment(self.consumer_config):
            self.consumer.incremental_unassign([kafka_tp(tp) for tp in restarts])
            self.consumer.incremental_assign(list(restarts.values()))
        else:
            others = [kafka_tp(tp) for tp in sorted(assigned) if tp not in restarts]
            positions = [  # nothing consumed yet: where it was assigned
                p if p.offset >= 0 else self.starts.get(TopicPartition(p.topic, p.partition), p)
                for p in (self.consumer.position(others) if others else [])
            ]
            self.consumer.assign(list(restarts.values()) + positions)
        self.starts.update(restarts)
        self.log.info("restarted %s", {str(tp): start.offset for tp, start in restarts.items()})
        return True

    def forget(self, tp: TopicPartition) -> None:
        """The partition was closed: nothing of it restarts."""
        self.pending.pop(tp, None)
        self.starts.pop(tp, None)

    def _continue_after(
        self, truncations: list[LogTruncation], position: str
    ) -> dict[TopicPartition, KafkaTopicPartition]:
        """Where each truncated partition continues (`TruncationRepair.starts`, which fails the task
        under `log.truncation.policy=fail`), a divergence offset reported as a moved position."""
        starts = self.repair.starts(truncations, position)
        for t in truncations:
            if t.divergence is not None:
                self.moved(t.topic_partition, t.divergence)
        return starts
