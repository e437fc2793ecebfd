"""Dead letter records against Apache Kafka Connect's own: FileStreamSink with errors.tolerance=all on
the same poison record, in a Java Connect 4.x worker and in an eosconnect worker on one broker. The
dead letters must carry the same bytes and the same `__connect.errors.*` headers (names, order and
values, except the connector name, which differs by design, and the exception's message and stack
trace, which are the two runtimes' own words).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer

from eosconnect.devkafka.kafka_connect import KafkaConnectProcess, connect_worker_defaults

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

JSON = "org.apache.kafka.connect.json.JsonConverter"
OWN_WORDS = {"__connect.errors.exception.message", "__connect.errors.exception.stacktrace"}


def sink(name: str, topic: str, dlq: str, out: Path) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "file": str(out),
        "key.converter": JSON,
        "value.converter": JSON,
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true",
        "errors.log.enable": "true",
        "consumer.override.auto.offset.reset": "earliest",
    }


def test_dead_letters_match_kafka_connects(
    bootstrap, workers, topic_name, create_topic, read_committed, tmp_path: Path
) -> None:
    topic = create_topic(topic_name("poison"), partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(6):
        producer.produce(topic, key=b"%d" % i, value=b"{not json" if i == 3 else b'{"n": %d}' % i)
    assert producer.flush(30) == 0
    java = KafkaConnectProcess(
        tmp_path / "java", worker_props=connect_worker_defaults(bootstrap, f"dlq-java-{uuid.uuid4().hex[:8]}")
    )
    java.start(timeout=300)
    try:
        eos = workers()
        java_dlq, eos_dlq = topic_name("java-dlq"), topic_name("eos-dlq")
        created = httpx.put(
            f"{java.url}/connectors/dlq-java/config",
            json=sink("dlq-java", topic, java_dlq, tmp_path / "java.txt"),
            timeout=60,
        )
        assert created.status_code in (200, 201), created.text
        config = sink("dlq-eos", topic, eos_dlq, tmp_path / "eos.txt")
        assert (
            eos.create_connector("dlq-eos", {k: v for k, v in config.items() if k != "name"}).status_code
            == 201
        )

        def lines(path: Path) -> int:
            return len(path.read_text().splitlines()) if path.exists() else 0

        eos.wait_for(
            lambda: lines(tmp_path / "java.txt") >= 5 and lines(tmp_path / "eos.txt") >= 5,
            120,
            "5 lines each",
        )
        (java_letter,) = read_committed(java_dlq)
        (eos_letter,) = read_committed(eos_dlq)
    finally:
        java.stop()
    assert (eos_letter.key, eos_letter.value) == (java_letter.key, java_letter.value) == (b"3", b"{not json")
    java_headers = [(k, v.decode()) for k, v in java_letter.headers]
    eos_headers = [(k, v.decode()) for k, v in eos_letter.headers]
    assert [k for k, _ in eos_headers] == [k for k, _ in java_headers]
    differ = {"__connect.errors.connector.name", *OWN_WORDS}
    assert [h for h in eos_headers if h[0] not in differ] == [h for h in java_headers if h[0] not in differ]
    assert dict(eos_headers)["__connect.errors.connector.name"] == "dlq-eos"
    for side in ("eos.txt", "java.txt"):  # the rest delivered on both
        assert len(tmp_path.joinpath(side).read_text().splitlines()) == 5
