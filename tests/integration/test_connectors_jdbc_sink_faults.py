"""JdbcSink through the faults that take more than one task down, in `insert.mode=insert` into a
table without a key (where an at-least-once sink duplicates whatever it writes again):

- SIGKILL of the whole `eosconnect worker` (its Python process, its Spark JVM and with them every
  task) mid-stream, then a new worker of the same group: the connector comes back from the config
  topic and its task resumes from the database's offsets table;
- a SIGKILL and restart of the (only) broker under the running sink, on a broker of the test's own.

Either way every record's `k` is in the table exactly once. PostgreSQL from the `postgres` fixture.
Most of each test's time is start-up (two workers, or a broker of its own and a worker): 211 s and
170 s at load 35, well under half that on a machine at the usual load.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eosconnect.tools.worker_process import WorkerProcess
from support.jdbc_sink import SlowProducer, assert_exactly_once, row_count, scalar, sink_config
from support.postgres import new_database
from support.workers import create_topics, private_kafka, worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_sigkill_of_the_whole_worker_then_a_new_worker_leaves_every_record_exactly_once(
    postgres, workers, topic_name, create_topic, bootstrap
):
    url = new_database(postgres)
    topic = create_topic(topic_name("events"), partitions=2)
    total = 2000
    first = workers("w1")
    config = sink_config(url, topic, **{"batch.size": "100"})
    assert first.create_connector("jdbc", config).status_code == 201
    first.wait_for(lambda: first.task_states("jdbc") == ["RUNNING"], 90, "the sink task RUNNING")
    producer = SlowProducer(bootstrap, topic, total, 2, hold_at=total // 2).start()
    try:
        first.wait_for(lambda: row_count(url) >= 300, 90, "300 rows in the table")
        first.kill()  # SIGKILL: the worker's process group and its Spark JVM
        killed_at = row_count(url)
        producer.release()
        second = workers("w2")  # same group and internal topics
    finally:
        producer.join()
    assert killed_at < total, "the kill must land mid-stream"
    second.wait_for(lambda: row_count(url) >= total, 120, f"{total} rows")
    time.sleep(2)  # anything repeated would land now
    assert_exactly_once(url, total)
    generation = scalar(url, "SELECT MAX(generation) FROM eosconnect_sink_offsets")
    assert generation >= 2, "the new worker's task claimed the partitions (fencing the old one's)"
    print(f"worker SIGKILLed at {killed_at} rows; {total} rows after a new worker, all distinct")
    assert second.request("DELETE", "/connectors/jdbc").status_code == 204


def test_a_broker_restart_under_the_sink_leaves_every_record_exactly_once(postgres, tmp_path: Path):
    """The only broker is SIGKILLed mid-stream and started again 3 s later (same data, same port):
    the producer and the sink task ride it out (or the task is restarted, resuming from the offsets
    table); the records still arrive once each."""
    url = new_database(postgres)
    total = 2000
    with private_kafka(tmp_path / "kafka") as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = "events-broker-restart"
        create_topics(bootstrap, (topic, 2))
        worker = WorkerProcess(worker_settings(bootstrap, "jdbc-broker-restart"), tmp_path / "w1").start()
        try:
            config = sink_config(url, topic, **{"batch.size": "100"})
            assert worker.create_connector("jdbc", config).status_code == 201
            worker.wait_for(lambda: worker.task_states("jdbc") == ["RUNNING"], 90, "the sink task RUNNING")
            producer = SlowProducer(bootstrap, topic, total, 2, hold_at=total // 2).start()
            try:
                worker.wait_for(lambda: row_count(url) >= 300, 90, "300 rows in the table")
                cluster.kill_node(1)
                killed_at = row_count(url)
                time.sleep(3)
                cluster.start_node(1)
                producer.release()
            finally:
                producer.join()
            assert killed_at < total, "the broker restart must land mid-stream"
            worker.wait_for(lambda: row_count(url) >= total, 150, f"{total} rows")
            time.sleep(2)
            assert_exactly_once(url, total)
            print(f"broker SIGKILLed at {killed_at} rows and restarted; {total} rows, all distinct")
        finally:
            worker.stop()
