"""Contract tests of `/connectors/...`: status codes and bodies against the in-memory FakeHerder."""

from __future__ import annotations

from typing import Any

import pytest

from eosconnect.rest import create_app
from support.fake_herder import SINK_CLASS, SOURCE_CLASS, FakeHerder, make_test_client, source_config


@pytest.fixture
def herder() -> FakeHerder:
    return FakeHerder()


@pytest.fixture
def client(herder: FakeHerder) -> Any:
    return make_test_client(create_app(herder))


def create(client: Any, name: str = "orders", **config: Any) -> Any:
    return client.post("/connectors", json={"name": name, "config": source_config(**config)})


def assert_error(response: Any, status: int, *fragments: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error_code", "message"}, body
    assert body["error_code"] == status
    for fragment in fragments:
        assert fragment in body["message"], body["message"]
    return body


# ---------------------------------------------------------------- create / list / get


def test_create_returns_201_with_info_and_location(client: Any) -> None:
    response = create(client, "orders", **{"tasks.max": 2})
    assert response.status_code == 201
    assert response.headers["location"] == "/connectors/orders"
    body = response.json()
    assert body["name"] == "orders"
    assert body["type"] == "source"
    assert body["config"] == {"connector.class": SOURCE_CLASS, "tasks.max": "2", "name": "orders"}
    assert body["tasks"] == [{"connector": "orders", "task": 0}, {"connector": "orders", "task": 1}]


def test_create_coerces_numbers_and_booleans_to_strings(client: Any, herder: FakeHerder) -> None:
    response = client.post(
        "/connectors",
        json={
            "name": "c",
            "config": {"connector.class": SOURCE_CLASS, "tasks.max": 1, "flag": True, "x": 1.5},
        },
    )
    assert response.status_code == 201
    assert herder.configs["c"] == {
        "connector.class": SOURCE_CLASS,
        "tasks.max": "1",
        "flag": "true",
        "x": "1.5",
        "name": "c",
    }


def test_create_trims_the_name(client: Any) -> None:
    response = client.post("/connectors", json={"name": "  spaced  ", "config": source_config()})
    assert response.status_code == 201
    assert response.json()["name"] == "spaced"


def test_create_existing_is_409(client: Any) -> None:
    assert create(client).status_code == 201
    assert_error(create(client), 409, "orders", "exists")


def test_create_with_initial_state_running_is_a_plain_create(client: Any, herder: FakeHerder) -> None:
    response = client.post(
        "/connectors", json={"name": "r", "config": source_config(), "initial_state": "RUNNING"}
    )
    assert response.status_code == 201
    assert herder.calls[-1][0] == "put_connector_config"


def test_create_with_initial_state_uses_create_connector(client: Any, herder: FakeHerder) -> None:
    response = client.post(
        "/connectors", json={"name": "p", "config": source_config(), "initial_state": "stopped"}
    )
    assert response.status_code == 201
    assert herder.calls[-1][0] == "create_connector"
    assert herder.calls[-1][1][2] == "STOPPED"
    assert client.get("/connectors/p/status").json()["connector"]["state"] == "STOPPED"


@pytest.mark.parametrize(
    ("body", "fragments"),
    [
        ({"config": source_config()}, ["name", "required"]),
        ({"name": "x"}, ["config", "required"]),
        ({"name": "x", "config": source_config(), "extra": 1}, ["extra", "unknown field"]),
        ({"name": "x", "config": source_config(), "initial_state": "SLEEPING"}, ["initial_state"]),
        (
            {"name": "x", "config": {"connector.class": SOURCE_CLASS, "nested": {"a": 1}}},
            ["nested", "object"],
        ),
        ({"name": "x", "config": {"connector.class": SOURCE_CLASS, "list": [1]}}, ["list", "array"]),
        ({"name": "x", "config": {"connector.class": SOURCE_CLASS, "nul": None}}, ["nul", "null"]),
        ({"name": "x", "config": "not an object"}, ["config"]),
        ({"name": "", "config": source_config()}, ["name", "empty"]),
        ({"name": "a\u0007b", "config": source_config()}, ["control characters"]),
        ({"name": "x", "config": {"tasks.max": "1"}}, ["connector.class"]),
        ({"name": "x", "config": {"connector.class": "  "}}, ["connector.class"]),
        ({"name": "x", "config": source_config(name="y")}, ["(y)", "(x)", "doesn't match"]),
        ({"name": "x", "config": source_config(**{"tasks.max": "zero"})}, ["tasks.max", "zero"]),
        ({"name": "x", "config": {"connector.class": "no.such.Connector"}}, ["connector.class", "no.such"]),
        ([1, 2], ["request body"]),
    ],
)
def test_create_bad_input_is_400(client: Any, herder: FakeHerder, body: Any, fragments: list[str]) -> None:
    assert_error(client.post("/connectors", json=body), 400, *fragments)
    assert herder.configs == {}, "nothing may be stored by a rejected request"


def test_malformed_json_is_400(client: Any) -> None:
    response = client.post(
        "/connectors", content=b'{"name": "x", ', headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "Malformed JSON")
    response = client.put(
        "/connectors/x/config", content=b"nope", headers={"Content-Type": "application/json"}
    )
    assert_error(response, 400, "Malformed JSON")


def test_empty_body_is_400(client: Any) -> None:
    assert_error(client.post("/connectors", headers={"Content-Type": "application/json"}), 400, "required")


def test_non_json_content_type_is_415(client: Any) -> None:
    response = client.post(
        "/connectors", content=b"name=x", headers={"Content-Type": "application/x-www-form-urlencoded"}
    )
    assert_error(response, 415, "application/json")


def test_list_plain_and_expanded(client: Any) -> None:
    assert client.get("/connectors").json() == []
    create(client, "a")
    create(client, "b")
    assert client.get("/connectors").json() == ["a", "b"]
    assert client.get("/connectors/").json() == ["a", "b"], "a trailing slash is served, not redirected"

    status_only = client.get("/connectors", params={"expand": "status"}).json()
    assert set(status_only) == {"a", "b"}
    assert set(status_only["a"]) == {"status"}
    assert status_only["a"]["status"]["connector"]["state"] == "RUNNING"

    both = client.get("/connectors?expand=status&expand=info").json()
    assert set(both["b"]) == {"status", "info"}
    assert both["b"]["info"]["config"]["connector.class"] == SOURCE_CLASS

    unknown = client.get("/connectors?expand=bogus").json()
    assert unknown == {"a": {}, "b": {}}


def test_get_connector_config_tasks_status_topics(client: Any) -> None:
    create(client, "c", **{"tasks.max": 2, "topic": "out"})
    info = client.get("/connectors/c")
    assert info.status_code == 200
    assert info.json()["tasks"] == [{"connector": "c", "task": 0}, {"connector": "c", "task": 1}]

    config = client.get("/connectors/c/config")
    assert config.status_code == 200
    assert config.json()["topic"] == "out"

    tasks = client.get("/connectors/c/tasks").json()
    assert [t["id"] for t in tasks] == [{"connector": "c", "task": 0}, {"connector": "c", "task": 1}]
    assert tasks[0]["config"]["topic"] == "out"

    status = client.get("/connectors/c/status").json()
    assert status["name"] == "c"
    assert status["type"] == "source"
    assert status["connector"] == {"state": "RUNNING", "worker_id": "fake-worker:8083"}
    assert [t["id"] for t in status["tasks"]] == [0, 1]
    assert all(t["state"] == "RUNNING" and t["worker_id"] for t in status["tasks"])

    task = client.get("/connectors/c/tasks/1/status")
    assert task.status_code == 200
    assert task.json() == {"id": 1, "state": "RUNNING", "worker_id": "fake-worker:8083"}

    assert client.get("/connectors/c/topics").json() == {"c": {"topics": ["out"]}}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/connectors/missing"),
        ("DELETE", "/connectors/missing"),
        ("GET", "/connectors/missing/config"),
        ("PATCH", "/connectors/missing/config"),
        ("GET", "/connectors/missing/status"),
        ("GET", "/connectors/missing/tasks"),
        ("GET", "/connectors/missing/tasks/0/status"),
        ("POST", "/connectors/missing/restart"),
        ("POST", "/connectors/missing/tasks/0/restart"),
        ("PUT", "/connectors/missing/pause"),
        ("PUT", "/connectors/missing/resume"),
        ("PUT", "/connectors/missing/stop"),
        ("GET", "/connectors/missing/offsets"),
        ("DELETE", "/connectors/missing/offsets"),
    ],
)
def test_unknown_connector_is_404(client: Any, method: str, path: str) -> None:
    kwargs: dict[str, Any] = {"json": {"tasks.max": "2"}} if method == "PATCH" else {}
    assert_error(client.request(method, path, **kwargs), 404, "missing")


