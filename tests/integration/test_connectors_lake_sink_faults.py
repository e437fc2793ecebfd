"""DeltaSink and IcebergSink through the faults that take more than one task down:

- SIGKILL of the whole `eosconnect worker` (its Python process, its Spark JVM and with them both
  tasks) mid-stream, then a new worker of the same group: the connector comes back from the config
  topic and each task resumes from the positions the table's own commits hold (a Delta `txn`
  action, an Iceberg snapshot summary), not from the consumer group.

Every record is then in the table exactly once, read back with deltalake / PyIceberg and with
Spark SQL (delta-spark / iceberg-spark-runtime), each row's cells as produced.
"""

from __future__ import annotations

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
