"""AirbyteSource through a real worker and broker: airbyte-source-faker from PyPI (seeded,
incremental streams) cell by cell against the source's own output; a resumable source SIGKILLed
mid-sync, every record once; a source printing garbage failing its task naming stream and line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from support.hosted_sources import write_source
from support.hosted_venvs import FAKER, airbyte_config, hosted_program

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

FAKER_CONFIG = {"count": 400, "seed": 7, "records_per_slice": 50, "always_updated": False, "parallelism": 1}
#: Cursor fields the faker sets to the time of the sync: not comparable between two runs.
SYNC_TIME_FIELDS = {"updated_at"}


def values(read_committed, topic: str) -> list[dict[str, Any]]:
    return [json.loads(r.value) for r in read_committed(topic)]


def faker_output(executable: str, streams: list[str], tmp_path: Path) -> dict[str, list[dict[str, Any]]]:
    """What the source itself prints for the same config and streams (the reference)."""
    (tmp_path / "config.json").write_text(json.dumps(FAKER_CONFIG))
    catalog = json.loads(
        subprocess.run(
            [executable, "discover", "--config", str(tmp_path / "config.json")],
            capture_output=True,
            check=True,
            text=True,
        ).stdout.splitlines()[-1]
    )["catalog"]
    configured = [
        {
            "stream": s,
            "sync_mode": "incremental",
            "destination_sync_mode": "append",
            "cursor_field": ["updated_at"],
        }
        for s in catalog["streams"]
        if s["name"] in streams
    ]
    (tmp_path / "catalog.json").write_text(json.dumps({"streams": configured}))
    out = subprocess.run(
        [
            executable,
            "read",
            "--config",
            str(tmp_path / "config.json"),
            "--catalog",
            str(tmp_path / "catalog.json"),
        ],
        capture_output=True,
        check=True,
        text=True,
    ).stdout
    records: dict[str, list[dict[str, Any]]] = {s: [] for s in streams}
    for line in out.splitlines():
        message = json.loads(line)
        if message["type"] == "RECORD":
            records[message["record"]["stream"]].append(message["record"]["data"])
    return records


def without(record: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """The record without `fields`, a null property the same as a missing one (the Struct of the
    stream's schema has every property, the source leaves some out)."""
    return {k: v for k, v in record.items() if k not in fields and v is not None}


def test_faker_then_a_sigkilled_sync_then_garbage(
    workers, topic_name, create_topic, read_committed, tmp_path
):
    faker = hosted_program(FAKER)
    streams = ["users", "purchases"]
    expected = faker_output(faker, streams, tmp_path)
    worker = workers()

    # 1. airbyte-source-faker by its package name: every record once, equal to the source's own.
    prefix = topic_name("faker")
    for stream in streams:
        create_topic(f"{prefix}.{stream}")
    config = airbyte_config("airbyte-source-faker", prefix, ",".join(streams), FAKER_CONFIG)
    # the source's spec, check and discover run at validation: Python programs, slow on a loaded machine
    path = "/connector-plugins/AirbyteSource/config/validate"
    validated = httpx.put(worker.url + path, json={**config, "name": "faker"}, timeout=180).json()
    assert validated["error_count"] == 0, [c for c in validated["configs"] if c["value"]["errors"]]
    assert worker.create_connector("faker", config).status_code == 201
    for stream in streams:
        worker.wait_for(
            lambda s=stream: len(read_committed(f"{prefix}.{s}")) >= len(expected[s]),
            150,
            f"every {stream} record",
        )
    for stream in streams:
        records = read_committed(f"{prefix}.{stream}")
        got = [json.loads(r.value) for r in records]
        assert len(got) == len(expected[stream]) == len({v["id"] for v in got}), f"{stream}: each record once"
        assert [json.loads(r.key) for r in records] == [v["id"] for v in got], "keyed by the primary key"
        by_id = {v["id"]: v for v in got}
        for want in expected[stream]:
            assert without(by_id[want["id"]], SYNC_TIME_FIELDS) == without(want, SYNC_TIME_FIELDS)
    offsets = worker.request("GET", "/connectors/faker/offsets").json()["offsets"]
    states = {o["partition"]["airbyte.stream"]: json.loads(o["offset"]["state"]) for o in offsets}
    assert set(states) == set(streams)
    assert states["users"]["stream"]["stream_state"]["loop_offset"] == FAKER_CONFIG["count"]
    assert worker.request("DELETE", "/connectors/faker").status_code == 204

    # 2. A source that resumes from any state, SIGKILLed mid-sync: nothing missing, nothing twice.
    scripted = write_source(tmp_path)
    prefix = topic_name("scripted")
    topic = create_topic(f"{prefix}.events")
    total = 3000
    config = airbyte_config(scripted, prefix, "events", {"count": total, "every": 50, "sleep_ms": 2})
    assert worker.create_connector("scripted", config).status_code == 201
    worker.wait_for(lambda: len(read_committed(topic)) >= 500, 120, "500 committed events")
    victim = worker.request("GET", "/internal/tasks").json()["scripted-0"]["pid"]
    assert victim
    os.kill(victim, signal.SIGKILL)

    def retried() -> bool:
        task = worker.request("GET", "/internal/tasks").json()["scripted-0"]
        return task["pid"] not in (None, victim) and task["state"] == "RUNNING"

    worker.wait_for(retried, 120, "the task to run again in a new Python worker")
    worker.wait_for(lambda: len(read_committed(topic)) >= total, 150, "every event")
    ids = [v["id"] for v in values(read_committed, topic)]
    assert sorted(ids) == list(range(1, total + 1)), "every event once across the SIGKILL"
    assert ids == sorted(ids), "in the source's order"
    (offset,) = worker.request("GET", "/connectors/scripted/offsets").json()["offsets"]
    assert json.loads(offset["offset"]["state"])["stream"]["stream_state"] == {"last_id": total}
    assert worker.request("DELETE", "/connectors/scripted").status_code == 204

    # 3. Garbage on stdout fails the task, naming the stream and the line.
    prefix = topic_name("garbage")
    create_topic(f"{prefix}.events")
    config = airbyte_config(scripted, prefix, "events", {"count": 100, "every": 10, "garbage_after": 30})
    assert worker.create_connector("garbage", config).status_code == 201
    worker.wait_for(lambda: worker.task_states("garbage") == ["FAILED"], 120, "the task FAILED")
    trace = worker.status("garbage")["tasks"][0]["trace"]
    assert "stream events printed a line that is not JSON" in trace
    assert "Traceback? this is not a protocol message" in trace
    assert len(values(read_committed, f"{prefix}.events")) == 30, "the records before the bad line, once"