def test_unknown_task_is_404(client: Any) -> None:
    create(client, "c")
    assert_error(client.get("/connectors/c/tasks/7/status"), 404, "c-7")
    assert_error(client.post("/connectors/c/tasks/7/restart"), 404)
    assert_error(client.get("/connectors/c/tasks/notanumber/status"), 404)


# ---------------------------------------------------------------- config PUT / PATCH


def test_put_config_creates_then_updates(client: Any, herder: FakeHerder) -> None:
    first = client.put("/connectors/c/config", json=source_config())
    assert first.status_code == 201
    assert first.headers["location"] == "/connectors/c"
    assert first.json()["name"] == "c"
    second = client.put("/connectors/c/config", json=source_config(**{"tasks.max": "3"}))
    assert second.status_code == 200
    assert len(second.json()["tasks"]) == 3
    assert herder.configs["c"]["name"] == "c"


def test_put_config_name_mismatch_is_400(client: Any, herder: FakeHerder) -> None:
    response = client.put("/connectors/c/config", json=source_config(name="other"))
    assert_error(response, 400, "(other)", "(c)")
    assert herder.calls == []


def test_put_config_bad_values_are_400_naming_the_field(client: Any) -> None:
    create(client, "c")
    assert_error(
        client.put("/connectors/c/config", json=source_config(**{"tasks.max": "-1"})), 400, "tasks.max"
    )
    assert_error(client.put("/connectors/c/config", json={"tasks.max": "1"}), 400, "connector.class")
    assert_error(client.put("/connectors/c/config", json=["a"]), 400)
    # the stored config is untouched
    assert client.get("/connectors/c/config").json()["tasks.max"] == "1"


