"""DeltaSink and IcebergSink through the faults that take more than one task down:

- SIGKILL of the whole `eosconnect worker` (its Python process, its Spark JVM and with them both
  tasks) mid-stream, then a new worker of the same group: the connector comes back from the config
  topic and each task resumes from the positions the table's own commits hold (a Delta `txn`
  action, an Iceberg snapshot summary), not from the consumer group;
- a task's Python worker SIGSTOPped with rows buffered, the connector reconfigured (two tasks to
  one) so that the new generation's task claims both partitions, then the zombie woken: its commit
  finds the stored generation raised and adds no data file.

Every record is then in the table exactly once, read back with deltalake / PyIceberg and with
Spark SQL (delta-spark / iceberg-spark-runtime), each row's cells as produced.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from support.jdbc_sink import SlowProducer
from support.lake import assert_each_record_once
from support.lake_spark import assert_spark_reads_each_record_once, spark_rows
from support.lake_targets import lake_target

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_sigkill_of_the_whole_worker_then_a_new_worker_leaves_every_record_exactly_once(
    fmt, workers, topic_name, create_topic, bootstrap, tmp_path: Path
):
    topic = create_topic(topic_name(f"{fmt}-events"), partitions=2)
    target = lake_target(fmt, tmp_path / fmt)
    total = 2000
    first = workers("w1")
    assert first.create_connector(fmt, target.config(topic)).status_code == 201
    first.wait_for(lambda: first.task_states(fmt) == ["RUNNING"] * 2, 120, "both sink tasks RUNNING")
    producer = SlowProducer(bootstrap, topic, total, 2, step=20, pause_s=0.05, hold_at=total // 2).start()
    try:
        first.wait_for(lambda: target.rows() >= total // 5, 120, f"{total // 5} rows in the table")
        first.kill()  # SIGKILL: the worker's process group, its Spark JVM and both tasks
        killed_at = target.rows()
        producer.release()
        second = workers("w2")  # same group and internal topics
    finally:
        producer.join()
    assert killed_at < total, "the kill must land mid-stream"
    second.wait_for(lambda: target.rows() >= total, 150, f"{total} rows")
    time.sleep(3)  # anything written twice would land now (the commit interval is 1 s)
    assert_each_record_once(target.arrow(), total)
    assert second.request("DELETE", f"/connectors/{fmt}").status_code == 204
    assert_spark_reads_each_record_once(spark_rows(fmt, target.spark_location()), total)
    print(f"{fmt}: worker SIGKILLed at {killed_at} rows; {total} rows after a new worker, each once")


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_a_sigstopped_zombie_woken_after_a_reconfiguration_commits_no_duplicate(
    fmt, workers, topic_name, create_topic, bootstrap, tmp_path: Path
):
    topic = create_topic(topic_name(f"{fmt}-zombie"), partitions=2)
    target = lake_target(fmt, tmp_path / fmt)
    total = 2000
    # The zombie stays alive (frozen, never cancelled) until the test wakes it.
    worker = workers(**{"eosconnect.zombie.cancel.timeout.ms": "600000"})
    config = target.config(topic)
    assert worker.create_connector(fmt, config).status_code == 201
    worker.wait_for(lambda: worker.task_states(fmt) == ["RUNNING"] * 2, 120, "both sink tasks RUNNING")
    producer = SlowProducer(bootstrap, topic, total, 2, step=20, pause_s=0.05, hold_at=total // 2).start()
    zombie = None
    try:
        worker.wait_for(lambda: target.rows() >= total // 5, 120, f"{total // 5} rows in the table")
        zombie = worker.request("GET", "/internal/tasks").json()[f"{fmt}-0"]["pid"]
        assert zombie
        os.kill(zombie, signal.SIGSTOP)  # mid-stream: rows of partition 0 buffered, uncommitted
        frozen_at = target.rows()
        reconfigured = {**config, "tasks.max": "1"}
        assert worker.request("PUT", f"/connectors/{fmt}/config", json=reconfigured).status_code == 200
        worker.wait_for(lambda: worker.task_states(fmt) == ["RUNNING"], 120, "the one-task generation")

        def successor_runs() -> bool:
            task = worker.request("GET", "/internal/tasks").json().get(f"{fmt}-0", {})
            return task.get("pid") not in (None, zombie) and task.get("state") == "RUNNING"

        worker.wait_for(successor_runs, 120, "the new generation's task in a new Python worker")
        producer.release()
        worker.wait_for(lambda: target.rows() >= total, 150, f"{total} rows from the new task")
    finally:
        if zombie:
            os.kill(zombie, signal.SIGCONT)
        producer.join()
    time.sleep(5)  # the woken zombie's commit of its buffered rows would land now
    assert frozen_at < total, "the freeze must land mid-stream"
    assert_each_record_once(target.arrow(), total)
    assert worker.request("DELETE", f"/connectors/{fmt}").status_code == 204
    assert_spark_reads_each_record_once(spark_rows(fmt, target.spark_location()), total)
    print(f"{fmt}: zombie frozen at {frozen_at} rows, woken after the new task wrote all {total}; each once")
