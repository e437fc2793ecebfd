"""How offset records are folded into what a task sees (the broker-side reading is tested in integration)."""

from __future__ import annotations

from eosconnect.api.records import SourcePartition
from eosconnect.storage.offsets import ConnectorOffsetView, OffsetsTopic
from eosconnect.storage.topic_reader import TopicRecord


class FedTopic(OffsetsTopic):
    """An OffsetsTopic fed from a list instead of a broker."""

    def __init__(self, records: list[tuple[int, int, bytes | None, bytes | None, int]]) -> None:
        super().__init__({}, "offsets")
        self.records = records

    def refresh(self, timeout: float | None = None) -> None:
        for partition, offset, key, value, ts in self.records:
            self._apply(TopicRecord("offsets", partition, offset, key, value, ts, None))
        self.records = []


P = SourcePartition({"p": 1})


def test_latest_in_a_partition_wins_even_with_an_older_timestamp():
    topic = FedTopic([(0, 0, b'["c",{"p":1}]', b'{"o":1}', 200), (0, 1, b'["c",{"p":1}]', b'{"o":2}', 100)])
    topic.refresh()
    assert topic.connector_offsets("c") == {P: {"o": 2}}


def test_across_partitions_the_newer_timestamp_wins():
    # The same source partition under two key spellings, hashed to two topic partitions.
    topic = FedTopic(
        [(1, 0, b'["c",{"p":1}]', b'{"o":"new"}', 200), (0, 0, b'["c", {"p": 1}]', b'{"o":"old"}', 100)]
    )
    topic.refresh()
    assert topic.connector_offsets("c") == {P: {"o": "new"}}


def test_garbage_is_counted_and_skipped():
    topic = FedTopic(
        [(0, 0, b"junk", b"{}", 1), (0, 1, b'["c",{"p":1}]', b"junk", 2), (0, 2, b'["c",{"p":1}]', b"{}", 3)]
    )
    topic.refresh()
    assert topic.skipped == 2
    assert topic.connector_offsets("c") == {P: {}}


def test_separate_topic_wins_per_partition_including_deletions():
    glob = FedTopic(
        [
            (0, 0, b'["c",{"p":1}]', b'{"o":"global"}', 1),
            (0, 1, b'["c",{"p":2}]', b'{"o":"global"}', 1),
            (0, 2, b'["c",{"p":3}]', b'{"o":"global"}', 1),
            (0, 3, b'["other",{"p":4}]', b'{"o":"global"}', 1),
        ]
    )
    separate = FedTopic([(0, 0, b'["c",{"p":2}]', b'{"o":"separate"}', 1), (0, 1, b'["c",{"p":3}]', None, 1)])
    view = ConnectorOffsetView("c", glob, separate)
    assert view.offset({"p": 1}) == {"o": "global"}
    assert view.offset({"p": 2}) == {"o": "separate"}
    assert view.offset({"p": 3}) is None  # deleted in the separate topic: the global value is stale
    assert view.offset({"p": 4}) is None  # another connector's
    assert view.snapshot() == {
        SourcePartition({"p": 1}): {"o": "global"},
        SourcePartition({"p": 2}): {"o": "separate"},
    }


def test_returned_offsets_are_copies():
    view = ConnectorOffsetView("c", FedTopic([(0, 0, b'["c",{"p":1}]', b'{"o":1}', 1)]))
    got = view.offset({"p": 1})
    assert got is not None
    got["o"] = 99
    assert view.offset({"p": 1}) == {"o": 1}
