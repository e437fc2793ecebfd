"""The standalone herder behind the real REST app, with nothing started: what it answers before
a task runs (validation, refusals, configs), which needs no broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from eosconnect.cluster.standalone import StandaloneHerder
from eosconnect.rest import create_app
from eosconnect.worker_config import WorkerConfig
from support.fake_herder import make_test_client

VALIDATE = "/connector-plugins/FileStreamSource/config/validate"
SOURCE = {"connector.class": "FileStreamSource", "name": "v", "file": "/tmp/in.txt", "topic": "t"}


@pytest.fixture
def client(tmp_path: Path) -> Any:
    worker = WorkerConfig.parse({"bootstrap.servers": "127.0.0.1:1"})
    herder = StandaloneHerder(worker, "http://127.0.0.1:8083", str(tmp_path / "connect.offsets"))
    return make_test_client(create_app(herder))


@pytest.mark.parametrize("tasks_max", ["many", "0", "-1", "100000"])
def test_validate_with_a_bad_tasks_max_answers_kafkas_body(client: Any, tasks_max: str) -> None:
    """Kafka answers 200 with the ConfigInfos, the error on tasks.max's own entry (with its
    definition), not a 400."""
    response = client.put(VALIDATE, json={**SOURCE, "tasks.max": tasks_max})
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"name", "error_count", "groups", "configs"} and body["error_count"] == 1
    (entry,) = [c for c in body["configs"] if c["value"]["errors"]]
    assert entry["value"]["name"] == "tasks.max" and entry["value"]["value"] == tasks_max
    assert entry["definition"]["name"] == "tasks.max"


def test_a_bad_connector_is_refused_naming_the_setting_and_nothing_is_kept(client: Any) -> None:
    refused = client.put(
        "/connectors/bad/config", json={"connector.class": "FileStreamSource", "tasks.max": "0"}
    )
    assert refused.status_code == 400 and "tasks.max" in refused.json()["message"]
    assert client.get("/connectors").json() == []
    assert client.get("/connectors/bad/status").status_code == 404


def test_internal_task_requests_are_refused(client: Any) -> None:
    """Tasks run in the worker's process: no signed request can reach its herder (no session key)."""
    unsigned = client.put("/connectors/v/fence", json={})
    assert unsigned.status_code == 400 and "not signed" in unsigned.json()["message"]
    signed = client.put(
        "/connectors/v/fence",
        json={},
        headers={
            "X-Connect-Authorization": "AAAA",
            "X-Connect-Request-Signature-Algorithm": "HmacSHA256",
            "X-Connect-Request-Signature-Timestamp": "1",
        },
    )
    assert signed.status_code == 403
