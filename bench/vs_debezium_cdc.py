"""PostgresCdcSource (eosconnect) side by side with Debezium's PostgreSQL connector on Kafka Connect (Java).

One broker, one PostgreSQL (wal_level=logical), a Java Connect worker with Debezium's connector as a
plugin (`eosconnect.devkafka.debezium`) and an eosconnect worker, both with
`exactly.once.source.support=enabled` and the connectors with `exactly.once.support=required`
(eosconnect with `transaction.boundary=connector`, its recommended setting: one Kafka transaction
per database transaction, or up to `--eos-group` whole ones together; Debezium with Connect's
default, `poll`). Per round and side, on a fresh
database of its own:

* **snapshot**: a table of `--rows` rows; time from creating the connector to the last snapshot
  record visible to a read_committed consumer;
* **streaming**: the connector paused, `--changes` inserts committed in transactions of
  `--txn-rows` rows, the connector resumed; time from resuming to the last change visible, split
  into the time to the first change visible (the resume reaching the task: Connect's config topic
  on the Java side, the task's heartbeat on eosconnect's, every 0.5 s, plus the first poll) and the
  time from the first change visible to the last (the streaming rate itself);
* **latency**: the connector running and caught up, `--latency-txns` single-row transactions, one
  every 50 ms; per transaction the time from its COMMIT returning to its event arriving at a
  read_committed consumer (p50 and p99 over all rounds).

Rounds interleave the sides (alternating which goes first); the report gives medians and the
ratio eos/java (>1: eosconnect faster). Every round also checks each record arrived once. The
machine may be shared: the load average is printed with every round. Usage:
`PYTHONPATH=. .venv/bin/python bench/vs_debezium_cdc.py [--rows N --changes N --txn-rows N --rounds R
--eos-group G]`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import httpx
import psycopg
from bench.workdir import new_workdir
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.debezium import DEBEZIUM_VERSION, debezium_connect
from eosconnect.devkafka.postgres import LocalPostgres
from eosconnect.storage.topics import ensure_topic
from eosconnect.tools.worker_process import WorkerProcess, local_worker_settings

console = Console(width=160)  # the table stays whole in logs (not a terminal)


@dataclass
class Result:
    side: str
    round: int
    snapshot_s: float
    stream_s: float
    first_s: float  # from resuming to the first change visible
    records: int
    duplicates: int
    load: float
    latencies: list[float]


class Counter:
    """Counts the distinct keys (and the repeats) of a topic, read_committed, from a thread."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.keys: set[bytes] = set()
        self.seen_at: dict[bytes, float] = {}  # wall clock when each key first arrived
        self.records = 0
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"bench-cdc-{uuid.uuid4().hex[:6]}",
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 20,
            }
        )
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(10_000, 0.05):
                if message.error() is None and message.value() is not None:
                    self.records += 1
                    self.keys.add(message.key())
                    self.seen_at.setdefault(message.key(), time.time())

    def wait(self, count: int, timeout: float, what: str, failed: Callable[[], str | None]) -> float:
        deadline = time.monotonic() + timeout
        while len(self.keys) < count:
            if time.monotonic() > deadline:
                raise SystemExit(f"timed out waiting for {what}: {len(self.keys)} of {count}")
            if trace := failed():
                raise SystemExit(f"{what}: the task FAILED:\n{trace}")
            time.sleep(0.02)
        return time.monotonic()

    def close(self) -> None:
        time.sleep(0.5)  # repeats written after the last new record
        self._stop.set()
        self._thread.join(5)
        self._consumer.close()


