"""JdbcSink on a real PostgreSQL server: the offsets table's locking and fencing, then end to end
through the session broker and Spark (upsert/delete; SIGKILL of the task's Python worker with an
append-only table in insert mode, the case at-least-once sinks duplicate).

PostgreSQL comes from the shared `postgres` fixture (tests/support/postgres.py).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import sqlalchemy as sa
from confluent_kafka import Producer

from eosconnect.api.records import OffsetAndMetadata, SinkRecord
from support.jdbc_sink import (
    JSON,
    TP,
    add,
    claim_waits_then_fences,
    flush_rides_out_a_crash,
    new_writer,
    produce,
    scalar,
    sink_config,
    upserts_and_deletes_end_to_end,
    value,
)
from support.postgres import new_database
from support.runtime_helpers import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


# ----------------------------------------------------------------------------- offsets table on PostgreSQL


def test_claim_waits_for_a_commit_in_flight_and_fences_the_older_task(postgres: str) -> None:
    """The zombie's flush transaction holds the partition's row lock: the successor's claim waits
    for it, reads the position after it, and the zombie's next flush is refused."""
    url = new_database(postgres)
    claim_waits_then_fences(url, lambda i: SinkRecord("t", 0, i, None, {"k": i}))
    assert scalar(url, "SELECT COUNT(*) FROM t") == 5


#: The zombie of the test below: claims `t`-0, buffers records 5..104 and flushes them, printing the
#: result. Run as a real process so that the test can SIGSTOP it inside its flush transaction.
ZOMBIE = """
import sys
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.connectors.jdbc_sink.config import parse_settings
from eosconnect.connectors.jdbc_sink.rows import RowMaker
from eosconnect.connectors.jdbc_sink.writer import RowWriter

config = {"name": "c", "connection.url": sys.argv[1], "topics": "t", "auto.create": "true",
          "idle.transaction.timeout.ms": sys.argv[2]}
settings = parse_settings(config)
writer, maker = RowWriter(settings, "c"), RowMaker(settings)
tp = TopicPartition("t", 0)
writer.claim([tp])
for i in range(5, 105):
    writer.add(maker.row(SinkRecord("t", 0, i, None, {"k": i})))
result = writer.flush({tp: OffsetAndMetadata(105)})
print(f"zombie rows={result.rows} fenced={dict(result.fenced)} committed={len(result.committed)}", flush=True)
"""


