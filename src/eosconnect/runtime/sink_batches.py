"""A consumed batch into the records one `put` gets, and the positions that batch moves to.

Why an object of its own: it is the sink task's hot path and its error rules in one place - every
message through the converters and transformations (retried per `errors.retry.*`), a failure
either failing the task naming the record and the fix or, under `errors.tolerance=all`, skipped,
logged and dead-lettered - apart from the loop that polls, pauses and commits
(runtime/sink_task.py).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import Any

from eosconnect.api.errors import ConnectException, RetriableException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition, known_or_none
from eosconnect.runtime.dead_letter import DeadLetterQueue, conversion_stage
from eosconnect.runtime.metrics import SinkTaskMetrics
from eosconnect.runtime.pipeline import SinkRecordPipeline
from eosconnect.runtime.retry_tolerance import RetryWithTolerance
from eosconnect.runtime.sink_consumer import Offsets

__all__ = ["SinkBatchConverter"]


class SinkBatchConverter:
    """Converts consumed messages into `SinkRecord`s and, per partition, the position after the
    batch's last message; never loses a position: a skipped or filtered record's offset moves its
    partition's position like any other.

    `consumer_error` handles a message that carries a consumer error and returns the partition's
    new position when the consumer had to move it (a truncation continued from its divergence
    offset), which then wins over the batch's own position for that partition.
    """

    def __init__(
        self,
        task_id: str,
        pipeline: SinkRecordPipeline,
        retry: RetryWithTolerance,
        dead_letters: DeadLetterQueue,
        connector_settings: Mapping[str, Any],
        metrics: SinkTaskMetrics,
        consumer_error: Callable[[Any], OffsetAndMetadata | None],
        log: logging.LoggerAdapter[logging.Logger],
    ) -> None:
        self.task_id = task_id
        self.pipeline = pipeline
        self.retry = retry
        self.dead_letters = dead_letters
        self.connector_settings = connector_settings
        self.metrics = metrics
        self.consumer_error = consumer_error
        self.log = log

    def convert(self, messages: list[Any]) -> tuple[list[SinkRecord], Offsets]:
        """Records for `put` and, per partition, the position after the batch's last message.

        Counters and positions are gathered per batch: a lock and two objects per record would be
        paid on the hot path for values only the last message of each partition decides."""
        records: list[SinkRecord] = []
        last: dict[tuple[str, int], tuple[int, int | None]] = {}
        moved: Offsets = {}
        polled = filtered = 0
        for message in messages:
            if message.error() is not None:
                position = self.consumer_error(message)
                if position is not None:
                    moved[TopicPartition(message.topic(), message.partition())] = position
                    last.pop((message.topic(), message.partition()), None)
                continue
            polled += 1
            last[(message.topic(), message.partition())] = (message.offset(), message.leader_epoch())
            try:
                if self.retry.settings.retries:
                    record = self.retry.execute(functools.partial(self.pipeline.convert, message))
                else:  # the hot path: no closure and no extra call per record
                    record = self.pipeline.convert(message)
            except Exception as exc:
                self._skip_or_fail(message, exc)
                record = None
            if record is None:
                filtered += 1
                continue
            records.append(record)
        self.metrics.record_poll(polled)
        self.metrics.record_filtered(filtered)
        self.metrics.topics.update(topic for topic, _ in last)
        positions: Offsets = {
            TopicPartition(topic, partition): OffsetAndMetadata(offset + 1, leader_epoch=known_or_none(epoch))
            for (topic, partition), (offset, epoch) in last.items()
        }
        positions.update(moved)
        return records, positions

    def _skip_or_fail(self, message: Any, exc: Exception) -> None:
        """A message the converters or transformations rejected: fail the task naming it and the
        fix, or under `errors.tolerance=all` log, dead-letter and skip it."""
        where = f"topic {message.topic()!r} partition {message.partition()} offset {message.offset()}"
        if not self.retry.failed():
            retried = (
                f" (retried for errors.retry.timeout={self.retry.settings.retry_timeout_ms} ms)"
                if isinstance(exc, RetriableException) and self.retry.settings.retries
                else ""
            )
            raise ConnectException(
                f"{self.task_id}: the record at {where} could not be converted or transformed"
                f"{retried}: {exc}. Fix the data or the key.converter/value.converter/transforms "
                "settings, or set errors.tolerance=all to skip such records (they are then logged "
                "and lost)."
            ) from exc
        self.log.warning("skipping the record at %s (errors.tolerance=all): %s", where, exc)
        stage = conversion_stage(self.pipeline, message, self.connector_settings)
        self.dead_letters.failed(message, *stage, exc)
