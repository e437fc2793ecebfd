"""Records, settings and table reads shared by the JdbcSink tests (test_connectors_jdbc_sink*.py).

Values are Kafka's JSON with schemas (a Struct with an int64 `k`, a string and a Decimal), so the
sink creates typed columns; every record carries its own `k`, the column the tests compare by.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from typing import Any

import sqlalchemy as sa
from confluent_kafka import Producer

JSON = "org.apache.kafka.connect.json.JsonConverter"
VALUE_SCHEMA = {
    "type": "struct",
    "optional": False,
    "fields": [
        {"field": "k", "type": "int64", "optional": False},
        {"field": "note", "type": "string", "optional": True},
        {
            "field": "price",
            "type": "bytes",
            "optional": True,
            "name": "org.apache.kafka.connect.data.Decimal",
            "version": 1,
            "parameters": {"scale": "2"},
        },
    ],
}


def value(k: int, note: str = "n") -> bytes:
    """Kafka's JSON with schemas; `price` (Decimal, scale 2) is k as base64 two's-complement bytes."""
    unscaled = 100 * k
    raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
    payload = {"k": k, "note": note, "price": base64.b64encode(raw).decode()}
    return json.dumps({"schema": VALUE_SCHEMA, "payload": payload}).encode()


def key(k: int) -> bytes:
    return json.dumps({"schema": {"type": "int64", "optional": False}, "payload": k}).encode()


def scalar(url: str, sql: str) -> Any:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.exec_driver_sql(sql).scalar_one()
    finally:
        engine.dispose()


def row_count(url: str, table: str = "events") -> int:
    """Rows in `table`; 0 while it does not exist yet or the database does not answer."""
    try:
        return scalar(url, f"SELECT COUNT(*) FROM {table}")
    except sa.exc.SQLAlchemyError:
        return 0


def sink_config(url: str, topic: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "connection.url": url,
        "table.name.format": "events",
        "auto.create": "true",
        "key.converter": JSON,
        "value.converter": JSON,
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "consumer.override.session.timeout.ms": "6000",
        **extra,
    }


def produce(
    bootstrap: str, topic: str, items: list[tuple[bytes | None, bytes | None]], partitions: int
) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, (k, v) in enumerate(items):
        producer.produce(topic, value=v, key=k, partition=i % partitions)
    assert producer.flush(30) == 0


class SlowProducer:
    """Produces values 0..total-1 (k = i into partition i % partitions) in steps of `step` records
    with a pause between steps, from a thread, so that faults land mid-stream; `join()` asserts every
    record was acknowledged (librdkafka retries through a broker restart)."""

    def __init__(
        self, bootstrap: str, topic: str, total: int, partitions: int, step: int = 40, pause_s: float = 0.03
    ) -> None:
        self.bootstrap, self.topic, self.total, self.partitions = bootstrap, topic, total, partitions
        self.step, self.pause_s = step, pause_s
        self.undelivered: int | None = None
        self._thread = threading.Thread(target=self._run, name="slow-producer", daemon=True)

    def start(self) -> SlowProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        for start in range(0, self.total, self.step):
            for i in range(start, min(start + self.step, self.total)):
                producer.produce(self.topic, value=value(i), partition=i % self.partitions)
            producer.poll(0)
            time.sleep(self.pause_s)
        self.undelivered = producer.flush(120)

    def join(self, timeout: float = 180) -> None:
        self._thread.join(timeout)
        assert self.undelivered == 0, f"{self.undelivered} records not acknowledged by the broker"


def assert_exactly_once(url: str, total: int) -> None:
    """Every k in 0..total-1 once in `events`, nothing else."""
    assert scalar(url, "SELECT COUNT(*) FROM events") == total, "no duplicates"
    assert scalar(url, "SELECT COUNT(DISTINCT k) FROM events") == total, "every record exactly once"
    assert scalar(url, "SELECT MIN(k) FROM events") == 0
    assert scalar(url, "SELECT MAX(k) FROM events") == total - 1