class Side:
    """One Connect REST API (Java or eosconnect) and how to create, pause, resume and delete on it."""

    def __init__(self, name: str, url: str, extra: dict[str, str]) -> None:
        self.name, self.url, self.extra = name, url, extra

    def _state(self, connector: str) -> tuple[str, list[str]]:
        status = httpx.get(f"{self.url}/connectors/{connector}/status", timeout=30).json()
        return status.get("connector", {}).get("state", ""), [t["state"] for t in status.get("tasks", [])]

    def failed(self, connector: str) -> str | None:
        try:
            status = httpx.get(f"{self.url}/connectors/{connector}/status", timeout=10).json()
        except (httpx.HTTPError, ValueError):
            return None
        traces = [t.get("trace", "") for t in status.get("tasks", []) if t.get("state") == "FAILED"]
        return traces[0][:2000] if traces else None

    def create(self, connector: str, config: dict[str, str]) -> None:
        body = {"name": connector, "config": {**config, **self.extra}}
        deadline = time.monotonic() + 60
        while (response := httpx.post(f"{self.url}/connectors", json=body, timeout=60)).status_code != 201:
            if response.status_code != 409 or time.monotonic() > deadline:
                raise SystemExit(f"{self.name}: creating {connector}: {response.status_code} {response.text}")
            time.sleep(0.5)

    def pause(self, connector: str) -> None:
        httpx.put(f"{self.url}/connectors/{connector}/pause", timeout=30)
        deadline = time.monotonic() + 60
        while self._state(connector) != ("PAUSED", ["PAUSED"]):
            if time.monotonic() > deadline:
                raise SystemExit(f"{self.name}: {connector} did not pause: {self._state(connector)}")
            time.sleep(0.2)
        time.sleep(1.0)  # let the task finish its last poll

    def resume(self, connector: str) -> None:
        httpx.put(f"{self.url}/connectors/{connector}/resume", timeout=30)

    def delete(self, connector: str) -> None:
        httpx.delete(f"{self.url}/connectors/{connector}", timeout=60)
        deadline = time.monotonic() + 60
        while connector in httpx.get(f"{self.url}/connectors", timeout=30).json():
            if time.monotonic() > deadline:
                break
            time.sleep(0.3)
        time.sleep(2.0)  # the task releases its slot


