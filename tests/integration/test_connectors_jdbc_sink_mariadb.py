"""JdbcSink on a real MariaDB server (Debian's `mariadb-server`, PyMySQL): the offsets table's
locking and fencing, a server crash mid-flush, and upsert/delete end to end through the session
broker and Spark. The same cases as on PostgreSQL (test_connectors_jdbc_sink.py), where the SQL
differs: SELECT .. FOR UPDATE under InnoDB, INSERT .. ON DUPLICATE KEY UPDATE, VARCHAR keys.
"""

from __future__ import annotations

import threading
import time

import pytest
import sqlalchemy as sa

from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.connectors.jdbc_sink.config import parse_settings
from eosconnect.connectors.jdbc_sink.offsets_table import OffsetsTable
from eosconnect.connectors.jdbc_sink.rows import RowMaker
from eosconnect.connectors.jdbc_sink.writer import RowWriter
from support.jdbc_sink import key, produce, scalar, sink_config, value
from support.runtime_helpers import wait_until


def test_claim_waits_for_a_commit_in_flight_and_fences_the_older_task(mariadb) -> None:
    url = mariadb.new_database()
    config = {
        "name": "c",
        "connection.url": url,
        "topics": "t",
        "auto.create": "true",
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "name",
    }
    settings = parse_settings(config)
    tp = TopicPartition("t", 0)
    zombie, successor = RowWriter(settings, "c"), RowWriter(settings, "c")
    maker = RowMaker(settings)

    def rows(start: int, end: int) -> None:
        for i in range(start, end):
            record = SinkRecord("t", 0, i, None, {"name": f"row-{i % 3}", "k": i})
            zombie.add(maker.row(record))  # type: ignore[arg-type]

    assert zombie.claim([tp]) == {}
    rows(0, 5)
    zombie.flush({tp: OffsetAndMetadata(5, leader_epoch=3)})
    assert scalar(url, "SELECT COUNT(*) FROM t") == 3, "upserts by a VARCHAR key"
    assert scalar(url, "SELECT k FROM t WHERE name = 'row-1'") == 4
    table = OffsetsTable(settings.offsets_table, "c")
    with zombie.engine.connect() as conn, conn.begin():
        table.lock(conn, [tp])  # a commit in flight
        claimed: dict[TopicPartition, OffsetAndMetadata] = {}
        waiter = threading.Thread(target=lambda: claimed.update(successor.claim([tp])))
        waiter.start()
        time.sleep(1.0)
        assert waiter.is_alive(), "the claim must wait for the lock"
    waiter.join(30)
    assert claimed == {tp: OffsetAndMetadata(5, leader_epoch=3)}
    rows(5, 8)
    result = zombie.flush({tp: OffsetAndMetadata(8, leader_epoch=3)})
    assert result.fenced == {tp: 2} and result.committed == {} and result.rows == 0
    assert scalar(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == 5
    zombie.close()
    successor.close()


def test_a_flush_rides_out_a_mariadb_crash_and_writes_every_row_once(mariadb) -> None:
    """mariadbd is SIGKILLed with rows waiting and started again 2 s later (InnoDB recovers): the
    flush retries per connection.attempts and commits rows and position once."""
    url = mariadb.new_database()
    config = {
        "name": "c",
        "connection.url": url,
        "topics": "t",
        "auto.create": "true",
        "connection.attempts": "20",
        "connection.backoff.ms": "1000",
    }
    settings = parse_settings(config)
    tp = TopicPartition("t", 0)
    writer, maker = RowWriter(settings, "c"), RowMaker(settings)
    writer.claim([tp])
    for i in range(50):
        writer.add(maker.row(SinkRecord("t", 0, i, None, {"k": i})))  # type: ignore[arg-type]
    writer.flush({tp: OffsetAndMetadata(50)})
    for i in range(50, 100):
        writer.add(maker.row(SinkRecord("t", 0, i, None, {"k": i})))  # type: ignore[arg-type]
    mariadb.kill()
    restarter = threading.Timer(2.0, mariadb.start)
    restarter.start()
    try:
        result = writer.flush({tp: OffsetAndMetadata(100)})
    finally:
        restarter.join()
    assert result.rows == 50 and result.committed == {tp: OffsetAndMetadata(100)}
    assert scalar(url, "SELECT COUNT(*) FROM t") == 100
    assert scalar(url, "SELECT COUNT(DISTINCT k) FROM t") == 100
    assert scalar(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == 100
    writer.close()


@pytest.mark.kafka
@pytest.mark.spark
def test_upsert_and_delete_end_to_end(mariadb, run_job, worker_props, topic_name, create_topic, bootstrap):
    url = mariadb.new_database()
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
