"""The walking skeleton: Spark tasks that write records and an offset record in one transaction.

It proves the machinery the runtime stands on (a confluent-kafka transactional producer inside a
Spark task on an executor, `transactional.id` fencing, read_committed visibility) and is what
`make demo` ran before the real runtime existed. Functions run on executors, so they must be
module-level and keep no state in globals (Python workers are reused across tasks).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, Producer

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

CONNECTOR = "skeleton"


@dataclass(frozen=True)
class SkeletonJob:
    bootstrap_servers: str
    data_topic: str
    offsets_topic: str
    transactional_prefix: str
    records_per_task: int


def offset_key(task: int) -> bytes:
    """Kafka Connect's offsets-topic key layout: ["<connector>", {<source partition>}]."""
    return json.dumps([CONNECTOR, {"task": task}], separators=(",", ":")).encode()


def record_key(task: int) -> bytes:
    return f"task-{task}".encode()


def record_value(task: int, seq: int) -> bytes:
    return json.dumps({"task": task, "seq": seq}, separators=(",", ":")).encode()


def _producer(job: SkeletonJob, task: int) -> Producer:
    return Producer(
        {
            "bootstrap.servers": job.bootstrap_servers,
            "transactional.id": f"{job.transactional_prefix}-{task}",
            "enable.idempotence": True,
            "linger.ms": 5,
        }
    )


def write_task(task: int, rows: Iterator[Any], job: SkeletonJob) -> Iterator[dict[str, Any]]:
    """One Spark task: N records plus their offset record, committed atomically."""
    producer = _producer(job, task)
    producer.init_transactions(30)
    producer.begin_transaction()
    for seq in range(job.records_per_task):
        producer.produce(job.data_topic, key=record_key(task), value=record_value(task, seq))
        producer.poll(0)
    producer.produce(
        job.offsets_topic,
        key=offset_key(task),
        value=json.dumps({"seq": job.records_per_task - 1}, separators=(",", ":")).encode(),
    )
    producer.commit_transaction(30)
    yield {"task": task, "written": job.records_per_task, "pid": os.getpid()}


def run_skeleton(spark: SparkSession, job: SkeletonJob, tasks: int) -> list[dict[str, Any]]:
    """Run `tasks` Spark tasks, one transactional producer each; returns what each task reported."""
    rdd = spark.sparkContext.parallelize(range(tasks), tasks)
    return rdd.mapPartitionsWithIndex(lambda idx, rows: write_task(idx, rows, job)).collect()


def zombie_task(
    task: int, rows: Iterator[Any], job: SkeletonJob, barrier_dir: str
) -> Iterator[dict[str, Any]]:
    """Open a transaction, send records, then wait to be fenced before trying to commit.

    Writes `sent` once its records are in the log (uncommitted) and waits for `fenced`, which the
    test writes after a second producer with the same transactional id has called init_transactions.
    """
    barrier = Path(barrier_dir)
    producer = _producer(job, task)
    producer.init_transactions(30)
    producer.begin_transaction()
    for seq in range(job.records_per_task):
        producer.produce(job.data_topic, key=record_key(task), value=record_value(task, seq))
    producer.produce(job.offsets_topic, key=offset_key(task), value=b'{"seq":-1}')
    producer.flush(30)
    (barrier / "sent").write_text(str(os.getpid()))
    deadline = time.monotonic() + 60
    while not (barrier / "fenced").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    outcome: dict[str, Any] = {"task": task, "pid": os.getpid(), "committed": False}
    try:
        producer.commit_transaction(30)
        outcome["committed"] = True
    except KafkaException as exc:
        err = exc.args[0]
        outcome.update(error=err.name(), fatal=err.fatal(), message=err.str())
    yield outcome
