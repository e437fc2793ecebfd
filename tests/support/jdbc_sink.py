"""Records, settings and table reads shared by the JdbcSink tests (test_connectors_jdbc_sink*.py).

Values are Kafka's JSON with schemas (a Struct with an int64 `k`, a string and a Decimal), so the
sink creates typed columns; every record carries its own `k`, the column the tests compare by.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import sqlalchemy as sa
from confluent_kafka import Producer

from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.connectors.jdbc_sink.config import parse_settings
from eosconnect.connectors.jdbc_sink.offsets_table import OffsetsTable
from eosconnect.connectors.jdbc_sink.rows import RowMaker
from eosconnect.connectors.jdbc_sink.writer import RowWriter
from support.chaos import wait_for_progress
from support.runtime_helpers import wait_until

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
    record was acknowledged (librdkafka retries through a broker restart). Idempotent, so that a retry
    through a broker SIGKILL cannot write a record twice into the topic: a duplicate row in the table
    is then the sink's, which is what the fault tests look for.

    With `hold_at`, it stops before that record until `release()`: a test that injects its fault
    before releasing knows the records from there on are written after the fault, however fast the
    sink caught up (on a loaded machine it may reach the first records' end before the test looks)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        total: int,
        partitions: int,
        step: int = 40,
        pause_s: float = 0.03,
        hold_at: int | None = None,
    ) -> None:
        self.bootstrap, self.topic, self.total, self.partitions = bootstrap, topic, total, partitions
        self.step, self.pause_s, self.hold_at = step, pause_s, hold_at
        self.undelivered: int | None = None
        self._released = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow-producer", daemon=True)

    def start(self) -> SlowProducer:
        self._thread.start()
        return self

    def release(self) -> None:
        """Produce the records from `hold_at` on."""
        self._released.set()

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, "enable.idempotence": True})
        for start in range(0, self.total, self.step):
            if self.hold_at is not None and start >= self.hold_at and not self._released.is_set():
                producer.flush(30)
                self._released.wait(300)
            for i in range(start, min(start + self.step, self.total)):
                producer.produce(self.topic, value=value(i), partition=i % self.partitions)
            producer.poll(0)
            time.sleep(self.pause_s)
        self.undelivered = producer.flush(120)

    def join(self, timeout: float = 180) -> None:
        self.release()
        self._thread.join(timeout)
        assert self.undelivered == 0, f"{self.undelivered} records not acknowledged by the broker"


def assert_exactly_once(url: str, total: int) -> None:
    """Every k in 0..total-1 once in `events`, nothing else."""
    assert scalar(url, "SELECT COUNT(*) FROM events") == total, "no duplicates"
    assert scalar(url, "SELECT COUNT(DISTINCT k) FROM events") == total, "every record exactly once"
    assert scalar(url, "SELECT MIN(k) FROM events") == 0
    assert scalar(url, "SELECT MAX(k) FROM events") == total - 1


# ----------------------------------------------------------------------------- the writer alone
#: The partition the writer-level tests (no broker) write: topic `t` into table `t`.
TP = TopicPartition("t", 0)


def new_writer(url: str, **extra: str) -> tuple[RowWriter, RowMaker]:
    """JdbcSink's writer and row maker for connector `c` reading `t` (auto.create), without a task."""
    config = {"name": "c", "connection.url": url, "topics": "t", "auto.create": "true", **extra}
    settings = parse_settings(config)
    return RowWriter(settings, "c"), RowMaker(settings)


def add(writer: RowWriter, maker: RowMaker, records: Iterable[SinkRecord]) -> None:
    for record in records:
        row = maker.row(record)
        assert row is not None
        writer.add(row)


