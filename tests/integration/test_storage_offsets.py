"""Offsets topics on a real broker: combined view, tombstones, garbage, transactions."""

from __future__ import annotations

import logging
import threading
import time

import pytest
from confluent_kafka import KafkaException, Producer

from eosconnect.api.offsets import OffsetStorageReader
from eosconnect.api.records import SourcePartition
from eosconnect.storage.offsets import (
    ConnectorOffsetView,
    OffsetsTopic,
    encode_offset_records,
    offsets_topic_for,
    read_offsets,
    write_offsets,
)
from eosconnect.storage.topic_reader import ReadTimeout
from eosconnect.storage.topics import ensure_topic

pytestmark = pytest.mark.kafka

CONNECTOR = "reddit-source"


def _sub(name: str) -> SourcePartition:
    return SourcePartition({"subreddit": name})


def _ts(value: str) -> dict[str, str]:
    return {"timestamp": value}


@pytest.fixture
def worker(bootstrap, topic_name, admin):
    global_topic = topic_name("global-offsets")
    ensure_topic(admin, global_topic, partitions=3, replication_factor=1)
    return {
        "bootstrap.servers": bootstrap,
        "group.id": topic_name("group"),
        "offset.storage.topic": global_topic,
        "exactly.once.source.support": "enabled",
    }


def _txn_producer(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "log_level": 0})
    producer.init_transactions(30)
    return producer


def test_combined_view_reproduces_the_worked_example(bootstrap, admin, worker, topic_name):
    separate_topic = topic_name("reddit-offsets")
    placement = offsets_topic_for(CONNECTOR, {"offsets.storage.topic": separate_topic}, worker)
    assert placement.separate and placement.explicit
    ensure_topic(placement.admin(), placement.topic, partitions=2, replication_factor=1)
    glob = worker["offset.storage.topic"]
    write_offsets(
        {"bootstrap.servers": bootstrap},
        glob,
        CONNECTOR,
        {_sub("apachekafka"): _ts("4761"), _sub("CatsStandingUp"): _ts("2112")},
    )
    # another connector's offsets in the global topic are not this connector's business
    write_offsets({"bootstrap.servers": bootstrap}, glob, "other", {_sub("grilledcheese"): _ts("1")})
    write_offsets(
        {"bootstrap.servers": bootstrap},
        separate_topic,
        CONNECTOR,
        {_sub("CatsStandingUp"): _ts("2169"), _sub("grilledcheese"): _ts("489")},
    )

    view = ConnectorOffsetView.create(CONNECTOR, placement, worker)
    assert isinstance(view, OffsetStorageReader)
    view.refresh()

    assert view.offset({"subreddit": "apachekafka"}) == {"timestamp": "4761"}  # from the global topic
    assert view.offset({"subreddit": "CatsStandingUp"}) == {"timestamp": "2169"}  # separate wins
    assert view.offset({"subreddit": "grilledcheese"}) == {"timestamp": "489"}  # separate only
    assert view.offset({"subreddit": "nope"}) is None
    assert view.offsets([{"subreddit": "apachekafka"}, {"subreddit": "nope"}]) == {
        _sub("apachekafka"): {"timestamp": "4761"},
        _sub("nope"): None,
    }
    assert view.snapshot() == {
        _sub("apachekafka"): _ts("4761"),
        _sub("CatsStandingUp"): _ts("2169"),
        _sub("grilledcheese"): _ts("489"),
    }


def test_view_of_a_connector_without_separate_topic_reads_the_global_topic(bootstrap, worker):
    placement = offsets_topic_for(CONNECTOR, {}, worker)
    assert not placement.separate
    write_offsets(placement.global_producer_config, placement.topic, CONNECTOR, {_sub("a"): _ts("1")})
    view = ConnectorOffsetView.create(CONNECTOR, placement)
    assert view.offset({"subreddit": "a"}) == {"timestamp": "1"}  # first use reads without refresh()
    write_offsets(placement.global_producer_config, placement.topic, CONNECTOR, {_sub("a"): _ts("2")})
    assert view.offset({"subreddit": "a"}) == {"timestamp": "1"}  # a snapshot until refreshed
    view.refresh()
    assert view.offset({"subreddit": "a"}) == {"timestamp": "2"}