def test_patch_config_merges_and_removes_null_keys(client: Any, herder: FakeHerder) -> None:
    create(client, "c", **{"topic": "t1", "extra.key": "x"})
    response = client.patch("/connectors/c/config", json={"topic": "t2", "extra.key": None, "tasks.max": 2})
    assert response.status_code == 200
    config = response.json()["config"]
    assert config["topic"] == "t2"
    assert config["tasks.max"] == "2"
    assert "extra.key" not in config
    assert config["connector.class"] == SOURCE_CLASS
    assert herder.configs["c"] == config


def test_patch_config_errors(client: Any) -> None:
    create(client, "c")
    assert_error(client.patch("/connectors/c/config", json={"name": "d"}), 400, "(d)", "(c)")
    assert_error(client.patch("/connectors/c/config", json={"connector.class": None}), 400, "connector.class")
    assert_error(client.patch("/connectors/c/config", json={"tasks.max": "0"}), 400, "tasks.max")
    assert_error(client.patch("/connectors/c/config", json={"a": {"b": 1}}), 400, "'a'")


# ---------------------------------------------------------------- lifecycle


def test_pause_resume_stop_and_delete(client: Any, herder: FakeHerder) -> None:
    create(client, "c")
    pause = client.put("/connectors/c/pause")
    assert pause.status_code == 202
    assert pause.content == b""
    assert client.get("/connectors/c/status").json()["connector"]["state"] == "PAUSED"

    resume = client.put("/connectors/c/resume")
    assert resume.status_code == 202
    assert client.get("/connectors/c/status").json()["connector"]["state"] == "RUNNING"

    stop = client.put("/connectors/c/stop")
    assert stop.status_code == 204
    assert client.get("/connectors/c/status").json()["connector"]["state"] == "STOPPED"

    delete = client.delete("/connectors/c")
    assert delete.status_code == 204
    assert delete.content == b""
    assert client.get("/connectors").json() == []
    assert_error(client.get("/connectors/c"), 404)


def test_restart_plain_is_204(client: Any, herder: FakeHerder) -> None:
    create(client, "c")
    response = client.post("/connectors/c/restart")
    assert response.status_code == 204
    assert herder.calls[-1] == ("restart_connector", ("c", False, False))


