"""CPU per change of PostgresCdcTask's streaming, in-process (no Kafka, no Spark): where the time of
`bench/vs_debezium_cdc.py`'s streaming phase goes on eosconnect's side.

A local PostgreSQL (wal_level=logical), a table like the bench's, `--changes` inserts committed in
transactions of `--txn-rows` rows after a fresh slot was made; then per run: the raw stream read
without decoding (what PostgreSQL's walsender delivers), the task's `poll`/`commit_record` loop, and
that loop plus Kafka's JsonConverter (schemas.enable=false, as the bench) on every key and value.
Prints wall and CPU seconds; on a loaded machine compare CPU only. `--profile` prints cProfile's
top functions of the last form. Usage: `PYTHONPATH=. .venv/bin/python bench/cdc_task_cpu.py
[--changes N --txn-rows N --runs R --profile]`.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from eosconnect.api.context import SourceTaskContext
from eosconnect.api.converters import JsonConverter
from eosconnect.connectors.postgres_cdc.config import CdcConfig
from eosconnect.connectors.postgres_cdc.replication import ReplicationStream
from eosconnect.connectors.postgres_cdc.task import PostgresCdcTask
from eosconnect.devkafka.postgres import LocalPostgres


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--changes", type=int, default=20_000)
    parser.add_argument("--txn-rows", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--profile", action="store_true", help="cProfile the task + converter loop")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="eosconnect-cdc-cpu-"))
    workdir.chmod(0o755)  # PostgreSQL runs as the `postgres` user when we are root
    pg = LocalPostgres(base=workdir / "postgres")
    pg.start()
    try:
        workload = Workload(pg, args)
        n = args.changes
        for run in range(args.runs):
            for name, measure in (
                ("raw stream read", lambda: raw_read(workload)),
                ("task", lambda: task_loop(workload, convert=False)),
                ("task + JsonConverter", lambda: task_loop(workload, convert=True)),
            ):
                wall, cpu = measure()
                print(
                    f"run {run} {name:<21} {n} changes: {wall:5.2f} s wall ({n / wall:8,.0f}/s), "
                    f"{cpu:5.2f} s CPU ({cpu * 1e6 / n:3.0f} us/change)"
                )
        if args.profile:
            profiler = cProfile.Profile()
            task_loop(workload, convert=True, profiler=profiler)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(25)
    finally:
        pg.stop()
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
