"""A type matrix shared by the lake sinks' tests (tests/unit/connectors/lake, delta, iceberg): one
Connect schema with every type the sinks map (Kafka's logical types, Debezium's semantic types,
nested types), a value of it, and what each column reads back as from a Delta or Iceberg table."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from eosconnect.api.data import Date, Decimal, Schema, SchemaBuilder, Struct, Time, Timestamp

UTC = dt.UTC


def _named(builder: SchemaBuilder, name: str) -> Schema:
    return builder.name(name).optional().build()


VSD = (
    SchemaBuilder.struct()
    .name("io.debezium.data.VariableScaleDecimal")
    .field("scale", SchemaBuilder.int32().build())
    .field("value", SchemaBuilder.bytes().build())
    .optional()
    .build()
)
NESTED = (
    SchemaBuilder.struct()
    .field("a", SchemaBuilder.int32().optional().build())
    .field("b", SchemaBuilder.string().optional().build())
    .optional()
    .build()
)
MATRIX = (
    SchemaBuilder.struct()
    .field("k", SchemaBuilder.int64().build())
    .field("i8", SchemaBuilder.int8().optional().build())
    .field("i16", SchemaBuilder.int16().optional().build())
    .field("i32", SchemaBuilder.int32().optional().build())
    .field("f32", SchemaBuilder.float32().optional().build())
    .field("f64", SchemaBuilder.float64().optional().build())
    .field("flag", SchemaBuilder.bool().optional().build())
    .field("s", SchemaBuilder.string().optional().build())
    .field("raw", SchemaBuilder.bytes().optional().build())
    .field("dec", Decimal.builder(2).parameter("connect.decimal.precision", "10").optional().build())
    .field("day", Date.builder().optional().build())
    .field("tod", Time.builder().optional().build())
    .field("at", Timestamp.builder().optional().build())
    .field("dbz_day", _named(SchemaBuilder.int32(), "io.debezium.time.Date"))
    .field("dbz_micro_ts", _named(SchemaBuilder.int64(), "io.debezium.time.MicroTimestamp"))
    .field("dbz_nano_ts", _named(SchemaBuilder.int64(), "io.debezium.time.NanoTimestamp"))
    .field("dbz_micro_time", _named(SchemaBuilder.int64(), "io.debezium.time.MicroTime"))
    .field("dbz_zoned", _named(SchemaBuilder.string(), "io.debezium.time.ZonedTimestamp"))
    .field("dbz_duration", _named(SchemaBuilder.int64(), "io.debezium.time.MicroDuration"))
    .field("dbz_uuid", _named(SchemaBuilder.string(), "io.debezium.data.Uuid"))
    .field("dbz_json", _named(SchemaBuilder.string(), "io.debezium.data.Json"))
    .field("vsd", VSD)
    .field("ints", SchemaBuilder.array(SchemaBuilder.int32().optional().build()).optional().build())
    .field(
        "counts",
        SchemaBuilder.map(SchemaBuilder.string().build(), SchemaBuilder.int64().optional().build())
        .optional()
        .build(),
    )
    .field("nested", NESTED)
    .build()
)


def matrix_value(k: int) -> Struct:
    """The record value for key `k` (the values vary with k)."""
    v = Struct(MATRIX)
    v.put("k", k).put("i8", -(k % 100)).put("i16", -300 - k).put("i32", 70_000 + k)
    v.put("f32", 1.5 + k).put("f64", 0.1 + k).put("flag", k % 2 == 0).put("s", f"ünïcode-{k}")
    v.put("raw", bytes([0, 255, k % 256])).put(
        "dec", decimal.Decimal(f"{k}.25").quantize(decimal.Decimal("0.01"))
    )
    v.put("day", dt.date(1990, 1, 2) + dt.timedelta(days=k))
    v.put("tod", dt.time(13, 14, 15, 123_000, tzinfo=UTC))
    v.put("at", dt.datetime(2026, 3, 4, 5, 6, 7, 891_000, tzinfo=UTC) + dt.timedelta(seconds=k))
    v.put("dbz_day", 7306 + k)
    v.put("dbz_micro_ts", 1_700_000_000_123_456 + k)
    v.put("dbz_nano_ts", 1_700_000_000_123_456_789 + k * 1000)
    v.put("dbz_micro_time", 3_600_000_001 + k)
    v.put("dbz_zoned", "2026-03-04T05:06:07.654321Z")
    v.put("dbz_duration", -1_000_001 - k)
    v.put("dbz_uuid", "0f8fad5b-d9cb-469f-a165-70867728950e")
    v.put("dbz_json", '{"a": [1, 2]}')
    v.put("vsd", Struct(VSD).put("scale", 3).put("value", (12_345 + k).to_bytes(4, "big", signed=True)))
    v.put("ints", [1, None, k]).put("counts", {"x": k}).put(
        "nested", Struct(NESTED).put("a", k).put("b", "z")
    )
    return v


def matrix_expected(k: int, *, time_as_text: bool) -> dict[str, Any]:
    """What each column of `matrix_value(k)` reads back as (Arrow's Python values)."""
    tod = dt.time(13, 14, 15, 123_000)
    micro_time = dt.time(1, 0, 0, 1 + k)
    return {
        "k": k,
        "i8": -(k % 100),
        "i16": -300 - k,
        "i32": 70_000 + k,
        "f32": 1.5 + k,
        "f64": 0.1 + k,
        "flag": k % 2 == 0,
        "s": f"ünïcode-{k}",
        "raw": bytes([0, 255, k % 256]),
        "dec": decimal.Decimal(f"{k}.25"),
        "day": dt.date(1990, 1, 2) + dt.timedelta(days=k),
        "tod": tod.isoformat() if time_as_text else tod,
        "at": dt.datetime(2026, 3, 4, 5, 6, 7, 891_000, tzinfo=UTC) + dt.timedelta(seconds=k),
        "dbz_day": dt.date(1990, 1, 2) + dt.timedelta(days=k),
        "dbz_micro_ts": dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=1_700_000_000_123_456 + k),
        "dbz_nano_ts": dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=1_700_000_000_123_456 + k),
        "dbz_micro_time": micro_time.isoformat() if time_as_text else micro_time,
        "dbz_zoned": dt.datetime(2026, 3, 4, 5, 6, 7, 654_321, tzinfo=UTC),
        "dbz_duration": -1_000_001 - k,
        "dbz_uuid": "0f8fad5b-d9cb-469f-a165-70867728950e",
        "dbz_json": '{"a": [1, 2]}',
        "vsd": str(decimal.Decimal(12_345 + k).scaleb(-3)),
        "ints": [1, None, k],
        "counts": [("x", k)],
        "nested": {"a": k, "b": "z"},
    }


