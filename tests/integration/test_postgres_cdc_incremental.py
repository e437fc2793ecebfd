"""PostgresCdcSource's incremental snapshots and signals against a real PostgreSQL, a real worker and
the session's broker.

A ~20,000-row table (1,000,000 with EOSCONNECT_LONG_TESTS=1) is snapshotted incrementally on an
execute-snapshot signal sent through the REST API, while a workload updates, deletes and inserts
rows, the task is SIGKILLed mid-snapshot and the snapshot is paused and resumed by signals; the
topic read back read_committed must be exactly the table: every row's last event equals the row,
column by column, and every deleted row ends deleted. A bad signal is logged and ignored. A table
that a PUT /config adds to table.include.list gets its existing rows with snapshot.new.tables=incremental.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from support.cdc_soak import cdc_source_config, connect
from support.postgres import new_database, postgres  # noqa: F401 - the fixture

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

LONG = os.environ.get("EOSCONNECT_LONG_TESTS") == "1"
ROWS = 1_000_000 if LONG else 20_000
CHUNK = 5_000 if LONG else 1_000
SIGNALS = "dbz_signal"
EPOCH = "DATE '1970-01-01'"


@pytest.fixture
def db_url(postgres: str) -> Iterator[str]:  # noqa: F811 - the imported fixture
    url = new_database(postgres)
    with connect(url) as conn:
        conn.execute(
            "CREATE TABLE items (id INTEGER PRIMARY KEY, v BIGINT NOT NULL, note TEXT, flag BOOLEAN, "
            "day DATE)"
        )
        conn.execute(
            f"INSERT INTO items SELECT g, 0, 'row ' || g, g % 2 = 0, {EPOCH} + g % 5000 "
            f"FROM generate_series(1, {ROWS}) g"
        )
        conn.execute(
            f"CREATE TABLE {SIGNALS} (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
            "data VARCHAR(2048))"
        )
    yield url
    with connect(url) as conn:  # a slot left behind would keep WAL forever
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active")


def incremental_config(url: str, prefix: str, table: str, **extra: str) -> dict[str, str]:
    return {
        **cdc_source_config(url, prefix, table=table),
        "exactly.once.support": "required",
        "signal.data.collection": f"public.{SIGNALS}",
        "incremental.snapshot.chunk.size": str(CHUNK),
        "database.transactions.per.kafka.transaction": "20",  # the workload's commits do not lag
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


class Workload:
    """Updates (a new `v` each), deletes and inserts on random rows from a thread until stopped."""

    def __init__(self, url: str, seed: int = 5) -> None:
        self.url = url
        self.random = random.Random(seed)
        self.changes = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Workload:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            with connect(self.url) as conn:
                next_id = ROWS + 1
                while not self._stop.is_set():
                    key, choice = self.random.randint(1, ROWS), self.random.random()
                    if choice < 0.6:
                        conn.execute("UPDATE items SET v = v + 1, note = 'upd' WHERE id = %s", (key,))
                    elif choice < 0.8:
                        conn.execute("DELETE FROM items WHERE id = %s", (key,))
                    else:
                        conn.execute("INSERT INTO items VALUES (%s, 1, 'new', NULL, NULL)", (next_id,))
                        next_id += 1
                    self.changes += 1
                    time.sleep(0.01)
        except BaseException as exc:  # surfaced by stop()
            self.error = exc


def signal(worker: Any, name: str, signal_type: str, data: dict[str, Any] | None = None) -> None:
    answer = worker.request("POST", f"/connectors/{name}/signals", json={"type": signal_type, "data": data})
    assert answer.status_code == 200, answer.text


def last_events(records: list[Any]) -> tuple[dict[int, Any], Counter[int]]:
    """The last value (None for a tombstone) per key, and how many snapshot reads each key has."""
    last: dict[int, Any] = {}
    reads: Counter[int] = Counter()
    for record in records:
        key = json.loads(record.key)["payload"]["id"]
        value = json.loads(record.value)["payload"] if record.value else None
        last[key] = value
        if value is not None and value["op"] == "r":
            assert value["source"]["snapshot"] == "incremental", value["source"]
            reads[key] += 1
    return last, reads


def check_table(url: str, table: str, last: dict[int, Any]) -> None:
    """Every row's last event equals the row, column by column; every other key ends deleted."""
    with connect(url) as conn:
        rows = {
            r[0]: {"id": r[0], "v": r[1], "note": r[2], "flag": r[3], "day": r[4]}
            for r in conn.execute(f"SELECT id, v, note, flag, day - {EPOCH} FROM {table}").fetchall()
        }
    missing = [k for k in rows if k not in last]
    assert not missing, f"{len(missing)} row(s) never reached the topic, e.g. {missing[:5]}"
    for key, value in last.items():
        if key in rows:
            assert value is not None and value["op"] != "d", (key, value)
            assert value["after"] == rows[key], (key, value["after"], rows[key])
        else:
            assert value is None or value["op"] == "d", f"key {key} was deleted, its last event is {value}"


