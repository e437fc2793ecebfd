"""CPU per change of PostgresCdcTask's streaming, in-process (no Kafka, no Spark): where the time of
`bench/vs_debezium_cdc.py`'s streaming phase goes on eosconnect's side.

A local PostgreSQL (wal_level=logical), a table like the bench's, `--changes` inserts committed in
transactions of `--txn-rows` rows after a fresh slot was made; then per run: the raw stream read
without decoding (what PostgreSQL's walsender delivers), the task's `poll`/`commit_record` loop, and
that loop plus Kafka's JsonConverter (schemas.enable=false, as the bench) on every key and value.
With `--runner`, a fourth form runs the whole exactly-once source loop a worker runs
(`run_source_task`: pipeline, producer, one Kafka transaction per database transaction with its
offsets, commit callbacks) against a local broker, in this process: its CPU counts the task thread,
the commit thread and librdkafka's threads (not the broker's). Prints wall and CPU seconds; on a
loaded machine compare CPU only. `--profile` prints cProfile's top functions of the last form (the
runner's task thread with `--runner`). Usage: `PYTHONPATH=. .venv/bin/python bench/cdc_task_cpu.py
[--changes N --txn-rows N --runs R --runner --profile]`.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Any

import psycopg
from bench.workdir import new_workdir

from eosconnect.api.context import SourceTaskContext
from eosconnect.connectors.postgres_cdc.config import CdcConfig
from eosconnect.connectors.postgres_cdc.replication import ReplicationStream
from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask
from eosconnect.converters.json import JsonConverter
from eosconnect.devkafka.postgres import LocalPostgres
from eosconnect.runtime.control import Directive, TaskControl
from eosconnect.runtime.executor import run_source_task
from eosconnect.runtime.metrics import TaskMetrics
from eosconnect.runtime.startup import LocalStartupCoordinator
from eosconnect.runtime.task import TASK_CLASS_KEY, TaskSpec


class Workload:
    """One database; each run gets a new slot and `changes` new inserts after it."""

    def __init__(self, pg: LocalPostgres, args: argparse.Namespace) -> None:
        pg.create_database("cpu")
        self.args, self.next_id, self.runs = args, 1, 0
        self.conn = psycopg.connect(
            host="127.0.0.1", port=pg.port, user="postgres", dbname="cpu", autocommit=True
        )
        self.conn.execute(
            "CREATE TABLE items (id BIGINT PRIMARY KEY, name TEXT NOT NULL, price NUMERIC(10,2), "
            "ts TIMESTAMPTZ)"
        )
        self.base = {
            "database.hostname": "127.0.0.1", "database.port": str(pg.port), "database.user": "postgres",
            "database.dbname": "cpu", "topic.prefix": "cpu", "publication.name": "cpu_pub",
            "publication.autocreate.mode": "filtered", "table.include.list": "public\\.items",
            "snapshot.mode": "never", "plugin.name": "pgoutput",
        }  # fmt: skip

    def prepare(self) -> dict[str, str]:
        """A new slot (made by a task start), then the inserts: the config to read them with."""
        self.runs += 1
        config = {**self.base, "slot.name": f"cpu_slot_{self.runs}"}
        task = PostgresCdcTask()
        task.initialize(SourceTaskContext(configs=config))
        task.start(config)
        task.stop()
        rows = self.args.txn_rows
        for _ in range(self.args.changes // rows):
            self.conn.execute(
                "INSERT INTO items SELECT g, 'new-' || g, g / 100.0, now() "
                "FROM generate_series(%s::bigint, %s::bigint) g",
                (self.next_id, self.next_id + rows - 1),
            )
            self.next_id += rows
        return config

    def drop(self, config: dict[str, str]) -> None:
        for _ in range(50):  # the slot is released a moment after its connection closed
            try:
                self.conn.execute("SELECT pg_drop_replication_slot(%s)", (config["slot.name"],))
                return
            except psycopg.errors.ObjectInUse:
                time.sleep(0.1)


def raw_read(workload: Workload) -> tuple[float, float]:
    config = workload.prepare()
    stream = ReplicationStream(CdcConfig.parse(config))
    stream.start()
    expected = workload.args.changes + 2 * (workload.args.changes // workload.args.txn_rows)
    wall, cpu, seen = time.perf_counter(), time.process_time(), 0
    while seen < expected:  # Relation, Begin, Insert..., Commit
        if stream.read(1.0) is not None:
            seen += 1
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    stream.close()
    workload.drop(config)
    return wall, cpu


def task_loop(
    workload: Workload, convert: bool, profiler: cProfile.Profile | None = None
) -> tuple[float, float]:
    config = workload.prepare()
    keys, values = JsonConverter(), JsonConverter()
    keys.configure({"schemas.enable": "false"}, True)
    values.configure({"schemas.enable": "false"}, False)
    task = PostgresCdcTask()
    task.initialize(SourceTaskContext(configs=config))
    task.start(config)
    wall, cpu, got = time.perf_counter(), time.process_time(), 0
    if profiler is not None:
        profiler.enable()
    while got < workload.args.changes:
        batch: list[Any] = task.poll() or []
        for record in batch:
            if convert:
                keys.from_connect_data(record.topic, record.key_schema, record.key)
                values.from_connect_data(record.topic, record.value_schema, record.value)
            task.commit_record(record, None)
        got += len(batch)
    if profiler is not None:
        profiler.disable()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    task.stop()
    workload.drop(config)
    return wall, cpu


class UntilWritten(TaskControl):
    """The runner's control: RUN until `changes` records were committed, then STOP. Times the CPU
    from the first directive (the task started: after fencing, init_transactions and the offsets
    read) to the stop; with `profiler`, profiles the task thread over the same span."""

    def __init__(self, changes: int, profiler: cProfile.Profile | None) -> None:
        self.changes, self.profiler = changes, profiler
        self.metrics: TaskMetrics | None = None
        self.began: tuple[float, float] | None = None
        self.ended: tuple[float, float] | None = None

    def attach(self, metrics: TaskMetrics) -> None:
        self.metrics = metrics

    def directive(self) -> Directive:
        assert self.metrics is not None
        if self.began is None:
            self.began = time.perf_counter(), time.process_time()
            if self.profiler is not None:
                self.profiler.enable()
        if self.metrics.records_written < self.changes:
            return Directive.RUN
        if self.ended is None:
            self.ended = time.perf_counter(), time.process_time()
            if self.profiler is not None:
                self.profiler.disable()
        return Directive.STOP


def runner_loop(
    workload: Workload, bootstrap: str, profiler: cProfile.Profile | None = None
) -> tuple[float, float]:
    """The CDC task in the exactly-once runner, `transaction.boundary=connector`, as the bench's."""
    from confluent_kafka.admin import AdminClient

    from eosconnect.storage.topics import ensure_topic

    config = workload.prepare()
    run = f"cpu-{workload.runs}-{time.time_ns() % 10**9}"
    worker = {
        "bootstrap.servers": bootstrap,
        "group.id": run,
        "offset.storage.topic": f"{run}-offsets",
        "offset.storage.partitions": "1",
        "offset.storage.replication.factor": "1",
        "exactly.once.source.support": "enabled",
    }
    admin = AdminClient({"bootstrap.servers": bootstrap})
    ensure_topic(admin, worker["offset.storage.topic"], 1, 1)
    ensure_topic(admin, "cpu.public.items", 1, 1, compacted=False)
    connector = {
        **config,
        "name": run,
        "connector.class": "PostgresCdcSource",
        "transaction.boundary": "connector",
        "exactly.once.support": "required",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    control = UntilWritten(workload.args.changes, profiler)
    task_class = f"{PostgresCdcTask.__module__}.{PostgresCdcTask.__qualname__}"
    spec = TaskSpec(
        connector=run,
        task=0,
        task_config={**connector, TASK_CLASS_KEY: task_class},
        connector_config=connector,
        worker_config=worker,
        control=control,  # type: ignore[arg-type]
        coordinator=LocalStartupCoordinator(run, {"bootstrap.servers": bootstrap}, 1),
    )
    outcome = run_source_task(spec)
    if outcome.state.value != "STOPPED" or control.began is None or control.ended is None:
        raise SystemExit(f"the runner failed: {outcome.trace}")
    workload.drop(config)
    return control.ended[0] - control.began[0], control.ended[1] - control.began[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20_000)
    parser.add_argument("--txn-rows", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="cProfile the last form")
    parser.add_argument("--runner", action="store_true", help="also the exactly-once runner and a broker")
    args = parser.parse_args()
    workdir = new_workdir("eosconnect-cdc-cpu-")
    pg = LocalPostgres(base=workdir / "postgres")
    cluster = None
    pg.start()
    try:
        workload = Workload(pg, args)
        n = args.changes
        forms: list[tuple[str, Any]] = [
            ("raw stream read", lambda: raw_read(workload)),
            ("task", lambda: task_loop(workload, convert=False)),
            ("task + JsonConverter", lambda: task_loop(workload, convert=True)),
        ]
        if args.runner:
            from eosconnect.devkafka import LocalKafkaCluster

            cluster = LocalKafkaCluster(workdir / "kafka", brokers=1, tie_to_parent=True)
            bootstrap = cluster.start()
            forms.append(("eos runner + broker", lambda: runner_loop(workload, bootstrap)))
        for run in range(args.runs):
            for name, measure in forms:
                wall, cpu = measure()
                print(
                    f"run {run} {name:<21} {n} changes: {wall:5.2f} s wall ({n / wall:8,.0f}/s), "
                    f"{cpu:5.2f} s CPU ({cpu * 1e6 / n:3.0f} us/change)"
                )
        if args.profile:
            profiler = cProfile.Profile()
            if cluster is not None:
                runner_loop(workload, bootstrap, profiler=profiler)
            else:
                task_loop(workload, convert=True, profiler=profiler)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    finally:
        if cluster is not None:
            cluster.stop()
        pg.stop()


if __name__ == "__main__":
    main()
