"""PostgresCdcSource against real Debezium: the same tables and transactions, compared field by field.

Debezium's PostgreSQL connector (`io.debezium:debezium-connector-postgres`, the version in
`eosconnect.devkafka.debezium`) runs as a plugin in Apache Kafka Connect (Java), eosconnect's
PostgresCdcSource in eosconnect, each with its own slot and publication on one database and its own
topic prefix, both with Kafka's JsonConverter (schemas.enable=true). After the snapshot of the rows
already there, a fixed set of transactions (inserts, updates, deletes, a primary key change, an
unchanged TOASTed value, REPLICA IDENTITY FULL, every type listed in `KINDS`) is committed once; both
connectors decode the same WAL. Their topics must then hold the same records in the same order: keys
and their schemas, the envelope and its schema, op, before/after and the source block, except the
fields in `EXCLUDED`, each with the reason it legitimately differs. The topic prefix differs by
construction and is replaced by `P` in schema names and `source.name` before comparing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import psycopg
import pytest
import sqlalchemy as sa

from eosconnect.api.records import SinkRecord
from eosconnect.connectors.postgres_cdc.replication import drop_slot, slot_info
from eosconnect.converters.json import JsonConverter
from eosconnect.devkafka.debezium import debezium_connect
from eosconnect.devkafka.kafka_connect import KafkaConnectProcess
from eosconnect.transforms.unwrap import ExtractNewRecordState
from support.debezium_compare import differences, payloads, strip_excluded
from support.java_connect import java_failure, post_connector
from support.postgres import new_database, postgres  # noqa: F401 - the fixture
from support.runtime_helpers import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

#: Column name -> SQL type of the table `kinds`: every type the comparison covers.
KINDS = {
    "id": "INTEGER PRIMARY KEY",
    "small": "SMALLINT",
    "big": "BIGINT NOT NULL",
    "real_v": "REAL",
    "dbl": "DOUBLE PRECISION",
    "num": "NUMERIC(12,3)",
    "num_free": "NUMERIC",
    "txt": "TEXT",
    "vc": "VARCHAR(20)",
    "ch": "CHAR(3)",
    "flag": "BOOLEAN",
    "d": "DATE",
    "t": "TIME",
    "t3": "TIME(3)",
    "ts": "TIMESTAMP",
    "ts3": "TIMESTAMP(3)",
    "tstz": "TIMESTAMPTZ",
    "u": "UUID",
    "j": "JSON",
    "jb": "JSONB",
    "b": "BYTEA",
    "ints": "INTEGER[]",
    "texts": "TEXT[]",
    "grid": "INTEGER[][]",
    "words": "TEXT[][]",
    "iv": "INTERVAL",
    "hs": "HSTORE",
    "doc": "TEXT",
}

#: Fields left out of the comparison, each with why it legitimately differs.
EXCLUDED: dict[str, str] = {
    "value.ts_ms": "when each connector processed the event (wall clock of two processes)",
    "value.ts_us": "the same in microseconds",
    "value.ts_ns": "the same in nanoseconds",
    "snapshot:value.source.ts_ms": "a snapshot event's source time is when that connector's snapshot ran",
    "snapshot:value.source.ts_us": "the same in microseconds",
    "snapshot:value.source.ts_ns": "the same in nanoseconds",
    "snapshot:value.source.lsn": "each connector's slot has its own consistent point (its snapshot's LSN)",
    "snapshot:value.source.sequence": "holds that LSN",
    "snapshot:value.source.txId": "the id of each connector's own snapshot transaction",
    "headers.__debezium.context.runId": "a new id per task run (a time-ordered UUID on both sides)",
    "value.before.grid": "a multi-dimensional array: Debezium 3.7 writes one null per sub-array of numbers "
    "(we write the elements, flattened in row order, under the same ARRAY schema)",
    "value.after.grid": "the same",
    "value.before.words": "a multi-dimensional array: Debezium 3.7 writes Java's identity string of each "
    "sub-array of text ('[Ljava.lang.String;@445febb1', different in every run; we write the elements, "
    "flattened in row order)",
    "value.after.words": "the same",
}

ROW = (
    "INSERT INTO kinds VALUES (%(id)s, %(small)s, %(big)s, %(real_v)s, %(dbl)s, %(num)s, %(num_free)s, "
    "%(txt)s, %(vc)s, %(ch)s, %(flag)s, %(d)s, %(t)s, %(t3)s, %(ts)s, %(ts3)s, %(tstz)s, %(u)s, %(j)s, "
    "%(jb)s, %(b)s, %(ints)s, %(texts)s, %(grid)s, %(words)s, %(iv)s::interval, %(hs)s::hstore, %(doc)s)"
)


def row(i: int, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "id": i,
        "small": -i,
        "big": 9_000_000_000 + i,
        "real_v": 1.5 * i,
        "dbl": 1 / (i + 2),
        "num": f"{i}123.456",
        "num_free": f"-{i}.000100",
        "txt": f"row {i} ünïcode ✓",
        "vc": f"v{i}",
        "ch": "ab",
        "flag": i % 2 == 0,
        "d": f"2024-02-{i % 27 + 1:02d}",
        "t": f"13:14:{i % 60:02d}.123456",
        "t3": "23:59:59.999",
        "ts": f"2024-03-01 10:00:{i % 60:02d}.654321",
        "ts3": "1969-12-31 23:59:59.5",
        "tstz": f"2024-03-01 10:00:00.25+0{i % 9}:00",
        "u": str(uuid.UUID(int=i)),
        "j": json.dumps({"i": i, "nested": [1, "two", None]}),
        "jb": json.dumps({"k": i, "list": [True, 1.5]}),
        "b": bytes(range(i % 7, i % 7 + 5)),
        "ints": [i, None, -i] if i % 2 else [],
        "texts": ["a", f"b{i}", None, "with,comma"],
        "grid": [[i, 2], [3, None]] if i % 2 else [[i]],
        "words": [["a", f"b{i}"], ["c d", None]],
        "iv": "1 year 2 mons 3 days 04:05:06.789" if i % 2 else "-1 days 00:00:01",
        "hs": f'"k{i}"=>"v", "n"=>NULL',
        "doc": "short",
    }
    values.update(overrides)
    return values


@pytest.fixture(scope="module")
def debezium(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaConnectProcess]:
    """One Java Connect worker with Debezium's PostgreSQL connector for the module."""
    worker = debezium_connect(
        bootstrap,
        tmp_path_factory.mktemp("debezium"),
        f"dbz-{uuid.uuid4().hex[:8]}",
        plugin_discovery="only_scan",
    )
    worker.start(timeout=300)
    try:
        yield worker
    finally:
        worker.stop()