def one_round(
    side: Side, round_no: int, pg: LocalPostgres, bootstrap: str, admin: AdminClient, args: argparse.Namespace
) -> Result:
    suffix = f"{side.name}{round_no}_{uuid.uuid4().hex[:6]}"
    pg.create_database(f"bench_{suffix}")
    conn = psycopg.connect(
        host="127.0.0.1", port=pg.port, user="postgres", dbname=f"bench_{suffix}", autocommit=True
    )
    conn.execute(
        "CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL, price NUMERIC(10,2), ts TIMESTAMPTZ)"
    )
    conn.execute(
        "INSERT INTO items SELECT g, 'item-' || g, g / 100.0, now() FROM generate_series(1, %s::bigint) g",
        (args.rows,),
    )
    prefix = f"bench_{suffix}"
    topic = f"{prefix}.public.items"
    ensure_topic(admin, topic, partitions=1, replication_factor=1)
    counter = Counter(bootstrap, topic)
    connector = f"cdc-{suffix}".replace("_", "-")
    config = {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": str(pg.port),
        "database.user": "postgres",
        "database.dbname": f"bench_{suffix}",
        "plugin.name": "pgoutput",
        "topic.prefix": prefix,
        "slot.name": f"slot_{suffix}",
        "publication.name": f"pub_{suffix}",
        "publication.autocreate.mode": "filtered",
        "table.include.list": "public\\.items",
        "exactly.once.support": "required",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    try:
        started = time.monotonic()
        side.create(connector, config)
        snapshot_s = counter.wait(args.rows, 600, "the snapshot", lambda: side.failed(connector)) - started
        side.pause(connector)
        next_id = args.rows + 1
        for _ in range(args.changes // args.txn_rows):
            conn.execute(
                "INSERT INTO items SELECT g, 'new-' || g, g / 100.0, now() "
                "FROM generate_series(%s::bigint, %s::bigint) g",
                (next_id, next_id + args.txn_rows - 1),
            )
            next_id += args.txn_rows
        total = next_id - 1
        resumed, resumed_wall = time.monotonic(), time.time()
        side.resume(connector)
        stream_s = counter.wait(total, 600, "the changes", lambda: side.failed(connector)) - resumed
        first_s = (
            min(at for k, at in counter.seen_at.items() if json.loads(k)["id"] > args.rows) - resumed_wall
        )
        committed: dict[int, float] = {}
        for key in range(total + 1, total + 1 + args.latency_txns):
            conn.execute("INSERT INTO items VALUES (%s, 'latency', 1, now())", (key,))  # autocommit
            committed[key] = time.time()
            time.sleep(0.05)
        total += args.latency_txns
        counter.wait(total, 120, "the latency probes", lambda: side.failed(connector))
        arrived = {json.loads(k)["id"]: at for k, at in counter.seen_at.items()}
        latencies = [arrived[key] - at for key, at in committed.items()]
    finally:
        side.delete(connector)
        counter.close()
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active")
        conn.close()
    return Result(
        side.name, round_no, snapshot_s, stream_s, first_s, counter.records,
        counter.records - len(counter.keys), os.getloadavg()[0], latencies,
    )  # fmt: skip


def percentile(samples: list[float], points: tuple[int, ...]) -> list[float]:
    """Nearest-rank percentiles of `samples` (NaN when there are none)."""
    ordered = sorted(samples)
    if not ordered:
        return [float("nan")] * len(points)
    return [ordered[min(len(ordered) - 1, max(0, -(-p * len(ordered) // 100) - 1))] for p in points]


def report(results: list[Result], args: argparse.Namespace) -> None:
    table = Table(title=f"PostgresCdcSource vs Debezium {DEBEZIUM_VERSION}: medians of {args.rounds} rounds")
    columns = (
        "side", "snapshot s", "snapshot rows/s", "stream s", "changes/s", "to first s",
        "first-last changes/s", "latency p50 ms", "p99 ms",
    )  # fmt: skip
    for column in (*columns, "duplicates"):
        table.add_column(column)
    medians: dict[str, tuple[float, float, float]] = {}
    for side in ("java", "eos"):
        runs = [r for r in results if r.side == side]
        snap = statistics.median(r.snapshot_s for r in runs)
        stream = statistics.median(r.stream_s for r in runs)
        rate = statistics.median(r.stream_s - r.first_s for r in runs)
        medians[side] = (snap, stream, rate)
        p50, p99 = percentile([x for r in runs for x in r.latencies], (50, 99))
        table.add_row(
            side, f"{snap:.2f}", f"{args.rows / snap:,.0f}", f"{stream:.2f}", f"{args.changes / stream:,.0f}",
            f"{statistics.median(r.first_s for r in runs):.2f}", f"{args.changes / rate:,.0f}",
            f"{p50 * 1000:.0f}", f"{p99 * 1000:.0f}", str(sum(r.duplicates for r in runs)),
        )  # fmt: skip
    console.print(table)
    console.print(
        f"ratio eos/java (>1: eosconnect faster): snapshot {medians['java'][0] / medians['eos'][0]:.2f}, "
        f"streaming {medians['java'][1] / medians['eos'][1]:.2f} (from resuming; first to last change: "
        f"{medians['java'][2] / medians['eos'][2]:.2f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000, help="rows in the snapshot")
    # 100,000: at 7-9k changes/s that is 11-14 s of streaming, so the resume's fixed cost (0.2-0.6 s
    # on either side) weighs a few per cent, not the fifth it weighed at 20,000 (2-3 s).
    parser.add_argument("--changes", type=int, default=100_000, help="inserts committed while paused")
    parser.add_argument("--txn-rows", type=int, default=1_000, help="inserts per database transaction")
    parser.add_argument("--latency-txns", type=int, default=40, help="single-row commits timed per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--eos-group",
        type=int,
        default=1,
        help="eosconnect's database.transactions.per.kafka.transaction (1: one Kafka transaction each)",
    )
    args = parser.parse_args()
    workdir = new_workdir("eosconnect-bench-cdc-")
    cluster = LocalKafkaCluster(workdir / "kafka", brokers=1, tie_to_parent=True)
    pg = LocalPostgres(base=workdir / "postgres")
    suffix = uuid.uuid4().hex[:6]
    java = debezium_connect(
        "", workdir / "java", f"bench-dbz-{suffix}", exactly_once_source_support="enabled",
        plugin_discovery="only_scan",
    )  # fmt: skip
    eos: WorkerProcess | None = None
    try:
        console.print(
            "starting a broker, PostgreSQL, Kafka Connect with Debezium and an eosconnect worker ..."
        )
        bootstrap = cluster.start()
        pg.start()
        java.worker_props["bootstrap.servers"] = bootstrap
        java.start(timeout=300)
        eos = WorkerProcess(
            local_worker_settings(
                bootstrap, f"bench-eos-{suffix}", spark_master="local[2,2]", spark_driver_memory="768m"
            ),
            workdir / "eos",
        ).start(timeout=300)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        sides = [
            Side("java", java.url, {}),
            Side(
                "eos",
                eos.url,
                {
                    "transaction.boundary": "connector",
                    "database.transactions.per.kafka.transaction": str(args.eos_group),
                },
            ),
        ]
        results: list[Result] = []
        for round_no in range(args.rounds):
            for side in sides if round_no % 2 == 0 else sides[::-1]:
                result = one_round(side, round_no, pg, bootstrap, admin, args)
                results.append(result)
                p50 = percentile(result.latencies, (50,))[0]
                console.print(
                    f"round {round_no} {side.name}: snapshot {result.snapshot_s:.2f}s, streaming "
                    f"{result.stream_s:.2f}s (first change after {result.first_s:.2f}s), "
                    f"latency p50 {p50 * 1000:.0f} ms, "
                    f"{result.records} records, {result.duplicates} duplicates, load {result.load:.1f}"
                )
        report(results, args)
    finally:
        if eos is not None:
            eos.stop()
        java.stop()
        cluster.stop()
        pg.stop()


if __name__ == "__main__":
    main()
