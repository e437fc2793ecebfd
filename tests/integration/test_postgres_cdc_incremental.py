"""PostgresCdcSource's incremental snapshots and signals against a real PostgreSQL, a real worker and
the session's broker.

A ~20,000-row table (1,000,000 with EOSCONNECT_LONG_TESTS=1) is snapshotted incrementally on an
execute-snapshot signal sent through the REST API, while a workload updates, deletes and inserts
rows, the task is SIGKILLed mid-snapshot and the snapshot is paused and resumed by signals; the
topic read back read_committed must be exactly the table: every row's last event equals the row,
column by column, and every deleted row ends deleted. A bad signal is logged and ignored. A table
that a PUT /config adds to table.include.list gets its existing rows with snapshot.new.tables=incremental.
stop-snapshot (of one table, of all) ends the chunks and leaves nothing to resume; additional-conditions
narrow a snapshot to the matching rows. A whole worker SIGKILLed and PostgreSQL restarted, each
mid-snapshot: the snapshot resumes at its stored chunk, completes, and the topic is exactly the table.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import signal as signal_module
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
    """Updates (a new `v` each), deletes and inserts (from `first_id` on) on random rows from a thread
    until stopped."""

    def __init__(self, url: str, seed: int = 5, first_id: int = ROWS + 1) -> None:
        self.url = url
        self.first_id = first_id
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
                next_id = self.first_id
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


def snapshot_tables(offset: dict[str, Any]) -> list[str]:
    """The tables an offset's incremental snapshot still has to read (none: no snapshot runs)."""
    raw = offset.get("incremental_snapshot_collections")
    return [c["incremental_snapshot_collections_id"] for c in json.loads(raw)] if raw else []


def last_key_read(offset: dict[str, Any]) -> int | None:
    raw = offset.get("incremental_snapshot_primary_key")
    return int(json.loads(raw)[0]) if raw else None


def snapshot_reads(records: list[Any]) -> int:
    return sum(1 for r in records if r.value and json.loads(r.value)["payload"]["op"] == "r")


def throttled_config(url: str, prefix: str, chunk: int, pause_ms: int, **extra: str) -> dict[str, str]:
    """A connector whose chunks are small and handed out slowly: a snapshot of ROWS rows takes
    ROWS / chunk * pause_ms at least, so a signal or a fault reliably lands mid-snapshot."""
    return incremental_config(
        url,
        prefix,
        "items",
        connector_class="support.cdc_connectors.ThrottledPostgresCdcConnector",
        chunk_pause_ms=str(pause_ms),
        snapshot_mode="no_data",
        incremental_snapshot_chunk_size=str(chunk),
        **extra,
    )


def test_stop_snapshot_of_one_table_and_of_all_then_a_snapshot_with_additional_conditions(
    db_url, workers, topic_name, create_topic, read_committed
):
    """stop-snapshot of one of two tables, then of all: no chunk event after each stop, the offset
    drops the stopped tables at once (a restarted task resumes nothing), streaming goes on. Then an
    execute-snapshot with additional-conditions emits exactly the matching rows, as op=r."""
    prefix = topic_name("pgstop")
    with connect(db_url) as conn:
        conn.execute("CREATE TABLE extra (LIKE items INCLUDING ALL)")
        conn.execute("INSERT INTO extra SELECT * FROM items")
    items, extra = (create_topic(f"{prefix}.public.{t}") for t in ("items", "extra"))
    config = throttled_config(db_url, prefix, chunk=200, pause_ms=300)
    config["table.include.list"] = "public\\.items,public\\.extra"
    worker = workers()
    assert worker.create_connector("stopper", config).status_code == 201
    worker.wait_for(lambda: worker.task_states("stopper") == ["RUNNING"], 120, "the task RUNNING")
    worker.wait_for(lambda: slot_exists(db_url, config["slot.name"]), 60, "the slot")
    signal(worker, "stopper", "execute-snapshot", {"data-collections": ["public\\.items", "public\\.extra"]})
    worker.wait_for(
        lambda: (last_key_read(offsets_of(worker, "stopper")) or 0) >= 3 * 200, 120, "chunks of items"
    )
    signal(worker, "stopper", "stop-snapshot", {"data-collections": ["public\\.items"]})
    worker.wait_for(
        lambda: snapshot_tables(offsets_of(worker, "stopper")) == ["public.extra"], 60, "items stopped"
    )
    items_reads = snapshot_reads(read_committed(items))
    worker.wait_for(
        lambda: (last_key_read(offsets_of(worker, "stopper")) or 0) >= 2 * 200, 120, "chunks of extra"
    )
    signal(worker, "stopper", "stop-snapshot")  # no data-collections: all
    worker.wait_for(
        lambda: not snapshot_tables(offsets_of(worker, "stopper")), 60, "the offset without the snapshot"
    )
    extra_reads = snapshot_reads(read_committed(extra))
    assert 0 < items_reads < ROWS and 0 < extra_reads < ROWS, (items_reads, extra_reads)
    answer = worker.request("POST", "/connectors/stopper/tasks/0/restart")
    assert answer.status_code in (200, 204), answer.text
    worker.wait_for(lambda: worker.task_states("stopper") == ["RUNNING"], 120, "the task restarted")
    with connect(db_url) as conn:
        conn.execute("UPDATE items SET v = -7 WHERE id = 1")
        conn.execute("UPDATE extra SET v = -7 WHERE id = 1")

    def streamed(topic: str) -> bool:
        value = last_events(read_committed(topic))[0].get(1)
        return value is not None and value["after"]["v"] == -7

    worker.wait_for(lambda: streamed(items) and streamed(extra), 120, "the changes after the stops")
    time.sleep(3)  # a chunk still running would land now
    assert snapshot_reads(read_committed(items)) == items_reads, "no chunk of items after its stop"
    assert snapshot_reads(read_committed(extra)) == extra_reads, "no chunk of extra after the stop"
    log = worker.log_path.read_text(errors="replace")
    assert "resuming the incremental snapshot" not in log, "a stopped snapshot is not resumed"

    before = len(read_committed(items))
    condition = {"data-collection": "public.items", "filter": "id <= 450"}
    data = {"data-collections": ["public\\.items"], "additional-conditions": [condition]}
    signal(worker, "stopper", "execute-snapshot", data)
    worker.wait_for(lambda: len(read_committed(items)) >= before + 450, 120, "the conditional snapshot")
    time.sleep(3)  # anything beyond the condition would land now
    new = [json.loads(r.value)["payload"] for r in read_committed(items)[before:]]
    assert all(v["op"] == "r" and v["source"]["snapshot"] == "incremental" for v in new), new[:3]
    with connect(db_url) as conn:
        rows = {
            r[0]: {"id": r[0], "v": r[1], "note": r[2], "flag": r[3], "day": r[4]}
            for r in conn.execute(f"SELECT id, v, note, flag, day - {EPOCH} FROM items WHERE id <= 450")
        }
    assert len(new) == len(rows) == 450, "each matching row once, nothing else"
    assert {v["after"]["id"]: v["after"] for v in new} == rows
    assert not snapshot_tables(offsets_of(worker, "stopper")), "the conditional snapshot completed"


