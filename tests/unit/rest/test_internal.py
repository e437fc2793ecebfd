"""The signed internal endpoints: fencing and task heartbeats (403 unless correctly signed)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from eosconnect.rest import create_app
from eosconnect.storage.session_key import SessionKey, sign_request
from support.fake_herder import FakeHerder, make_test_client, source_config

NOW_MS = int(time.time() * 1000)


@pytest.fixture
def keys() -> list[SessionKey]:
    return [SessionKey.generate(), SessionKey.generate()]  # current, previous


@pytest.fixture
def herder(keys: list[SessionKey]) -> FakeHerder:
    herder = FakeHerder(keys=keys)
    herder.put_connector_config("c", {**source_config(**{"tasks.max": "2"}), "name": "c"}, False)
    herder.calls.clear()
    return herder


@pytest.fixture
def client(herder: FakeHerder) -> Any:
    return make_test_client(create_app(herder, basic_auth="admin:secret"))


def signed_put(client: Any, key: SessionKey | bytes, path: str, body: Any = None, **sign: Any) -> Any:
    content = b"" if body is None else json.dumps(body).encode()
    headers = sign_request(key, "PUT", sign.pop("signed_path", path), content, **sign)
    if content:
        headers["Content-Type"] = "application/json"
    return client.put(path, content=content, headers=headers)


def test_fence_signed_with_current_key_is_204(
    client: Any, herder: FakeHerder, keys: list[SessionKey]
) -> None:
    response = signed_put(client, keys[0], "/connectors/c/fence")
    assert response.status_code == 204
    assert herder.calls == [("fence_zombies", ("c",))]


def test_fence_passes_the_tasks_generation_and_rejects_a_bad_body(
    client: Any, herder: FakeHerder, keys: list[SessionKey]
) -> None:
    assert signed_put(client, keys[0], "/connectors/c/fence", {"generation": 3}).status_code == 204
    assert herder.calls == [("fence_zombies", ("c", 3))]
    response = signed_put(client, keys[0], "/connectors/c/fence", {"generation": "three"})
    assert response.status_code == 400
    assert "generation" in response.json()["message"]


def test_fence_signed_with_previous_key_is_accepted(
    client: Any, herder: FakeHerder, keys: list[SessionKey]
) -> None:
    assert signed_put(client, keys[1], "/connectors/c/fence").status_code == 204


def assert_forbidden(response: Any, herder: FakeHerder, fragment: str, status: int = 403) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error_code"] == status
    assert fragment in body["message"]
    assert not any(c[0] == "fence_zombies" for c in herder.calls)


def test_fence_unsigned_is_400_as_in_kafka_connect(client: Any, herder: FakeHerder) -> None:
    assert_forbidden(client.put("/connectors/c/fence"), herder, "not signed", status=400)


def test_fence_signed_with_unknown_key_is_403(client: Any, herder: FakeHerder) -> None:
    assert_forbidden(
        signed_put(client, SessionKey.generate(), "/connectors/c/fence"), herder, "wrong signature"
    )


def test_fence_signature_for_another_connector_is_403(
    client: Any, herder: FakeHerder, keys: list[SessionKey]
) -> None:
    response = signed_put(client, keys[0], "/connectors/c/fence", signed_path="/connectors/other/fence")
    assert_forbidden(response, herder, "wrong signature")


def test_fence_expired_signature_is_403(client: Any, herder: FakeHerder, keys: list[SessionKey]) -> None:
    response = signed_put(client, keys[0], "/connectors/c/fence", now_ms=NOW_MS - 10 * 60 * 1000)
    assert_forbidden(response, herder, "ago")


def test_fence_tampered_signature_is_403(client: Any, herder: FakeHerder, keys: list[SessionKey]) -> None:
    headers = sign_request(keys[0], "PUT", "/connectors/c/fence", b"")
    headers["X-Connect-Authorization"] = "AAAA" + headers["X-Connect-Authorization"][4:]
    assert_forbidden(client.put("/connectors/c/fence", headers=headers), herder, "wrong signature")
    headers["X-Connect-Authorization"] = "not base64!"
    assert_forbidden(client.put("/connectors/c/fence", headers=headers), herder, "malformed")


def test_fence_without_any_key_is_403(herder: FakeHerder) -> None:
    herder.keys = []
    client = make_test_client(create_app(herder))
    response = signed_put(client, SessionKey.generate(), "/connectors/c/fence")
    assert_forbidden(response, herder, "no session key")


def test_fence_unknown_connector_is_404_when_signed(client: Any, keys: list[SessionKey]) -> None:
    response = signed_put(client, keys[0], "/connectors/missing/fence")
    assert response.status_code == 404


def test_internal_endpoints_need_no_basic_auth_but_public_ones_do(
    client: Any, keys: list[SessionKey]
) -> None:
    assert client.get("/connectors").status_code == 401
    assert signed_put(client, keys[0], "/connectors/c/fence").status_code == 204


def heartbeat(
    client: Any, key: SessionKey, task: int = 0, generation: int = 1, state: str = "RUNNING", **extra: Any
) -> Any:
    body = {"generation": generation, "state": state, "metrics": {"connector": "c", "task": task}, **extra}
    return signed_put(client, key, f"/connectors/c/tasks/{task}/heartbeat", body)


def test_heartbeat_returns_directive(client: Any, herder: FakeHerder, keys: list[SessionKey]) -> None:
    response = heartbeat(client, keys[0], metrics_extra=1)
    assert response.status_code == 200
    assert response.json() == {"directive": "run"}
    name, args = herder.calls[-1]
    assert name == "task_heartbeat"
    assert args[:3] == ("c", 0, 1)
    assert args[3]["state"] == "RUNNING"
    assert args[3]["metrics"] == {"connector": "c", "task": 0}
    assert args[3]["metrics_extra"] == 1, "unknown report fields reach the herder"

    herder.pause_connector("c")
    assert heartbeat(client, keys[0]).json() == {"directive": "pause"}
    herder.stop_connector("c")
    assert heartbeat(client, keys[0]).json() == {"directive": "stop"}


def test_heartbeat_of_an_old_generation_is_told_to_stop(
    client: Any, herder: FakeHerder, keys: list[SessionKey]
) -> None:
    herder.put_connector_config("c", herder.configs["c"], True)  # generation 2
    assert heartbeat(client, keys[0], generation=1).json() == {"directive": "stop"}


def test_heartbeat_unsigned_is_refused_before_its_body_is_read(client: Any, herder: FakeHerder) -> None:
    response = client.put(
        "/connectors/c/tasks/0/heartbeat", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    assert "not signed" in response.json()["message"]
    assert not any(c[0] == "task_heartbeat" for c in herder.calls)


def test_heartbeat_bad_body_is_400_when_signed(client: Any, keys: list[SessionKey]) -> None:
    response = signed_put(client, keys[0], "/connectors/c/tasks/0/heartbeat", {"state": "RUNNING"})
    assert response.status_code == 400
    assert "generation" in response.json()["message"]
    key = keys[0]
    headers = sign_request(key, "PUT", "/connectors/c/tasks/0/heartbeat", b"{oops")
    headers["Content-Type"] = "application/json"
    response = client.put("/connectors/c/tasks/0/heartbeat", content=b"{oops", headers=headers)
    assert response.status_code == 400
    assert "Malformed JSON" in response.json()["message"]


def test_heartbeat_body_is_bound_by_the_signature(client: Any, keys: list[SessionKey]) -> None:
    body = json.dumps({"generation": 1, "state": "RUNNING"}).encode()
    headers = sign_request(keys[0], "PUT", "/connectors/c/tasks/0/heartbeat", body)
    headers["Content-Type"] = "application/json"
    tampered = body.replace(b"RUNNING", b"FAILED!")
    response = client.put("/connectors/c/tasks/0/heartbeat", content=tampered, headers=headers)
    assert response.status_code == 403