def test_latest_wins_and_tombstones_delete(bootstrap, worker):
    topic = worker["offset.storage.topic"]
    cfg = {"bootstrap.servers": bootstrap}
    write_offsets(cfg, topic, CONNECTOR, {_sub("a"): _ts("1"), _sub("b"): _ts("1")})
    write_offsets(cfg, topic, CONNECTOR, {_sub("a"): _ts("2")})
    write_offsets(cfg, topic, CONNECTOR, {_sub("b"): None})

    assert read_offsets(cfg, topic) == {CONNECTOR: {_sub("a"): _ts("2")}}
    assert read_offsets(cfg, topic, include_deleted=True) == {
        CONNECTOR: {_sub("a"): _ts("2"), _sub("b"): None}
    }
    view = ConnectorOffsetView(CONNECTOR, OffsetsTopic(cfg, topic))
    assert view.offset({"subreddit": "b"}) is None


def test_a_tombstone_in_the_separate_topic_hides_the_global_offset(bootstrap, worker, topic_name, admin):
    separate_topic = topic_name("separate")
    ensure_topic(admin, separate_topic, 1, 1)
    cfg = {"bootstrap.servers": bootstrap}
    write_offsets(cfg, worker["offset.storage.topic"], CONNECTOR, {_sub("a"): _ts("1"), _sub("b"): _ts("1")})
    write_offsets(cfg, separate_topic, CONNECTOR, {_sub("a"): None})
    view = ConnectorOffsetView(
        CONNECTOR, OffsetsTopic(cfg, worker["offset.storage.topic"]), OffsetsTopic(cfg, separate_topic)
    )
    assert view.offset({"subreddit": "a"}) is None
    assert view.offset({"subreddit": "b"}) == {"timestamp": "1"}


def test_garbage_is_skipped_with_a_warning(bootstrap, create_topic, topic_name, caplog):
    topic = create_topic(topic_name("offsets"))
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    garbage = [
        (b"not json", b'{"o":1}'),
        (None, b'{"o":1}'),
        (b'{"conn":{"p":1}}', b'{"o":1}'),
        (b'["conn",{"p":{"nested":1}}]', b'{"o":1}'),
        (b'["conn",{"p":1}]', b"[1,2,3]"),
        (b'["conn",{"p":1}]', b'{"o":{"deep":true}}'),
    ]
    producer.produce(topic, key=b'["conn", {"p": 1}]', value=b'{"o": 1}')  # valid, other spacing
    for key, value in garbage:
        producer.produce(topic, key=key, value=value)
    producer.produce(topic, key=b'["conn",{"p":2}]', value=b'{"o":2}')
    assert producer.flush(30) == 0

    reader = OffsetsTopic({"bootstrap.servers": bootstrap}, topic)
    with caplog.at_level(logging.WARNING, logger="eosconnect.storage.offsets"):
        reader.refresh()
    assert reader.connector_offsets("conn") == {
        SourcePartition({"p": 1}): {"o": 1},
        SourcePartition({"p": 2}): {"o": 2},
    }
    assert reader.skipped == len(garbage)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(garbage)
    for offset, message in enumerate(warnings, start=1):
        assert f"{topic} (partition 0, offset {offset})" in message


def test_aborted_transactions_are_invisible_and_committed_ones_visible(bootstrap, worker, topic_name):
    topic = worker["offset.storage.topic"]
    producer = _txn_producer(bootstrap, topic_name("txn"))
    producer.begin_transaction()
    for key, value in encode_offset_records(
        CONNECTOR, {_sub("a"): _ts("aborted"), _sub("b"): _ts("aborted")}
    ):
        producer.produce(topic, key=key, value=value)
    producer.abort_transaction(30)
    producer.begin_transaction()
    for key, value in encode_offset_records(CONNECTOR, {_sub("a"): _ts("committed")}):
        producer.produce(topic, key=key, value=value)
    producer.commit_transaction(30)
    producer.begin_transaction()
    for key, value in encode_offset_records(CONNECTOR, {_sub("a"): None}):
        producer.produce(topic, key=key, value=value)
    producer.abort_transaction(30)  # an aborted tombstone deletes nothing

    offsets = read_offsets({"bootstrap.servers": bootstrap}, topic, include_deleted=True)
    assert offsets == {CONNECTOR: {_sub("a"): _ts("committed")}}


