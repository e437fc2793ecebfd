"""`read_to_end` that rides out a partition leader moving, for the config and status stores.

Right after a topic is created, or while a broker restarts, listing offsets or fetching can fail
with NOT_LEADER_FOR_PARTITION and similar retriable errors. The stores apply records one by one
and remember their position, so a failed read can simply be retried from where it stopped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from eosconnect.storage.topic_reader import TopicRecord, read_to_end

log = logging.getLogger(__name__)

#: Errors that mean "ask again shortly", even where librdkafka does not flag them retriable.
TRANSIENT_CODES = frozenset(
    {
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TRANSPORT,
    }
)


def read_to_end_retrying(
    client_config: Mapping[str, Any],
    topic: str,
    positions: Callable[[], dict[int, int]],
    on_record: Callable[[TopicRecord], None],
    timeout: float,
) -> None:
    """`read_to_end(..., start_offsets=positions())`, retried on transient errors until `timeout`.

    `positions` is called before every attempt, so records applied by a failed attempt are not
    read twice.
    """
    deadline = time.monotonic() + timeout
    while True:
        remaining = max(1.0, deadline - time.monotonic())
        try:
            read_to_end(
                dict(client_config), topic, start_offsets=positions(), timeout=remaining, on_record=on_record
            )
            return
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            transient = isinstance(err, KafkaError) and (err.retriable() or err.code() in TRANSIENT_CODES)
            if not transient or time.monotonic() >= deadline:
                raise
            log.info("reading %r failed transiently (%s); retrying", topic, err)
            time.sleep(0.2)