def test_a_worker_sigkill_and_a_postgres_restart_mid_snapshot_leave_exactly_the_table(
    postgres,  # noqa: F811 - the imported fixture
    db_url,
    workers,
    topic_name,
    create_topic,
    read_committed,
):
    """The whole worker (process group, Spark JVM and the task's Python worker) is SIGKILLed
    mid-snapshot under a workload; a second worker resumes the snapshot from the stored chunk
    position. PostgreSQL is then restarted mid-snapshot: the task reconnects by itself and the
    snapshot completes. The topic replayed is exactly the table."""
    prefix = topic_name("pgkill")
    topic = create_topic(f"{prefix}.public.items")
    chunk = 500
    config = throttled_config(
        db_url, prefix, chunk=chunk, pause_ms=150, retriable_restart_connector_wait_ms="1000"
    )
    first = workers("w1")
    assert first.create_connector("killed", config).status_code == 201
    first.wait_for(lambda: first.task_states("killed") == ["RUNNING"], 120, "the task RUNNING")
    first.wait_for(lambda: slot_exists(db_url, config["slot.name"]), 60, "the slot")
    workload = Workload(db_url).start()
    try:
        signal(first, "killed", "execute-snapshot", {"data-collections": ["public\\.items"]})
        first.wait_for(
            lambda: (last_key_read(offsets_of(first, "killed")) or 0) >= 8 * chunk, 120, "chunks in Kafka"
        )
        before_kill = last_key_read(offsets_of(first, "killed")) or 0
        task_pid = first.request("GET", "/internal/tasks").json()["killed-0"]["pid"]
        first.kill()  # SIGKILL: the worker's process group and its Spark JVM
        with contextlib.suppress(ProcessLookupError):
            os.kill(task_pid, signal_module.SIGKILL)  # Spark's Python workers lead groups of their own
        second = workers("w2")  # same group and internal topics
        pattern = re.compile(
            r"resuming the incremental snapshot at table public\.items after key \['(\d+)'\]"
        )

        def resumed_at() -> int | None:
            found = pattern.search(second.log_path.read_text(errors="replace"))
            return int(found.group(1)) if found else None

        stored = second.wait_for(resumed_at, 120, "the snapshot resumed from the stored chunk position")
        assert before_kill <= stored < ROWS, ("resumed where it was, mid-snapshot", before_kill, stored)
        second.wait_for(
            lambda: (last_key_read(offsets_of(second, "killed")) or 0) >= stored + 3 * chunk,
            120,
            "the resumed snapshot's chunks",
        )
    finally:
        workload.stop()
    postgres.kill()
    try:
        time.sleep(3)  # connections refused: a few failed tries
        assert second.task_states("killed") == ["RUNNING"], "a lost connection does not fail the task"
    finally:
        postgres.start()
    assert snapshot_tables(offsets_of(second, "killed")), "the restart must land mid-snapshot"
    workload = Workload(db_url, seed=6, first_id=ROWS * 2).start()
    try:
        second.wait_for(
            lambda: not snapshot_tables(offsets_of(second, "killed")), 240, "the snapshot complete"
        )
    finally:
        workload.stop()
    with connect(db_url) as conn:  # the last change, so that everything before it is in the topic
        conn.execute("UPDATE items SET v = -1 WHERE id = (SELECT max(id) FROM items)")
        sentinel = conn.execute("SELECT max(id) FROM items").fetchone()[0]

    def arrived() -> bool:
        value = last_events(read_committed(topic))[0].get(sentinel)
        return value is not None and value["after"] is not None and value["after"]["v"] == -1

    second.wait_for(arrived, 120, "the last change")
    last, reads = last_events(read_committed(topic))
    check_table(db_url, "items", last)
    assert len(reads) > ROWS * 0.5, "most rows came from the incremental snapshot"
    assert max(reads.values()) <= 2, "a row is read once per chunk at most, twice only across a fault"
    assert all(n == 1 for k, n in reads.items() if k <= stored), "resumed, not read again from the start"
    assert "lost the replication connection" in second.log_path.read_text(errors="replace")
