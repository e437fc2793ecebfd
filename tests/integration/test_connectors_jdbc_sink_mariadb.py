"""JdbcSink on a real MariaDB server (Debian's `mariadb-server`, PyMySQL): the offsets table's
locking and fencing, a server crash mid-flush, and upsert/delete end to end through the session
broker and Spark. The same cases as on PostgreSQL (test_connectors_jdbc_sink.py), where the SQL
differs: SELECT .. FOR UPDATE under InnoDB, INSERT .. ON DUPLICATE KEY UPDATE, VARCHAR keys.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pymysql.cursors
import pytest
import sqlalchemy as sa

from eosconnect.api.records import OffsetAndMetadata, SinkRecord
from support.jdbc_sink import (
    TP,
    add,
    claim_waits_then_fences,
    flush_rides_out_a_crash,
    new_writer,
    scalar,
    upserts_and_deletes_end_to_end,
)


def test_claim_waits_for_a_commit_in_flight_and_fences_the_older_task(mariadb) -> None:
    url = mariadb.new_database()
    claim_waits_then_fences(
        url,
        lambda i: SinkRecord("t", 0, i, None, {"name": f"row-{i % 3}", "k": i}),
        **{"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "name"},
    )
    assert scalar(url, "SELECT COUNT(*) FROM t") == 3, "upserts by a VARCHAR key"
    assert scalar(url, "SELECT k FROM t WHERE name = 'row-1'") == 4


def test_a_zombie_idle_inside_its_transaction_is_ended_by_mariadb_and_fenced(mariadb) -> None:
    """MariaDB's idle_transaction_timeout (from idle.transaction.timeout.ms) ends a session that
    holds the offsets row's lock and says nothing - to the server a SIGSTOPped task looks just so:
    the successor's claim gets the lock within the timeout, and the zombie's next flush is fenced."""
    url = mariadb.new_database()
    idle = {"idle.transaction.timeout.ms": "3000"}
    (zombie, maker), (successor, _) = new_writer(url, **idle), new_writer(url, **idle)
    zombie.claim([TP])
    add(zombie, maker, (SinkRecord("t", 0, i, None, {"k": i}) for i in range(5)))
    zombie.flush({TP: OffsetAndMetadata(5)})
    conn = zombie.engine.connect()
    transaction = conn.begin()
    zombie.offsets.lock(conn, [TP])  # type: ignore[union-attr]  # then silence, as if frozen
    began = time.monotonic()
    claimed: dict = {}
    waiter = threading.Thread(target=lambda: claimed.update(successor.claim([TP])), daemon=True)
    waiter.start()
    waiter.join(30)
    assert not waiter.is_alive(), "the claim still waits for the idle zombie's lock after 30 s"
    assert claimed == {TP: OffsetAndMetadata(5)}
    print(f"claimed {time.monotonic() - began:.1f} s after the zombie fell silent (timeout 3 s)")
    with contextlib.suppress(sa.exc.DBAPIError):
        transaction.rollback()  # the server ended the session already
    conn.close()
    add(zombie, maker, (SinkRecord("t", 0, i, None, {"k": i}) for i in range(5, 8)))
    result = zombie.flush({TP: OffsetAndMetadata(8)})
    assert result.fenced == {TP: 2} and result.rows == 0
    assert scalar(url, "SELECT COUNT(*) FROM t") == 5
    zombie.close()
    successor.close()


def test_a_flush_rides_out_a_mariadb_crash_and_writes_every_row_once(mariadb) -> None:
    """mariadbd is SIGKILLed with rows waiting and started again 2 s later (InnoDB recovers): the
    flush retries per connection.attempts and commits rows and position once."""
    flush_rides_out_a_crash(mariadb.new_database(), mariadb.kill, mariadb.start, attempts=20)


def test_a_flush_of_upserts_is_one_multi_row_statement_on_the_wire(mariadb, monkeypatch) -> None:
    """JdbcSink hands MariaDB's upserts to executemany, which PyMySQL sends as multi-row
    `INSERT .. VALUES (..), (..) .. ON DUPLICATE KEY UPDATE` statements (up to about 1 MB each), not
    a statement per row: 3,000 upserts (1,000 keys written twice) take a handful of statements."""
    url = mariadb.new_database()
    writer, maker = new_writer(url, **{"insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "k"})
    writer.claim([TP])
    add(writer, maker, (SinkRecord("t", 0, i, None, {"k": i % 2000, "v": f"x{i}"}) for i in range(3000)))
    sent: list[str] = []  # PyMySQL's _query gets str or bytes
    query = pymysql.cursors.Cursor._query
    monkeypatch.setattr(
        pymysql.cursors.Cursor, "_query", lambda self, sql: sent.append(str(sql)) or query(self, sql)
    )
    assert writer.flush({TP: OffsetAndMetadata(3000)}).rows == 3000
    upserts = [q for q in sent if "ON DUPLICATE KEY UPDATE" in q]
    assert len(sent) < 10 and len(upserts) == 1, f"{len(sent)} statements, {len(upserts)} of them upserts"
    assert scalar(url, "SELECT COUNT(*) FROM t") == 2000
    assert scalar(url, "SELECT v FROM t WHERE k = 5") == "x2005", "the later record of a key wins"
    writer.close()


@pytest.mark.kafka
@pytest.mark.spark
def test_upsert_and_delete_end_to_end(mariadb, run_job, worker_props, topic_name, create_topic, bootstrap):
    url = mariadb.new_database()
    upserts_and_deletes_end_to_end(url, run_job, worker_props, topic_name, create_topic, bootstrap)
