"""storage/producing.py: a full librdkafka queue is waited out, once, for every writer.

A real producer with a one-message queue and no broker: the queued message times out after
`message.timeout.ms`, which frees the queue, as a delivery would."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from eosconnect.storage.producing import produce_rows, produce_waiting


def _producer(**extra: Any) -> Producer:
    return Producer(
        {
            "bootstrap.servers": "127.0.0.1:1",  # nothing listens: nothing is ever delivered
            "queue.buffering.max.messages": 1,
            "message.timeout.ms": 300,
            "log_level": 0,
            **extra,
        }
    )


def test_a_full_queue_is_waited_out() -> None:
    producer = _producer()
    reports: list[KafkaError | None] = []
    producer.produce("t", b"first", on_delivery=lambda err, _msg: reports.append(err))
    with pytest.raises(BufferError):
        producer.produce("t", b"no room")
    assert produce_waiting(producer, "t", b"second", b"k", on_delivery=lambda err, _m: reports.append(err))
    assert reports and reports[0] is not None and reports[0].code() == KafkaError._MSG_TIMED_OUT
    producer.flush(5)
    assert len(reports) == 2


def test_a_writer_with_a_deadline_gives_up_and_nothing_is_sent() -> None:
    producer = _producer(**{"message.timeout.ms": 60_000})
    reports: list[bytes] = []
    producer.produce("t", b"first", on_delivery=lambda _err, msg: reports.append(msg.value()))
    waits: list[int] = []

    def while_full() -> bool:
        waits.append(1)
        return len(waits) < 3

    report = lambda _err, msg: reports.append(msg.value())  # noqa: E731
    assert not produce_waiting(producer, "t", b"second", on_delivery=report, while_full=while_full)
    assert len(waits) == 3
    # Every queued record gets a report when purged: only the first was queued. (len(producer)
    # would also count the client's error events, which come and go with its connection attempts.)
    producer.purge()
    producer.poll(0)
    assert reports == [b"first"]


def test_rows_resume_where_the_queue_was_full() -> None:
    producer = _producer(**{"message.timeout.ms": 100})
    delivered: list[bytes] = []
    produce_rows(
        producer,
        "t",
        [b"a", b"b", b"c", b"d"],
        [b"1", b"2", b"3", b"4"],
        start=1,
        on_delivery=lambda _err, msg: delivered.append(msg.value()),
    )
    producer.flush(5)
    assert delivered == [b"b", b"c", b"d"]  # each once, in order, from `start`


def test_a_failing_row_is_named() -> None:
    producer = _producer(**{"message.max.bytes": 1000, "queue.buffering.max.messages": 10})
    values = [b"small", b"x" * 5000, b"small"]
    with pytest.raises(KafkaException):
        produce_rows(producer, "t", values)
    rows: list[int] = []

    def failed(exc: KafkaException, row: int) -> Exception | None:
        rows.append(row)
        return ValueError(f"row {row}: {exc.args[0].name()}")

    with pytest.raises(ValueError, match="row 1: MSG_SIZE_TOO_LARGE"):
        produce_rows(producer, "t", values, timestamps=[None, None, None], failed=failed)
    assert rows == [1]
    producer.purge()
