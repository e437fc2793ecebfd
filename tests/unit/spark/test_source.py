"""The `eosconnect` streaming source's planning and replay, driven the way Spark drives it.

Spark calls initialOffset/latestOffset/partitions on the driver and read() on executors; a replay
after a failure calls partitions/read again with the same offsets. These are plain Python calls, so
the contract (bounded ranges, identical replays, offsets continuing across micro-batches) is checked
here for the three replayable connectors; the Spark round trip is in tests/integration.
"""

from __future__ import annotations

import json

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.spark.source import _Reader


def _batches(reader: _Reader, count: int) -> list[tuple[dict, dict, list[tuple]]]:
    start = reader.initialOffset()
    out = []
    for _ in range(count):
        end = reader.latestOffset(start, None)
        rows = [row for p in reader.partitions(start, end) for row in reader.read(p)]
        out.append((start, end, rows))
        start = end
    return out


def test_sequence_source_micro_batches_are_bounded_contiguous_and_replayable() -> None:
    reader = _Reader(
        {
            "connector.class": "SequenceSource",
            "topic": "t",
            "tasks.max": "2",
            "records.per.task": "250",
            "batch.size": "40",
            "max.records.per.batch": "100",
        }
    )
    batches = _batches(reader, 4)
    seqs: dict[str, list[int]] = {}
    for start, end, rows in batches:
        assert len(rows) <= 2 * 120  # bounded: at most a poll past max.records.per.batch per task
        for key, value, topic, _partition, _offset in rows:
            seqs.setdefault(key, []).append(json.loads(value)["seq"])
            assert topic == "t"
        # a replay of the same range returns the same rows
        replay = [row for p in reader.partitions(start, end) for row in reader.read(p)]
        assert replay == rows
    assert seqs == {"task-0": list(range(250)), "task-1": list(range(250))}
    reader.stop()


def test_file_stream_source_reads_exactly_the_planned_lines(tmp_path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("".join(f"line {i}\n" for i in range(30)))
    reader = _Reader(
        {"connector.class": "FileStreamSource", "file": str(path), "topic": "lines", "batch.size": "7"}
    )
    ((_, end, rows),) = _batches(reader, 1)
    assert [r[1] for r in rows] == [f"line {i}" for i in range(30)]
    with path.open("a") as f:
        f.write("line 30\nline 31\npartial")
    more = reader.latestOffset(end, None)
    rows2 = [row for p in reader.partitions(end, more) for row in reader.read(p)]
    assert [r[1] for r in rows2] == ["line 30", "line 31"]
    reader.stop()


def test_connector_without_replay_support_is_refused() -> None:
    with pytest.raises(ConfigException, match="replay"):
        _Reader({"connector.class": "MirrorSource", "source.cluster.bootstrap.servers": "x:1", "topics": "a"})


def test_missing_connector_class_names_the_option() -> None:
    with pytest.raises(ConfigException, match=r"connector\.class"):
        _Reader({"topic": "t"})


def test_rows_added_between_planning_and_reading_wait_for_the_next_micro_batch(tmp_path) -> None:
    """Spark plans a micro-batch (latestOffset) and reads it later; a poll on the executor may then
    return rows past the planned end. They belong to the next micro-batch: yielding them twice (now
    and in the next batch) was the duplicate a driver-kill test found."""
    path = tmp_path / "in.txt"
    path.write_text("".join(f"line {i}\n" for i in range(10)))
    reader = _Reader(
        {"connector.class": "FileStreamSource", "file": str(path), "topic": "lines", "batch.size": "100"}
    )
    start = reader.initialOffset()
    end = reader.latestOffset(start, None)
    with path.open("a") as f:
        f.write("".join(f"line {i}\n" for i in range(10, 15)))
    rows = [row for p in reader.partitions(start, end) for row in reader.read(p)]
    assert [r[1] for r in rows] == [f"line {i}" for i in range(10)]
    more = reader.latestOffset(end, None)
    rows2 = [row for p in reader.partitions(end, more) for row in reader.read(p)]
    assert [r[1] for r in rows2] == [f"line {i}" for i in range(10, 15)]
    reader.stop()


def test_struct_values_reach_spark_as_json_objects() -> None:
    import datetime as dt
    import decimal

    from eosconnect.api import Decimal, SchemaBuilder, Struct, Timestamp
    from eosconnect.spark.source import _text

    schema = (
        SchemaBuilder.struct()
        .field("id", SchemaBuilder.int64())
        .field("amount", Decimal.schema(2))
        .field("at", Timestamp.SCHEMA)
        .build()
    )
    value = (
        Struct(schema)
        .put("id", 1)
        .put("amount", decimal.Decimal("2.50"))
        .put("at", dt.datetime(2024, 1, 2, tzinfo=dt.UTC))
    )
    assert _text(value) == '{"id":1,"amount":2.5,"at":"2024-01-02T00:00:00+00:00"}'