def cell_mismatches(row: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """Every column whose value differs, as `column: got != expected` (floats to their precision)."""
    problems = []
    for column, want in expected.items():
        got = row.get(column)
        if isinstance(want, float) and isinstance(got, float):
            if abs(got - want) > 1e-6 * max(1.0, abs(want)):
                problems.append(f"{column}: {got!r} != {want!r}")
        elif got != want:
            problems.append(f"{column}: {got!r} != {want!r}")
    return problems


# ----------------------------------------------------------------------------- through a worker
def sigkill_a_task_mid_stream(
    worker: Any, bootstrap: str, topic: str, connector: str, config: dict[str, str], rows: Any, total: int
) -> int:
    """Create the connector (two tasks, one per partition of `topic`), produce `total` records
    (support.jdbc_sink's values, k = 0..total-1) slowly, SIGKILL task 0's Python worker once a
    quarter of them is in the table, wait until the task runs again and every record is in;
    `rows()` is the table's row count (0 while it does not exist). Returns the count at the kill."""
    import os
    import signal

    from support.jdbc_sink import SlowProducer

    assert worker.create_connector(connector, config).status_code == 201
    worker.wait_for(
        lambda: worker.task_states(connector) == ["RUNNING", "RUNNING"], 120, "both sink tasks RUNNING"
    )
    producer = SlowProducer(bootstrap, topic, total, 2, step=20, pause_s=0.1).start()  # about 15 s
    try:
        worker.wait_for(lambda: rows() >= total // 4, 120, f"{total // 4} rows in the table")
        victim = worker.request("GET", "/internal/tasks").json()[f"{connector}-0"]["pid"]
        assert victim
        os.kill(victim, signal.SIGKILL)
        killed_at = int(rows())
    finally:
        producer.join()
    assert killed_at < total, "the kill must land mid-stream"

    def retried() -> bool:
        task = worker.request("GET", "/internal/tasks").json()[f"{connector}-0"]
        return task["pid"] not in (None, victim) and task["state"] == "RUNNING"

    worker.wait_for(retried, 120, "the killed task to run again in a new Python worker")
    worker.wait_for(lambda: rows() >= total, 150, f"{total} rows")
    import time

    time.sleep(3)  # anything written twice would land now (commit.interval.ms is 1 s)
    return killed_at


def assert_each_record_once(table: Any, total: int) -> None:
    """Every k of 0..total-1 exactly once in an Arrow table of support.jdbc_sink's values, each
    row's note and price (a Decimal of k) as produced."""
    keys = table.column("k").to_pylist()
    assert len(keys) == total, f"{len(keys) - len(set(keys))} duplicates, {total - len(set(keys))} missing"
    assert sorted(keys) == list(range(total)), "every record exactly once"
    for row in table.select(["k", "note", "price"]).to_pylist():
        assert (row["note"], row["price"]) == (
            "n",
            decimal.Decimal(row["k"]).quantize(decimal.Decimal("0.01")),
        )
