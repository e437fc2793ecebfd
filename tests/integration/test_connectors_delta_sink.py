"""DeltaSink through a real broker and worker: two tasks append one Delta table, one task is
SIGKILLed mid-stream and runs again; every record is in the table exactly once (read back with
deltalake, each row's values as produced), and the table's `txn` actions hold both partitions'
next offsets; Spark SQL (delta-spark) reads the same rows, each once and cell by cell as produced."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from eosconnect.api.records import TopicPartition
from eosconnect.connectors.delta.table import app_id
from support.jdbc_sink import JSON
from support.lake import assert_each_record_once, sigkill_a_task_mid_stream
from support.lake_spark import assert_spark_reads_each_record_once, spark_rows

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_sigkill_of_a_task_leaves_every_record_exactly_once_in_the_delta_table(
    workers, topic_name, create_topic, bootstrap, tmp_path: Path
):
    topic = create_topic(topic_name("events"), partitions=2)
    path = tmp_path / "events"
    total = 3000
    config = {
        "connector.class": "DeltaSink",
        "tasks.max": "2",
        "topics": topic,
        "delta.table.path": str(path),
        "commit.interval.ms": "1000",
        "value.converter": JSON,
        "value.converter.schemas.enable": "true",
        "consumer.override.session.timeout.ms": "6000",
    }

    def rows() -> int:
        try:
            return DeltaTable(str(path)).count()
        except Exception:  # not created yet
            return 0

    worker = workers()
    killed_at = sigkill_a_task_mid_stream(worker, bootstrap, topic, "delta", config, rows, total)
    table = DeltaTable(str(path))
    assert_each_record_once(pa.table(table.to_pyarrow_table()), total)
    offsets = [table.transaction_version(app_id("delta", TopicPartition(topic, p))) for p in (0, 1)]
    assert offsets == [total // 2, total // 2]
    assert worker.request("DELETE", "/connectors/delta").status_code == 204
    assert_spark_reads_each_record_once(spark_rows("delta", str(path)), total)
    print(f"task SIGKILLed at {killed_at} rows; {total} rows after its retry, each once; txn {offsets}")