def slot_exists(url: str, slot: str) -> bool:
    with connect(url) as conn:
        query = "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND active"
        return conn.execute(query, (slot,)).fetchone() is not None


def offsets_of(worker: Any, name: str) -> dict[str, Any]:
    entries = worker.request("GET", f"/connectors/{name}/offsets").json().get("offsets") or [{}]
    offset: dict[str, Any] = entries[0].get("offset") or {}
    return offset


def test_incremental_snapshot_through_a_sigkill_pause_and_a_bad_signal_is_exactly_the_table(
    db_url, workers, topic_name, create_topic, read_committed, tmp_path: Path
):
    prefix = topic_name("pginc")
    topic = create_topic(f"{prefix}.public.items")
    markers = tmp_path / "markers"
    markers.mkdir()
    config = incremental_config(
        db_url,
        prefix,
        "items",
        connector_class="support.cdc_connectors.ChunkCrashingPostgresCdcConnector",
        crash_after_chunks="4",
        crash_marker_dir=str(markers),
        snapshot_mode="no_data",
    )
    worker = workers()
    assert worker.create_connector("inc", config).status_code == 201
    worker.wait_for(lambda: worker.task_states("inc") == ["RUNNING"], 120, "the task RUNNING")
    worker.wait_for(
        lambda: slot_exists(db_url, config["slot.name"]), 60, "the slot, which signals go through"
    )
    workload = Workload(db_url).start()
    try:
        with connect(db_url) as conn:  # a bad signal through the table, one through the REST API
            conn.execute(f"INSERT INTO {SIGNALS} VALUES ('bad-1', 'explode', NULL)")
        signal(worker, "inc", "execute-snapshot", {"data-collections": ["public\\.nothing_here"]})
        signal(worker, "inc", "log", {"message": "before the snapshot"})
        signal(worker, "inc", "execute-snapshot", {"data-collections": ["public\\.items"]})
        worker.wait_for(lambda: (markers / "crashed").exists(), 120, "the SIGKILL mid-snapshot")
        worker.wait_for(
            lambda: "incremental_snapshot_collections" in offsets_of(worker, "inc"),
            120,
            "the snapshot resumed",
        )
        signal(worker, "inc", "pause-snapshot")
        worker.wait_for(
            lambda: offsets_of(worker, "inc").get("incremental_snapshot_paused") is True, 60, "paused"
        )
        time.sleep(2)  # the chunk in flight when the signal came is still emitted
        held = offsets_of(worker, "inc").get("incremental_snapshot_primary_key")
        time.sleep(3)
        assert offsets_of(worker, "inc").get("incremental_snapshot_primary_key") == held, (
            "a paused snapshot holds"
        )
        signal(worker, "inc", "resume-snapshot")
        worker.wait_for(
            lambda: "incremental_snapshot_collections" not in offsets_of(worker, "inc"),
            150 if not LONG else 1800,
            "the snapshot complete",
        )
    finally:
        workload.stop()
    with connect(db_url) as conn:  # the last change, so that everything before it is in the topic
        conn.execute("UPDATE items SET v = -1 WHERE id = (SELECT max(id) FROM items)")
        sentinel = conn.execute("SELECT max(id) FROM items").fetchone()[0]

    def arrived() -> bool:
        value = last_events(read_committed(topic))[0].get(sentinel)
        return value is not None and value["after"] is not None and value["after"]["v"] == -1

    worker.wait_for(arrived, 120, "the last change")
    records = read_committed(topic)
    last, reads = last_events(records)
    check_table(db_url, "items", last)
    assert len(reads) > ROWS * 0.5, "most rows came from the incremental snapshot"
    assert max(reads.values()) <= 2, "a row is read once per chunk at most, twice only across the crash"
    log = worker.log_path.read_text(errors="replace")
    assert "ignored signal 'bad-1' from the source channel: type 'explode'" in log
    assert "data.data-collections ['public\\\\.nothing_here'] match none of the captured tables" in log
    assert "before the snapshot" in log