def claim_waits_then_fences(url: str, record: Callable[[int], SinkRecord], **extra: str) -> None:
    """A zombie writes `record(0..4)`; while its next flush holds the partition's row lock, the
    successor's claim must wait for it and then read the position after it; the zombie's next flush
    (`record(5..7)`) is refused (fenced), writing nothing. The caller checks the table."""
    (zombie, maker), (successor, _) = new_writer(url, **extra), new_writer(url, **extra)
    assert zombie.claim([TP]) == {}
    add(zombie, maker, map(record, range(5)))
    zombie.flush({TP: OffsetAndMetadata(5, leader_epoch=3)})
    table = OffsetsTable(zombie.settings.offsets_table, "c")
    with zombie.engine.connect() as conn, conn.begin():
        table.lock(conn, [TP])  # a commit in flight
        claimed: dict[TopicPartition, OffsetAndMetadata] = {}
        waiter = threading.Thread(target=lambda: claimed.update(successor.claim([TP])))
        waiter.start()
        time.sleep(1.0)
        assert waiter.is_alive(), "the claim must wait for the lock"
    waiter.join(30)
    assert claimed == {TP: OffsetAndMetadata(5, leader_epoch=3)}
    add(zombie, maker, map(record, range(5, 8)))
    result = zombie.flush({TP: OffsetAndMetadata(8, leader_epoch=3)})
    assert result.fenced == {TP: 2} and result.committed == {} and result.rows == 0
    assert scalar(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == 5
    zombie.close()
    successor.close()


def flush_rides_out_a_crash(
    url: str, kill: Callable[[], None], start: Callable[[], Any], attempts: int
) -> None:
    """The database is killed with 50 rows waiting and started again 2 s later: the flush retries
    (`connection.attempts`, 1 s apart) and commits rows and position once."""
    writer, maker = new_writer(url, **{"connection.attempts": str(attempts), "connection.backoff.ms": "1000"})
    writer.claim([TP])
    add(writer, maker, (SinkRecord("t", 0, i, None, {"k": i}) for i in range(50)))
    writer.flush({TP: OffsetAndMetadata(50)})
    add(writer, maker, (SinkRecord("t", 0, i, None, {"k": i}) for i in range(50, 100)))
    kill()
    restarter = threading.Timer(2.0, start)
    restarter.start()
    try:
        result = writer.flush({TP: OffsetAndMetadata(100)})
    finally:
        restarter.join()
    assert result.rows == 50 and result.committed == {TP: OffsetAndMetadata(100)}
    assert scalar(url, "SELECT COUNT(*) FROM t") == 100
    assert scalar(url, "SELECT COUNT(DISTINCT k) FROM t") == 100
    assert scalar(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == 100
    writer.close()


def upserts_and_deletes_end_to_end(
    url: str, run_job: Any, worker_props: Any, topic_name: Any, create_topic: Any, bootstrap: str
) -> None:
    """100 records, then a new value for every second key and a tombstone for every tenth, through
    the session broker and Spark with upserts by the record key and `delete.enabled`: 90 rows, 40 of
    them changed. The fixtures of tests/conftest.py are passed in."""
    topic = create_topic(topic_name("upserts"), partitions=1)
    items: list[tuple[bytes | None, bytes | None]] = [(key(i), value(i)) for i in range(100)]
    items += [(key(i), value(i, "changed")) for i in range(0, 100, 2)]
    items += [(key(i), None) for i in range(0, 100, 10)]  # tombstones
    produce(bootstrap, topic, items, 1)
    config = sink_config(
        url,
        topic,
        name=topic_name("sink"),
        **{"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "k", "delete.enabled": "true"},
    )
    job = run_job(config, worker_props("disabled"))

    def done() -> bool:
        try:
            return scalar(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == len(items)
        except sa.exc.SQLAlchemyError:
            return False

    wait_until(done, 90, "every record written", job)
    assert [o["state"] for o in job.stop()] == ["STOPPED"]
    assert scalar(url, "SELECT COUNT(*) FROM events") == 90
    assert scalar(url, "SELECT COUNT(*) FROM events WHERE note = 'changed'") == 40
    assert scalar(url, "SELECT SUM(price) FROM events WHERE mod(k, 10) = 1") == sum(range(1, 100, 10))


# ----------------------------------------------------------------------------- the chaos soak's table
class SequenceTable:
    """The chaos soak's JdbcSink target, followed as `support.chaos.SequenceFollower` follows a
    topic: SequenceSource values (`task`, `seq`, `payload`; schemaless JSON) written with
    `insert.mode=insert` into a table without a key, where any record written twice shows as a
    second row with the same (task, seq).

    `highest()` is each task's highest seq in the table, `anomalies` the (task, seq) pairs found
    more than once (a query each time it is read, so it sees what is committed now), and `verify`
    the final check: every seq of every task once, nothing missing, nothing else."""

    def __init__(self, url: str, topic: str, table: str = "chaos_rows") -> None:
        self.url, self.topic, self.table = url, topic, table
        self.engine = sa.create_engine(url, pool_pre_ping=True)
        self.errors: list[str] = []

    def config(self, tasks: int) -> dict[str, str]:
        """The JdbcSink connector: exactly once (the default), append-only, the worker's JSON converter."""
        return {
            "connector.class": "JdbcSink",
            "tasks.max": str(tasks),
            "topics": self.topic,
            "connection.url": self.url,
            "table.name.format": self.table,
            "auto.create": "true",
            "insert.mode": "insert",
            "pk.mode": "none",
            "batch.size": "500",
            "connection.attempts": "30",
            "connection.backoff.ms": "1000",
        }

    def start(self) -> SequenceTable:
        return self

    def stop(self) -> None:
        self.engine.dispose()

    def _rows(self, sql: str) -> list[tuple[Any, ...]]:
        try:
            with self.engine.connect() as conn:
                return [tuple(r) for r in conn.exec_driver_sql(sql)]
        except sa.exc.SQLAlchemyError as exc:  # not created yet, or the database busy for a moment
            if len(self.errors) < 20:
                self.errors.append(str(exc).splitlines()[0])
            return []

    def highest(self) -> dict[int, int]:
        rows = self._rows(f"SELECT task, MAX(seq) FROM {self.table} GROUP BY task")
        return {int(t): int(s) for t, s in rows}

    @property
    def anomalies(self) -> list[str]:
        twice = self._rows(
            f"SELECT task, seq, COUNT(*) FROM {self.table} GROUP BY task, seq HAVING COUNT(*) > 1 LIMIT 20"
        )
        return [f"task {t} seq {s} is in {self.table} {n} times" for t, s, n in twice]

    def wait_for_progress(
        self,
        tasks: Iterable[int],
        advance: int,
        timeout: float,
        what: str,
        alive: Callable[[], str | None] = lambda: None,
        since: dict[int, int] | None = None,
    ) -> float:
        """As `SequenceFollower.wait_for_progress`, by each task's highest seq in the table."""
        return wait_for_progress(
            self.highest,
            tasks,
            advance,
            timeout,
            f"in {self.table} {what}",
            alive,
            since,
            lambda: f"errors: {self.errors[-3:]}",
        )

    def verify(self, tasks: int, records_per_task: int) -> tuple[int, int, int]:
        """(rows, duplicated rows, missing records) against seq 0..records_per_task-1 of tasks 0..tasks-1."""
        (rows, distinct, inside), *_ = self._rows(
            f"SELECT COUNT(*), COUNT(DISTINCT (task, seq)), "
            f"COUNT(DISTINCT (task, seq)) FILTER (WHERE task >= 0 AND task < {tasks} "
            f"AND seq >= 0 AND seq < {records_per_task}) FROM {self.table}"
        ) or [(0, 0, 0)]
        return int(rows), int(rows) - int(distinct), tasks * records_per_task - int(inside)