def _connect(url: str) -> psycopg.Connection[Any]:
    parsed = sa.engine.make_url(url)
    return psycopg.connect(
        host=parsed.host, port=parsed.port, user="postgres", dbname=parsed.database, autocommit=True
    )


def database_settings(url: str) -> dict[str, str]:
    parsed = sa.engine.make_url(url)
    return {
        "database.hostname": parsed.host or "127.0.0.1",
        "database.port": str(parsed.port),
        "database.user": "postgres",
        "database.dbname": parsed.database or "",
    }


def connector_config(url: str, prefix: str, slot: str) -> dict[str, str]:
    """The settings both connectors get (Debezium's names), differing only in prefix, slot and publication."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        **database_settings(url),
        "plugin.name": "pgoutput",
        "topic.prefix": prefix,
        "slot.name": slot,
        "publication.name": f"pub_{slot}",
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public\\.kinds,public\\.full_rows",
        "snapshot.mode": "initial",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }


def transactions(conn: psycopg.Connection[Any]) -> int:
    """The workload, committed once for both connectors; returns the number of change events."""
    big = "".join(uuid.UUID(int=i * 7919).hex for i in range(400))  # 12.8 kB, stored out of line
    events = 0

    def insert(values: dict[str, Any]) -> None:
        conn.execute(ROW, values)

    with conn.transaction():  # one insert with every type
        insert(row(10))
        events += 1
    with conn.transaction():  # several statements in one transaction
        conn.execute(
            "UPDATE kinds SET txt = 'changed', num = -0.5, num_free = 1500, ints = ARRAY[7], "
            "iv = '36 hours', hs = 'a=>1, b=>2, c=>3, dd=>\"x y\", key10=>NULL' WHERE id = 1"
        )
        conn.execute("DELETE FROM kinds WHERE id = 2")
        insert(row(11, txt=None, num=None, u=None, j=None, b=None, ints=None, iv=None, hs=None, flag=None))
        events += 3
    with conn.transaction():  # a large value stored out of line (TOAST), then left unchanged
        insert(row(12, doc=big))
        events += 1
    with conn.transaction():
        conn.execute("UPDATE kinds SET vc = 'toast kept' WHERE id = 12")
        events += 1
    with conn.transaction():  # a primary key change: a delete and a create
        conn.execute("UPDATE kinds SET id = 30 WHERE id = 3")
        events += 2
    with conn.transaction():  # REPLICA IDENTITY FULL: `before` is the whole old row
        conn.execute("UPDATE full_rows SET label = 'second', amount = amount * 2 WHERE id = 1")
        conn.execute("DELETE FROM full_rows WHERE id = 2")
        events += 2
    with conn.transaction():
        conn.execute(
            "UPDATE kinds SET num_free = 'NaN', tstz = '2000-01-01 00:00:00Z', ts = '2000-01-01', "
            "t = '00:00:00', d = '1960-06-30', ints = '{1,2,3}' WHERE id = 10"
        )
        conn.execute("DELETE FROM kinds WHERE id = 11")
        events += 2
    return events


#: The unwrap every Debezium JDBC sink guide shows, with fields and headers added from the envelope.
UNWRAP = {
    "transforms": "unwrap",
    "transforms.unwrap.type": "io.debezium.transforms.ExtractNewRecordState",
    "transforms.unwrap.add.fields": "op,source.lsn,table:tbl",
    "transforms.unwrap.add.headers": "op,db",
}


def unwrap_here(records: list[Any]) -> list[Any]:
    """Our events through our ExtractNewRecordState (configured as UNWRAP), as a sink would see them:
    read with the JsonConverter, transformed, written back with it."""
    keys, values = JsonConverter(), JsonConverter()
    keys.configure({"schemas.enable": "true"}, True)
    values.configure({"schemas.enable": "true"}, False)
    smt = ExtractNewRecordState[Any]()
    prefix = "transforms.unwrap."
    smt.configure(
        {
            k.removeprefix(prefix): v
            for k, v in UNWRAP.items()
            if k.startswith(prefix) and k != prefix + "type"
        }
    )
    out = []
    for record in records:
        key, value = (
            keys.to_connect_data(record.topic, record.key),
            values.to_connect_data(record.topic, record.value),
        )
        sink = SinkRecord(
            topic=record.topic, partition=record.partition, offset=record.offset, key=key.value,
            value=value.value, key_schema=key.schema, value_schema=value.schema, headers=record.headers,
        )  # fmt: skip
        done = smt.apply(sink)
        if done is not None:
            out.append(
                SimpleNamespace(
                    key=keys.from_connect_data(done.topic, done.key_schema, done.key),
                    value=values.from_connect_data(done.topic, done.value_schema, done.value),
                    headers=tuple((k, v.encode() if isinstance(v, str) else v) for k, v in done.headers),
                )
            )
    return out


def strip_unwrapped(event: dict[str, Any]) -> dict[str, Any]:
    """EXCLUDED, for a row of UNWRAP: its columns at the top, `__source_lsn` for the snapshot's `lsn`."""
    event["headers"].pop("__debezium.context.runId", None)
    row = (event.get("value") or {}).get("payload")
    if isinstance(row, dict):
        for column in ("grid", "words"):
            row.pop(column, None)
        if row.get("__op") == "r":
            row.pop("__source_lsn", None)
    return event


