"""Schema'd topics shared with Apache Kafka Connect (Java) through `JsonConverter schemas.enable=true`.

eosconnect -> Java: JdbcSource (Structs with the table's schema, exactly once) fills a topic that
Kafka Connect's own FileStreamSink reads into Java Structs (Decimal as BigDecimal, Date as a date).
Java -> eosconnect: Kafka Connect's FileStreamSource writes schema'd STRING records that eosconnect's
FileStreamSink, through the same converter, writes back as the original lines.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa

from eosconnect.devkafka.kafka_connect import KafkaConnectProcess, connect_worker_defaults
from support.runtime_helpers import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SCHEMAS_ON = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
    "value.converter.schemas.enable": "true",
}


@pytest.fixture(scope="module")
def java_connect(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaConnectProcess]:
    group = f"schemas-java-{uuid.uuid4().hex[:8]}"
    worker = KafkaConnectProcess(
        tmp_path_factory.mktemp("java-connect"),
        worker_props={**connect_worker_defaults(bootstrap, group), **SCHEMAS_ON},
    ).start()
    yield worker
    worker.stop()


def create_java_connector(worker: KafkaConnectProcess, name: str, config: dict[str, str]) -> None:
    response = httpx.post(f"{worker.url}/connectors", json={"name": name, "config": config}, timeout=30)
    assert response.status_code == 201, response.text


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def test_jdbc_structs_are_read_by_kafka_connects_file_sink(
    java_connect, run_job, worker_props, topic_name, create_topic, tmp_path: Path
):
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, price NUMERIC(8,2), day DATE)"
        )
        conn.execute(
            sa.text("INSERT INTO orders (id, item, price, day) VALUES (:id, :item, :price, :day)"),
            [
                {"id": i, "item": f"item-{i}", "price": f"{i}.25", "day": f"2024-01-{i:02d}"}
                for i in range(1, 21)
            ],
        )
    engine.dispose()
    prefix = topic_name("db") + "-"
    topic = create_topic(prefix + "orders")
    job = run_job(
        {
            "name": "jdbc-to-java",
            "connector.class": "JdbcSource",
            "tasks.max": "1",
            "connection.url": url,
            "tables": "orders",
            "mode": "incrementing",
            "incrementing.column.name": "id",
            "topic.prefix": prefix,
            "poll.interval.ms": "100",
            "exactly.once.support": "required",
            **SCHEMAS_ON,
        },
        worker_props("enabled"),
    )
    out = tmp_path / "java-sink.txt"
    create_java_connector(
        java_connect,
        f"file-sink-{uuid.uuid4().hex[:6]}",
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "file": str(out),
        },
    )
    wait_until(lambda: len(lines_of(out)) >= 20, 120, "Kafka Connect's FileStreamSink to write 20 rows", job)
    job.stop()
    lines = lines_of(out)
    assert len(lines) == 20
    # Struct.toString() of Java Structs: the schema travelled (BigDecimal 1.25, not base64 bytes).
    assert lines[0].startswith("Struct{id=1,item=item-1,price=1.25,day=")
    assert all(f"item=item-{i}," in line and f"price={i}.25," in line for i, line in enumerate(lines, 1))


def test_kafka_connects_schemad_records_are_read_by_an_eosconnect_sink(
    java_connect, run_job, worker_props, topic_name, create_topic, tmp_path: Path
):
    source_file = tmp_path / "in.txt"
    expected = [f"line {i} é" for i in range(25)]
    source_file.write_text("".join(line + "\n" for line in expected), encoding="utf-8")
    topic = create_topic(topic_name("lines"))
    create_java_connector(
        java_connect,
        f"file-source-{uuid.uuid4().hex[:6]}",
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "tasks.max": "1",
            "topic": topic,
            "file": str(source_file),
        },
    )
    out = tmp_path / "eos-sink.txt"
    job = run_job(
        {
            "name": "eos-file-sink",
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "file": str(out),
            **SCHEMAS_ON,
        },
        worker_props("enabled"),
    )
    deadline = time.monotonic() + 120
    while len(lines_of(out)) < len(expected) and time.monotonic() < deadline:
        time.sleep(0.5)
    job.stop()
    assert lines_of(out) == expected
