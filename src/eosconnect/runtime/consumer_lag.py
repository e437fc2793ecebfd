"""Kafka's `sink-record-lag-max` for one sink task: how far its consumer is behind.

The lag of a partition is its high watermark less the consumer's position (the next record the task
is handed), as the Java consumer's `records-lag` is. Both come from librdkafka's local state (the
watermarks its fetch responses carried), so measuring asks the broker nothing; it runs on the task's
thread, at most every `every_s`, because the consumer is the task thread's. Under `read_committed`
a partition whose last batch was a transaction reads a lag of at least 1 at its end: the commit
marker sits below the high watermark and is never delivered.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.records import TopicPartition

__all__ = ["ConsumerLag"]


class ConsumerLag:
    """The largest lag over the partitions it is given; None while no partition has a position."""

    def __init__(self, every_s: float = 1.0) -> None:
        self.every_s = every_s
        self.value: int | None = None
        self._next = 0.0

    def measure(self, consumer: Any, partitions: Iterable[TopicPartition]) -> int | None:
        now = time.monotonic()
        if now < self._next:
            return self.value
        self._next = now + self.every_s
        lags: list[int] = []
        positions = consumer.position([KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions])
        for position in positions:
            if position.offset < 0:  # nothing consumed yet: no position to measure from
                continue
            _low, high = consumer.get_watermark_offsets(position, cached=True)
            if high >= 0:
                lags.append(max(high - position.offset, 0))
        self.value = max(lags) if lags else None
        return self.value
