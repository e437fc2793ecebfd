"""Handing records to a librdkafka producer whose local queue may be full.

`Producer.produce()` raises `BufferError` when the queue (`queue.buffering.max.messages` /
`.kbytes`) is full: nothing was sent, and the caller must serve delivery reports (`poll()`), which
frees room, and try the same record again. Every writer of the runtime does that the same way,
here: `produce_waiting` for one record, `produce_rows` for a run of columns in one tight loop
(no object, keyword dict or Python frame per record). They live in storage/ so that both the
storage writers and the task runners (runtime/, spark/, connectors/) can use them.

Other Kafka errors (`KafkaException`) are raised unchanged, for the caller to classify; a
`BufferError` never leaves these helpers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import KafkaException, Producer

__all__ = ["FULL_QUEUE_POLL_S", "produce_rows", "produce_waiting"]

#: How long one wait for room in a full queue serves delivery reports.
FULL_QUEUE_POLL_S = 0.05


def produce_waiting(
    producer: Producer,
    topic: str,
    value: Any,
    key: Any = None,
    partition: int = -1,
    *,
    on_delivery: Any = None,
    timestamp: int = 0,
    headers: Any = None,
    poll_s: float = FULL_QUEUE_POLL_S,
    while_full: Callable[[], bool] | None = None,
) -> bool:
    """Produce one record, waiting while the producer's queue is full; True once it was handed over.

    The defaults are the producer's own "none": partition -1 (the partitioner), timestamp 0 (now),
    no headers, no delivery callback. While the queue is full, `producer.poll(poll_s)` serves
    delivery reports before the next try; a writer with a deadline passes `while_full` instead,
    which does the waiting itself and returns False to give up (then nothing was sent and this
    returns False)."""
    while True:
        try:
            producer.produce(
                topic,
                value,
                key,
                partition,
                on_delivery=on_delivery,
                timestamp=timestamp,
                headers=headers,
            )
            return True
        except BufferError:
            if while_full is None:
                producer.poll(poll_s)
            elif not while_full():
                return False


def produce_rows(
    producer: Producer,
    topic: str,
    values: Sequence[Any],
    keys: Sequence[Any] | None = None,
    partition: int = -1,
    *,
    start: int = 0,
    stop: int | None = None,
    on_delivery: Any = None,
    timestamps: Sequence[int | None] | None = None,
    headers: Sequence[Any] | None = None,
    poll_s: float = FULL_QUEUE_POLL_S,
    failed: Callable[[KafkaException, int], Exception | None] | None = None,
) -> None:
    """Produce rows `start` to `stop` (exclusive; default: all) of columns, one record per row, to
    `topic` (and `partition`), resuming at the row a full queue stopped (after serving delivery
    reports). Rows without keys, timestamps and headers take positional `produce()` calls, the
    fastest confluent-kafka offers. A `KafkaException` is raised as it is, or replaced by what
    `failed(exc, row)` returns when that is not None (the row that failed, for the error text)."""
    produce = producer.produce
    count = len(values) if stop is None else stop
    i = start
    while i < count:
        try:
            if timestamps is None and headers is None:
                # Positional: topic, value, key, partition, on_delivery (then comes `callback`).
                if keys is None:
                    if on_delivery is None:
                        for i in range(i, count):  # noqa: B020 - resumes where a full queue stopped it
                            produce(topic, values[i], None, partition)
                    else:
                        for i in range(i, count):  # noqa: B020
                            produce(topic, values[i], None, partition, on_delivery)
                elif on_delivery is None:
                    for i in range(i, count):  # noqa: B020
                        produce(topic, values[i], keys[i], partition)
                else:
                    for i in range(i, count):  # noqa: B020
                        produce(topic, values[i], keys[i], partition, on_delivery)
            else:
                for i in range(i, count):  # noqa: B020
                    produce(
                        topic,
                        values[i],
                        None if keys is None else keys[i],
                        partition,
                        on_delivery=on_delivery,
                        timestamp=(timestamps[i] or 0) if timestamps is not None else 0,
                        headers=None if headers is None else headers[i],
                    )
            i = count
        except BufferError:
            producer.poll(poll_s)
        except KafkaException as exc:
            replacement = None if failed is None else failed(exc, i)
            if replacement is None:
                raise
            raise replacement from exc