def test_an_open_transaction_delays_refresh_until_it_is_fenced(bootstrap, worker, topic_name):
    topic = worker["offset.storage.topic"]
    cfg = {"bootstrap.servers": bootstrap}
    write_offsets(cfg, topic, CONNECTOR, {_sub("a"): _ts("before")})
    txn_id = topic_name("zombie")
    zombie = _txn_producer(bootstrap, txn_id)
    zombie.begin_transaction()
    for key, value in encode_offset_records(CONNECTOR, {_sub("a"): _ts("zombie")}):
        zombie.produce(topic, key=key, value=value)
    assert zombie.flush(30) == 0  # in the log, but the transaction stays open

    view = ConnectorOffsetView(CONNECTOR, OffsetsTopic(cfg, topic, timeout=120))
    with pytest.raises(ReadTimeout, match="transaction"):
        view.refresh(timeout=3)

    done = threading.Event()
    errors: list[BaseException] = []

    def refresh() -> None:
        try:
            view.refresh()
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=refresh, daemon=True)
    thread.start()
    assert not done.wait(3), "refresh() finished while a transaction was still open"

    started = time.monotonic()
    _txn_producer(bootstrap, txn_id).close()  # same transactional.id: fences the zombie, aborts its txn
    assert done.wait(60), "refresh() still blocked after the open transaction was fenced"
    assert not errors
    assert time.monotonic() - started < 60
    assert view.offset({"subreddit": "a"}) == {"timestamp": "before"}


def test_refresh_reads_only_what_is_new(bootstrap, worker):
    topic = worker["offset.storage.topic"]
    cfg = {"bootstrap.servers": bootstrap}
    reader = OffsetsTopic(cfg, topic)
    reader.refresh()
    assert reader.all_offsets() == {}
    write_offsets(cfg, topic, CONNECTOR, {_sub(str(i)): _ts(str(i)) for i in range(50)})
    reader.refresh()
    assert len(reader.connector_offsets(CONNECTOR)) == 50
    write_offsets(cfg, topic, CONNECTOR, {_sub("7"): _ts("new"), _sub("8"): None})
    reader.refresh()
    offsets = reader.connector_offsets(CONNECTOR)
    assert len(offsets) == 49 and offsets[_sub("7")] == _ts("new")


def test_reading_a_missing_topic_fails_without_creating_it(bootstrap, admin, topic_name):
    missing = topic_name("missing")
    with pytest.raises(KafkaException, match=r"UNKNOWN_TOPIC|Unknown topic|not in metadata"):
        read_offsets({"bootstrap.servers": bootstrap}, missing, timeout=10)
    time.sleep(1)
    assert missing not in admin.list_topics(timeout=10).topics


def test_views_in_one_process_share_a_reader_that_reads_only_what_is_new(
    bootstrap, worker, topic_name, admin
):
    """Source tasks of one slot host (and the worker's offsets API) read the same offsets topics:
    one reader per process (`shared_offsets_topic`), so a task starting after others reads only
    what was appended since, and sees exactly what a fresh full read sees."""
    separate_topic = topic_name("shared-offsets")
    placement = offsets_topic_for(CONNECTOR, {"offsets.storage.topic": separate_topic}, worker)
    ensure_topic(placement.admin(), placement.topic, partitions=2, replication_factor=1)
    glob = placement.global_producer_config
    write_offsets(glob, placement.global_topic, "other", {_sub(str(i)): _ts(str(i)) for i in range(200)})
    write_offsets(glob, placement.global_topic, CONNECTOR, {_sub("a"): _ts("g1"), _sub("b"): _ts("g1")})
    first = ConnectorOffsetView.create(CONNECTOR, placement)
    first.refresh()
    assert first.global_topic.skipped == 0

    write_offsets(placement.client, placement.topic, CONNECTOR, {_sub("a"): _ts("s1")})
    write_offsets(glob, placement.global_topic, CONNECTOR, {_sub("b"): None, _sub("c"): _ts("g2")})
    applied: list[int] = []
    apply = first.global_topic._apply
    first.global_topic._apply = lambda record: (applied.append(record.offset), apply(record))[1]  # type: ignore[method-assign]

    second = ConnectorOffsetView.create(CONNECTOR, placement)
    assert second.global_topic is first.global_topic and second.separate_topic is first.separate_topic
    second.refresh()
    assert len(applied) == 2, "a later refresh reads only the records appended since"

    fresh = ConnectorOffsetView(
        CONNECTOR,
        OffsetsTopic(placement.global_consumer_config, placement.global_topic),
        OffsetsTopic(placement.client, placement.topic),
    )
    expected = {_sub("a"): _ts("s1"), _sub("c"): _ts("g2")}
    assert second.snapshot() == fresh.snapshot() == expected
    first.refresh()
    assert first.snapshot() == expected


