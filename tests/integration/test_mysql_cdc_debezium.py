"""MySqlCdcSource against real Debezium on one MariaDB: a type matrix compared field by field.

Debezium's binlog connector (the plugin in `eosconnect.devkafka.debezium.MYSQL_PLUGIN`) runs in
Apache Kafka Connect (Java), MySqlCdcSource in eosconnect, both on the same MariaDB (a binary log of
full row images) and the same broker, each with its own `topic.prefix` and server id, both under
Debezium's connector class and with Kafka's JsonConverter (schemas.enable=true). Both snapshot the
rows already there, then a fixed set of transactions (inserts, an update, a delete, NULLs and
extremes of every type in `KINDS`) is committed once and both decode the same binlog. Their topics
must hold the same records in the same order: keys and their schemas, the envelope and its schema,
op, before/after and the source block, except the fields in `EXCLUDED`, each with the reason it
legitimately differs. The offsets each stored are then compared key by key (`OFFSET_KEYS`).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from eosconnect.devkafka.debezium import MYSQL_PLUGIN, debezium_connect
from eosconnect.devkafka.kafka_connect import KafkaConnectProcess
from eosconnect.devkafka.mariadb import LocalMariaDB, MariaDBSetupError
from support.debezium_compare import differences, payloads, strip_excluded
from support.java_connect import java_failure, post_connector
from support.runtime_helpers import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

#: Column name -> SQL type of the table `kinds`: every type the comparison covers.
KINDS = {
    "id": "INT PRIMARY KEY",
    "t": "TINYINT", "tu": "TINYINT UNSIGNED", "s": "SMALLINT", "su": "SMALLINT UNSIGNED",
    "m": "MEDIUMINT", "mu": "MEDIUMINT UNSIGNED", "i": "INT", "iu": "INT UNSIGNED",
    "b": "BIGINT NOT NULL", "bu": "BIGINT UNSIGNED",
    "f": "FLOAT", "d": "DOUBLE", "dec1": "DECIMAL(12,3)", "dec2": "DECIMAL(30,10)",
    "c": "CHAR(5)", "vc": "VARCHAR(40)", "tx": "TEXT", "bin": "BINARY(4)", "vb": "VARBINARY(20)",
    "bl": "BLOB",
    "dd": "DATE", "dt0": "DATETIME", "dt1": "DATETIME(1)", "dt3": "DATETIME(3)", "dt4": "DATETIME(4)",
    "dt6": "DATETIME(6)", "ts0": "TIMESTAMP NULL", "ts3": "TIMESTAMP(3) NULL", "ts6": "TIMESTAMP(6) NULL",
    "tm": "TIME", "tm3": "TIME(3)", "tm6": "TIME(6)", "y": "YEAR",
    "e": "ENUM('red','green','blue')", "st": "SET('a','b','c')", "bit1": "BIT(1)", "bit12": "BIT(12)",
    "js": "JSON",
}  # fmt: skip

#: Fields left out of the comparison, each with why it legitimately differs.
EXCLUDED: dict[str, str] = {
    "value.ts_ms": "when each connector processed the event (wall clock of two processes)",
    "value.ts_us": "the same in microseconds",
    "value.ts_ns": "the same in nanoseconds",
    "snapshot:value.source.ts_ms": "a snapshot event's source time is when that connector's snapshot ran",
    "snapshot:value.source.ts_us": "the same in microseconds",
    "snapshot:value.source.ts_ns": "the same in nanoseconds",
    "value.source.gtid": "streaming: Debezium's MySQL connector reads MariaDB as a MySQL without GTIDs (it "
    "does not register as a MariaDB replica, and MariaDB has no gtid_mode), so it writes null; we write "
    "MariaDB's GTID (domain-server-sequence), as Debezium's MariaDB connector does",
    "snapshot:value.after.ts3": "Debezium 3.6's snapshot prints a TIMESTAMP's fraction without trailing "
    "zeros ('.25Z'), its stream with the column's digits ('.250Z'); we write the column's digits in both",
    "headers.__debezium.context.runId": "a new id per task run",
    "value.source.version": "the Debezium release each writes (the reference runs the newest 3.x whose "
    "MySQL connector Maven Central serves whole, ours names the one it follows)",
}


def row(n: int) -> dict[str, Any]:
    """Row `n` of the matrix: extremes on even rows, NULLs (where allowed) on every fifth."""
    big = n % 2 == 0
    values: dict[str, Any] = {
        "id": n,
        "t": -128 if big else n, "tu": 255 if big else n, "s": -32768 if big else -n,
        "su": 65535 if big else n, "m": -8388608 if big else n, "mu": 16777215 if big else n,
        "i": -2147483648 if big else n, "iu": 4294967295 if big else n,
        "b": -(2**63) if big else n, "bu": 2**64 - 1 if big else n,
        "f": 1.5 * n, "d": 2.25e100 / n, "dec1": decimal.Decimal(f"{n}123.456"),
        "dec2": decimal.Decimal(f"-{n}.0123456789"),
        "c": f"c{n}", "vc": f"varchar é {n}", "tx": "text ü" * n, "bin": bytes([n, 0, 255, 1]),
        "vb": bytes(range(n, n + 8)), "bl": bytes([0, 200, n]) * 50,
        "dd": dt.date(2024, 2, n % 28 + 1), "dt0": dt.datetime(2024, 1, 2, 3, 4, 5),
        "dt1": dt.datetime(1960, 1, 2, 3, 4, 5, 100000),
        "dt3": dt.datetime(2024, 1, 2, 3, 4, 5, 123000), "dt4": dt.datetime(2024, 1, 2, 3, 4, 5, 123400),
        "dt6": dt.datetime(1999, 12, 31, 23, 59, 59, 999999),
        "ts0": dt.datetime(2024, 5, 6, 7, 8, 9), "ts3": dt.datetime(2024, 5, 6, 7, 8, 9, 250000),
        "ts6": dt.datetime(2030, 1, 1, 0, 0, 0, 654321),
        "tm": dt.timedelta(hours=-(n % 3), minutes=n), "tm3": dt.timedelta(hours=838, milliseconds=5),
        "tm6": dt.timedelta(hours=n, microseconds=n * 1001), "y": 2000 + n,
        "e": ("red", "green", "blue")[n % 3], "st": "a,c" if big else "b", "bit1": n % 2,
        "bit12": n * 7 % 4096, "js": json.dumps({"n": n, "list": [1, "two", None]}),
    }  # fmt: skip
    if n % 5 == 0:
        values = {k: (v if k in ("id", "b") else None) for k, v in values.items()}
    return values


INSERT = f"INSERT INTO kinds ({', '.join(KINDS)}) VALUES ({', '.join(f'%({c})s' for c in KINDS)})"


def connect(server: Any, database: str | None = None) -> Any:
    import pymysql

    return pymysql.connect(
        host="127.0.0.1", port=server.port, user=server.USER, database=database, autocommit=True
    )


@pytest.fixture(scope="module")
def debezium(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaConnectProcess]:
    """One Java Connect worker with Debezium's binlog connector for the module."""
    worker = debezium_connect(
        bootstrap,
        tmp_path_factory.mktemp("debezium"),
        f"dbz-{uuid.uuid4().hex[:8]}",
        plugin=MYSQL_PLUGIN,
        plugin_discovery="only_scan",
    )
    worker.start(timeout=300)
    try:
        yield worker
    finally:
        worker.stop()


