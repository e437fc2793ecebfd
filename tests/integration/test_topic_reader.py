"""`TopicReader`: one pair of clients reused across reads must read exactly what the one-shot
`read_to_end` reads: every committed record once, nothing aborted, and a read with nothing new must
end (at a commit marker too) instead of waiting out its timeout."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer

from eosconnect.storage.topic_reader import TopicReader

pytestmark = pytest.mark.kafka


def _transaction(producer: Producer, topic: str, partition: int, values: list[bytes], commit: bool) -> None:
    producer.begin_transaction()
    for value in values:
        producer.produce(topic, value=value, partition=partition)
    if commit:
        producer.commit_transaction(30)
    else:
        producer.abort_transaction(30)


def test_a_reused_reader_sees_each_committed_record_once_and_ends_at_commit_markers(
    bootstrap, create_topic, topic_name
):
    topic = create_topic(topic_name("data"), partitions=2)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name("txn")})
    producer.init_transactions(30)
    reader = TopicReader({"bootstrap.servers": bootstrap}, topic)
    positions: dict[int, int] = {}
    seen: list[tuple[int, bytes]] = []

    def read() -> None:
        for rec in reader.read_to_end(start_offsets=dict(positions), timeout=15):
            positions[rec.partition] = rec.offset + 1
            seen.append((rec.partition, rec.value))

    try:
        read()  # empty topic
        assert seen == []
        _transaction(producer, topic, 0, [b"a1", b"a2"], commit=True)
        read()
        read()  # nothing new: the log ends with a commit marker past our position
        _transaction(producer, topic, 0, [b"x"], commit=False)
        _transaction(producer, topic, 1, [b"b1"], commit=True)
        read()
        read()
        reader.close()  # a later read makes new clients
        _transaction(producer, topic, 0, [b"a3"], commit=True)
        read()
        read()
    finally:
        reader.close()
        producer.close()
    assert seen == [(0, b"a1"), (0, b"a2"), (1, b"b1"), (0, b"a3")]


def test_a_failed_read_leaves_the_reader_usable(bootstrap, create_topic, topic_name):
    topic = topic_name("later")
    reader = TopicReader({"bootstrap.servers": bootstrap}, topic)
    try:
        with pytest.raises(KafkaException, match=r"UNKNOWN_TOPIC|Unknown topic|not in metadata"):
            reader.read_to_end(timeout=5)
        create_topic(topic)
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(topic, value=b"v")
        assert producer.flush(30) == 0
        assert [r.value for r in reader.read_to_end(timeout=15)] == [b"v"]
    finally:
        reader.close()