def test_a_kept_reader_reads_a_re_created_topic_from_its_beginning(bootstrap, admin, topic_name, caplog):
    """A reader kept for a process's life (`shared_offsets_topic`) remembers where it stopped. If
    the topic is deleted and created again meanwhile, the new topic ends before that position: the
    reader must start over, not keep the old topic's offsets and skip the new one's records."""
    topic = topic_name("recreated-offsets")
    client = {"bootstrap.servers": bootstrap}
    ensure_topic(admin, topic, partitions=1, replication_factor=1)
    write_offsets(client, topic, CONNECTOR, {_sub(str(i)): _ts("old") for i in range(5)})
    kept = OffsetsTopic(client, topic, timeout=30)
    kept.refresh()
    assert len(kept.connector_offsets(CONNECTOR)) == 5

    admin.delete_topics([topic])[topic].result(30)
    deadline = time.monotonic() + 60
    while True:  # the name is free once the deletion has completed
        try:
            if ensure_topic(admin, topic, partitions=1, replication_factor=1):
                break
        except KafkaException:  # still being deleted
            pass
        assert time.monotonic() < deadline, f"{topic} could not be created again within 60 s"
        time.sleep(0.5)
    write_offsets(client, topic, CONNECTOR, {_sub("new"): _ts("new")})

    with caplog.at_level(logging.WARNING, logger="eosconnect.storage.offsets.reading"):
        kept.refresh()
    assert kept.connector_offsets(CONNECTOR) == {_sub("new"): _ts("new")}
    assert kept.connector_offsets(CONNECTOR) == read_offsets(client, topic)[CONNECTOR]
    assert any("re-created" in r.getMessage() and topic in r.getMessage() for r in caplog.records)


def test_records_appended_while_a_kept_reader_refreshes_are_not_taken_for_a_re_created_topic(
    bootstrap, admin, topic_name, caplog
):
    """A refresh lists the topic's end offsets, then reads up to them; where the end is a commit
    marker (read_committed never sees it) the first record past it, appended meanwhile, is applied
    too: its position may pass the ends it listed. Only where the last refresh had read to may be
    compared with those ends, or a busy offsets topic is read again from the beginning at refreshes
    (as happened in a density run: 60 full re-reads as 400 tasks started)."""
    topic = topic_name("busy-offsets")
    client = {"bootstrap.servers": bootstrap}
    ensure_topic(admin, topic, partitions=1, replication_factor=1)
    write_offsets(client, topic, CONNECTOR, {_sub("first"): _ts("0")})
    kept = OffsetsTopic(client, topic, timeout=30)
    kept.refresh()
    stop = threading.Event()

    def write_on() -> None:  # as source tasks do: each offset in a transaction of its own
        producer = _txn_producer(bootstrap, topic_name("busy-writer"))
        i = 0
        while not stop.is_set():
            i += 1
            producer.begin_transaction()
            for key, value in encode_offset_records(CONNECTOR, {_sub(f"p{i % 50}"): _ts(str(i))}):
                producer.produce(topic, key=key, value=value)
            producer.commit_transaction(30)

    writer = threading.Thread(target=write_on, daemon=True)
    writer.start()
    try:
        with caplog.at_level(logging.WARNING, logger="eosconnect.storage.offsets.reading"):
            for _ in range(30):
                kept.refresh()
    finally:
        stop.set()
        writer.join(30)
    kept.refresh()
    assert not [r for r in caplog.records if "re-created" in r.getMessage()]
    assert kept.connector_offsets(CONNECTOR) == read_offsets(client, topic)[CONNECTOR]
