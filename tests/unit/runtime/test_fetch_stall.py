"""FetchStallWatch's decisions: when a sink task's consumer counts as stalled, what it says and where
it seeks. (A real librdkafka consumer cannot be made to stop fetching on demand; the stand-in answers
only the calls the watch makes: the high watermark, cached or the leader's, and seek.)"""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.records import TopicPartition
from eosconnect.runtime.fetch_stall import FetchStallWatch
from eosconnect.runtime.task import TaskLogAdapter

STALL_S = 0.2
PAUSE_S = 0.1
A, B = TopicPartition("t", 0), TopicPartition("t", 1)


class Watermarks:
    """`high`: the ends librdkafka cached from its fetches; `leader`: the ends the leaders answer
    (default: the cached ones; "silent": no answer, a timeout)."""

    def __init__(
        self, high: dict[TopicPartition, int], leader: dict[TopicPartition, int] | str | None = None
    ) -> None:
        self.high = high
        self.leader = leader
        self.asked: list[TopicPartition] = []
        self.sought: list[tuple[str, int, int]] = []

    def get_watermark_offsets(
        self, tp: KafkaTopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        ours = TopicPartition(tp.topic, tp.partition)
        if cached:
            return 0, self.high.get(ours, -1001)
        assert timeout is not None and timeout <= 2.0, "a leader is asked for a bounded time"
        self.asked.append(ours)
        if self.leader == "silent":
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Failed to query watermark offsets"))
        return 0, (self.high if self.leader is None else self.leader).get(ours, 0)

    def seek(self, tp: KafkaTopicPartition) -> None:
        self.sought.append((tp.topic, tp.partition, tp.offset))


@pytest.fixture
def watch() -> FetchStallWatch:
    log = TaskLogAdapter(logging.getLogger("test"), {"id": "sink-0"})
    return FetchStallWatch(log, stall_s=STALL_S, pause_s=PAUSE_S)


def test_a_partition_with_records_past_the_position_is_sought_there_after_the_stall(watch, caplog):
    consumer = Watermarks({A: 50, B: 11})
    asked: list[int] = []

    def positions() -> dict[TopicPartition, int]:
        asked.append(1)
        return {A: 20, B: 10}

    assert watch.check(consumer, STALL_S / 2, positions) == []  # not yet: the stall has not lasted
    assert asked == [], "positions are built only when the watch is due"
    with caplog.at_level(logging.WARNING):
        assert watch.check(consumer, STALL_S, positions) == [A]  # B: only a transaction marker past it
    assert consumer.sought == [("t", 0, 20)]
    assert "t-0 (position 20, end 50)" in caplog.text and "t-1" not in caplog.text
    assert "seeking them again" in caplog.text


def test_it_is_said_once_per_position_and_again_when_the_partition_moved(watch):
    consumer = Watermarks({A: 50})
    assert watch.check(consumer, STALL_S, lambda: {A: 20}) == [A]
    time.sleep(STALL_S / 4 + 0.01)
    assert watch.check(consumer, STALL_S * 2, lambda: {A: 20}) == []  # same position, same end
    consumer.high[A] = 60
    time.sleep(STALL_S / 4 + 0.01)
    assert watch.check(consumer, STALL_S * 3, lambda: {A: 20}) == [A]
    assert consumer.sought == [("t", 0, 20), ("t", 0, 20)]


def test_checks_come_at_most_every_quarter_of_the_stall(watch):
    consumer = Watermarks({A: 50})
    assert watch.check(consumer, STALL_S, lambda: {A: 20}) == [A]
    consumer.high[A] = 60
    assert watch.check(consumer, STALL_S, lambda: {A: 20}) == []  # too soon after the last check


def test_a_partition_with_nothing_past_the_position_is_left_alone(watch):
    consumer = Watermarks({}, leader={A: 1})  # never fetched, and only a marker at the leader
    assert watch.check(consumer, STALL_S, lambda: {A: 0}) == []
    assert consumer.asked == [A] and consumer.sought == []


def test_an_end_librdkafka_never_fetched_is_asked_of_the_leader_at_most_every_probe_interval(caplog):
    """After a rewind librdkafka may stop fetching a partition before it fetched there once: its
    cache then knows no end (-1001) or an old one, and only the partition's leader can tell."""
    log = TaskLogAdapter(logging.getLogger("test"), {"id": "sink-0"})
    watch = FetchStallWatch(log, stall_s=STALL_S, pause_s=STALL_S * 10, probe_every_s=STALL_S)
    consumer = Watermarks({B: 30}, leader={A: 40, B: 30})  # A: no end cached; B: an old end, caught up
    with caplog.at_level(logging.WARNING):
        assert watch.check(consumer, STALL_S, lambda: {A: 20, B: 30}) == [A]
    assert consumer.asked == [A, B] and consumer.sought == [("t", 0, 20)]
    assert "t-0 (position 20, end 40 by its leader: librdkafka knew no such end)" in caplog.text
    consumer.leader = {A: 40, B: 45}
    time.sleep(STALL_S / 4 + 0.01)  # the next check, before the probe interval: the cache only
    assert watch.check(consumer, STALL_S * 2, lambda: {A: 20, B: 30}) == []
    assert consumer.asked == [A, B]
    time.sleep(STALL_S * 3 / 4)
    assert watch.check(consumer, STALL_S * 3, lambda: {A: 20, B: 30}) == [B]
    assert consumer.asked == [A, B, A, B], "A is reported once per position, yet asked again"


def test_a_partition_whose_leader_does_not_answer_is_sought_all_the_same_once_per_position(caplog):
    """The chaos soak's own reader of a mirror topic got nothing for five minutes, its cache showing
    no end past its positions and every probe timing out, and the watch stayed silent. Unknown is
    not "nothing past it": the partition is sought at its position (skipping nothing) and the WARN
    names why, once per position."""
    log = TaskLogAdapter(logging.getLogger("test"), {"id": "sink-0"})
    watch = FetchStallWatch(log, stall_s=STALL_S, pause_s=STALL_S * 10, probe_every_s=STALL_S / 4)
    consumer = Watermarks({A: 20}, leader="silent")  # the cache: caught up when fetching stopped
    with caplog.at_level(logging.WARNING):
        assert watch.check(consumer, STALL_S, lambda: {A: 20}) == [A]
    assert consumer.sought == [("t", 0, 20)]
    assert "t-0 (position 20, end unknown: its leader did not answer (" in caplog.text
    time.sleep(STALL_S / 4 + 0.01)
    assert watch.check(consumer, STALL_S * 2, lambda: {A: 20}) == [], "said and sought once per position"
    time.sleep(STALL_S / 4 + 0.01)
    assert watch.check(consumer, STALL_S * 3, lambda: {A: 25}) == [A], "a new position is sought again"
    assert consumer.sought == [("t", 0, 20), ("t", 0, 25)]
    assert consumer.asked == [A, A, A], "the leader was asked each time"


def test_a_task_that_was_not_polling_counts_its_stall_from_when_it_polls_again(watch, caplog):
    """A SIGSTOPped zombie wakes with a long idle time: its consumer did not stop fetching, the
    process stopped. Only polling time counts, so nothing is said or sought until the task has polled
    for the whole stall after waking."""
    consumer = Watermarks({A: 50})
    assert watch.check(consumer, 0.0, lambda: {A: 20}) == []
    time.sleep(PAUSE_S * 1.5)  # no check meanwhile: the process was stopped
    woke = time.monotonic()
    with caplog.at_level(logging.WARNING):
        assert watch.check(consumer, STALL_S * 10, lambda: {A: 20}) == [], "the stop is no fetch stall"
        sought: list[TopicPartition] = []
        while not sought and time.monotonic() - woke < STALL_S * 3:
            time.sleep(PAUSE_S / 5)
            sought = watch.check(consumer, STALL_S * 10 + time.monotonic() - woke, lambda: {A: 20})
    assert sought == [A], "a stall after waking is still noticed"
    assert time.monotonic() - woke >= STALL_S
    assert caplog.text.count("seeking them again") == 1