def test_events_equal_debeziums_field_by_field(
    postgres,  # noqa: F811 - the imported fixture
    debezium: KafkaConnectProcess,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
    tmp_path: Path,
) -> None:
    url = new_database(postgres)
    with _connect(url) as conn:
        conn.execute("CREATE EXTENSION hstore")
        conn.execute(f"CREATE TABLE kinds ({', '.join(f'{c} {t}' for c, t in KINDS.items())})")
        conn.execute(
            "CREATE TABLE full_rows (id BIGINT PRIMARY KEY, label TEXT NOT NULL, amount NUMERIC(8,2))"
        )
        conn.execute("ALTER TABLE full_rows REPLICA IDENTITY FULL")
        for i in (1, 2, 3):
            conn.execute(ROW, row(i))
        conn.execute("INSERT INTO full_rows VALUES (1, 'first', 10.5), (2, 'gone', NULL)")
    snapshot_events = 5
    dbz, eos, unwrapped = topic_name("dbz"), topic_name("eos"), topic_name("dbzu")
    tables = ("public.kinds", "public.full_rows")
    for prefix in (dbz, eos, unwrapped):
        for table in tables:
            create_topic(f"{prefix}.{table}")
    dbz_name, unwrap_name = f"dbz-{uuid.uuid4().hex[:6]}", f"dbzu-{uuid.uuid4().hex[:6]}"
    post_connector(debezium, dbz_name, connector_config(url, dbz, f"dbz_{uuid.uuid4().hex[:8]}"))
    # Debezium's ExtractNewRecordState on Debezium's own events, against ours on our events (below)
    unwrap_config = {**connector_config(url, unwrapped, f"dbzu_{uuid.uuid4().hex[:8]}"), **UNWRAP}
    post_connector(debezium, unwrap_name, unwrap_config)
    job = run_job(
        {
            "name": "cdc-vs-debezium",
            **connector_config(url, eos, f"eos_{uuid.uuid4().hex[:8]}"),
            "exactly.once.support": "required",
            "transaction.boundary": "connector",
        },
        worker_props("enabled"),
    )

    def count(prefix: str) -> int:
        return sum(len(read_committed(f"{prefix}.{t}", timeout=30)) for t in tables)

    def check_java() -> None:
        for name in (dbz_name, unwrap_name):
            failure = java_failure(debezium, name)
            assert failure is None, f"Debezium failed:\n{failure}\n{debezium.tail()}"

    def snapshots_done() -> bool:
        check_java()
        return count(dbz) >= snapshot_events and count(eos) >= snapshot_events

    wait_until(snapshots_done, 120, "both snapshots", job)
    with _connect(url) as conn:
        conn.autocommit = False
        changes = transactions(conn)
    # a delete is followed by a tombstone on both sides
    expected = snapshot_events + changes + 4

    def delivered() -> bool:
        check_java()
        # unwrapped: a delete becomes one record (a null value), Debezium's tombstone is dropped
        return count(dbz) >= expected and count(eos) >= expected and count(unwrapped) >= expected - 4

    try:
        wait_until(delivered, 120, "every change on both sides", job)
    finally:
        for name in (dbz_name, unwrap_name):
            httpx.delete(f"{debezium.url}/connectors/{name}", timeout=60)
    job.stop()

    found: list[str] = []
    for table in tables:
        java = payloads(read_committed(f"{dbz}.{table}"), dbz)
        ours = payloads(read_committed(f"{eos}.{table}"), eos)
        (tmp_path / f"{table}.debezium.json").write_text(json.dumps(java, indent=1))
        (tmp_path / f"{table}.eosconnect.json").write_text(json.dumps(ours, indent=1))
        assert len(java) == len(ours), (table, len(java), len(ours))
        for i, (a, b) in enumerate(zip(java, ours, strict=True)):
            found += [
                f"{table} record {i}: {d}"
                for d in differences(strip_excluded(a, EXCLUDED), strip_excluded(b, EXCLUDED))
            ]
        java_rows = payloads(read_committed(f"{unwrapped}.{table}"), unwrapped)
        our_rows = payloads(unwrap_here(read_committed(f"{eos}.{table}")), eos)
        assert len(java_rows) == len(our_rows), (table, "unwrapped", len(java_rows), len(our_rows))
        for i, (a, b) in enumerate(zip(java_rows, our_rows, strict=True)):
            found += [
                f"{table} unwrapped {i}: {d}" for d in differences(strip_unwrapped(a), strip_unwrapped(b))
            ]
    assert not found, "\n".join(found[:60]) + f"\n({len(found)} in all; both dumped in {tmp_path})"


