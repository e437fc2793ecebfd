"""Copying a connector's offsets to the worker's global offsets topic, and plain offset writes."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import Producer

from eosconnect.api.records import SourcePartition
from eosconnect.devkafka.ports import free_port
from eosconnect.storage.offsets import (
    GlobalOffsetCopier,
    OffsetWriteError,
    OffsetWriter,
    offsets_topic_for,
    read_offsets,
)
from eosconnect.storage.topics import ensure_topic

pytestmark = pytest.mark.kafka


def _p(n: int) -> SourcePartition:
    return SourcePartition({"file": f"f{n}"})


def test_copier_delivers_the_latest_offsets_to_the_global_topic(bootstrap, admin, topic_name):
    worker = {
        "bootstrap.servers": bootstrap,
        "offset.storage.topic": topic_name("global"),
        "exactly.once.source.support": "enabled",
    }
    placement = offsets_topic_for("c", {"offsets.storage.topic": topic_name("own")}, worker)
    ensure_topic(admin, placement.global_topic, 2, 1)
    copier = GlobalOffsetCopier.for_placement("c", placement)
    try:
        for line in range(100):  # coalesces: only the latest per partition has to reach the topic
            copier.submit({_p(0): {"line": line}, _p(1): {"line": line * 2}})
        copier.submit({_p(2): {"line": 1}})
        copier.submit({_p(2): None})
        assert copier.flush(30)
        assert copier.failures == 0
    finally:
        copier.close()
    offsets = read_offsets({"bootstrap.servers": bootstrap}, placement.global_topic, include_deleted=True)
    assert offsets == {"c": {_p(0): {"line": 99}, _p(1): {"line": 198}, _p(2): None}}


def test_copier_never_fails_or_blocks_when_the_cluster_is_unreachable(caplog):
    copier = GlobalOffsetCopier(
        "c",
        "connect-offsets",
        {"bootstrap.servers": f"127.0.0.1:{free_port()}", "message.timeout.ms": 1000, "log_level": 0},
        initial_backoff=0.1,
        max_backoff=0.2,
    )
    started = time.monotonic()
    for i in range(1000):
        copier.submit({_p(i % 10): {"line": i}})
    assert time.monotonic() - started < 1.0  # submit() returns at once
    assert not copier.flush(3)
    assert copier.failures >= 1  # it keeps trying (and logging) ...
    assert copier._thread.is_alive()  # ... without dying
    started = time.monotonic()
    copier.close(timeout=1)
    assert time.monotonic() - started < 10
    assert "not copied" in caplog.text


def test_copier_retries_until_the_topic_can_be_written(bootstrap, admin, topic_name):
    topic = topic_name("late")
    # Writes fail while the topic is missing (no auto-creation for this producer) and succeed once it exists.
    config = {"bootstrap.servers": bootstrap, "message.timeout.ms": 1500, "log_level": 0}
    copier = GlobalOffsetCopier("c", topic, config, initial_backoff=0.2, max_backoff=0.5)
    try:
        admin.delete_topics([topic])  # make sure it does not exist (ignored if it does not)
        copier.submit({_p(1): {"line": 1}})
        deadline = time.monotonic() + 20
        while copier.failures < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert copier.failures >= 1
        assert ensure_topic(admin, topic, 1, 1)
        copier.submit({_p(2): {"line": 2}})
        assert copier.flush(60)
    finally:
        copier.close()
    assert read_offsets({"bootstrap.servers": bootstrap}, topic) == {
        "c": {_p(1): {"line": 1}, _p(2): {"line": 2}}
    }


def test_offset_writer_borrows_a_producer_and_reports_failures(bootstrap, admin, topic_name):
    topic = topic_name("offsets")
    ensure_topic(admin, topic, 1, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "log_level": 0})
    writer = OffsetWriter(producer, topic)
    writer.write("c", {_p(1): {"n": 1}})
    writer.close()
    producer.produce(topic, key=b'["c",{"file":"f9"}]', value=b'{"n":9}')  # still usable: not closed
    producer.flush(10)
    assert read_offsets({"bootstrap.servers": bootstrap}, topic) == {"c": {_p(1): {"n": 1}, _p(9): {"n": 9}}}

    down = {"bootstrap.servers": f"127.0.0.1:{free_port()}", "message.timeout.ms": 500, "log_level": 0}
    failing = OffsetWriter(down, topic)
    with pytest.raises(OffsetWriteError) as info:
        failing.write("c", {_p(1): {"n": 2}, _p(2): {"n": 2}}, timeout=10)
    assert set(info.value.failed) == {_p(1), _p(2)}
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(OffsetWriteError):
        failing.write("c", {_p(3): {"n": 3}}, timeout=None, cancel=cancel)
    failing.close(0)