def test_a_table_added_by_put_config_gets_its_existing_rows_and_kafka_signals_arrive(
    db_url, workers, topic_name, create_topic, read_committed, bootstrap
):
    prefix = topic_name("pgnew")
    signal_topic = create_topic(topic_name("signals"))
    with connect(db_url) as conn:
        conn.execute("CREATE TABLE first (id INTEGER PRIMARY KEY, v BIGINT NOT NULL)")
        conn.execute("INSERT INTO first SELECT g, g FROM generate_series(1, 10) g")
        conn.execute("CREATE TABLE later (id INTEGER PRIMARY KEY, v BIGINT NOT NULL, note TEXT)")
        conn.execute("INSERT INTO later SELECT g, g * 10, 'old ' || g FROM generate_series(1, 100) g")
    first, later = (create_topic(f"{prefix}.public.{t}") for t in ("first", "later"))
    config = incremental_config(
        db_url,
        prefix,
        "first",
        snapshot_new_tables="incremental",
        signal_enabled_channels="source,kafka",
        signal_kafka_topic=signal_topic,
        signal_kafka_bootstrap_servers=bootstrap,
    )
    worker = workers()
    assert worker.create_connector("grow", config).status_code == 201
    worker.wait_for(lambda: len(read_committed(first)) >= 10, 240, "the initial snapshot")
    config["table.include.list"] = "public\\.first,public\\.later"
    assert worker.request("PUT", "/connectors/grow/config", json=config).status_code == 200
    with connect(db_url) as conn:
        conn.execute("UPDATE later SET v = -5 WHERE id = 7")
        conn.execute("INSERT INTO later VALUES (101, 1010, 'new')")

    def complete() -> bool:
        last = last_events(read_committed(later))[0]
        return len(last) == 101 and last[7] is not None and last[7]["after"]["v"] == -5

    worker.wait_for(complete, 120, "the added table's rows and changes")
    producer = Producer({"bootstrap.servers": bootstrap})
    for key in ("another-connector", prefix):  # only the record keyed by topic.prefix is this one's
        message = {"type": "log", "data": {"message": f"from the signal topic for {key}"}}
        producer.produce(signal_topic, key=key.encode(), value=json.dumps(message).encode())
    assert producer.flush(30) == 0
    worker.wait_for(
        lambda: f"from the signal topic for {prefix}" in worker.log_path.read_text(errors="replace"),
        60,
        "the Kafka signal",
    )
    assert "from the signal topic for another-connector" not in worker.log_path.read_text(errors="replace")
    last, reads = last_events(read_committed(later))
    with connect(db_url) as conn:
        rows = {r[0]: {"id": r[0], "v": r[1], "note": r[2]} for r in conn.execute("SELECT * FROM later")}
    assert {k: v["after"] for k, v in last.items()} == rows
    assert len(reads) >= 99, "the existing rows came from the incremental snapshot"
    log = worker.log_path.read_text(errors="replace")
    assert (
        "table public.later is newly captured: its existing rows will be read by an incremental snapshot"
        in log
    )