def test_a_task_frozen_inside_its_flush_transaction_does_not_block_its_successor(
    postgres: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The hole a SIGSTOPped zombie used to leave: frozen while its flush transaction holds the
    offsets row's FOR UPDATE lock, its successor's claim waited as long as it stayed frozen. A
    statement trigger (pg_sleep, for the zombie's session only) holds the zombie inside its COPY, the
    test SIGSTOPs the zombie's process there; PostgreSQL ends the session after
    idle.transaction.timeout.ms, the successor claims, logs who held the lock meanwhile, and writes
    the rows. SIGCONTed, the zombie's commit fails and its retry finds itself fenced: every record
    once."""
    idle_ms = 7000  # > CLAIM_LOCK_WAIT_S: the claim logs the holder once before it gets the lock
    url = new_database(postgres)
    setup, maker = new_writer(url)
    setup.claim([TP])
    add(setup, maker, (SinkRecord("t", 0, i, None, {"k": i}) for i in range(5)))
    setup.flush({TP: OffsetAndMetadata(5)})
    setup.close()
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE FUNCTION hold() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF current_setting('application_name') = 'zombie' THEN PERFORM pg_sleep(1); END IF; "
            "RETURN NULL; END $$"
        )
        conn.exec_driver_sql(
            "CREATE TRIGGER hold BEFORE INSERT ON t FOR EACH STATEMENT EXECUTE FUNCTION hold()"
        )
    sep = "&" if "?" in url else "?"
    zombie = subprocess.Popen(
        [sys.executable, "-c", ZOMBIE, f"{url}{sep}application_name=zombie", str(idle_ms)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:

        def sleeping_in_flush() -> bool:
            with engine.connect() as conn:
                return bool(
                    conn.exec_driver_sql(
                        "SELECT COUNT(*) FROM pg_stat_activity WHERE application_name = 'zombie' "
                        "AND wait_event = 'PgSleep' AND xact_start IS NOT NULL"
                    ).scalar_one()
                )

        wait_until(sleeping_in_flush, 60, "the zombie inside its flush transaction")
        os.kill(zombie.pid, signal.SIGSTOP)
        frozen = time.monotonic()
        successor, maker = new_writer(url, **{"idle.transaction.timeout.ms": str(idle_ms)})
        claimed: dict = {}
        with caplog.at_level(logging.WARNING, logger="eosconnect.connectors.jdbc_sink.offsets_table"):
            waiter = threading.Thread(target=lambda: claimed.update(successor.claim([TP])), daemon=True)
            waiter.start()
            waiter.join(idle_ms / 1000 + 40)
        waited = time.monotonic() - frozen
        assert not waiter.is_alive(), (
            f"the successor's claim still waits for the frozen zombie after {waited:.0f} s"
        )
        assert claimed == {TP: OffsetAndMetadata(5)}, "the zombie's flush must not have committed"
        held = [r.getMessage() for r in caplog.records if "still waiting" in r.getMessage()]
        assert held and "application_name='zombie'" in held[0], held
        add(successor, maker, (SinkRecord("t", 0, i, None, {"k": i}) for i in range(5, 105)))
        assert successor.flush({TP: OffsetAndMetadata(105)}).rows == 100
        successor.close()
        print(f"claimed {waited:.1f} s after the SIGSTOP (idle timeout {idle_ms} ms); log: {held[0]}")
    finally:
        os.kill(zombie.pid, signal.SIGCONT)
        try:
            out, _ = zombie.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            zombie.kill()
            out, _ = zombie.communicate()
        engine.dispose()
    print(out)
    assert zombie.returncode == 0, out
    assert "zombie rows=0 fenced={TopicPartition(topic='t', partition=0): 3} committed=0" in out, out
    assert scalar(url, "SELECT COUNT(*) FROM t") == 105, "no duplicates"
    assert scalar(url, "SELECT COUNT(DISTINCT k) FROM t") == 105, "every record exactly once"
    assert scalar(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == 105


def test_a_flush_whose_session_postgresql_ended_as_idle_is_retried_and_finds_itself_fenced(
    postgres: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The chaos soak (seed 1412404671): a slot host was SIGSTOPped with a JdbcSink task inside its
    flush transaction; PostgreSQL ended the session after idle.transaction.timeout.ms and the leader
    ran the task again elsewhere. Woken, the old task failed with an ERROR: psycopg reports the
    ended session as IdleInTransactionSessionTimeout, an InternalError, which the flush did not
    retry as a lost connection. Now it does, and the retry finds the partition claimed by the
    successor: the zombie writes nothing, the successor every row once."""
    url = new_database(postgres)
    zombie, maker = new_writer(url, **{"idle.transaction.timeout.ms": "1000"})
    successor, _ = new_writer(url)
    zombie.claim([TP])
    add(zombie, maker, (SinkRecord("t", 0, i, None, {"k": i}) for i in range(5)))
    write_rows = zombie._write_rows
    paused: list[float] = []

    def frozen_once(conn: sa.Connection, rows: list) -> int:
        if not paused:  # "frozen" inside the transaction, holding the offsets row's lock
            paused.append(time.monotonic())
            time.sleep(2.0)  # PostgreSQL ends the idle session after 1 s, releasing the lock
            assert successor.claim([TP]) == {}, "the successor found a committed position"
        return write_rows(conn, rows)

    monkeypatch.setattr(zombie, "_write_rows", frozen_once)
    with caplog.at_level(logging.WARNING, logger="eosconnect.connectors.jdbc_sink.writer"):
        result = zombie.flush({TP: OffsetAndMetadata(5)})
    retried = [r.getMessage() for r in caplog.records if "retrying" in r.getMessage()]
    assert paused and retried, "the flush was not retried"
    print(retried[0])
    assert result.rows == 0 and TP in result.fenced, result
    assert scalar(url, "SELECT COUNT(*) FROM t") == 0, "the fenced zombie wrote rows"
    add(successor, maker, (SinkRecord("t", 0, i, None, {"k": i}) for i in range(5)))
    assert successor.flush({TP: OffsetAndMetadata(5)}).rows == 5
    assert scalar(url, "SELECT COUNT(DISTINCT k) FROM t") == 5
    zombie.close()
    successor.close()


def test_a_flush_rides_out_a_postgresql_crash_and_writes_every_row_once(postgres) -> None:
    """PostgreSQL is killed (pg_ctl -m immediate) with rows waiting and started again 2 s later: the
    flush retries per connection.attempts/connection.backoff.ms and commits rows and position once."""
    flush_rides_out_a_crash(new_database(postgres), postgres.kill, postgres.start, attempts=10)


def test_upserts_by_copy_keep_the_last_row_of_each_key_and_the_order_with_deletes(postgres: str) -> None:
    """Runs of upserts go to PostgreSQL as COPY into a temporary table and one INSERT .. ON CONFLICT:
    several rows of one key in a run leave the last one, a delete between two runs stays between
    them, and two flushes in one session (temporary tables dropped at commit) both work."""
    url = new_database(postgres)
    writer, maker = new_writer(
        url, **{"insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "id", "delete.enabled": "true"}
    )
    writer.claim([TP])
    items = [(i % 5, {"v": f"first {i}"}) for i in range(10)]  # keys 0-4 twice each in one run
    items += [(3, None), (4, None), (4, {"v": "again"})]  # delete 3 and 4, then 4 back
    add(writer, maker, (SinkRecord("t", 0, offset, k, v) for offset, (k, v) in enumerate(items)))
    writer.flush({TP: OffsetAndMetadata(len(items))})
    second = enumerate(range(1, 7), start=len(items))
    add(writer, maker, (SinkRecord("t", 0, offset, k, {"v": f"second {k}"}) for offset, k in second))
    writer.flush({TP: OffsetAndMetadata(len(items) + 6)})
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        got = dict(conn.exec_driver_sql("SELECT id, v FROM t").all())
    engine.dispose()
    assert got == {0: "first 5", **{k: f"second {k}" for k in range(1, 7)}}
    assert scalar(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == len(items) + 6
    writer.close()


# ----------------------------------------------------------------------------- end to end


def test_upsert_and_delete_end_to_end(postgres, run_job, worker_props, topic_name, create_topic, bootstrap):
    url = new_database(postgres)
    upserts_and_deletes_end_to_end(url, run_job, worker_props, topic_name, create_topic, bootstrap)


def test_sigkill_of_the_task_leaves_every_record_exactly_once_in_an_append_only_table(
    postgres, workers, topic_name, create_topic, bootstrap
):
    """insert.mode=insert, no primary key (an at-least-once sink duplicates here after a crash): the
    task's Python worker is SIGKILLed mid-stream; Spark runs the task again, it resumes from the
    database's offsets, and every record's key column appears exactly once."""
    url = new_database(postgres)
    topic = create_topic(topic_name("events"), partitions=2)
    total = 4000
    worker = workers()
    config = sink_config(url, topic, **{"batch.size": "100"})
    assert worker.create_connector("jdbc", config).status_code == 201
    worker.wait_for(lambda: worker.task_states("jdbc") == ["RUNNING"], 90, "the sink task RUNNING")

    def produce_slowly() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for start in range(0, total, 40):
            for i in range(start, start + 40):
                producer.produce(topic, value=value(i), partition=i % 2)
            producer.poll(0)
            time.sleep(0.03)
        assert producer.flush(30) == 0

    def count() -> int:
        try:
            return scalar(url, "SELECT COUNT(*) FROM events")
        except sa.exc.SQLAlchemyError:
            return 0

    writer = threading.Thread(target=produce_slowly)
    writer.start()
    try:
        worker.wait_for(lambda: count() >= 600, 90, "600 rows in the table")
        victim = worker.request("GET", "/internal/tasks").json()["jdbc-0"]["pid"]
        assert victim
        os.kill(victim, signal.SIGKILL)
        killed_at = count()
    finally:
        writer.join()
    assert killed_at < total, "the kill must land mid-stream"

    def retried() -> bool:
        task = worker.request("GET", "/internal/tasks").json()["jdbc-0"]
        return task["pid"] not in (None, victim) and task["state"] == "RUNNING"

    worker.wait_for(retried, 120, "the sink task to run again in a new Python worker")
    worker.wait_for(lambda: count() >= total, 120, f"{total} rows")
    time.sleep(2)  # anything repeated would land now
    assert scalar(url, "SELECT COUNT(*) FROM events") == total, "no duplicates"
    assert scalar(url, "SELECT COUNT(DISTINCT k) FROM events") == total, "every record exactly once"
    assert (
        scalar(url, "SELECT MIN(k) FROM events") == 0
        and scalar(url, "SELECT MAX(k) FROM events") == total - 1
    )
    print(f"SIGKILL at {killed_at} rows; {total} rows after the retry, all distinct")
    assert worker.request("DELETE", "/connectors/jdbc").status_code == 204


def test_a_refused_write_leads_the_trace_and_fails_again_after_each_restart(
    postgres, workers, topic_name, create_topic, bootstrap
):
    """A row PostgreSQL refuses (a CHECK constraint), default errors.tolerance: the task is FAILED
    with the database's message first (it led with SQLAlchemy's background link), and a restart, by
    task or of the failed tasks (onlyFailed), ends FAILED again with that trace (it stayed RESTARTING)."""
    url = new_database(postgres)
    topic = create_topic(topic_name("refused"), partitions=1)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE events (k BIGINT PRIMARY KEY, note TEXT CHECK (note <> 'n'), price NUMERIC(38, 2))"
        )
    engine.dispose()
    produce(bootstrap, topic, [(None, value(1))], 1)
    worker = workers()
    assert worker.create_connector("refused", sink_config(url, topic)).status_code == 201

    def failed_with_the_database_message(what: str) -> str:
        worker.wait_for(lambda: worker.task_states("refused") == ["FAILED"], 90, what)
        trace = worker.status("refused")["tasks"][0]["trace"]
        assert trace.startswith(
            'psycopg.errors.CheckViolation: new row for relation "events" violates check'
        ), trace
        assert "[SQL: INSERT INTO" in trace.split("\n\n")[0] and "sqlalche.me" not in trace.split("\n\n")[0]
        return trace

    failed_with_the_database_message("the task FAILED on the refused row")
    assert worker.request("POST", "/connectors/refused/tasks/0/restart").status_code in (200, 204)
    failed_with_the_database_message("FAILED again after the task's restart")
    answer = worker.request("POST", "/connectors/refused/restart?includeTasks=true&onlyFailed=true")
    assert answer.status_code == 202 and answer.json()["tasks"][0]["state"] == "RESTARTING", answer.text
    failed_with_the_database_message("FAILED again after restarting the failed tasks")
    assert scalar(url, "SELECT COUNT(*) FROM events") == 0


def test_poison_records_go_to_the_dead_letter_queue_with_kafkas_headers(
    postgres, run_job, worker_props, topic_name, create_topic, bootstrap, read_committed
):
    """errors.tolerance=all with a DLQ: a record the JsonConverter rejects (stage VALUE_CONVERTER), one
    the task reports through errant_record_reporter() (a JSON string, not a row: TASK_PUT) and one the
    database refuses (a duplicate primary key, found at flush: TASK_PUT) go to the dead letter topic as
    consumed, with Kafka's __connect.errors.* headers; the rest is written, exactly once."""
    url = new_database(postgres)
    topic = create_topic(topic_name("mixed"), partitions=1)
    dlq = topic_name("dlq")
    not_json = b"{not json"
    not_a_row = json.dumps({"schema": {"type": "string"}, "payload": "just text"}).encode()
    items: list[tuple[bytes | None, bytes | None]] = [(None, value(i)) for i in range(10)]
    items[3], items[7] = (None, not_json), (None, not_a_row)
    items.append((None, value(5, "duplicate key")))  # the database refuses it: a unique key violation
    produce(bootstrap, topic, items, 1)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE events (k BIGINT PRIMARY KEY, note TEXT, price NUMERIC(38, 2))")
    engine.dispose()
    name = topic_name("sink")
    config = sink_config(
        url,
        topic,
        name=name,
        **{
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.log.enable": "true",
        },
    )
    job = run_job(config, worker_props("disabled"))

    def done() -> bool:
        try:
            return scalar(url, "SELECT kafka_offset FROM eosconnect_sink_offsets") == 11
        except sa.exc.SQLAlchemyError:
            return False

    wait_until(done, 90, "every record handled", job)
    assert [o["state"] for o in job.stop()] == ["STOPPED"]
    assert scalar(url, "SELECT COUNT(*) FROM events") == 8
    assert scalar(url, "SELECT COUNT(*) FROM events WHERE k IN (3, 7)") == 0
    letters = read_committed(dlq)
    assert [r.value for r in letters] == [not_json, not_a_row, items[10][1]]
    refused = {k: v.decode() for k, v in letters[2].headers}
    assert (refused["__connect.errors.offset"], refused["__connect.errors.stage"]) == ("10", "TASK_PUT")
    assert refused["__connect.errors.exception.class.name"] == "sqlalchemy.exc.IntegrityError"
    assert scalar(url, "SELECT note FROM events WHERE k = 5") == "n", "the first row with key 5 stays"
    for letter, offset, stage in zip(letters, (3, 7), ("VALUE_CONVERTER", "TASK_PUT"), strict=False):
        headers = {k: v.decode() for k, v in letter.headers}
        assert headers["__connect.errors.topic"] == topic
        assert headers["__connect.errors.partition"] == "0"
        assert headers["__connect.errors.offset"] == str(offset)
        assert headers["__connect.errors.connector.name"] == name
        assert headers["__connect.errors.task.id"] == "0"
        assert headers["__connect.errors.stage"] == stage
        assert (
            headers["__connect.errors.exception.class.name"]
            == "org.apache.kafka.connect.errors.DataException"
        )
        assert headers["__connect.errors.exception.message"]
        assert "Traceback" in headers["__connect.errors.exception.stacktrace"]
    assert {k: v.decode() for k, v in letters[0].headers}["__connect.errors.class.name"] == JSON


def test_a_sigstopped_zombie_task_cannot_commit_after_its_partition_moved(
    postgres, workers, topic_name, create_topic, bootstrap
):
    """Two tasks, one partition each. Task 0's Python worker is SIGSTOPped mid-stream with rows
    buffered; after the session timeout the group gives its partition to task 1, which claims it in
    the offsets table and resumes from the position stored there. Task 0 is then SIGCONTed: its
    flush (or the commit on revocation) is refused by the generation check. Every record once."""
    url = new_database(postgres)
    topic = create_topic(topic_name("zombie"), partitions=2)
    total = 3000
    worker = workers()
    # Each task in a Python worker of its own (not packed into one slot host), so that SIGSTOP freezes
    # task 0 alone.
    # If SIGSTOP lands inside a flush transaction, PostgreSQL ends the zombie's session after
    # idle.transaction.timeout.ms; 10 s (not the default 30) keeps the claim well inside the 60 s below.
    config = sink_config(
        url,
        topic,
        **{
            "tasks.max": "2",
            "batch.size": "50",
            "eosconnect.own.slot": "true",
            "idle.transaction.timeout.ms": "10000",
        },
    )
    assert worker.create_connector("jdbc", config).status_code == 201
    worker.wait_for(lambda: worker.task_states("jdbc") == ["RUNNING", "RUNNING"], 90, "both tasks RUNNING")
    tasks = worker.request("GET", "/internal/tasks").json()
    victim, other = tasks["jdbc-0"]["pid"], tasks["jdbc-1"]["pid"]
    assert victim and victim != other, f"the two tasks must run in Python workers of their own: {tasks}"

    def count() -> int:
        try:
            return scalar(url, "SELECT COUNT(*) FROM events")
        except sa.exc.SQLAlchemyError:
            return 0

    def produce_slowly() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        for start in range(0, total, 30):
            for i in range(start, start + 30):
                producer.produce(topic, value=value(i), partition=i % 2)
            producer.poll(0)
            time.sleep(0.03)
        assert producer.flush(30) == 0

    writer = threading.Thread(target=produce_slowly)
    writer.start()
    try:
        worker.wait_for(lambda: count() >= 400, 90, "400 rows in the table")
        os.kill(victim, signal.SIGSTOP)
        try:
            stopped_at = count()

            def moved() -> bool:  # the successor claimed both partitions: generation 2 somewhere
                return scalar(url, "SELECT MAX(generation) FROM eosconnect_sink_offsets") >= 2

            worker.wait_for(moved, 60, "the stopped task's partition claimed by the other task")
            worker.wait_for(lambda: count() > stopped_at + 200, 60, "rows written by the successor")
        finally:
            os.kill(victim, signal.SIGCONT)
    finally:
        writer.join()
    worker.wait_for(lambda: count() >= total, 120, f"{total} rows")
    time.sleep(3)  # the zombie's late flush, and anything repeated, would land now
    assert scalar(url, "SELECT COUNT(*) FROM events") == total, "no duplicates"
    assert scalar(url, "SELECT COUNT(DISTINCT k) FROM events") == total, "every record exactly once"
    # Whether the zombie still tried to commit depends on what it held when stopped; say which it was.
    refused = worker.log_path.read_text(errors="replace").count("was claimed by a newer task")
    print(f"SIGSTOP at {stopped_at} rows; the zombie's commits refused by the generation check: {refused}")
    assert worker.request("DELETE", "/connectors/jdbc").status_code == 204
