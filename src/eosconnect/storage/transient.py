"""Kafka errors that go away by themselves, and one way to ride them out.

A leader moving or dead (a broker restarting), a group coordinator loading or moving, a request
timing out: asking again shortly succeeds. Every Kafka call the runtime must not fail on such a
moment (reading internal topics to their end, listing end offsets, fetching committed offsets)
goes through `retry_transient`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException

__all__ = ["TRANSIENT_CODES", "is_transient", "retry_transient"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Errors that mean "ask again shortly", even where librdkafka does not flag them retriable. The
#: leader-epoch ones come back from ListOffsets while a restarted broker's leadership propagates;
#: the coordinator ones from offset fetches while __consumer_offsets loads or moves. _NOENT is
#: librdkafka's admin answer for partitions without a leader ("No leaders found"), as a single
#: broker's are for a moment after a freeze (its controller fences it, then unfences it).
#: OFFSET_NOT_AVAILABLE is ListOffsets' answer from a new leader whose high watermark has not caught
#: up yet (retriable in Kafka's Java client, not flagged so by librdkafka): a broker kill that moves
#: the offsets topic's leader while source tasks read it, right after renewing their producers,
#: would otherwise fail those tasks.
TRANSIENT_CODES = frozenset(
    {
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError._NOENT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.UNSTABLE_OFFSET_COMMIT,
    }
)


def is_transient(exc: KafkaException) -> bool:
    err = exc.args[0] if exc.args else None
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in TRANSIENT_CODES)


def retry_transient(
    call: Callable[[], T],
    *,
    timeout: float,
    doing: str,
    logger: logging.Logger | logging.LoggerAdapter[Any] = log,
    pause_s: float = 0.2,
) -> T:
    """`call()`, called again after `pause_s` while it raises a transient error, until `timeout`
    has passed; then (or on any other error) its exception propagates."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return call()
        except KafkaException as exc:
            if not is_transient(exc) or time.monotonic() >= deadline:
                raise
            logger.info("%s failed transiently (%s); retrying", doing, exc.args[0])
            time.sleep(pause_s)
