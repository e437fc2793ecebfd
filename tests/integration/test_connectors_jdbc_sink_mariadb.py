"""JdbcSink on a real MariaDB server (Debian's `mariadb-server`, PyMySQL): the offsets table's
locking and fencing, a server crash mid-flush, and upsert/delete end to end through the session
broker and Spark. The same cases as on PostgreSQL (test_connectors_jdbc_sink.py), where the SQL
differs: SELECT .. FOR UPDATE under InnoDB, INSERT .. ON DUPLICATE KEY UPDATE, VARCHAR keys.
"""

from __future__ import annotations

import pytest

from eosconnect.api.records import SinkRecord
from support.jdbc_sink import (
    claim_waits_then_fences,
    flush_rides_out_a_crash,
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


def test_a_flush_rides_out_a_mariadb_crash_and_writes_every_row_once(mariadb) -> None:
    """mariadbd is SIGKILLed with rows waiting and started again 2 s later (InnoDB recovers): the
    flush retries per connection.attempts and commits rows and position once."""
    flush_rides_out_a_crash(mariadb.new_database(), mariadb.kill, mariadb.start, attempts=20)


@pytest.mark.kafka
@pytest.mark.spark
def test_upsert_and_delete_end_to_end(mariadb, run_job, worker_props, topic_name, create_topic, bootstrap):
    url = mariadb.new_database()
    upserts_and_deletes_end_to_end(url, run_job, worker_props, topic_name, create_topic, bootstrap)
