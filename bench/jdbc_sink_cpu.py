"""CPU per row of JdbcSink's path, in-process (no worker, no Spark): where the time of
`bench/vs_debezium_jdbc_sink.py`'s eosconnect side goes on the task's thread.

A local broker and PostgreSQL; the bench's topic of `--records` schema'd records (Kafka's
JsonConverter with schemas: key Struct {id}, value Struct {id, name, amount}) is produced once and
consumed once into memory (confluent-kafka `Message`s), the broker is stopped, and then per run and
job (`insert`: pk.mode=none; `upsert`: pk.mode=record_key) a fresh `JdbcSinkTask` (exactly once,
the bench's settings) gets the messages as the sink loop hands them over: batches of 500, each
converted by the connector's `SinkRecordPipeline` (converters, then transformations), `put`, and
`pre_commit` whenever the task asks for a flush (and at the end). Prints CPU microseconds per row
of this process (`time.process_time`: PostgreSQL's backends are not in it) split into convert,
put (rows) and pre_commit (COPY, offsets, commit); on a loaded machine compare CPU, not wall.
`--profile` prints cProfile's top functions of one more upsert run. Usage: `PYTHONPATH=.
.venv/bin/python bench/jdbc_sink_cpu.py [--records N --runs R --jobs insert,upsert --profile]`.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
import uuid
from typing import Any

from bench.vs_debezium_jdbc_sink import fill_topic, sink_config
from bench.workdir import new_workdir
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from eosconnect.api.context import SinkTaskContext
from eosconnect.api.records import OffsetAndMetadata, TopicPartition
from eosconnect.connectors.jdbc_sink.connector import JdbcSinkTask
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.postgres import LocalPostgres
from eosconnect.runtime.frozen_heap import frozen_heap
from eosconnect.runtime.pipeline import SinkRecordPipeline
from eosconnect.runtime.sink_task import MAX_BATCH
from eosconnect.storage.topics import ensure_topic


def consume_all(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cpu-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    messages: list[Any] = []
    deadline = time.monotonic() + 120
    while len(messages) < count and time.monotonic() < deadline:
        messages += [m for m in consumer.consume(MAX_BATCH, 1.0) if m.error() is None]
    consumer.close()
    if len(messages) != count:
        raise SystemExit(f"consumed {len(messages)} of {count} records")
    return messages


def run_job(
    job: str, messages: list[Any], config: dict[str, str], profiler: cProfile.Profile | None = None
) -> dict[str, float]:
    """One task writes every message; CPU seconds per phase and the wall time."""
    topic = messages[0].topic()
    tp = TopicPartition(topic, 0)
    pipeline = SinkRecordPipeline(config)
    context = SinkTaskContext(configs=config)
    task = JdbcSinkTask()
    task.initialize(context)
    task.start(config)
    task.open([tp])
    spent = {"convert": 0.0, "put": 0.0, "pre_commit": 0.0}
    clock = time.process_time
    wall = time.perf_counter()
    if profiler is not None:
        profiler.enable()
    for start in range(0, len(messages), MAX_BATCH):
        batch = messages[start : start + MAX_BATCH]
        t0 = clock()
        records = [pipeline.convert(m) for m in batch]
        t1 = clock()
        task.put(records)
        t2 = clock()
        spent["convert"] += t1 - t0
        spent["put"] += t2 - t1
        last = start + len(batch) >= len(messages)
        if context.commit_requested or last:
            context.commit_requested = False
            task.pre_commit({tp: OffsetAndMetadata(batch[-1].offset() + 1)})
            spent["pre_commit"] += clock() - t2
    if profiler is not None:
        profiler.disable()
    spent["wall"] = time.perf_counter() - wall
    if task.written != len(messages):
        raise SystemExit(f"{job}: the task wrote {task.written} of {len(messages)} rows")
    task.close([tp])
    task.stop()
    pipeline.close()
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--jobs", default="insert,upsert")
    parser.add_argument("--profile", action="store_true", help="cProfile one more upsert run")
    args = parser.parse_args()
    jobs = [j for j in args.jobs.split(",") if j]
    workdir = new_workdir("eosconnect-jdbc-sink-cpu-")
    cluster = LocalKafkaCluster(workdir / "kafka", tie_to_parent=True)
    pg = LocalPostgres(base=workdir / "postgres")
    try:
        bootstrap = cluster.start()
        topic = "jdbc-sink-cpu"
        ensure_topic(
            AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}), topic, 1, 1, compacted=False
        )
        fill_topic(bootstrap, topic, args.records)
        messages = consume_all(bootstrap, topic, args.records)
        cluster.stop()
        pg.start()
        database = pg.new_database().rsplit("/", 1)[1]
        n = len(messages)
        totals: dict[str, list[float]] = {job: [] for job in jobs}
        for run in range(args.runs):
            for job in jobs:
                table = f"cpu_{job}_{run}"
                config = {**sink_config("eos", job, topic, table, pg, database), "name": f"cpu-{table}"}
                with frozen_heap():  # as the sink loop runs (runtime/frozen_heap.py)
                    spent = run_job(job, messages, config)
                cpu = spent["convert"] + spent["put"] + spent["pre_commit"]
                totals[job].append(cpu)
                print(
                    f"run {run} {job:<6} {n} rows: {spent['wall']:5.2f} s wall, "
                    f"CPU {cpu * 1e6 / n:5.1f} us/row = convert {spent['convert'] * 1e6 / n:5.1f} + "
                    f"put {spent['put'] * 1e6 / n:5.1f} + pre_commit {spent['pre_commit'] * 1e6 / n:5.1f}"
                )
        for job in (j for j in jobs if totals[j]):
            best = min(totals[job])
            print(f"{job}: best CPU {best * 1e6 / n:.1f} us/row ({best / n * 1e6:.1f} CPU s per M rows)")
        if args.profile:
            profiler = cProfile.Profile()
            config = {**sink_config("eos", "upsert", topic, "cpu_profile", pg, database), "name": "cpu-prof"}
            run_job("upsert", messages, config, profiler)
            pstats.Stats(profiler).sort_stats("tottime").print_stats(30)
    finally:
        pg.stop()
        cluster.stop()


if __name__ == "__main__":
    main()
