"""The third-party client kafka-connect-py (PyPI) drives the API served by uvicorn on loopback.

The same scenario runs against the real worker in the end-to-end tests; here the herder is the
in-memory FakeHerder, so this checks only that a Kafka Connect client understands our HTTP layer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from requests.exceptions import HTTPError

from eosconnect.rest import create_app
from support.fake_herder import SOURCE_CLASS, FakeHerder, served

kafka_connect = pytest.importorskip("kafka_connect")


@pytest.fixture
def herder() -> FakeHerder:
    return FakeHerder()


@pytest.fixture
def connect(herder: FakeHerder) -> Iterator[Any]:
    with served(create_app(herder, basic_auth="admin:secret")) as server:
        yield kafka_connect.KafkaConnect(url=server.url, auth="admin:secret")


def test_lifecycle_with_kafka_connect_py(connect: Any, herder: FakeHerder) -> None:
    info = connect.get_cluster_info()
    assert info["kafka_cluster_id"] == "fake-cluster-id"
    assert set(info) == {"version", "commit", "kafka_cluster_id"}

    plugins = connect.list_connector_plugins()
    assert SOURCE_CLASS in {p["class"] for p in plugins}

    validation = connect.validate_connector_config(
        "SequenceSource", {"connector.class": SOURCE_CLASS, "tasks.max": "0"}
    )
    assert validation["error_count"] == 1
    ok = connect.validate_connector_config(
        "SequenceSource", {"connector.class": SOURCE_CLASS, "tasks.max": "1"}
    )
    assert ok["error_count"] == 0

    created = connect.create_connector(
        {"name": "seq", "config": {"connector.class": SOURCE_CLASS, "tasks.max": "2", "topic": "t"}}
    )
    assert created["name"] == "seq"
    assert len(created["tasks"]) == 2

    assert connect.list_connectors() == ["seq"]
    expanded = connect.list_connectors(expand="status")
    assert expanded["seq"]["status"]["connector"]["state"] == "RUNNING"
    assert connect.list_connectors(state="running") == ["seq"]
    assert connect.get_connector("seq")["type"] == "source"

    status = connect.get_connector_status("seq")
    assert status["connector"]["state"] == "RUNNING"
    assert [t["state"] for t in status["tasks"]] == ["RUNNING", "RUNNING"]
    assert connect.get_connector_task_status("seq", 1)["state"] == "RUNNING"
    assert len(connect.list_connector_tasks("seq")) == 2
    assert connect.list_connector_topics("seq") == {"seq": {"topics": ["t"]}}

    updated = connect.update_connector(
        "seq", {"connector.class": SOURCE_CLASS, "tasks.max": "3", "topic": "t"}
    )
    assert len(updated["tasks"]) == 3
    assert connect.get_connector_config("seq")["tasks.max"] == "3"

    connect.pause_connector("seq")
    assert connect.get_connector_status("seq")["connector"]["state"] == "PAUSED"
    connect.resume_connector("seq")
    assert connect.get_connector_status("seq")["connector"]["state"] == "RUNNING"

    assert connect.restart_connector("seq") is None  # 204
    restarted = connect.restart_connector("seq", include_tasks=True, only_failed=False)  # 202 + status
    assert restarted["name"] == "seq"
    assert herder.calls[-1] == ("restart_connector", ("seq", True, False))
    assert connect.restart_connector_task("seq", 0) is None

    connect.stop_connector("seq")
    assert connect.get_connector_status("seq")["connector"]["state"] == "STOPPED"

    connect.delete_connector("seq")
    assert connect.list_connectors() == []


def test_errors_reach_kafka_connect_py(connect: Any) -> None:
    with pytest.raises(HTTPError) as err:
        connect.get_connector("missing")
    assert err.value.response.status_code == 404
    assert err.value.response.json()["error_code"] == 404

    body = {"name": "c", "config": {"connector.class": SOURCE_CLASS}}
    connect.create_connector(body)
    with pytest.raises(HTTPError) as err:
        connect.create_connector(body)
    assert err.value.response.status_code == 409

    with pytest.raises(HTTPError) as err:
        connect.create_connector({"name": "d", "config": {"tasks.max": "1"}})
    assert err.value.response.status_code == 400
    assert "connector.class" in err.value.response.json()["message"]


def test_wrong_credentials_are_refused(herder: FakeHerder) -> None:
    with served(create_app(herder, basic_auth="admin:secret")) as server:
        client = kafka_connect.KafkaConnect(url=server.url, auth="admin:wrong")
        with pytest.raises(HTTPError) as err:
            client.list_connectors()
    assert err.value.response.status_code == 401