@dataclasses.dataclass
class Switch:
    """The set-up both switch tests share: table `t` holding rows 1-5 (for the snapshot), its topic,
    and the config both connectors get, under one connector name, slot and publication."""

    url: str
    topic: str
    name: str
    config: dict[str, str]
    debezium: KafkaConnectProcess
    read_committed: Callable[..., list[Any]]

    @classmethod
    def create(
        cls,
        server: str,
        debezium: KafkaConnectProcess,
        topic_name: Callable[[str], str],
        create_topic: Callable[..., str],
        read_committed: Callable[..., list[Any]],
        label: str,
    ) -> Switch:
        url = new_database(server)
        with _connect(url) as conn:
            conn.execute("CREATE TABLE t (id INT PRIMARY KEY, v TEXT)")
            conn.execute("INSERT INTO t SELECT g, 'snapshot' FROM generate_series(1, 5) g")
        prefix = topic_name(label)
        config = {
            **connector_config(url, prefix, f"{label}_{uuid.uuid4().hex[:8]}"),
            "table.include.list": "public\\.t",
        }
        topic = create_topic(f"{prefix}.public.t")
        return cls(url, topic, f"{label}-{uuid.uuid4().hex[:6]}", config, debezium, read_committed)

    @property
    def slot(self) -> str:
        return self.config["slot.name"]

    def insert(self, ids: range, label: str) -> None:
        """One transaction per row."""
        with _connect(self.url) as conn:
            for i in ids:
                conn.execute("INSERT INTO t VALUES (%s, %s)", (i, label))

    def events(self) -> list[dict[str, Any]]:
        """The envelopes in the topic (read_committed), tombstones left out."""
        return [
            json.loads(r.value)["payload"] for r in self.read_committed(self.topic, timeout=30) if r.value
        ]

    def ops(self) -> list[tuple[int, str]]:
        return [((e["after"] or e["before"])["id"], e["op"]) for e in self.events()]

    def debezium_delivered(self, count: int) -> bool:
        failure = java_failure(self.debezium, self.name)
        assert failure is None, f"Debezium failed:\n{failure}"
        return len(self.ops()) >= count

    def our_worker(self, worker_props: Callable[..., dict[str, str]]) -> dict[str, str]:
        """An exactly-once worker storing offsets in the Kafka Connect cluster's offsets topic."""
        return worker_props(
            "enabled", offset_storage_topic=self.debezium.worker_props["offset.storage.topic"]
        )