def test_restart_with_flags_is_202_with_status(client: Any, herder: FakeHerder) -> None:
    create(client, "c", **{"tasks.max": 2})
    herder.task_state[("c", 1)] = "FAILED"
    response = client.post("/connectors/c/restart", params={"includeTasks": "true", "onlyFailed": "true"})
    assert response.status_code == 202
    body = response.json()
    assert body["name"] == "c"
    states = {t["id"]: t["state"] for t in body["tasks"]}
    assert states == {0: "RUNNING", 1: "RESTARTING"}
    assert herder.calls[-1] == ("restart_connector", ("c", True, True))


@pytest.mark.parametrize(
    ("value", "expected"), [("True", True), ("false", False), ("1", True), ("FALSE", False)]
)
def test_restart_flag_spellings(client: Any, herder: FakeHerder, value: str, expected: bool) -> None:
    create(client, "c")
    response = client.post(f"/connectors/c/restart?includeTasks={value}&onlyFailed=False")
    assert response.status_code == (202 if expected else 204)
    assert herder.calls[-1] == ("restart_connector", ("c", expected, False))


def test_restart_bad_flag_is_400(client: Any) -> None:
    create(client, "c")
    assert_error(client.post("/connectors/c/restart?includeTasks=maybe"), 400, "includeTasks")


def test_restart_task_is_204(client: Any, herder: FakeHerder) -> None:
    create(client, "c")
    response = client.post("/connectors/c/tasks/0/restart")
    assert response.status_code == 204
    assert herder.calls[-1] == ("restart_task", ("c", 0))


def test_sink_connector_type(client: Any) -> None:
    response = client.post("/connectors", json={"name": "s", "config": {"connector.class": SINK_CLASS}})
    assert response.status_code == 201
    assert response.json()["type"] == "sink"


# ---------------------------------------------------------------- offsets


def test_offsets_read_alter_reset(client: Any) -> None:
    create(client, "c")
    assert client.get("/connectors/c/offsets").json() == {"offsets": []}

    body = {"offsets": [{"partition": {"file": "a"}, "offset": {"pos": 10}}]}
    # not stopped: 400 (Kafka Connect answers 400 for a connector that is not STOPPED)
    assert_error(client.patch("/connectors/c/offsets", json=body), 400, "STOPPED")
    assert_error(client.delete("/connectors/c/offsets"), 400, "STOPPED")

    assert client.put("/connectors/c/stop").status_code == 204
    altered = client.patch("/connectors/c/offsets", json=body)
    assert altered.status_code == 200
    assert altered.json() == {"message": "The offsets for this connector have been altered successfully"}
    assert client.get("/connectors/c/offsets").json() == body

    removed = client.patch(
        "/connectors/c/offsets", json={"offsets": [{"partition": {"file": "a"}, "offset": None}]}
    )
    assert removed.status_code == 200
    assert client.get("/connectors/c/offsets").json() == {"offsets": []}

    client.patch("/connectors/c/offsets", json=body)
    reset = client.delete("/connectors/c/offsets")
    assert reset.status_code == 200
    assert set(reset.json()) == {"message"}
    assert client.get("/connectors/c/offsets").json() == {"offsets": []}


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ({"offsets": []}, "need to be provided"),
        ({}, "offsets"),
        ({"offsets": [{"partition": {"f": "a"}}]}, "offset"),
        ({"offsets": [{"partition": None, "offset": {"p": 1}}]}, "partition"),
        ({"offsets": [{"partition": {"f": {"nested": 1}}, "offset": {"p": 1}}]}, "primitives"),
        ({"offsets": [{"partition": {"f": "a"}, "offset": {"p": [1]}}]}, "primitives"),
        ({"offsets": [], "other": 1}, "other"),
    ],
)
def test_alter_offsets_bad_body_is_400(client: Any, herder: FakeHerder, body: Any, fragment: str) -> None:
    create(client, "c")
    client.put("/connectors/c/stop")
    assert_error(client.patch("/connectors/c/offsets", json=body), 400, fragment)
    assert not any(call[0] == "alter_connector_offsets" for call in herder.calls)


def test_topics_of_an_unknown_connector_are_empty_and_reset_accepted(client: Any) -> None:
    assert client.get("/connectors/missing/topics").json() == {"missing": {"topics": []}}
    assert client.put("/connectors/missing/topics/reset").status_code == 202  # as Kafka Connect 4.3
