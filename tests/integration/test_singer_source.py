"""SingerSource through a real worker and broker: pipelinewise-tap-postgres from PyPI reading the
test PostgreSQL INCREMENTAL while rows keep coming, the task SIGKILLed mid-stream: every row
once (by primary key), equal to the table cell by cell, and the tap resumed from the committed
state (its inclusive bookmark row not delivered twice)."""

from __future__ import annotations

import datetime
import json
import os
import signal
import threading
import time
from typing import Any

import pytest
import sqlalchemy as sa

from support.hosted_venvs import TAP_POSTGRES, VENV_DIR, hosted_program
from support.postgres import new_database

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

FIRST_ROWS = 20_000
MORE_ROWS = 6_000


def insert(engine: sa.Engine, count: int) -> None:
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO events (name, amount) "
                "SELECT 'event ' || g, (g % 1000) * 1.25 FROM generate_series(1, :n) g"
            ),
            {"n": count},
        )


def keep_inserting(engine: sa.Engine, stop: threading.Event) -> None:
    for _ in range(MORE_ROWS // 200):
        if stop.is_set():
            return
        insert(engine, 200)
        time.sleep(0.2)


def test_tap_postgres_incremental_exactly_once_through_a_sigkill(
    postgres, workers, topic_name, create_topic, read_committed
):
    tap = hosted_program(TAP_POSTGRES)
    assert tap.endswith("/tap-postgres")
    url = new_database(postgres)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "CREATE TABLE events (id serial PRIMARY KEY, name text, amount numeric(10,2), "
                "at timestamptz DEFAULT now())"
            )
        )
    insert(engine, FIRST_ROWS)
    parts = sa.engine.make_url(url)
    tap_config = {
        "host": parts.host,
        "port": parts.port,
        "user": parts.username,
        "password": parts.password or "",
        "dbname": parts.database,
        "filter_schemas": "public",
    }
    prefix = topic_name("pg")
    topic = create_topic(f"{prefix}.public-events")
    worker = workers()
    config = {
        "connector.class": "SingerSource",
        "tasks.max": "1",
        "singer.tap": "pipelinewise-tap-postgres",
        "singer.venv.dir": VENV_DIR,
        "singer.config": json.dumps(tap_config),
        "singer.streams": "public-events",
        "topic.prefix": prefix,
        "singer.sync.interval.ms": "1000",
        "transaction.boundary": "connector",
        "exactly.once.support": "required",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    assert worker.create_connector("tap", config).status_code == 201
    stop = threading.Event()
    writer = threading.Thread(target=keep_inserting, args=(engine, stop))
    writer.start()
    try:
        worker.wait_for(lambda: len(read_committed(topic)) >= 10_000, 150, "the first state's rows")
        victim = worker.request("GET", "/internal/tasks").json()["tap-0"]["pid"]
        assert victim
        os.kill(victim, signal.SIGKILL)

        def retried() -> bool:
            task = worker.request("GET", "/internal/tasks").json()["tap-0"]
            return task["pid"] not in (None, victim) and task["state"] == "RUNNING"

        worker.wait_for(retried, 120, "the task to run again in a new Python worker")
    finally:
        writer.join()
    total = FIRST_ROWS + MORE_ROWS
    worker.wait_for(lambda: len(read_committed(topic)) >= total, 150, "every row")
    time.sleep(3)  # another sync or two: the bookmark row must not come again
    records = read_committed(topic)
    got: list[dict[str, Any]] = [json.loads(r.value) for r in records]
    ids = [v["id"] for v in got]
    assert sorted(ids) == list(range(1, total + 1)), f"{len(ids)} records: every row once"
    assert [json.loads(r.key) for r in records] == ids, "keyed by the table's key"
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(sa.text("SELECT id, name, amount, at FROM events"))}
    for value in got:
        row = rows[value["id"]]
        assert value["name"] == row.name
        assert value["amount"] == float(row.amount)
        assert datetime.datetime.fromisoformat(value["at"]) == row.at
    (offset,) = worker.request("GET", "/connectors/tap/offsets").json()["offsets"]
    assert offset["partition"] == {"singer.state": "GLOBAL"}
    state = json.loads(offset["offset"]["state"])
    assert state["value"]["bookmarks"]["public-events"]["replication_key_value"] == total
    assert state["delivered"]["public-events"] == {"value": total, "keys": [[total]]}
    stop.set()
    assert worker.request("DELETE", "/connectors/tap").status_code == 204
    engine.dispose()
