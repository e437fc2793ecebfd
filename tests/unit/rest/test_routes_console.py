"""`/console`: the page and its files, the state (secrets masked, failed tasks, workers), behind
the REST API's basic auth."""

from __future__ import annotations

import base64

from eosconnect.rest import create_app
from support.fake_herder import FakeHerder, make_test_client, source_config


def test_page_and_files_are_served() -> None:
    client = make_test_client(create_app(FakeHerder()))
    page = client.get("/console")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/console/console.js">' in page.text
    assert client.get("/console/").status_code == 200
    script = client.get("/console/console.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert client.get("/console/console.css").headers["content-type"].startswith("text/css")
    assert client.get("/console/app.py").status_code == 404
    assert client.get("/console/..%2Fapp.py").status_code == 404
    assert "/console" not in client.get("/openapi.json").json()["paths"]


def test_state_masks_secrets_and_shows_failed_tasks() -> None:
    herder = FakeHerder()
    client = make_test_client(create_app(herder))
    config = {**source_config(), "connection.password": "hunter22", "tasks.max": "2"}
    assert client.post("/connectors", json={"name": "c", "config": config}).status_code == 201
    herder.task_state[("c", 1)] = "FAILED"
    herder.snapshots[("c", 0)] = {
        "connector": "c",
        "task": 0,
        "transactions-committed": 5,
        "transactions-aborted": 1,
        "transaction-open-age-ms": 120.0,
        "source-record-write-total": 500,
    }
    state = client.get("/console/api/state").json()
    assert "hunter22" not in str(state)
    (connector,) = state["connectors"]
    assert connector["config"]["connection.password"] == "[hidden]"
    assert [t["state"] for t in connector["tasks"]] == ["RUNNING", "FAILED"]
    assert connector["tasks"][1]["trace"] == "RuntimeError: boom"
    metrics = connector["tasks"][0]["metrics"]
    assert (metrics["commits"], metrics["aborts"], metrics["open_transaction_age_ms"]) == (5, 1, 120.0)
    assert metrics["records"] == 500
    assert connector["tasks"][1]["metrics"] is None
    assert state["workers"] == [{"id": "fake-worker:8083", "leader": True, "this": True, "tasks": 2}]
    assert state["worker"]["leader"] is True


def test_console_needs_the_rest_credentials() -> None:
    client = make_test_client(create_app(FakeHerder(), basic_auth="admin:pw"))
    assert client.get("/console").status_code == 401
    assert client.get("/console/api/state").status_code == 401
    token = base64.b64encode(b"admin:pw").decode()
    assert client.get("/console", headers={"authorization": f"Basic {token}"}).status_code == 200
