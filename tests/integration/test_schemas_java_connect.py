"""Schema'd topics shared with Apache Kafka Connect (Java) through `JsonConverter schemas.enable=true`.

eosconnect -> Java: JdbcSource (Structs with the table's schema, exactly once) fills a topic that
Kafka Connect's own FileStreamSink reads into Java Structs (Decimal as BigDecimal, Date as a date).
Java -> eosconnect: Kafka Connect's FileStreamSource writes schema'd STRING records that eosconnect's
FileStreamSink, through the same converter, writes back as the original lines.
The issue's whole pipeline: JdbcSource -> InsertField + ReplaceField + RegexRouter (Kafka's class
names) -> Kafka exactly once, with JsonConverter schemas.enable=true (checked by `eosconnect verify`'s
JDBC check and read by Kafka Connect's FileStreamSink) and with the AvroConverter against the real
registry (read back by Confluent's AvroDeserializer).
"""

from __future__ import annotations

import decimal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eosconnect.devkafka.kafka_connect import KafkaConnectProcess, connect_worker_defaults
from eosconnect.devkafka.registry import LocalSchemaRegistry
from eosconnect.tools.verify import verify_jdbc_topic
from support.java_connect import post_connector
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


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


def orders_table(tmp_path: Path, rows: int = 20) -> str:
    """A SQLite table `orders` of `rows` rows (id 1..rows); its SQLAlchemy URL."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT NOT NULL, price NUMERIC(8,2), day DATE)"
        )
        conn.execute(
            sa.text("INSERT INTO orders (id, item, price, day) VALUES (:id, :item, :price, :day)"),
            [
                {"id": i, "item": f"item-{i}", "price": f"{i}.25", "day": f"2024-01-{i % 28 + 1:02d}"}
                for i in range(1, rows + 1)
            ],
        )
    engine.dispose()
    return url


def jdbc_orders(url: str, prefix: str, **extra: str) -> dict[str, str]:
    """JdbcSource on `orders`, exactly once, into `<prefix>orders`."""
    return {
        "name": "jdbc-orders",
        "connector.class": "JdbcSource",
        "tasks.max": "1",
        "connection.url": url,
        "tables": "orders",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": prefix,
        "poll.interval.ms": "100",
        "batch.max.rows": "25",
        "exactly.once.support": "required",
        **extra,
    }


#: The SMT chain of the pipeline, configured with Kafka's class names: a static field and the topic
#: inserted, `item` renamed and `day` dropped, then the topic renamed. (TimestampRouter would refuse
#: JdbcSource's records as Kafka's does: like Confluent's JDBC source it sets no record timestamp.)
SMT_CHAIN = {
    "transforms": "insert,replace,route",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.static.field": "origin",
    "transforms.insert.static.value": "eosconnect",
    "transforms.insert.topic.field": "source_topic",
    "transforms.replace.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.replace.renames": "item:product",
    "transforms.replace.exclude": "day",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "(.*)-orders",
    "transforms.route.replacement": "$1-routed",
}


def java_file_sink(worker: KafkaConnectProcess, topic: str, out: Path) -> None:
    post_connector(
        worker,
        f"file-sink-{uuid.uuid4().hex[:6]}",
        {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "file": str(out),
        },
    )


def test_jdbc_structs_are_read_by_kafka_connects_file_sink(
    java_connect, run_job, worker_props, topic_name, create_topic, tmp_path: Path
):
    url = orders_table(tmp_path)
    prefix = topic_name("db") + "-"
    topic = create_topic(prefix + "orders")
    job = run_job(jdbc_orders(url, prefix, **SCHEMAS_ON), worker_props("enabled"))
    out = tmp_path / "java-sink.txt"
    java_file_sink(java_connect, topic, out)
    wait_until(lambda: len(lines_of(out)) >= 20, 120, "Kafka Connect's FileStreamSink to write 20 rows", job)
    job.stop()
    lines = lines_of(out)
    assert len(lines) == 20
    # Struct.toString() of Java Structs: the schema travelled (BigDecimal 1.25, not base64 bytes).
    assert lines[0].startswith("Struct{id=1,item=item-1,price=1.25,day=")
    assert all(f"item=item-{i}," in line and f"price={i}.25," in line for i, line in enumerate(lines, 1))


def test_pipeline_jdbc_smt_chain_json_schemas_exactly_once_read_by_kafka_connect(
    java_connect, run_job, worker_props, topic_name, create_topic, bootstrap: str, tmp_path: Path
):
    """The issue's "done when", JSON form: JdbcSource Structs -> InsertField + ReplaceField + RegexRouter
    -> Kafka with JsonConverter schemas.enable=true, exactly once by `eosconnect verify`'s JDBC check,
    and Kafka Connect's FileStreamSink reads the transformed Java Structs."""
    rows = 120
    url = orders_table(tmp_path, rows)
    prefix = topic_name("db") + "-"
    create_topic(prefix + "orders")
    routed = create_topic(prefix + "routed")
    job = run_job(jdbc_orders(url, prefix, **SCHEMAS_ON, **SMT_CHAIN), worker_props("enabled"))
    out = tmp_path / "java-sink.txt"
    java_file_sink(java_connect, routed, out)
    wait_until(
        lambda: len(lines_of(out)) >= rows, 120, f"Kafka Connect's FileStreamSink to write {rows}", job
    )
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes

    report = verify_jdbc_topic({"bootstrap.servers": bootstrap}, routed, url, "orders", "id")
    assert report.ok and report.seen == rows, report.anomalies
    lines = lines_of(out)
    assert len(lines) == rows
    # Java's Struct.toString(): fields in the transformed schema's order, the decimal a BigDecimal.
    assert (
        lines[0] == f"Struct{{id=1,product=item-1,price=1.25,source_topic={prefix}orders,origin=eosconnect}}"
    )
    assert [line.split(",", 1)[0] for line in lines] == [f"Struct{{id={i}" for i in range(1, rows + 1)]


