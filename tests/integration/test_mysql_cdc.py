"""MySqlCdcSource against a real MariaDB (a binary log of row events with full table map metadata)
and, for the exactly-once tests, the session's broker.

The task-level tests run the task in this process on a fresh database: the snapshot and the stream
of a table holding every supported type are compared value by value with what the server holds; an
ALTER TABLE while streaming decodes the rows before and after it with their own columns; offsets
stored inside a transaction resume exactly after the last delivered row. The worker tests run the
connector exactly once through a SIGKILL of its task and read every topic read_committed: every
change once, per key in binlog order, each database transaction one Kafka transaction, the last
event per key equal to the row.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import random
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eosconnect.api import InMemoryOffsetStorageReader, SourceTaskContext
from eosconnect.api.data import Struct
from eosconnect.api.records import SourceRecord
from eosconnect.connectors.mysql_cdc import MySqlCdcSourceConnector, MySqlCdcTask
from support.cdc_soak import kafka_transactions
from support.runtime_helpers import wait_until
from support.workers import LONG_TESTS

EPOCH = dt.datetime(1970, 1, 1)

TYPES_TABLE = """CREATE TABLE types (
    id INT PRIMARY KEY,
    t TINYINT, tu TINYINT UNSIGNED, s SMALLINT, su SMALLINT UNSIGNED, m MEDIUMINT, mu MEDIUMINT UNSIGNED,
    i INT, iu INT UNSIGNED, b BIGINT, bu BIGINT UNSIGNED,
    f FLOAT, d DOUBLE, dec1 DECIMAL(12, 3), dec2 DECIMAL(30, 10),
    c CHAR(5), vc VARCHAR(40), tx TEXT, bin BINARY(4), vb VARBINARY(20), bl BLOB,
    dd DATE, dt0 DATETIME, dt3 DATETIME(3), dt6 DATETIME(6), ts0 TIMESTAMP NULL, ts6 TIMESTAMP(6) NULL,
    tm TIME, tm6 TIME(6), y YEAR,
    e ENUM('red', 'green', 'blue'), st SET('a', 'b', 'c'), bit1 BIT(1), bit12 BIT(12),
    js JSON
)"""

COLUMNS = (
    "id, t, tu, s, su, m, mu, i, iu, b, bu, f, d, dec1, dec2, c, vc, tx, bin, vb, bl, dd, dt0, dt3, dt6, "
    "ts0, ts6, tm, tm6, y, e, st, bit1, bit12, js"
)


def type_row(n: int) -> tuple[Any, ...]:
    """Row `n` of the matrix: extremes on some rows, NULLs on every fifth."""
    if n % 5 == 0:
        return (n, *([None] * 34))
    big = n % 2 == 0
    return (
        n,
        -128 if big else n, 255 if big else n, -32768 if big else -n, 65535 if big else n,
        -8388608 if big else n, 16777215 if big else n, -2147483648 if big else n, 4294967295 if big else n,
        -(2**63) if big else n, 2**64 - 1 if big else n,
        1.5 * n, 2.25e100 / n, decimal.Decimal(f"{n}123.456"), decimal.Decimal(f"-{n}.0123456789"),
        f"c{n}", f"varchar é {n}", "text ü" * n, bytes([n, 0, 255, 1]), bytes(range(n, n + 8)),
        bytes([0, 200, n]) * 50,
        dt.date(2024, 2, n % 28 + 1), dt.datetime(2024, 1, 2, 3, 4, 5),
        dt.datetime(2024, 1, 2, 3, 4, 5, 123000), dt.datetime(1999, 12, 31, 23, 59, 59, 999999),
        dt.datetime(2024, 5, 6, 7, 8, 9), dt.datetime(2030, 1, 1, 0, 0, 0, 654321),
        dt.timedelta(hours=-(n % 3), minutes=n), dt.timedelta(hours=n, microseconds=n * 1001), 2000 + n,
        ("red", "green", "blue")[n % 3], "a,c" if big else "b", n % 2, n * 7 % 4096,
        json.dumps({"n": n, "list": [1, "two", None]}),
    )  # fmt: skip


def expected_value(column: str, value: Any) -> Any:
    """What Debezium writes for `value` of `column` (the defaults: precise decimals, long unsigned
    bigints, bytes, adaptive_time_microseconds)."""
    if value is None:
        return None
    if column == "bu":
        return value - 2**64 if value >= 2**63 else value
    if column == "f":
        return pytest.approx(value, rel=1e-6)
    if column == "dec1":
        return value.quantize(decimal.Decimal("0.001"))
    if column == "dec2":
        return value.quantize(decimal.Decimal("1E-10"))
    if column == "bin":
        return value
    if column == "dd":
        return (value - EPOCH.date()).days
    if column in ("dt0", "dt3"):
        return (value - EPOCH) // dt.timedelta(milliseconds=1)
    if column == "dt6":
        return (value - EPOCH) // dt.timedelta(microseconds=1)
    if column == "ts0":
        return value.isoformat() + "Z"
    if column == "ts6":
        return value.isoformat(timespec="microseconds") + "Z"
    if column in ("tm", "tm6"):
        return value // dt.timedelta(microseconds=1)
    if column == "bit1":
        return bool(value)
    if column == "bit12":
        return value.to_bytes(2, "little")
    return value


def connect(server: Any, database: str | None = None) -> Any:
    import pymysql

    return pymysql.connect(
        host="127.0.0.1", port=server.port, user=server.USER, database=database, autocommit=True
    )


@pytest.fixture
def database(mariadb_binlog: Any) -> Iterator[str]:
    name = f"cdc_{uuid.uuid4().hex[:10]}"
    with connect(mariadb_binlog) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    yield name
    with connect(mariadb_binlog) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE {name}")


def source_config(server: Any, database: str, prefix: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": str(server.port),
        "database.user": server.USER,
        "database.server.id": str(random.randint(1000, 2**31)),
        "topic.prefix": prefix,
        "database.include.list": database,
        "poll.interval.ms": "200",
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


class Task:
    """A MySqlCdcTask in this process, started on stored offsets."""

    def __init__(self, config: dict[str, str], offset: dict[str, Any] | None = None) -> None:
        self.task = MySqlCdcTask()
        stored = [({"server": config["topic.prefix"]}, offset)] if offset else []
        self.task.initialize(SourceTaskContext(offset_storage_reader=InMemoryOffsetStorageReader(stored)))
        self.task.start(config)

    def records(self, count: int, timeout: float = 30) -> list[SourceRecord]:
        out: list[SourceRecord] = []
        deadline = time.monotonic() + timeout
        while len(out) < count:
            assert time.monotonic() < deadline, f"{len(out)} of {count} records after {timeout} s"
            out.extend(self.task.poll() or [])
        return out

    def stop(self) -> None:
        self.task.stop()


def as_dict(struct: Struct | None) -> dict[str, Any] | None:
    return None if struct is None else {f.name: struct.get(f.name) for f in struct.schema.fields}


def test_type_matrix_snapshot_and_stream_equal_the_rows_and_follow_an_alter(mariadb_binlog, database):
    with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
        cur.execute(TYPES_TABLE)
        marks = ", ".join(["%s"] * 35)
        cur.executemany(
            f"INSERT INTO types ({COLUMNS}) VALUES ({marks})", [type_row(n) for n in range(1, 11)]
        )
    task = Task(source_config(mariadb_binlog, database, "mx"))
    try:
        snapshot = task.records(10)
        assert [r.value.get("op") for r in snapshot] == ["r"] * 10
        assert snapshot[0].value.get("source").get("snapshot") == "first"
        assert snapshot[-1].value.get("source").get("snapshot") == "last"
        assert all(r.source_offset["snapshot"] == "INITIAL" for r in snapshot[:-1])
        assert "snapshot" not in snapshot[-1].source_offset, "the last one: Debezium's completed snapshot"

        with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.executemany(
                f"INSERT INTO types ({COLUMNS}) VALUES ({marks})", [type_row(n) for n in range(11, 21)]
            )
            cur.execute("UPDATE types SET vc = 'updated', bu = 7 WHERE id = 3")
            cur.execute("DELETE FROM types WHERE id = 4")
            cur.execute("COMMIT")
        streamed = task.records(13)  # 10 inserts, an update, a delete and its tombstone
        assert [r.value.get("op") if r.value else None for r in streamed] == ["c"] * 10 + ["u", "d", None]
        source = streamed[0].value.get("source")
        assert source.get("connector") == "mariadb" and source.get("db") == database
        assert source.get("gtid") and source.get("file") and source.get("pos") > 0
        assert {r.value.get("source").get("gtid") for r in streamed if r.value} == {source.get("gtid")}
        assert "event" not in streamed[-1].source_offset, "the transaction's last record: after its commit"
        # Debezium's count: the transaction's GTID event is 0, its table map 1, the rows event 2
        assert streamed[0].source_offset["row"] == 1 and streamed[0].source_offset["event"] == 2

        # every column of every row equals the table's row, as Debezium writes it
        names = [c.strip() for c in COLUMNS.split(",")]
        rows = {r[0]: dict(zip(names, r, strict=True)) for r in (type_row(n) for n in range(1, 21))}
        for record in snapshot + streamed[:10]:
            after = as_dict(record.value.get("after"))
            assert after is not None
            expected = rows[after["id"]]
            for column in names:
                assert after[column] == expected_value(column, expected[column]), (after["id"], column)
            if after["id"] % 5:
                assert json.loads(after["js"]) == json.loads(expected["js"])
        update = streamed[10].value
        assert as_dict(update.get("after")) == {**as_dict(update.get("before")), "vc": "updated", "bu": 7}
        assert as_dict(update.get("before"))["vc"] == "varchar é 3"
        assert as_dict(streamed[11].value.get("before"))["id"] == 4
        assert as_dict(streamed[12].key) == {"id": 4}

        schema = {f.name: f.schema for f in snapshot[0].value.get("after").schema.fields}
        assert schema["dec1"].name == "org.apache.kafka.connect.data.Decimal"
        assert schema["dec1"].parameters == {"scale": "3", "connect.decimal.precision": "12"}
        assert (schema["dd"].name, schema["dt0"].name, schema["dt6"].name) == (
            "io.debezium.time.Date",
            "io.debezium.time.Timestamp",
            "io.debezium.time.MicroTimestamp",
        )
        assert (schema["ts0"].name, schema["tm"].name, schema["y"].name) == (
            "io.debezium.time.ZonedTimestamp",
            "io.debezium.time.MicroTime",
            "io.debezium.time.Year",
        )
        assert schema["e"].name == "io.debezium.data.Enum" and schema["e"].parameters == {
            "allowed": "red,green,blue"
        }
        assert schema["st"].name == "io.debezium.data.EnumSet"
        assert schema["bit12"].name == "io.debezium.data.Bits"
        assert (schema["tu"].type.value, schema["su"].type.value, schema["iu"].type.value) == (
            "int16",
            "int32",
            "int64",
        )
        streamed_schema = {f.name: f.schema for f in streamed[0].value.get("after").schema.fields}
        assert streamed_schema == schema, "the table map gives the schema the catalog gives"

        # an ALTER while streaming: the rows before it decode with the old columns, after with the new
        with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
            cur.execute("UPDATE types SET vc = 'before alter' WHERE id = 1")
            cur.execute("ALTER TABLE types ADD COLUMN tier SMALLINT NOT NULL DEFAULT 2 AFTER id")
            cur.execute("UPDATE types SET vc = 'after alter', tier = 5 WHERE id = 1")
            cur.execute("ALTER TABLE types DROP COLUMN tx")
            cur.execute("UPDATE types SET vc = 'after drop' WHERE id = 1")
        before, after, dropped = (r.value.get("after") for r in task.records(3))
        assert as_dict(before)["vc"] == "before alter" and "tier" not in as_dict(before)
        assert as_dict(after)["vc"] == "after alter" and as_dict(after)["tier"] == 5
        assert as_dict(after)["tx"] == "text ü"
        assert as_dict(dropped)["vc"] == "after drop" and "tx" not in as_dict(dropped)
        assert as_dict(dropped)["tier"] == 5
    finally:
        task.stop()


def test_an_offset_inside_a_transaction_resumes_after_its_last_row(mariadb_binlog, database):
    """Offsets stored inside a transaction (as Debezium's: its start, then rows events and rows
    done) resume with the next row; the offset of a transaction's last record with the next one.
    So does the offset Debezium's MySQL connector stores there on MariaDB (the rows event's end and
    the rows done of it, no `event`): the rest of the transaction is read, not skipped."""
    with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(10))")
    config = source_config(
        mariadb_binlog, database, "rs", snapshot_mode="no_data", tombstones_on_delete="false"
    )
    task = Task(config)
    try:
        with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
            cur.execute("BEGIN")
            cur.executemany("INSERT INTO items VALUES (%s, 'a')", [(i,) for i in range(1, 6)])  # one event
            cur.execute("UPDATE items SET v = 'b' WHERE id IN (1, 2)")
            cur.execute("DELETE FROM items WHERE id = 5")
            cur.execute("COMMIT")
            cur.execute("INSERT INTO items VALUES (6, 'c')")
        first = task.records(9)
    finally:
        task.stop()
    ops = [(r.value.get("op"), as_dict(r.key)["id"]) for r in first]
    assert ops == [("c", 1), ("c", 2), ("c", 3), ("c", 4), ("c", 5), ("u", 1), ("u", 2), ("d", 5), ("c", 6)]
    with connect(mariadb_binlog) as conn, conn.cursor() as cur:
        cur.execute(f"SHOW BINLOG EVENTS IN '{first[0].source_offset['file']}'")
        end_of = {int(e[1]): int(e[4]) for e in cur.fetchall()}
    for cut in (0, 3, 5, 6, 7, 8):
        # Debezium's MySQL connector on MariaDB sees no BEGIN: its offset inside a transaction is the
        # end of the record's rows event and the rows delivered of it, with no `event`
        source = first[cut].value.get("source")
        debezium = {
            "file": source.get("file"),
            "pos": end_of[source.get("pos")],
            "row": source.get("row") + 1,
        }
        for offset in (dict(first[cut].source_offset), debezium):
            if cut == len(first) - 1 and offset is debezium:
                continue  # the transaction's last record: Debezium's offset is after the rows event
            resumed = Task(config, offset)
            try:
                rest = resumed.records(len(first) - cut - 1)
            finally:
                resumed.stop()
            assert [(r.value.get("op"), as_dict(r.key)["id"]) for r in rest] == ops[cut + 1 :], (cut, offset)


def test_validation_names_each_missing_server_setting_and_its_fix(mariadb_binlog, database):
    config = source_config(mariadb_binlog, database, "v")
    with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE t (id INT PRIMARY KEY)")
    assert not [r for r in MySqlCdcSourceConnector().validate(config) if r.errors]
    with connect(mariadb_binlog) as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
        cur.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
        try:
            errors = {r.name: r.errors for r in MySqlCdcSourceConnector().validate(config) if r.errors}
        finally:
            cur.execute("SET GLOBAL binlog_row_image = 'FULL'")
            cur.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
    text = " ".join(errors["database.hostname"])
    assert "SET GLOBAL binlog_row_image = 'FULL';" in text
    assert "SET GLOBAL binlog_row_metadata = 'FULL';" in text
    nothing = {**config, "table.include.list": f"{database}\\.nothing"}
    errors = {r.name: r.errors for r in MySqlCdcSourceConnector().validate(nothing) if r.errors}
    assert "no table matches" in errors["table.include.list"][0]


# ---------------------------------------------------------------------------------- exactly once

SNAPSHOT_ROWS = 30


class Workload:
    """Transactions of 1-4 statements (insert, update, delete) on random keys of `accounts`, from a
    thread; each update sets a new `version`. `gtids` maps each transaction's GTID (@@last_gtid) to
    its number of row changes."""

    def __init__(
        self, server: Any, database: str, transactions: int, seed: int, pause_s: float = 0.02
    ) -> None:
        self.server, self.database, self.transactions, self.pause_s = server, database, transactions, pause_s
        self.random = random.Random(seed)
        self.gtids: dict[str, int] = {}
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    @property
    def changes(self) -> int:
        return sum(self.gtids.values())

    def start(self) -> Workload:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join(120)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            with connect(self.server, self.database) as conn, conn.cursor() as cur:
                next_id, version = SNAPSHOT_ROWS + 1, 0
                for _ in range(self.transactions):
                    cur.execute("BEGIN")
                    changes = 0
                    for _ in range(self.random.randint(1, 4)):
                        cur.execute("SELECT id FROM accounts")
                        ids = [r[0] for r in cur.fetchall()]
                        choice, version = self.random.random(), version + 1
                        if choice < 0.4 or len(ids) < 5:
                            cur.execute(
                                "INSERT INTO accounts VALUES (%s, %s, %s, %s)",
                                (next_id, f"owner-{next_id}", f"{next_id}.5", version),
                            )
                            next_id += 1
                        elif choice < 0.8:
                            cur.execute(
                                "UPDATE accounts SET balance = balance + 1, version = %s WHERE id = %s",
                                (version, self.random.choice(ids)),
                            )
                        else:
                            cur.execute("DELETE FROM accounts WHERE id = %s", (self.random.choice(ids),))
                        changes += 1
                    cur.execute("COMMIT")
                    cur.execute("SELECT @@last_gtid")
                    self.gtids[str(cur.fetchone()[0])] = changes
                    time.sleep(self.pause_s)
        except BaseException as exc:  # surfaced by join()
            self.error = exc


@pytest.fixture
def accounts(mariadb_binlog: Any, database: str) -> str:
    with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE accounts (id INT PRIMARY KEY, owner VARCHAR(40) NOT NULL, balance DECIMAL(12, 2), "
            "version BIGINT NOT NULL)"
        )
        cur.executemany(
            "INSERT INTO accounts VALUES (%s, %s, %s, 0)",
            [(i, f"owner-{i}", f"{i}.25") for i in range(1, SNAPSHOT_ROWS + 1)],
        )
    return database


def kafka_config(server: Any, database: str, prefix: str, **extra: str) -> dict[str, str]:
    return {
        "name": f"mysql-{prefix}",
        **source_config(server, database, prefix),
        "table.include.list": f"{database}\\.accounts",
        "transaction.boundary": "connector",
        "exactly.once.support": "required",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


def read_events(read_committed: Any, topic: str) -> list[tuple[int, Any, Any]]:
    """(Kafka offset, key id, value payload or None) of every committed record."""
    out = []
    for record in read_committed(topic):
        key = json.loads(record.key)["payload"] if record.key else None
        value = json.loads(record.value)["payload"] if record.value else None
        out.append((record.offset, key["id"] if key else None, value))
    return out


def count_changes(read_committed: Any, topic: str) -> int:
    return sum(1 for _, _, v in read_events(read_committed, topic) if v and v["op"] != "r")


def check_exactly_once(
    events: list[tuple[int, Any, Any]], server: Any, database: str, workload: Workload
) -> None:
    """Every change once, per key in binlog order, each database transaction one Kafka transaction
    holding all its changes, the last event per key equal to the row (a tombstone when deleted)."""
    seen: set[str] = set()
    per_key: dict[int, list[Any]] = defaultdict(list)
    per_gtid: dict[str, int] = defaultdict(int)
    for _offset, key, value in events:
        if value is None:
            per_key[key].append(None)
            continue
        source = value["source"]
        identity = json.dumps([source["gtid"], source["pos"], source["row"], value["op"], value["after"]])
        assert identity not in seen, f"duplicate event {identity}"
        seen.add(identity)
        per_key[key].append(value)
        if value["op"] != "r":
            per_gtid[source["gtid"]] += 1
    assert dict(per_gtid) == workload.gtids, "every transaction's changes, each once"
    snapshot = [v for _, _, v in events if v is not None and v["op"] == "r"]
    assert len(snapshot) == SNAPSHOT_ROWS and snapshot[-1]["source"]["snapshot"] == "last"
    groups = kafka_transactions(events)
    assert all(v is not None and v["op"] == "r" for _, _, v in groups[0]), "the snapshot is one transaction"
    owners = []
    for group in groups[1:]:
        gtids = {v["source"]["gtid"] for _, _, v in group if v is not None}
        assert len(gtids) == 1, f"one database transaction per Kafka transaction, got {gtids}"
        owners.extend(gtids)
    assert len(owners) == len(set(owners)), "no database transaction is split"
    with connect(server, database) as conn, conn.cursor() as cur:
        cur.execute("SELECT id, owner, CAST(balance AS CHAR), version FROM accounts")
        rows = {r[0]: r for r in cur.fetchall()}
    for key, history in per_key.items():
        positions = [
            (v["source"]["file"], v["source"]["pos"], v["source"]["row"])
            for v in history
            if v and v["op"] != "r"
        ]
        assert positions == sorted(positions), f"key {key}: events out of binlog order"
        last = history[-1]
        if key in rows:
            assert last is not None and last["after"]["version"] == rows[key][3], (key, last)
            assert last["after"]["owner"] == rows[key][1]
        else:
            assert last is None, f"key {key} was deleted: its last record must be a tombstone"
    assert set(rows) <= set(per_key)


@pytest.mark.kafka
@pytest.mark.spark
def test_sigkilled_task_resumes_exactly_once_one_kafka_transaction_per_db_transaction(
    mariadb_binlog,
    accounts,
    run_job,
    worker_props,
    topic_name,
    create_topic,
    read_committed,
    tmp_path: Path,
):
    prefix = topic_name("my")
    topic = create_topic(f"{prefix}.{accounts}.accounts")
    markers = tmp_path / "markers"
    markers.mkdir()
    config = kafka_config(
        mariadb_binlog,
        accounts,
        prefix,
        connector_class="support.mysql_cdc_connectors.CrashingMySqlCdcConnector",
        crash_after_batches="4",
        crash_marker_dir=str(markers),
    )
    job = run_job(config, worker_props("enabled"))
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    workload = Workload(mariadb_binlog, accounts, transactions=80, seed=11).start()
    workload.join()
    wait_until(lambda: count_changes(read_committed, topic) >= workload.changes, 120, "every change", job)
    outcomes = job.stop()
    assert (markers / "crashed").exists(), "the task's Python worker must have been SIGKILLed"
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes
    check_exactly_once(read_events(read_committed, topic), mariadb_binlog, accounts, workload)


@pytest.mark.kafka
@pytest.mark.spark
def test_sigkilled_worker_process_then_restarted_exactly_once(
    mariadb_binlog,
    accounts,
    workers,
    topic_name,
    create_topic,
    read_committed,
):
    """The whole worker (its process group and the task's Python worker) is SIGKILLed mid-stream;
    a new worker of the same group resumes from the committed offset."""
    import contextlib
    import os
    import signal

    prefix = topic_name("my")
    topic = create_topic(f"{prefix}.{accounts}.accounts")
    first = workers("w1")
    config = kafka_config(mariadb_binlog, accounts, prefix)
    assert first.create_connector(config["name"], config).status_code == 201
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 120, "the snapshot")
    workload = Workload(mariadb_binlog, accounts, transactions=80, seed=41, pause_s=0.05).start()
    wait_until(lambda: count_changes(read_committed, topic) >= 10, 60, "the first changes")
    tasks = first.request("GET", "/internal/tasks").json()
    task_pids = [int(t["pid"]) for t in tasks.values() if t.get("pid")]
    first.kill()
    for pid in task_pids:  # the task's Python worker runs in a process group of its own
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    workload.join()
    second = workers("w2")
    second.wait_for(lambda: second.task_states(config["name"]) == ["RUNNING"], 120, "the task on w2")
    wait_until(lambda: count_changes(read_committed, topic) >= workload.changes, 120, "every change")
    second.stop_connector(config["name"])
    check_exactly_once(read_events(read_committed, topic), mariadb_binlog, accounts, workload)


def test_a_purged_position_fails_naming_it_or_takes_a_new_snapshot_when_needed(mariadb_binlog, database):
    with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id INT PRIMARY KEY)")
        cur.execute("INSERT INTO items VALUES (1), (2)")
    config = source_config(mariadb_binlog, database, "pg")
    task = Task(config)
    try:
        offset = dict(task.records(2)[-1].source_offset)
    finally:
        task.stop()
    with connect(mariadb_binlog) as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        current = cur.fetchone()[0]
        deadline = time.monotonic() + 30
        while True:  # a binlog a dump thread still reads is kept: until the server ends that thread
            cur.execute(f"PURGE BINARY LOGS TO '{current}'")
            cur.execute("SHOW BINARY LOGS")
            if offset["file"] not in [r[0] for r in cur.fetchall()]:
                break
            assert time.monotonic() < deadline, "the binlog was not purged"
            time.sleep(0.5)
    from eosconnect.api.errors import ConnectException

    with pytest.raises(ConnectException, match="is not on") as failed:
        Task(config, offset)
    assert offset["file"] in str(failed.value) and "snapshot.mode=when_needed" in str(failed.value)
    again = Task({**config, "snapshot.mode": "when_needed"}, offset)
    try:
        assert [r.value.get("op") for r in again.records(2)] == ["r", "r"]
    finally:
        again.stop()


def test_a_server_killed_mid_stream_is_read_again_after_the_last_whole_transaction(mariadb_binlog, database):
    """mariadbd SIGKILLed while transactions are being streamed and started again: the task
    reconnects by itself and every change arrives once."""
    with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(10))")
    config = source_config(
        mariadb_binlog, database, "kl", snapshot_mode="no_data", retriable_restart_connector_wait_ms="300"
    )
    task = Task(config)
    try:
        with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
            for i in range(1, 6):
                cur.execute("BEGIN")
                cur.execute("INSERT INTO items VALUES (%s, 'a'), (%s, 'b')", (i * 10, i * 10 + 1))
                cur.execute("COMMIT")
        records = task.records(4)  # some read, the rest read after the restart
        mariadb_binlog.kill()
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:  # the task meets the dead server
            records.extend(task.task.poll() or [])
        mariadb_binlog.start()
        with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO items VALUES (60, 'c'), (61, 'd')")
        records.extend(task.records(12 - len(records), timeout=60))
        time.sleep(1)
        records.extend(task.task.poll() or [])
    finally:
        task.stop()
    ids = [as_dict(r.key)["id"] for r in records]
    assert ids == [10, 11, 20, 21, 30, 31, 40, 41, 50, 51, 60, 61], ids


def test_heartbeats_move_the_offset_while_the_captured_tables_are_idle(mariadb_binlog, database):
    with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE items (id INT PRIMARY KEY)")
        cur.execute("CREATE TABLE other (id INT PRIMARY KEY)")
    config = source_config(
        mariadb_binlog,
        database,
        "hb",
        snapshot_mode="no_data",
        heartbeat_interval_ms="300",
        table_include_list=f"{database}\\.items",
    )
    task = Task(config)
    try:
        start = task.task._read_to
        with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO other VALUES (1), (2)")
        beat = task.records(1)[0]
        assert beat.topic == "__debezium-heartbeat.hb" and as_dict(beat.key) == {"serverName": "hb"}
        assert beat.source_offset["pos"] > start.pos and beat.source_offset["gtids"] != start.gtids
        time.sleep(0.8)
        assert not task.task.poll(), "no new heartbeat while the position stays"
    finally:
        task.stop()
    resumed = Task(config, dict(beat.source_offset))
    try:
        with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
            cur.execute("INSERT INTO items VALUES (7)")
        (record,) = resumed.records(1)
        assert as_dict(record.key) == {"id": 7}
    finally:
        resumed.stop()


#: 100,000 rows under EOSCONNECT_LONG_TESTS=1; 20,000 in `make test`, which bounds each file's time.
BIG_TRANSACTION_ROWS = 100_000 if LONG_TESTS else 20_000


@pytest.mark.kafka
@pytest.mark.spark
def test_one_large_transaction_is_one_kafka_transaction(
    mariadb_binlog, accounts, run_job, worker_props, topic_name, create_topic, read_committed
):
    """One transaction of BIG_TRANSACTION_ROWS inserted rows (many rows events, one XID): every row
    arrives once, all in one Kafka transaction (consecutive offsets: no commit marker between)."""
    prefix = topic_name("my")
    topic = create_topic(f"{prefix}.{accounts}.accounts")
    job = run_job(
        kafka_config(mariadb_binlog, accounts, prefix, max_batch_size="4096"), worker_props("enabled")
    )
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    first = 1_000_000
    with connect(mariadb_binlog, accounts) as conn, conn.cursor() as cur:
        cur.execute("BEGIN")
        cur.executemany(
            "INSERT INTO accounts (id, owner, balance, version) VALUES (%s, %s, 1, %s)",
            [(n, f"bulk-{n}", n) for n in range(first, first + BIG_TRANSACTION_ROWS)],
        )
        cur.execute("COMMIT")
    total = SNAPSHOT_ROWS + BIG_TRANSACTION_ROWS
    wait_until(lambda: len(read_committed(topic)) >= total, 240, "the large transaction", job)
    job.stop()
    records = read_committed(topic)
    assert len(records) == total, "nothing duplicated"
    bulk = records[SNAPSHOT_ROWS:]
    ids = [json.loads(r.key)["payload"]["id"] for r in bulk]
    assert ids == list(range(first, first + BIG_TRANSACTION_ROWS)), "every row once, in binlog order"
    offsets = [r.offset for r in bulk]
    assert offsets == list(range(offsets[0], offsets[0] + BIG_TRANSACTION_ROWS)), "one Kafka transaction"
    gtids = {json.loads(r.value)["payload"]["source"]["gtid"] for r in (bulk[0], bulk[-1])}
    assert len(gtids) == 1
