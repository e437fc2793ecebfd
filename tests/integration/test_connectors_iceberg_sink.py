"""IcebergSink through a real broker and worker: two tasks append one Iceberg table (a SQL catalog
on SQLite, a local warehouse; their commits conflict and are retried), one task is SIGKILLed
mid-stream and runs again; every record is in the table exactly once (read back with PyIceberg,
each row's values as produced), and the latest snapshot's summary holds both partitions' next
offsets; Spark SQL (iceberg-spark-runtime) reads the same rows, each once and cell by cell as produced."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyiceberg.catalog import load_catalog

from eosconnect.api.records import TopicPartition
from eosconnect.connectors.iceberg.table import positions_property
from eosconnect.connectors.lake.positions import decode_positions
from support.jdbc_sink import JSON
from support.lake import assert_each_record_once, sigkill_a_task_mid_stream
from support.lake_spark import assert_spark_reads_each_record_once, spark_rows

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_sigkill_of_a_task_leaves_every_record_exactly_once_in_the_iceberg_table(
    workers, topic_name, create_topic, bootstrap, tmp_path: Path
):
    topic = create_topic(topic_name("events"), partitions=2)
    (tmp_path / "warehouse").mkdir()
    catalog = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "warehouse": f"file://{tmp_path / 'warehouse'}",
    }
    total = 3000
    config = {
        "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
        "tasks.max": "2",
        "topics": topic,
        "iceberg.tables": "db.events",
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "1000",
        **{f"iceberg.catalog.{k}": v for k, v in catalog.items()},
        "value.converter": JSON,
        "value.converter.schemas.enable": "true",
        "consumer.override.session.timeout.ms": "6000",
    }

    def table():  # type: ignore[no-untyped-def]
        return load_catalog("iceberg", **catalog).load_table("db.events")

    def rows() -> int:
        try:
            return len(table().scan(selected_fields=("k",)).to_arrow())
        except Exception:  # not created yet
            return 0

    worker = workers()
    killed_at = sigkill_a_task_mid_stream(worker, bootstrap, topic, "iceberg", config, rows, total)
    events = table()
    assert_each_record_once(events.scan().to_arrow(), total)
    snapshot = events.current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    positions = decode_positions(snapshot.summary[positions_property("iceberg")])
    offsets = [positions[TopicPartition(topic, p)].offset for p in (0, 1)]
    assert offsets == [total // 2, total // 2]
    assert worker.request("DELETE", "/connectors/iceberg").status_code == 204
    assert_spark_reads_each_record_once(spark_rows("iceberg", events.metadata_location), total)
    print(f"task SIGKILLed at {killed_at} rows; {total} rows after its retry, each once; summary {offsets}")