def test_pipeline_jdbc_smt_chain_avro_exactly_once_read_by_confluents_deserializer(
    schema_registry: LocalSchemaRegistry,
    run_job,
    worker_props,
    topic_name,
    create_topic,
    read_committed,
    tmp_path,
):
    """The same pipeline with the AvroConverter (keys and values) against the real registry: every row
    once under read_committed, the transformed records read back by Confluent's AvroDeserializer with
    the registry's schema id for the routed topic's subject."""
    rows = 120
    url = orders_table(tmp_path, rows)
    prefix = topic_name("db") + "-"
    create_topic(prefix + "orders")
    routed = create_topic(prefix + "routed")
    avro = {
        "key.converter": "io.confluent.connect.avro.AvroConverter",
        "key.converter.schema.registry.url": schema_registry.url,
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": schema_registry.url,
    }
    job = run_job(jdbc_orders(url, prefix, **avro, **SMT_CHAIN), worker_props("enabled"))
    wait_until(lambda: len(read_committed(routed)) >= rows, 120, f"{rows} rows in Kafka", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes

    records = read_committed(routed)
    client = SchemaRegistryClient({"url": schema_registry.url, "timeout": 30})
    deserialize = AvroDeserializer(client)
    context = SerializationContext(routed, MessageField.VALUE)
    values = [deserialize(r.value, context) for r in records]
    assert sorted(v["id"] for v in values) == list(range(1, rows + 1)), "every row exactly once"
    assert values[0] == {
        "id": 1,
        "product": "item-1",
        "price": decimal.Decimal("1.25"),
        "source_topic": f"{prefix}orders",
        "origin": "eosconnect",
    }
    value_id = client.get_latest_version(f"{routed}-value").schema_id
    assert {int.from_bytes(r.value[1:5], "big") for r in records} == {value_id}
    assert {r.value[0] for r in records} == {0}, "Confluent's magic byte"


def test_kafka_connects_schemad_records_are_read_by_an_eosconnect_sink(
    java_connect, run_job, worker_props, topic_name, create_topic, tmp_path: Path
):
    source_file = tmp_path / "in.txt"
    expected = [f"line {i} é" for i in range(25)]
    source_file.write_text("".join(line + "\n" for line in expected), encoding="utf-8")
    topic = create_topic(topic_name("lines"))
    post_connector(
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