def test_switch_from_debezium_resumes_from_its_offsets_without_a_new_snapshot(
    postgres,  # noqa: F811 - the imported fixture
    debezium: KafkaConnectProcess,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
) -> None:
    """Debezium snapshots a table and streams some inserts, then is stopped; PostgresCdcSource takes
    over under the same connector name, slot and offsets topic: it reads Debezium's stored offset
    (`lsn_commit`, `lsn_proc`), takes no new snapshot, and sends exactly the changes Debezium did not.
    PostgreSQL may resend Debezium's last transaction (the slot is confirmed only up to what Debezium
    flushed): its events must then be skipped ("skipped 1 event(s) of transaction ... Debezium
    delivered" in the task's log), where our own offset format would have sent them again."""
    sw = Switch.create(postgres, debezium, topic_name, create_topic, read_committed, "switch")
    post_connector(debezium, sw.name, sw.config)
    wait_until(lambda: sw.debezium_delivered(5), 120, "Debezium's snapshot")
    sw.insert(range(6, 11), "by debezium")
    wait_until(lambda: sw.debezium_delivered(10), 60, "Debezium's changes")
    assert httpx.put(f"{debezium.url}/connectors/{sw.name}/stop", timeout=60).status_code in (202, 204)

    def java_stopped() -> bool:
        status = httpx.get(f"{debezium.url}/connectors/{sw.name}/status", timeout=10).json()
        return status["connector"]["state"] == "STOPPED" and not status["tasks"]

    wait_until(java_stopped, 60, "Debezium to stop (its offsets flushed)")
    sw.insert(range(11, 14), "in between")  # committed while no connector runs
    job = run_job(
        {"name": sw.name, **sw.config, "exactly.once.support": "required"}, sw.our_worker(worker_props)
    )
    sw.insert(range(14, 17), "by eosconnect")
    wait_until(lambda: len(sw.ops()) >= 16, 90, "the changes after the switch", job)
    time.sleep(2.0)  # anything extra (a second snapshot, a repeat) would arrive now
    job.stop()
    events = sw.ops()
    assert [op for _, op in events] == ["r"] * 5 + ["c"] * 11, events
    assert [i for i, _ in events] == list(range(1, 17)), "every change once, none repeated"


