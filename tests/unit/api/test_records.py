"""Records: source partition/offset validation, immutability, helpers for transformations."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest

from eosconnect.api import (
    DataException,
    Header,
    InMemoryOffsetStorageReader,
    RecordMetadata,
    SinkRecord,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    TopicPartition,
)


def record(**overrides: Any) -> SourceRecord:
    fields: dict[str, Any] = {
        "source_partition": {"table": "orders"},
        "source_offset": {"id": 42},
        "topic": "orders",
        "value": {"id": 42},
    }
    fields.update(overrides)
    return SourceRecord(**fields)


def test_positional_signature_and_defaults() -> None:
    r = SourceRecord({"file": "a"}, {"line": 1}, "t", "v")
    assert (r.key, r.partition, r.headers, r.timestamp) == (None, None, (), None)
    assert r.source_partition == {"file": "a"} and r.source_offset == {"line": 1}


@pytest.mark.parametrize(
    ("partition", "offset", "bad_key"),
    [
        ({"file": ["a", "b"]}, {"line": 1}, "'file'"),
        ({"file": "a"}, {"pos": {"line": 1}}, "'pos'"),
        ({1: "a"}, {"line": 1}, "1"),
        ({"file": "a"}, {"at": b"raw"}, "'at'"),
        ({"file": "a"}, {"x": float("inf")}, "'x'"),
    ],
)
def test_partition_and_offset_must_be_flat_primitive_maps(partition: Any, offset: Any, bad_key: str) -> None:
    with pytest.raises(ValueError, match=bad_key) as info:
        SourceRecord(partition, offset, "t", None)
    assert isinstance(info.value, DataException)
    assert "source_partition" in str(info.value) or "source_offset" in str(info.value)


def test_primitive_values_are_accepted_and_offset_may_be_a_tombstone() -> None:
    r = record(source_offset={"s": "x", "i": 1, "f": 1.5, "b": True, "n": None})
    assert r.source_offset == {"s": "x", "i": 1, "f": 1.5, "b": True, "n": None}
    assert record(source_offset=None).source_offset is None


def test_partitions_are_frozen_and_hashable() -> None:
    original = {"table": "orders"}
    r = record(source_partition=original)
    original["table"] = "changed"  # the record took a copy
    assert r.source_partition == {"table": "orders"}
    assert isinstance(r.source_partition, SourcePartition)
    assert {r.source_partition: 1}[SourcePartition(table="orders")] == 1
    with pytest.raises(TypeError):
        r.source_partition["table"] = "x"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.topic = "other"  # type: ignore[misc]


def test_invalid_record_fields() -> None:
    with pytest.raises(DataException, match="topic"):
        record(topic="")
    with pytest.raises(DataException, match="partition"):
        record(partition=-1)
    with pytest.raises(DataException, match="timestamp"):
        record(timestamp="now")
    with pytest.raises(DataException, match="header 'h'"):
        record(headers={"h": 1})


def test_headers_are_normalised() -> None:
    r = record(headers=[("a", b"1"), ("a", "2"), ("b", bytearray(b"3"))])
    assert r.headers == (Header("a", b"1"), Header("a", "2"), Header("b", b"3"))
    assert r.last_header("a") == "2" and r.last_header("zzz") is None
    assert record(headers={"k": None}).headers == (("k", None),)
    assert record(headers=None).headers == ()


def test_new_record_keeps_source_position() -> None:
    r = record(key="k", timestamp=5)
    moved = r.new_record(topic="archive", value=None, key=None)
    assert (moved.topic, moved.value, moved.key, moved.timestamp) == ("archive", None, None, 5)
    assert moved.source_partition == r.source_partition and moved.source_offset == r.source_offset
    assert r.topic == "orders"


def test_new_record_copies_every_slot_of_both_record_types() -> None:
    source = record(key="k", timestamp=5, headers={"h": b"v"})
    sink = SinkRecord("t", 3, 10, b"k", {"v": 1}, timestamp=1, headers={"h": "x"}, leader_epoch=7)
    for original in (source, sink):
        copy = original.new_record()
        assert copy == original and copy is not original
        slots = type(original).__slots__
        assert all(getattr(copy, name) is getattr(original, name) for name in slots)
        changed = original.new_record(value="new", value_schema=None)
        assert changed.value == "new" and original.value != "new"


def test_records_pickle_for_spark() -> None:
    r = record(headers={"h": b"v"})
    assert pickle.loads(pickle.dumps(r)) == r
    partition = pickle.loads(pickle.dumps(r.source_partition))
    assert isinstance(partition, SourcePartition) and hash(partition) == hash(r.source_partition)


def test_sink_record_and_small_types() -> None:
    s = SinkRecord("t", 3, 10, b"k", {"v": 1}, timestamp=1, headers={"h": "x"}, leader_epoch=7)
    assert s.topic_partition == TopicPartition("t", 3) and str(s.topic_partition) == "t-3"
    assert s.new_record(value=None).offset == 10
    with pytest.raises(DataException, match="leader_epoch"):
        SinkRecord("t", 0, 0, None, None, leader_epoch=-1)
    assert RecordMetadata("t", 0, 5, 1000).offset == 5
    assert sorted([TopicPartition("b", 0), TopicPartition("a", 1)])[0].topic == "a"


def test_in_memory_offset_reader() -> None:
    reader = InMemoryOffsetStorageReader([({"table": "a"}, {"id": 1}), ({"table": "b"}, None)])
    assert reader.offset({"table": "a"}) == {"id": 1}
    assert reader.offset(SourcePartition(table="b")) is None
    assert reader.offset({"table": "missing"}) is None
    assert reader.offsets([{"table": "a"}, {"table": "c"}]) == {
        SourcePartition(table="a"): {"id": 1},
        SourcePartition(table="c"): None,
    }
    assert SourceOffset(id=1) == {"id": 1}