#: What the server reports as its version: Debezium 3's MySQL connector gates its statements on it
#: (a MariaDB 10/11 version reads as MySQL >= 8.4, whose `SHOW BINARY LOG STATUS` MariaDB lacks) and so
#: does MySQL Connector/J (from 5.7.20 on it reads `transaction_isolation`, MariaDB 10 has `tx_isolation`);
#: MySqlCdcSource tells MariaDB from MySQL by the word MariaDB in it.
SERVER_VERSION = "5.7.19-MariaDB-log"


@pytest.fixture(scope="module")
def mariadb_binlog() -> Iterator[Any]:
    """A MariaDB of the module's own with a binary log, reporting `SERVER_VERSION`."""
    pytest.importorskip("pymysql", reason="PyMySQL (the test extra) is needed for the MariaDB tests")
    try:
        server = LocalMariaDB(binlog=True, options=(f"--version={SERVER_VERSION}",))
    except MariaDBSetupError as exc:
        pytest.skip(str(exc))
    try:
        server.start()
        yield server
    finally:
        server.stop()


@pytest.fixture
def database(mariadb_binlog: Any) -> Iterator[str]:
    name = f"dbzcmp_{uuid.uuid4().hex[:10]}"
    with connect(mariadb_binlog) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
    yield name
    with connect(mariadb_binlog) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE {name}")


def connector_config(
    server: Any, database: str, prefix: str, server_id: int, bootstrap: str
) -> dict[str, str]:
    """The settings both connectors get (Debezium's names), differing only in prefix and server id."""
    return {
        "connector.class": MYSQL_CONNECTOR_CLASS,
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": str(server.port),
        "database.user": server.USER,
        "database.password": "",
        "database.server.id": str(server_id),
        "topic.prefix": prefix,
        "database.include.list": database,
        "table.include.list": f"{database}\\.kinds",
        "snapshot.mode": "initial",
        "include.schema.changes": "false",
        "schema.history.internal.kafka.topic": f"{prefix}-history",
        "schema.history.internal.kafka.bootstrap.servers": bootstrap,
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }


