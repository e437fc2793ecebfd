"""DeltaSink (`delta.mode=merge`) and IcebergSink (`iceberg.tables.upsert-mode-enabled`) through a
real broker and worker, fed Debezium change events (the envelope: `before`, `after`, `op`):
creates, then updates of every second key, then deletes of every tenth, all on one partition so
each key's events arrive in order. The table then equals the source state - one row per live key,
the last update's cells - read with deltalake / PyIceberg and with Spark SQL, cell by cell."""

from __future__ import annotations

import base64
import decimal
import json
import time
from pathlib import Path
from typing import Any

import pytest

from support.jdbc_sink import JSON, VALUE_SCHEMA, key, produce
from support.lake_spark import spark_rows
from support.lake_targets import lake_target

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

ROW = {**VALUE_SCHEMA, "optional": True}
ENVELOPE = {
    "type": "struct",
    "optional": False,
    "name": "dbserver.public.events.Envelope",
    "fields": [
        {**ROW, "field": "before"},
        {**ROW, "field": "after"},
        {"field": "op", "type": "string", "optional": False},
    ],
}
KEYS = 300


def row(k: int, note: str) -> dict[str, Any]:
    unscaled = 100 * k
    raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
    return {"k": k, "note": note, "price": base64.b64encode(raw).decode()}


def change(op: str, k: int, before: str | None, after: str | None) -> bytes:
    payload = {
        "before": None if before is None else row(k, before),
        "after": None if after is None else row(k, after),
        "op": op,
    }
    return json.dumps({"schema": ENVELOPE, "payload": payload}).encode()


def source_state() -> dict[int, dict[str, Any]]:
    """What the table must hold after the events: every key but each tenth, updated ones changed."""
    price = decimal.Decimal("0.01")
    return {
        k: {"k": k, "note": "changed" if k % 2 == 0 else "n", "price": decimal.Decimal(k).quantize(price)}
        for k in range(KEYS)
        if k % 10 != 0
    }


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_debezium_creates_updates_and_deletes_leave_the_source_state_in_the_table(
    fmt, workers, topic_name, create_topic, bootstrap, tmp_path: Path
):
    topic = create_topic(topic_name(f"{fmt}-cdc"), partitions=1)
    target = lake_target(fmt, tmp_path / fmt)
    events: list[tuple[bytes | None, bytes | None]] = [
        (key(k), change("c", k, None, "n")) for k in range(KEYS)
    ]
    events += [(key(k), change("u", k, "n", "changed")) for k in range(0, KEYS, 2)]
    events += [(key(k), change("d", k, "changed", None)) for k in range(0, KEYS, 10)]
    upsert = (
        {"delta.mode": "merge", "delta.merge.keys": "k"}
        if fmt == "delta"
        else {"iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "k"}
    )
    config = target.config(
        topic, tasks=1, **upsert, **{"key.converter": JSON, "key.converter.schemas.enable": "true"}
    )
    worker = workers()
    assert worker.create_connector(fmt, config).status_code == 201
    worker.wait_for(lambda: worker.task_states(fmt) == ["RUNNING"], 120, "the sink task RUNNING")
    half = len(events) // 2  # two batches: the updates and deletes also meet rows of earlier commits
    produce(bootstrap, topic, events[:half], 1)
    worker.wait_for(lambda: target.rows() >= min(half, KEYS), 120, "the first batch in the table")
    produce(bootstrap, topic, events[half:], 1)
    want = source_state()

    def current() -> dict[int, dict[str, Any]]:
        return {r["k"]: r for r in target.arrow().select(["k", "note", "price"]).to_pylist()}

    worker.wait_for(lambda: current() == want, 120, "the table equal to the source state")
    time.sleep(3)  # a late or repeated commit would land now
    rows = target.arrow().select(["k", "note", "price"]).to_pylist()
    assert len(rows) == len(want) and {r["k"]: r for r in rows} == want
    assert worker.request("DELETE", f"/connectors/{fmt}").status_code == 204
    spark = [{**r, "price": decimal.Decimal(r["price"])} for r in spark_rows(fmt, target.spark_location())]
    assert len(spark) == len(want), f"Spark SQL: {len(spark)} rows, {len(want)} live keys"
    assert {r["k"]: {c: r[c] for c in ("k", "note", "price")} for r in spark} == want
    print(f"{fmt}: {len(events)} change events -> {len(want)} rows equal to the source state")
