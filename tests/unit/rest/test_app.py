"""Worker-level endpoints, plugins, loggers, errors, basic auth, metrics and the OpenAPI document."""

from __future__ import annotations

import base64
import logging
import uuid
from typing import Any

import pytest

from eosconnect import __version__
from eosconnect.cluster.herder_api import ConflictError
from eosconnect.rest import create_app
from support.fake_herder import SOURCE_CLASS, FakeHerder, make_test_client, source_config


@pytest.fixture
def herder() -> FakeHerder:
    return FakeHerder()


@pytest.fixture
def client(herder: FakeHerder) -> Any:
    return make_test_client(create_app(herder, commit="abc123"))


def error(response: Any, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error_code", "message"}
    assert body["error_code"] == status
    return body["message"]


# ---------------------------------------------------------------- worker


def test_root(client: Any) -> None:
    assert client.get("/").json() == {
        "version": __version__,
        "commit": "abc123",
        "kafka_cluster_id": "fake-cluster-id",
    }


def test_health(client: Any, herder: FakeHerder) -> None:
    assert client.get("/health").json()["status"] == "healthy"
    herder.fail_with = RuntimeError("config topic unreadable")
    response = client.get("/health")
    assert response.status_code == 500
    assert response.json()["status"] == "unhealthy"


def test_unknown_path_and_method(client: Any) -> None:
    assert "GET /nothing/here" in error(client.get("/nothing/here"), 404)
    assert "POST" in error(client.post("/connectors/c/status"), 405)


def test_unexpected_exception_is_500_without_a_stack_trace(
    client: Any, herder: FakeHerder, caplog: pytest.LogCaptureFixture
) -> None:
    herder.fail_with = ZeroDivisionError("division by zero in the herder")
    with caplog.at_level(logging.ERROR, logger="eosconnect.rest"):
        response = client.get("/connectors")
    message = error(response, 500)
    assert "ZeroDivisionError" in message
    assert "Traceback" not in response.text
    assert "File " not in response.text
    assert any("Traceback" in (r.exc_text or "") or r.exc_info for r in caplog.records), "traceback is logged"


def test_herder_conflict_is_409(client: Any, herder: FakeHerder) -> None:
    def conflict(*args: Any) -> None:
        raise ConflictError(
            "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
        )

    herder.restart_task = conflict  # type: ignore[method-assign]
    herder.put_connector_config("c", {**source_config(), "name": "c"}, False)
    assert "rebalance" in error(client.post("/connectors/c/tasks/0/restart"), 409)


# ---------------------------------------------------------------- plugins


def test_plugins_list(client: Any) -> None:
    plugins = client.get("/connector-plugins").json()
    assert {p["type"] for p in plugins} == {"source", "sink"}
    assert all(set(p) == {"class", "type", "version"} for p in plugins)
    everything = client.get("/connector-plugins", params={"connectorsOnly": "false"}).json()
    assert {"transformation", "predicate", "converter"} <= {p["type"] for p in everything}
    assert len(everything) > len(plugins)


def test_plugin_config(client: Any) -> None:
    definitions = client.get(f"/connector-plugins/{SOURCE_CLASS}/config").json()
    assert [d["name"] for d in definitions] == ["connector.class", "tasks.max"]
    assert client.get("/connector-plugins/SequenceSource/config").status_code == 200
    assert "Unknown plugin" in error(client.get("/connector-plugins/Nope/config"), 404)


@pytest.mark.parametrize("path_name", [SOURCE_CLASS, "SequenceSourceConnector", "SequenceSource"])
def test_validate_valid_config(client: Any, path_name: str) -> None:
    response = client.put(f"/connector-plugins/{path_name}/config/validate", json=source_config())
    assert response.status_code == 200
    body = response.json()
    assert body["name"] == SOURCE_CLASS
    assert body["error_count"] == 0
    assert body["groups"] == ["Common"]
    assert {c["definition"]["name"] for c in body["configs"]} == {"connector.class", "tasks.max"}


def test_validate_invalid_config_is_200_with_errors(client: Any) -> None:
    response = client.put(
        "/connector-plugins/SequenceSource/config/validate", json=source_config(**{"tasks.max": "0"})
    )
    assert response.status_code == 200
    body = response.json()
    assert body["error_count"] == 1
    values = {c["value"]["name"]: c["value"] for c in body["configs"]}
    assert values["tasks.max"]["errors"] and "at least 1" in values["tasks.max"]["errors"][0]
    assert values["connector.class"]["errors"] == []


def test_validate_without_connector_class_is_400_as_in_kafka_connect(client: Any, herder: FakeHerder) -> None:
    response = client.put("/connector-plugins/SequenceSource/config/validate", json={"tasks.max": "1"})
    message = error(response, 400)
    assert "contains no connector type" in message and "connector.class" in message


def test_validate_class_mismatch_is_400(client: Any) -> None:
    response = client.put(
        "/connector-plugins/FakeSink/config/validate", json={"connector.class": SOURCE_CLASS}
    )
    message = error(response, 400)
    assert "does not match request type FakeSink" in message


def test_validate_bad_body_is_400(client: Any) -> None:
    error(client.put("/connector-plugins/SequenceSource/config/validate", json=["x"]), 400)
    error(
        client.put(
            "/connector-plugins/SequenceSource/config/validate",
            content=b"{",
            headers={"Content-Type": "application/json"},
        ),
        400,
    )


# ---------------------------------------------------------------- loggers


def test_loggers(client: Any) -> None:
    name = f"eosconnect.test_{uuid.uuid4().hex[:8]}"
    child = logging.getLogger(name + ".child")
    child.setLevel(logging.ERROR)
    try:
        everything = client.get("/admin/loggers").json()
        assert "root" in everything
        assert everything[name + ".child"] == {"level": "ERROR", "last_modified": None}
        assert client.get("/admin/loggers/").json() == everything

        assert "not found" in error(client.get("/admin/loggers/no.such.logger.anywhere"), 404)
        assert client.get(f"/admin/loggers/{name}").json()["last_modified"] is None

        response = client.put(f"/admin/loggers/{name}", json={"level": "debug"})
        assert response.status_code == 200
        assert response.json() == [name, name + ".child"]
        assert child.level == logging.DEBUG
        assert logging.getLogger(name).level == logging.DEBUG
        level = client.get(f"/admin/loggers/{name}").json()
        assert level["level"] == "DEBUG"
        assert isinstance(level["last_modified"], int)

        assert client.put(f"/admin/loggers/{name}", json={"level": "WARN"}).status_code == 200
        assert client.get(f"/admin/loggers/{name}.child").json()["level"] == "WARNING"
        assert client.put(f"/admin/loggers/{name}", json={"level": "TRACE"}).status_code == 200
        assert client.get(f"/admin/loggers/{name}").json()["level"] == "TRACE"

        assert "'level'" in error(client.put(f"/admin/loggers/{name}", json={}), 400)
        assert "control character" in error(
            client.put("/admin/loggers/evil%0Aforged", json={"level": "DEBUG"}), 400
        )
        assert "invalid log level 'LOUD'" in error(
            client.put(f"/admin/loggers/{name}", json={"level": "LOUD"}), 404
        )
        assert "cluster" in error(
            client.put(f"/admin/loggers/{name}?scope=cluster", json={"level": "INFO"}), 400
        )
    finally:
        for logger_name in (name, name + ".child"):
            logging.getLogger(logger_name).setLevel(logging.NOTSET)


# ---------------------------------------------------------------- basic auth


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_basic_auth(herder: FakeHerder) -> None:
    client = make_test_client(create_app(herder, basic_auth="alice:s3cret:with:colons,bob:pw"))
    for headers in ({}, basic("alice", "wrong"), basic("carol", "pw"), {"Authorization": "Bearer x"}):
        response = client.get("/connectors", headers=headers)
        assert response.status_code == 401
        assert response.headers["www-authenticate"].startswith("Basic")
        assert response.json()["error_code"] == 401
    assert client.get("/connectors", headers=basic("alice", "s3cret:with:colons")).status_code == 200
    assert client.get("/connectors", headers=basic("bob", "pw")).json() == []
    assert client.get("/metrics").status_code == 401
    assert client.get("/openapi.json").status_code == 401
    spec = client.get("/openapi.json", headers=basic("bob", "pw")).json()
    assert spec["components"]["securitySchemes"]["basicAuth"] == {"type": "http", "scheme": "basic"}


def test_basic_auth_mapping_and_bad_spec(herder: FakeHerder) -> None:
    client = make_test_client(create_app(herder, basic_auth={"u": "p"}))
    assert client.get("/", headers=basic("u", "p")).status_code == 200
    with pytest.raises(ValueError, match="user:password"):
        create_app(herder, basic_auth="nocolon")


# ---------------------------------------------------------------- metrics


def test_metrics_endpoint(client: Any, herder: FakeHerder) -> None:
    herder.put_connector_config("c", {**source_config(**{"tasks.max": "2"}), "name": "c"}, False)
    herder.snapshots[("c", 0)] = {
        "connector": "c",
        "task": 0,
        "transaction-size-min": 3,
        "transaction-size-max": 10,
        "transaction-size-avg": 6.5,
        "transactions-committed": 4,
        "source-record-poll-total": 26,
        "source-record-write-rate": 12.5,
        "offset-commit-avg-time-ms": 4.0,
    }
    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    assert 'eosconnect_source_task_transaction_size_min{connector="c",task="0"} 3.0' in text
    assert 'eosconnect_source_task_transaction_size_max{connector="c",task="0"} 10.0' in text
    assert 'eosconnect_source_task_transaction_size_avg{connector="c",task="0"} 6.5' in text
    assert 'eosconnect_source_task_transactions_committed_total{connector="c",task="0"} 4.0' in text
    assert 'eosconnect_source_task_source_record_poll_total{connector="c",task="0"} 26.0' in text
    assert 'eosconnect_source_task_source_record_write_rate{connector="c",task="0"} 12.5' in text
    assert 'eosconnect_source_task_offset_commit_avg_time_ms{connector="c",task="0"} 4.0' in text
    assert 'eosconnect_connectors{state="RUNNING"} 1.0' in text
    assert 'eosconnect_tasks{state="RUNNING"} 2.0' in text
    assert 'eosconnect_connector_tasks{connector="c",state="RUNNING"} 2.0' in text
    assert 'eosconnect_connector_tasks{connector="c",state="FAILED"} 0.0' in text


# ---------------------------------------------------------------- OpenAPI


EXPECTED_OPERATIONS = {
    ("put", "/connectors/{connector}/topics/reset"),
    ("get", "/"),
    ("get", "/health"),
    ("get", "/metrics"),
    ("get", "/connectors"),
    ("post", "/connectors"),
    ("get", "/connectors/{connector}"),
    ("delete", "/connectors/{connector}"),
    ("get", "/connectors/{connector}/acls"),
    ("get", "/connectors/{connector}/config"),
    ("put", "/connectors/{connector}/config"),
    ("patch", "/connectors/{connector}/config"),
    ("get", "/connectors/{connector}/status"),
    ("get", "/connectors/{connector}/tasks"),
    ("get", "/connectors/{connector}/tasks/{task}/status"),
    ("post", "/connectors/{connector}/tasks/{task}/restart"),
    ("get", "/connectors/{connector}/topics"),
    ("post", "/connectors/{connector}/restart"),
    ("post", "/connectors/{connector}/signals"),
    ("put", "/connectors/{connector}/pause"),
    ("put", "/connectors/{connector}/resume"),
    ("put", "/connectors/{connector}/stop"),
    ("get", "/connectors/{connector}/offsets"),
    ("patch", "/connectors/{connector}/offsets"),
    ("delete", "/connectors/{connector}/offsets"),
    ("put", "/connectors/{connector}/fence"),
    ("put", "/connectors/{connector}/tasks/{task}/heartbeat"),
    ("get", "/internal/tasks"),
    ("put", "/internal/hosts/{host}/heartbeat"),
    ("get", "/connector-plugins"),
    ("get", "/connector-plugins/{plugin}/config"),
    ("put", "/connector-plugins/{plugin}/config/validate"),
    ("get", "/admin/loggers"),
    ("get", "/admin/loggers/{logger}"),
    ("put", "/admin/loggers/{logger}"),
}


def test_openapi_describes_every_endpoint(client: Any) -> None:
    spec = client.get("/openapi.json").json()
    operations = {
        (method, path)
        for path, item in spec["paths"].items()
        for method in item
        if method in {"get", "put", "post", "patch", "delete"}
    }
    assert operations == EXPECTED_OPERATIONS
    for path, item in spec["paths"].items():
        for method, op in item.items():
            assert op.get("summary"), f"{method} {path} has no summary"
            assert "422" not in op["responses"], f"{method} {path} documents 422"
    post = spec["paths"]["/connectors"]["post"]
    assert "201" in post["responses"] and "409" in post["responses"] and "400" in post["responses"]
    assert "ErrorMessage" in spec["components"]["schemas"]
    assert "CreateConnectorRequest" in spec["components"]["schemas"]
    restart = spec["paths"]["/connectors/{connector}/restart"]["post"]
    assert {p["name"] for p in restart["parameters"]} >= {"includeTasks", "onlyFailed"}
    heartbeat = spec["paths"]["/connectors/{connector}/tasks/{task}/heartbeat"]["put"]
    assert "generation" in heartbeat["requestBody"]["content"]["application/json"]["schema"]["properties"]