MYSQL_CONNECTOR_CLASS = "io.debezium.connector.mysql.MySqlConnector"


def transactions(conn: Any) -> int:
    """The workload, committed once for both connectors; returns the number of change events."""
    with conn.cursor() as cur:
        conn.begin()
        for n in (6, 7, 10):
            cur.execute(INSERT, row(n))
        conn.commit()
        conn.begin()
        cur.execute("UPDATE kinds SET vc = 'changed', dec1 = -0.5, bu = 0, js = '[]', st = '' WHERE id = 1")
        cur.execute("DELETE FROM kinds WHERE id = 2")
        conn.commit()
        cur.execute("UPDATE kinds SET e = NULL, dt6 = '1970-01-01 00:00:00' WHERE id = 3")
    return 6


def offsets(read_committed: Callable[..., list[Any]], topic: str, name: str) -> list[dict[str, Any]]:
    """Every offset value connector `name` stored in the offsets topic, in order."""
    out = []
    for record in read_committed(topic, timeout=30):
        if record.key and record.value and json.loads(record.key)[0] == name:
            out.append(json.loads(record.value))
    return out


def test_events_equal_debeziums_field_by_field(
    mariadb_binlog: Any,
    database: str,
    debezium: KafkaConnectProcess,
    bootstrap: str,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
    tmp_path: Path,
) -> None:
    with connect(mariadb_binlog, database) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE kinds ({', '.join(f'{c} {t}' for c, t in KINDS.items())})")
        for n in (1, 2, 3, 4, 5):
            cur.execute(INSERT, row(n))
    snapshot_events = 5
    dbz, eos = topic_name("dbz"), topic_name("eos")
    table = f"{database}.kinds"
    for prefix in (dbz, eos):
        create_topic(f"{prefix}.{table}")
    dbz_name = f"dbz-{uuid.uuid4().hex[:6]}"
    post_connector(debezium, dbz_name, connector_config(mariadb_binlog, database, dbz, 4101, bootstrap))
    ours = worker_props("enabled")
    job = run_job(
        {
            "name": "mysql-cdc-vs-debezium",
            **connector_config(mariadb_binlog, database, eos, 4102, bootstrap),
            "exactly.once.support": "required",
            "transaction.boundary": "connector",
        },
        ours,
    )

    def count(prefix: str) -> int:
        return len(read_committed(f"{prefix}.{table}", timeout=30))

    def check_java() -> None:
        failure = java_failure(debezium, dbz_name)
        assert failure is None, f"Debezium failed:\n{failure}\n{debezium.tail()}"

    def snapshots_done() -> bool:
        check_java()
        return count(dbz) >= snapshot_events and count(eos) >= snapshot_events

    wait_until(snapshots_done, 120, "both snapshots", job)
    with connect(mariadb_binlog, database) as conn:
        changes = transactions(conn)
    expected = snapshot_events + changes + 1  # the delete's tombstone

    def delivered() -> bool:
        check_java()
        return count(dbz) >= expected and count(eos) >= expected

    try:
        wait_until(delivered, 120, "every change on both sides", job)
        wait_until(
            lambda: bool(offsets(read_committed, debezium.worker_props["offset.storage.topic"], dbz_name)),
            30,
            "Debezium's offsets",
        )
        java_offsets = offsets(read_committed, debezium.worker_props["offset.storage.topic"], dbz_name)
    finally:
        httpx.delete(f"{debezium.url}/connectors/{dbz_name}", timeout=60)
    job.stop()
    our_offsets = offsets(read_committed, ours["offset.storage.topic"], "mysql-cdc-vs-debezium")
    (tmp_path / "offsets.json").write_text(
        json.dumps({"debezium": java_offsets, "eosconnect": our_offsets}, indent=1)
    )
    print("debezium offsets", java_offsets[-3:], "\neosconnect offsets", our_offsets[-3:])

    java = payloads(read_committed(f"{dbz}.{table}"), dbz)
    mine = payloads(read_committed(f"{eos}.{table}"), eos)
    (tmp_path / "debezium.json").write_text(json.dumps(java, indent=1))
    (tmp_path / "eosconnect.json").write_text(json.dumps(mine, indent=1))
    assert len(java) == len(mine), (len(java), len(mine))
    found: list[str] = []
    for i, (a, b) in enumerate(zip(java, mine, strict=True)):
        found += [
            f"record {i}: {d}" for d in differences(strip_excluded(a, EXCLUDED), strip_excluded(b, EXCLUDED))
        ]
    assert not found, "\n".join(found[:80]) + f"\n({len(found)} in all; both dumped in {tmp_path})"
