"""PostgresCdcSource against a real PostgreSQL (wal_level=logical) and the session's broker, exactly once.

Each test: a fresh database and slot, an initial snapshot, then a workload of inserts, updates and
deletes (some transactions of several statements), read back read_committed, checking that every
change appears once, in commit order per key, that the last event per key equals the table's row
(a tombstone for a deleted one), and that with transaction.boundary=connector every database
transaction is exactly one Kafka transaction.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from eosconnect.devkafka.ports import free_port
from support.cdc_soak import cdc_source_config, connect, kafka_transactions
from support.postgres import new_database, postgres  # noqa: F401 - the fixture
from support.runtime_helpers import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SNAPSHOT_ROWS = 40


@dataclass
class Db:
    url: str  # SQLAlchemy URL
    name: str

    def connect(self) -> psycopg.Connection[Any]:
        return connect(self.url)


@pytest.fixture
def db(postgres: str) -> Iterator[Db]:  # noqa: F811 - the imported fixture
    url = new_database(postgres)
    database = Db(url, sa.engine.make_url(url).database or "")
    with database.connect() as conn:
        conn.execute(
            "CREATE TABLE accounts (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, balance NUMERIC(12,2), "
            "opened DATE, seen TIMESTAMPTZ, note VARCHAR(40), version BIGINT NOT NULL)"
        )
        for i in range(1, SNAPSHOT_ROWS + 1):
            conn.execute(
                "INSERT INTO accounts VALUES (%s, %s, %s, DATE '2024-01-01' + %s, "
                "TIMESTAMPTZ '2024-01-01 00:00:00+00' + %s * INTERVAL '1 hour', %s, 0)",
                (i, f"owner-{i}", f"{i}.25", i, i, None if i % 3 else f"n{i}"),
            )
    yield database
    with database.connect() as conn:  # a slot left behind would keep WAL forever
        conn.execute("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE NOT active")


def cdc_config(name: str, db: Db, prefix: str, **extra: str) -> dict[str, str]:
    """The source of `public.accounts` under Debezium's class name, exactly once required."""
    return {
        "name": name,
        **cdc_source_config(db.url, prefix, table="accounts"),
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "exactly.once.support": "required",
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


class Workload:
    """Transactions of 1-4 statements (insert, update, delete) on random keys, from a thread.
    Every update sets a new `version`, so each change is distinguishable."""

    def __init__(self, db: Db, transactions: int, seed: int = 7, pause_s: float = 0.0) -> None:
        self.db, self.transactions, self.pause_s = db, transactions, pause_s
        self.random = random.Random(seed)
        self.multi_statement: list[int] = []  # txids of transactions with several statements
        self.changes = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> Workload:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join(120)
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            with self.db.connect() as conn:
                conn.autocommit = False
                next_id, version = SNAPSHOT_ROWS + 1, 0
                for _ in range(self.transactions):
                    statements = self.random.randint(1, 4)
                    for _ in range(statements):
                        ids = [r[0] for r in conn.execute("SELECT id FROM accounts").fetchall()]
                        choice = self.random.random()
                        version += 1
                        if choice < 0.4 or len(ids) < 5:
                            conn.execute(
                                "INSERT INTO accounts VALUES (%s, %s, %s, NULL, now(), 'new', %s)",
                                (next_id, f"owner-{next_id}", f"{next_id}.5", version),
                            )
                            next_id += 1
                        elif choice < 0.8:
                            conn.execute(
                                "UPDATE accounts SET balance = balance + 1, version = %s WHERE id = %s",
                                (version, self.random.choice(ids)),
                            )
                        else:
                            conn.execute("DELETE FROM accounts WHERE id = %s", (self.random.choice(ids),))
                        self.changes += 1
                    txid = conn.execute("SELECT txid_current()").fetchone()[0]
                    conn.commit()
                    if statements > 1:
                        self.multi_statement.append(txid)
                    time.sleep(self.pause_s)
        except BaseException as exc:  # surfaced by join()
            self.error = exc


def read_events(read_committed: Any, topic: str) -> list[tuple[int, Any, Any]]:
    """(Kafka offset, key payload, value payload or None) of every committed record."""
    out = []
    for record in read_committed(topic):
        key = json.loads(record.key)["payload"] if record.key else None
        value = json.loads(record.value)["payload"] if record.value else None
        out.append((record.offset, key["id"] if key else None, value))
    return out


def count_changes(read_committed: Any, topic: str) -> int:
    """How many change events (not snapshot reads, not tombstones) are committed in `topic`."""
    return sum(1 for _, _, v in read_events(read_committed, topic) if v and v["op"] != "r")


def insert_rows(db: Db, owner: str, first_version: int, rows: int = 10) -> None:
    """`rows` new accounts with ids past the largest, one autocommitted transaction each."""
    with db.connect() as conn:
        first_id = conn.execute("SELECT coalesce(max(id), 0) + 1000 FROM accounts").fetchone()[0]
        for i in range(rows):
            conn.execute(
                "INSERT INTO accounts VALUES (%s, %s, 1, NULL, now(), NULL, %s)",
                (first_id + i, owner, first_version + i),
            )


def table_rows(db: Db) -> dict[int, dict[str, Any]]:
    with db.connect() as conn:
        rows = conn.execute("SELECT id, owner, balance::text, version FROM accounts").fetchall()
    return {r[0]: {"owner": r[1], "balance": r[2], "version": r[3]} for r in rows}


def check_exactly_once(events: list[tuple[int, Any, Any]], db: Db, workload_changes: int) -> None:
    """Every change once, per key in commit order, last event per key = the row."""
    seen: set[str] = set()
    per_key: dict[int, list[Any]] = defaultdict(list)
    changes = 0
    for _offset, key, value in events:
        if value is None:
            per_key[key].append(None)
            continue
        identity = json.dumps(
            [value["source"]["lsn"], value["op"], value["before"], value["after"]], sort_keys=True
        )
        assert identity not in seen, f"duplicate event {identity}"
        seen.add(identity)
        per_key[key].append(value)
        if value["op"] != "r":
            changes += 1
    assert changes == workload_changes, (changes, workload_changes)
    snapshot = [v for _, _, v in events if v is not None and v["op"] == "r"]
    assert len(snapshot) == SNAPSHOT_ROWS
    assert snapshot[-1]["source"]["snapshot"] == "last"
    rows = table_rows(db)
    for key, history in per_key.items():
        lsns = [v["source"]["lsn"] for v in history if v is not None and v["op"] != "r"]
        assert lsns == sorted(lsns), f"key {key}: events out of commit order"
        last = history[-1]
        if key in rows:
            assert last is not None and last["after"] is not None, (key, last)
            after = last["after"]
            assert after["owner"] == rows[key]["owner"] and after["version"] == rows[key]["version"]
        else:
            assert last is None, f"key {key} was deleted: its last record must be a tombstone"
    assert set(rows) <= set(per_key)


def through_a_crash(
    config: dict[str, str],
    db: Db,
    topic: str,
    markers: Path,
    run_job: Any,
    worker_props: Any,
    read_committed: Any,
    **workload: Any,
) -> tuple[Workload, list[tuple[int, Any, Any]]]:
    """Run `config` (a CrashingPostgresCdcConnector writing its marker into `markers`) through its
    snapshot and a `Workload(**workload)`, until every change arrived; the task must have been
    SIGKILLed once and end STOPPED, and every change must be there exactly once. The events."""
    job = run_job(config, worker_props("enabled"))
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    changes = Workload(db, **workload).start()
    changes.join()

    def delivered() -> bool:
        seen = sum(1 for _, _, v in read_events(read_committed, topic) if v and v["op"] != "r")
        return seen >= changes.changes

    wait_until(delivered, 120, "every change", job)
    outcomes = job.stop()
    assert (markers / "crashed").exists(), "the task's Python worker must have been SIGKILLed"
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes
    events = read_events(read_committed, topic)
    check_exactly_once(events, db, changes.changes)
    return changes, events


def test_snapshot_then_changes_exactly_once_one_kafka_transaction_per_db_transaction(
    db, run_job, worker_props, topic_name, create_topic, read_committed, connect_harness
):
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    job = run_job(cdc_config("cdc-e2e", db, prefix), worker_props("enabled"))
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    workload = Workload(db, transactions=60).start()
    workload.join()
    with db.connect() as conn:  # a schema change mid-stream: picked up from the Relation message
        conn.execute("ALTER TABLE accounts ADD COLUMN tier SMALLINT")
        conn.execute(
            "UPDATE accounts SET tier = 2, version = 100000 WHERE id = (SELECT min(id) FROM accounts)"
        )
    expected = workload.changes + 1

    def delivered() -> bool:
        return sum(1 for _, _, v in read_events(read_committed, topic) if v and v["op"] != "r") >= expected

    wait_until(delivered, 90, "every change", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes

    events = read_events(read_committed, topic)
    check_exactly_once(events, db, expected)
    groups = kafka_transactions(events)
    assert (
        all(v is not None and v["op"] == "r" for _, _, v in groups[0]) and len(groups[0]) == SNAPSHOT_ROWS
    ), "the snapshot is one Kafka transaction"
    for group in groups[1:]:
        txids = {v["source"]["txId"] for _, _, v in group if v is not None}
        assert len(txids) == 1, f"one database transaction per Kafka transaction, got {txids}"
    streamed = {next(v["source"]["txId"] for _, _, v in g if v is not None) for g in groups[1:]}
    assert len(streamed) == len(groups) - 1, "no database transaction is split"
    assert set(workload.multi_statement) <= streamed
    last = [v for _, _, v in events if v is not None][-1]
    assert last["after"]["tier"] == 2 and last["op"] == "u"
    first = next(v for _, _, v in events if v is not None)
    assert first["after"]["balance"] is not None and first["source"]["connector"] == "postgresql"
    assert first["source"]["db"] == db.name and first["source"]["table"] == "accounts"

    # Kafka's own JsonConverter reads each kind of event (r, c, u, d, after the ALTER) and writes
    # it back byte for byte: the envelope and its schemas are valid Connect data for Java consumers.
    records = read_committed(topic)
    samples: dict[str, Any] = {}
    for record in records:
        if record.value:
            payload = json.loads(record.value)
            samples.setdefault(payload["payload"]["op"], record)
    samples["alter"] = records[-1]
    assert set(samples) == {"r", "c", "u", "d", "alter"}
    for record in samples.values():
        for data in (record.key, record.value):
            answer = connect_harness.run(
                {"converter": {"schemas.enable": "true"}, "topic": topic, "value": json.loads(data)}
            )
            assert "error" not in answer, answer
            assert answer["value"] == json.loads(data)
    envelope = json.loads(samples["u"].value)["schema"]
    assert envelope["name"] == f"{prefix}.public.accounts.Envelope"
    fields = {f["field"]: f for f in envelope["fields"]}
    assert fields["after"]["name"] == f"{prefix}.public.accounts.Value"
    assert fields["source"]["name"] == "io.debezium.connector.postgresql.Source"
    columns = {f["field"]: f for f in fields["after"]["fields"]}
    assert columns["balance"]["name"] == "org.apache.kafka.connect.data.Decimal"
    assert columns["opened"]["name"] == "io.debezium.time.Date"
    assert columns["seen"]["name"] == "io.debezium.time.ZonedTimestamp"
    assert json.loads(samples["u"].key)["schema"]["name"] == f"{prefix}.public.accounts.Key"


def test_sigkilled_task_resumes_exactly_once(
    db, run_job, worker_props, topic_name, create_topic, read_committed, tmp_path: Path
):
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    markers = tmp_path / "markers"
    markers.mkdir()
    config = cdc_config(
        "cdc-crash",
        db,
        prefix,
        connector_class="support.cdc_connectors.CrashingPostgresCdcConnector",
        crash_after_batches="3",
        crash_marker_dir=str(markers),
    )
    through_a_crash(
        config,
        db,
        topic,
        markers,
        run_job,
        worker_props,
        read_committed,
        transactions=80,
        seed=11,
        pause_s=0.05,
    )
    with db.connect() as conn:  # the slot moved: PostgreSQL does not keep WAL Kafka already has
        confirmed = conn.execute(
            "SELECT confirmed_flush_lsn > '0/0' FROM pg_replication_slots WHERE slot_name = %s",
            (config["slot.name"],),
        ).fetchone()
    assert confirmed is not None and confirmed[0]


def test_grouped_database_transactions_stay_whole_through_a_sigkill(
    db, run_job, worker_props, topic_name, create_topic, read_committed, tmp_path: Path
):
    """database.transactions.per.kafka.transaction=20: the transactions a poll returns are committed
    up to 20 to a Kafka transaction, none split, through a SIGKILL of the task mid-stream."""
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    markers = tmp_path / "markers"
    markers.mkdir()
    config = cdc_config(
        "cdc-grouped",
        db,
        prefix,
        connector_class="support.cdc_connectors.CrashingPostgresCdcConnector",
        crash_after_batches="3",
        crash_marker_dir=str(markers),
        database_transactions_per_kafka_transaction="20",
        max_batch_size="64",
    )
    workload, events = through_a_crash(
        config, db, topic, markers, run_job, worker_props, read_committed, transactions=300, seed=5
    )
    held: dict[int, int] = {}  # database transaction -> the Kafka transaction holding it
    sizes = []
    for index, group in enumerate(kafka_transactions(events)[1:]):  # after the snapshot's
        txids = {v["source"]["txId"] for _, _, v in group if v is not None}
        sizes.append(len(txids))
        for txid in txids:
            assert txid not in held, f"database transaction {txid} split over Kafka transactions"
            held[txid] = index
    assert max(sizes) > 1 and max(sizes) <= 20, sizes
    assert set(workload.multi_statement) <= set(held)


def test_validation_names_each_problem_and_its_fix(db) -> None:
    """Up-front checks against the real server: a role without REPLICATION, a missing publication
    with autocreation disabled, a filter matching nothing, a plugin other than pgoutput."""
    from eosconnect.connectors.postgres_cdc import PostgresCdcSourceConnector

    with db.connect() as conn:
        conn.execute("DROP ROLE IF EXISTS plain_user")
        conn.execute("CREATE ROLE plain_user LOGIN")
    config = {
        **cdc_config("cdc-validate", db, "v"),
        "database.user": "plain_user",
        "publication.name": "missing_pub",
        "publication.autocreate.mode": "disabled",
    }
    errors = {r.name: r.errors for r in PostgresCdcSourceConnector().validate(config) if r.errors}
    assert "REPLICATION" in errors["database.user"][0] and "ALTER ROLE" in errors["database.user"][0]
    assert "CREATE PUBLICATION" in errors["publication.name"][0]

    filtered = {**cdc_config("cdc-validate", db, "v"), "table.include.list": "public\\.nothing"}
    errors = {r.name: r.errors for r in PostgresCdcSourceConnector().validate(filtered) if r.errors}
    assert "no table matches" in errors["table.include.list"][0]

    decoderbufs = {**cdc_config("cdc-validate", db, "v"), "plugin.name": "decoderbufs"}
    errors = {r.name: r.errors for r in PostgresCdcSourceConnector().validate(decoderbufs) if r.errors}
    assert list(errors) == ["plugin.name"]
    assert not [r for r in PostgresCdcSourceConnector().validate(cdc_config("ok", db, "v")) if r.errors]


def validation_errors(config: dict[str, str]) -> dict[str, list[str]]:
    from eosconnect.connectors.postgres_cdc import PostgresCdcSourceConnector

    return {r.name: r.errors for r in PostgresCdcSourceConnector().validate(config) if r.errors}


def test_filtered_publication_needs_create_on_the_database_and_the_tables_said_at_validation(db) -> None:
    """A role with REPLICATION could not create the filtered publication (it lacks CREATE on the
    database, and does not own the table): validation passed and the task failed with a bare
    InsufficientPrivilege. Validation names the setting, what is missing and the GRANT; once both
    are given it passes and the task's set-up creates the publication."""
    from eosconnect.api.errors import ConnectException
    from eosconnect.connectors.postgres_cdc import catalog
    from eosconnect.connectors.postgres_cdc.config import CdcConfig

    role = f"filtered_{db.name}"
    with db.connect() as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN REPLICATION")
        conn.execute(f"GRANT SELECT ON accounts TO {role}")
    config = {**cdc_config("cdc-filtered", db, "f"), "database.user": role, "publication.name": "f_pub"}
    errors = validation_errors(config)
    assert list(errors) == ["publication.autocreate.mode"], errors
    create, own = errors["publication.autocreate.mode"]
    assert f'GRANT CREATE ON DATABASE "{db.name}" TO "{role}"' in create, create
    assert "publication.autocreate.mode=disabled" in create
    assert '"public"."accounts"' in own and "OWNER TO" in own, own
    with (
        catalog.connect(CdcConfig.parse(config)) as conn,
        pytest.raises(ConnectException, match="GRANT CREATE ON DATABASE"),  # at run time too
    ):
        catalog.ensure_publication(conn, CdcConfig.parse(config))

    with db.connect() as conn:
        conn.execute(f"GRANT CREATE ON DATABASE {db.name} TO {role}")
    assert [len(e) for e in validation_errors(config).values()] == [1], "the ownership is still missing"
    with db.connect() as conn:
        conn.execute(f"ALTER TABLE accounts OWNER TO {role}")
    assert validation_errors(config) == {}
    with catalog.connect(CdcConfig.parse(config)) as conn:
        catalog.ensure_publication(conn, CdcConfig.parse(config))
        assert catalog.published_tables(conn, CdcConfig.parse(config)) == [("public", "accounts")]


def test_a_refused_login_names_the_setting_at_validation_and_at_run_time(postgres, db) -> None:  # noqa: F811
    """A wrong password was reported against database.hostname. PostgreSQL's refusals name their own
    setting (password, user, database), an address that does not answer names the host, and a
    task that starts with a wrong password fails at once naming database.password."""
    from eosconnect.connectors.postgres_cdc import PostgresCdcTask
    from eosconnect.connectors.postgres_cdc.config import CdcConfig
    from eosconnect.connectors.postgres_cdc.refusal import ConnectionRefused
    from eosconnect.connectors.postgres_cdc.replication import ReplicationStream

    role = f"login_{db.name}"
    with db.connect() as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN REPLICATION SUPERUSER PASSWORD 'right'")
    hba = postgres.server.data_dir / "pg_hba.conf"  # the server trusts everyone else
    hba.write_text(
        f"host all {role} 127.0.0.1/32 scram-sha-256\nhost replication {role} 127.0.0.1/32 "
        f"scram-sha-256\n{hba.read_text()}"
    )
    with db.connect() as conn:
        conn.execute("SELECT pg_reload_conf()")
    config = {**cdc_config("cdc-login", db, "l"), "database.user": role, "database.password": "wrong"}
    errors = validation_errors(config)
    assert list(errors) == ["database.password"], errors
    assert "refused the password" in errors["database.password"][0]
    right = {**config, "database.password": "right"}
    assert validation_errors(right) == {}
    assert list(validation_errors({**right, "database.dbname": "nosuch"})) == ["database.dbname"]
    unreachable = {**right, "database.port": str(free_port())}
    assert list(validation_errors(unreachable)) == ["database.hostname"]

    with pytest.raises(ConnectionRefused, match=r"^database\.password: "):
        PostgresCdcTask().start(config)
    with pytest.raises(ConnectionRefused, match=r"^database\.password: "):
        ReplicationStream(CdcConfig.parse(config))


def test_heartbeats_move_offset_and_slot_while_captured_tables_are_idle(
    db, run_job, worker_props, topic_name, create_topic, read_committed
):
    """Only a table outside the publication changes: heartbeat records carry the server's WAL
    position into the committed offset, and the slot moves on, so PostgreSQL does not keep that WAL."""
    from support.runtime_helpers import committed_offsets

    with db.connect() as conn:
        conn.execute("CREATE TABLE audit (id BIGSERIAL PRIMARY KEY, line TEXT)")
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    heartbeats = create_topic(f"__debezium-heartbeat.{prefix}")
    worker = worker_props("enabled")
    config = cdc_config("cdc-heartbeat", db, prefix, heartbeat_interval_ms="300")
    job = run_job(config, worker)
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    with db.connect() as conn:
        start = conn.execute("SELECT pg_current_wal_lsn() - '0/0'").fetchone()[0]
        for i in range(200):
            conn.execute("INSERT INTO audit (line) VALUES (%s)", (f"line {i}",))

    def offset_lsn() -> int:
        offsets = committed_offsets(read_committed, worker["offset.storage.topic"], "cdc-heartbeat")
        offset = offsets.get(json.dumps({"server": prefix})) or {}
        return int(offset.get("lsn", 0)) if "heartbeat" in offset else 0

    def slot_lsn() -> int:
        with db.connect() as conn:
            return conn.execute(
                "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots WHERE slot_name = %s",
                (config["slot.name"],),
            ).fetchone()[0]

    wait_until(lambda: offset_lsn() > start, 60, "a heartbeat offset past the audit writes", job)
    wait_until(lambda: slot_lsn() > start, 60, "the slot to move past the uncaptured table's WAL", job)
    job.stop()
    assert len(read_committed(topic)) == SNAPSHOT_ROWS, "heartbeats add no change events"
    record = read_committed(heartbeats)[-1]
    assert json.loads(record.key)["payload"] == {"serverName": prefix}


def test_sigkill_mid_snapshot_takes_it_again_exactly_once(
    db, run_job, worker_props, topic_name, create_topic, read_committed, tmp_path: Path
):
    """With transaction.boundary=connector the snapshot is one Kafka transaction: killed halfway,
    nothing of it is visible, and the restarted task takes a new snapshot on a new slot."""
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    markers = tmp_path / "markers"
    markers.mkdir()
    config = cdc_config(
        "cdc-snapshot-crash",
        db,
        prefix,
        connector_class="support.cdc_connectors.CrashingPostgresCdcConnector",
        snapshot_fetch_size="5",
        crash_phase="snapshot",
        crash_after_batches="3",
        crash_marker_dir=str(markers),
    )
    with db.connect() as conn:  # `before` carries the whole old row
        conn.execute("ALTER TABLE accounts REPLICA IDENTITY FULL")
    job = run_job(config, worker_props("enabled"))
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 120, "the snapshot", job)
    workload = Workload(db, transactions=20, seed=5).start()
    workload.join()
    with db.connect() as conn:  # a dropped column disappears from the events after it
        conn.execute("ALTER TABLE accounts DROP COLUMN note")
        conn.execute("UPDATE accounts SET version = 100000 WHERE id = (SELECT max(id) FROM accounts)")
    expected = workload.changes + 1

    def delivered() -> bool:
        changes = sum(1 for _, _, v in read_events(read_committed, topic) if v and v["op"] != "r")
        return changes >= expected

    wait_until(delivered, 90, "every change", job)
    job.stop()
    assert (markers / "crashed").exists(), "the task's Python worker must have been SIGKILLed mid-snapshot"
    events = read_events(read_committed, topic)
    check_exactly_once(events, db, expected)
    values = [v for _, _, v in events if v is not None]
    for value in values:
        if value["op"] in ("u", "d"):
            assert value["before"] is not None and value["before"]["owner"].startswith("owner-"), value
    assert "note" not in values[-1]["after"] and "note" in values[0]["after"]


def test_sigstopped_zombie_is_replaced_exactly_once(
    db, run_job, worker_props, topic_name, create_topic, read_committed, tmp_path: Path
):
    """The task's Python worker is frozen (SIGSTOP) holding the slot; a new instance is started: it
    waits until PostgreSQL ends the frozen walsender (wal_sender_timeout, 4 s here), streams on, and
    the zombie, thawed, is fenced. Every change once."""
    import os
    import signal

    with db.connect() as conn:
        conn.execute("ALTER SYSTEM SET wal_sender_timeout = '4s'")
        conn.execute("SELECT pg_reload_conf()")
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    pid_file = tmp_path / "pid"
    config = cdc_config(
        "cdc-zombie",
        db,
        prefix,
        connector_class="support.cdc_connectors.PidRecordingPostgresCdcConnector",
        pid_file=str(pid_file),
    )
    worker = worker_props("enabled")
    zombie = run_job(config, worker)
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", zombie)
    first = Workload(db, transactions=15, seed=3).start()
    first.join()

    changes = functools.partial(count_changes, read_committed, topic)

    wait_until(lambda: changes() >= first.changes, 60, "the first changes", zombie)
    pid = int(pid_file.read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        insert_rows(db, owner="late", first_version=50000)
        successor = run_job(config, worker)
        wait_until(lambda: changes() >= first.changes + 10, 90, "the successor to stream the rest", successor)
    finally:
        os.kill(pid, signal.SIGCONT)
        with db.connect() as conn:  # the other tests keep the default
            conn.execute("ALTER SYSTEM RESET wal_sender_timeout")
            conn.execute("SELECT pg_reload_conf()")
    (zombie_outcome,) = zombie.wait(60)
    # Thawed, the zombie finds its replication connection ended by the server (or its producer fenced).
    assert zombie_outcome["state"] == "FAILED", zombie_outcome
    assert "lost the replication connection" in zombie_outcome["trace"] or "fenced" in zombie_outcome["trace"]
    successor.stop()
    check_exactly_once(read_events(read_committed, topic), db, first.changes + 10)


def test_postgres_crash_mid_stream_the_task_reconnects_by_itself_exactly_once(
    postgres,  # noqa: F811 - the imported fixture
    db,
    run_job,
    worker_props,
    topic_name,
    create_topic,
    read_committed,
):
    """PostgreSQL crashes (pg_ctl -m immediate) while the task streams a backlog, stays down for a
    few tries, and comes back: the task never fails (errors.max.retries=-1, Debezium's default), hands
    out what it had read, reconnects and streams on after it (the restarted server may send
    transactions again: its slot position is saved at checkpoints). Every change once."""
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    config = cdc_config("cdc-pg-crash", db, prefix, retriable_restart_connector_wait_ms="1000")
    job = run_job(config, worker_props("enabled"))
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    backlog = Workload(db, transactions=1500, seed=21).start()
    backlog.join()  # one Kafka transaction per database transaction: the task trails by seconds

    changes = functools.partial(count_changes, read_committed, topic)

    postgres.kill()
    try:
        time.sleep(3)  # connections refused: a few failed tries
        assert job.running(), "a lost replication connection must not fail the task"
        streamed = changes()
    finally:
        postgres.start()
    assert 0 < streamed < backlog.changes, ("the crash must come mid-stream", streamed, backlog.changes)
    insert_rows(db, owner="after", first_version=70000)
    wait_until(lambda: changes() >= backlog.changes + 10, 120, "the backlog and the changes after", job)
    (outcome,) = job.stop()
    assert outcome["state"] == "STOPPED", outcome
    check_exactly_once(read_events(read_committed, topic), db, backlog.changes + 10)


def test_postgres_crash_with_retries_off_fails_and_a_restart_resumes_exactly_once(
    postgres,  # noqa: F811 - the imported fixture
    db,
    run_job,
    worker_props,
    topic_name,
    create_topic,
    read_committed,
):
    """With errors.max.retries=0 a crash of PostgreSQL fails the task at once, saying the replication
    connection was lost and how to go on; restarted after PostgreSQL is back, it resumes from its
    committed offset on the same slot. Every change once."""
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    worker = worker_props("enabled")
    config = cdc_config("cdc-pg-crash-no-retry", db, prefix, errors_max_retries="0")
    job = run_job(config, worker)
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    first = Workload(db, transactions=15, seed=21).start()
    first.join()

    changes = functools.partial(count_changes, read_committed, topic)

    wait_until(lambda: changes() >= first.changes, 60, "the first changes", job)
    postgres.kill()
    try:
        (outcome,) = job.wait(60)
    finally:
        postgres.start()
    assert outcome["state"] == "FAILED", outcome
    assert "lost the replication connection" in outcome["trace"], outcome
    assert "errors.max.retries=0" in outcome["trace"], outcome
    insert_rows(db, owner="after", first_version=70000)
    job = run_job(config, worker)
    wait_until(lambda: changes() >= first.changes + 10, 90, "the changes after the restart", job)
    job.stop()
    check_exactly_once(read_events(read_committed, topic), db, first.changes + 10)


#: Rows of the one large transaction (the issue's "long transaction of 100k rows").
BIG_TRANSACTION_ROWS = 100_000


def test_one_large_transaction_is_one_kafka_transaction(
    db, run_job, worker_props, topic_name, create_topic, read_committed
):
    """One INSERT of BIG_TRANSACTION_ROWS rows in one database transaction: with the connector
    boundary every row arrives once, all in one Kafka transaction (consecutive offsets: no commit
    marker between them), none missing."""
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    job = run_job(cdc_config("cdc-big", db, prefix, max_batch_size="4096"), worker_props("enabled"))
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    first = 1_000_000
    with db.connect() as conn:
        conn.execute(
            "INSERT INTO accounts (id, owner, balance, version) "
            "SELECT g, 'bulk-' || g, g, g FROM generate_series(%s, %s) g",
            (first, first + BIG_TRANSACTION_ROWS - 1),
        )
    total = SNAPSHOT_ROWS + BIG_TRANSACTION_ROWS
    wait_until(lambda: len(read_committed(topic)) >= total, 240, "the large transaction", job)
    job.stop()
    records = read_committed(topic)
    assert len(records) == total, "nothing duplicated"
    bulk = records[SNAPSHOT_ROWS:]
    ids = [json.loads(r.key)["payload"]["id"] for r in bulk]
    assert sorted(ids) == list(range(first, first + BIG_TRANSACTION_ROWS)), "every row once"
    offsets = [r.offset for r in bulk]
    assert offsets == list(range(offsets[0], offsets[0] + BIG_TRANSACTION_ROWS)), "one Kafka transaction"
    tx_ids = {json.loads(r.value)["payload"]["source"]["txId"] for r in (bulk[0], bulk[-1])}
    assert len(tx_ids) == 1


def test_broker_restart_mid_stream_exactly_once(
    kafka, db, run_job, worker_props, topic_name, create_topic, read_committed
):
    """The (session's only) broker is restarted while transactions stream: the task rides it out
    (or fails and is started again, which resumes from its committed offset); every change once."""
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    worker = worker_props("enabled")
    config = cdc_config("cdc-broker-restart", db, prefix)
    job = run_job(config, worker)
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 90, "the snapshot", job)
    workload = Workload(db, transactions=60, seed=31, pause_s=0.05).start()
    time.sleep(1.0)
    kafka.restart_node(kafka.broker_ids()[0])
    workload.join()

    changes = functools.partial(count_changes, read_committed, topic)

    deadline = time.monotonic() + 120
    while changes() < workload.changes and time.monotonic() < deadline:
        if not job.running():  # failed on the outage: a restart resumes from the committed offset
            job = run_job(config, worker)
        time.sleep(1.0)
    assert changes() >= workload.changes, "every change after the broker restart"
    job.stop()
    events = read_events(read_committed, topic)
    check_exactly_once(events, db, workload.changes)
    # No database transaction is split. One Kafka transaction may hold two: when the only broker
    # shuts down gracefully during a commit, its coordinator finds no leader for the partitions,
    # "skips" their markers as if the partitions were deleted and completes the commit (Kafka's
    # TransactionMarkerChannelManager); the records stay pending in the log until the producer's
    # next transaction's marker commits them too (seen in CI: two txIds behind one COMMIT marker,
    # the coordinator's log showing both transactions complete, no marker for the first).
    txids_per_group = [
        [v["source"]["txId"] for _, _, v in group if v is not None]
        for group in kafka_transactions(events)[1:]
    ]
    owners = [txid for txids in txids_per_group for txid in dict.fromkeys(txids)]
    assert len(owners) == len(set(owners)), f"a database transaction split: {owners}"
    merged = [sorted(set(txids)) for txids in txids_per_group if len(set(txids)) > 1]
    assert len(merged) <= 1 and all(len(m) == 2 for m in merged), f"merged database transactions: {merged}"


def test_sigkilled_worker_process_then_restarted_exactly_once(
    db, workers, topic_name, create_topic, read_committed
):
    """The whole eosconnect worker (its process group, Spark's JVM and the task's Python worker) is
    SIGKILLed mid-stream; a new worker of the same group takes the connector over from the config
    topic and resumes from the committed offset on the same slot: every change once, in LSN order
    per key, no database transaction split."""
    import signal

    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public.accounts")
    first = workers("w1")
    config = cdc_config("cdc-worker-kill", db, prefix)
    assert first.create_connector("cdc-worker-kill", config).status_code == 201
    wait_until(lambda: len(read_committed(topic)) >= SNAPSHOT_ROWS, 120, "the snapshot")
    workload = Workload(db, transactions=80, seed=41, pause_s=0.05).start()

    changes = functools.partial(count_changes, read_committed, topic)

    wait_until(lambda: changes() >= 10, 60, "the first changes")
    tasks = first.request("GET", "/internal/tasks").json()
    task_pids = [int(t["pid"]) for t in tasks.values() if t.get("pid")]
    first.kill()
    for pid in task_pids:  # the task's Python worker runs in a process group of its own
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    workload.join()
    second = workers("w2")
    second.wait_for(lambda: second.task_states("cdc-worker-kill") == ["RUNNING"], 120, "the task on w2")
    wait_until(lambda: changes() >= workload.changes, 120, "every change after the restart")
    second.stop_connector("cdc-worker-kill")
    events = read_events(read_committed, topic)
    check_exactly_once(events, db, workload.changes)
    for group in kafka_transactions(events)[1:]:
        assert len({v["source"]["txId"] for _, _, v in group if v is not None}) == 1


def test_deleting_names_the_slot_left_and_slot_drop_on_stop_drops_it_only_for_good(
    db, workers, topic_name, create_topic
):
    """Deleting a CDC connector left its slot retaining WAL without a word. The worker's log now names
    the slot, the WAL it retains and how to drop it; with slot.drop.on.stop=true the slot is dropped
    once the connector is stopped, and kept through a task restart (the next task resumes from it)."""

    def slot_exists(config: dict[str, str]) -> bool:
        with db.connect() as conn:
            query = "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s"
            return conn.execute(query, (config["slot.name"],)).fetchone() is not None

    worker = workers()
    kept, dropped = topic_name("kept"), topic_name("dropped")
    configs = {  # a publication each: two tasks creating the same one at once collide
        "cdc-kept": cdc_config("cdc-kept", db, kept, publication_name="kept"),
        "cdc-dropped": cdc_config(
            "cdc-dropped", db, dropped, publication_name="dropped", slot_drop_on_stop="true"
        ),
    }
    for name, config in configs.items():
        create_topic(f"{config['topic.prefix']}.public.accounts")
        assert worker.create_connector(name, config).status_code == 201
    worker.wait_for(
        lambda: all(worker.task_states(n) == ["RUNNING"] and slot_exists(c) for n, c in configs.items()),
        120,
        "both tasks RUNNING on their slots",
    )

    def instance() -> str:
        return worker.request("GET", "/internal/tasks").json()["cdc-dropped-0"]["instance"]

    before = instance()
    assert worker.request("POST", "/connectors/cdc-dropped/tasks/0/restart").status_code in (200, 204)
    worker.wait_for(
        lambda: instance() != before and worker.task_states("cdc-dropped") == ["RUNNING"], 90, "a new task"
    )
    assert slot_exists(configs["cdc-dropped"]), "a restart keeps the slot"
    worker.stop_connector("cdc-dropped")
    worker.wait_for(lambda: not slot_exists(configs["cdc-dropped"]), 30, "the slot dropped once stopped")

    slot = configs["cdc-kept"]["slot.name"]
    assert worker.request("DELETE", "/connectors/cdc-kept").status_code == 204
    warning = f"PostgresCdcSource cdc-kept deleted: its replication slot '{slot}'"
    worker.wait_for(lambda: warning in worker.log_path.read_text(), 30, "the warning about the slot")
    line = next(line for line in worker.log_path.read_text().splitlines() if warning in line)
    assert "WARNING" in line and "of WAL" in line and f"SELECT pg_drop_replication_slot('{slot}');" in line
    assert slot_exists(configs["cdc-kept"]), "deleting without slot.drop.on.stop keeps the slot"