@pytest.mark.parametrize("slot", ["same", "behind"])
def test_switch_back_to_debezium_resumes_from_our_offsets(
    slot: str,
    postgres,  # noqa: F811 - the imported fixture
    debezium: KafkaConnectProcess,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
) -> None:
    """The other direction: PostgresCdcSource snapshots a table and streams single-row transactions,
    is stopped, and Debezium takes over under the same connector name and offsets topic. Debezium
    reads our stored offset (`lsn_proc`, `lsn_commit`, `lsn_events_processed`, `messageType`; on
    snapshot events `snapshot: INITIAL` with `snapshot_completed`), takes no new snapshot, sends none
    of the changes we delivered again and every change we did not, in commit order.

    `same`: Debezium reads our slot, which our task confirmed up to its last committed transaction
    (checked) when it stopped, so PostgreSQL starts after it. `behind`: Debezium reads a copy of our
    slot taken before our first streamed change (as after a crash between the Kafka commit and the
    slot's confirmation, or a PostgreSQL restart losing a confirmation not yet checkpointed), so
    PostgreSQL sends our changes again and only our offset keeps Debezium from repeating them: our
    last change is a single-row transaction, whose BEGIN has the insert's LSN, and without
    `messageType` Debezium 3.7's WalPositionLocator restarts from that BEGIN and sends it again."""
    sw = Switch.create(postgres, debezium, topic_name, create_topic, read_committed, f"back_{slot}")
    job = run_job(
        {"name": sw.name, **sw.config, "exactly.once.support": "required"}, sw.our_worker(worker_props)
    )
    wait_until(lambda: len(sw.ops()) >= 5, 90, "our snapshot", job)
    debezium_config = sw.config
    if slot == "behind":
        behind = f"{sw.slot}_behind"
        with _connect(sw.url) as conn:
            conn.execute("SELECT pg_copy_logical_replication_slot(%s, %s)", (sw.slot, behind))
        debezium_config = {**sw.config, "slot.name": behind}
    ours = 8
    sw.insert(range(6, ours + 1), "by eosconnect")
    wait_until(lambda: len(sw.ops()) >= ours, 60, "our streamed changes", job)
    job.stop()
    last_change = sw.events()[-1]["source"]["lsn"]
    with _connect(sw.url) as conn:
        confirmed = slot_info(conn, sw.slot)
    assert confirmed is not None and (confirmed[1] or 0) > last_change, (
        f"our slot was left at {confirmed}, before our last delivered change ({last_change}): PostgreSQL "
        "would send that transaction again"
    )
    sw.insert(range(ours + 1, ours + 4), "in between")  # committed while no connector runs
    post_connector(debezium, sw.name, debezium_config)
    try:
        wait_until(lambda: sw.debezium_delivered(ours + 3), 120, "Debezium's first changes")
        sw.insert(range(ours + 4, ours + 7), "by debezium")
        wait_until(lambda: sw.debezium_delivered(ours + 6), 60, "Debezium's later changes")
        time.sleep(3.0)  # anything extra (a second snapshot, a repeat) would arrive now
        events = sw.ops()
    finally:
        httpx.delete(f"{debezium.url}/connectors/{sw.name}", timeout=60)
        if slot == "behind":
            with _connect(sw.url) as conn, contextlib.suppress(Exception):
                drop_slot(conn, debezium_config["slot.name"], wait_s=30)
    ids = [i for i, _ in events]
    assert events[:5] == [(i, "r") for i in range(1, 6)], events
    assert ids[5:ours] == list(range(6, ours + 1)), f"our streamed changes: {events}"
    ours_again = [i for i in ids[ours:] if i <= ours]
    assert not ours_again, f"Debezium sent again what we had delivered: {ours_again} ({events})"
    first_seen = list(dict.fromkeys(ids))
    assert first_seen == list(range(1, ours + 7)), f"every change, in commit order: {events}"
    assert all(op == "c" for _, op in events[5:]), "no second snapshot"
    # Debezium on Kafka Connect without exactly-once support is at least once: should its own task be
    # restarted before its first offset flush, it sends its own first changes again (from our offset).
    # That is Debezium's delivery guarantee, not where it resumed, so it is allowed here, and shown.
    if len(ids) > len(first_seen):
        print(f"Debezium repeated some of its own changes (at least once): {ids[ours:]}")
