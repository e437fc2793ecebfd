"""Forwarding to the leader: a follower app in-process, the leader served by uvicorn on loopback."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from eosconnect.devkafka.ports import free_port
from eosconnect.rest import create_app
from eosconnect.rest.forwarding import FORWARDED_HEADER
from eosconnect.storage.session_key import SessionKey, sign_request
from support.fake_herder import FakeHerder, make_test_client, served, source_config

AUTH = {"Authorization": "Basic " + base64.b64encode(b"admin:pw").decode()}


@pytest.fixture
def leader() -> FakeHerder:
    return FakeHerder(worker_id="leader:8083", keys=[SessionKey.generate()])


@pytest.fixture
def leader_url(leader: FakeHerder) -> Iterator[str]:
    with served(create_app(leader, basic_auth="admin:pw")) as server:
        leader.rest_url = server.url
        yield server.url


@pytest.fixture
def follower(leader: FakeHerder, leader_url: str) -> FakeHerder:
    return FakeHerder.follower_of(
        leader, leader_url, worker_id="follower:8083", rest_url="http://follower:8083"
    )


@pytest.fixture
def client(follower: FakeHerder) -> Any:
    return make_test_client(create_app(follower, basic_auth="admin:pw"), headers=AUTH)


def test_writes_are_forwarded_to_the_leader(client: Any, leader: FakeHerder, follower: FakeHerder) -> None:
    response = client.post("/connectors", json={"name": "c", "config": source_config(**{"tasks.max": 2})})
    assert response.status_code == 201, response.text
    assert response.headers["location"] == "/connectors/c"
    assert response.json()["name"] == "c"
    assert [c[0] for c in leader.calls] == ["put_connector_config"]
    assert follower.calls == []

    # reads are served locally; the shared state shows the leader's write
    assert client.get("/connectors").json() == ["c"]

    update = client.put("/connectors/c/config", json=source_config(**{"tasks.max": 3}))
    assert update.status_code == 200
    assert len(update.json()["tasks"]) == 3

    patch = client.patch("/connectors/c/config", json={"topic": "x"})
    assert patch.status_code == 200
    assert leader.configs["c"]["topic"] == "x"

    restart = client.post("/connectors/c/restart?includeTasks=true&onlyFailed=false")
    assert restart.status_code == 202
    assert leader.calls[-1] == ("restart_connector", ("c", True, False))

    assert client.put("/connectors/c/pause").status_code == 202
    assert client.put("/connectors/c/stop").status_code == 204
    offsets = client.patch(
        "/connectors/c/offsets", json={"offsets": [{"partition": {"p": 1}, "offset": {"o": 2}}]}
    )
    assert offsets.status_code == 200
    assert "altered" in offsets.json()["message"]
    assert client.delete("/connectors/c").status_code == 204
    assert leader.configs == {}


def test_leader_errors_are_relayed(client: Any, leader: FakeHerder) -> None:
    assert client.post("/connectors", json={"name": "c", "config": source_config()}).status_code == 201
    again = client.post("/connectors", json={"name": "c", "config": source_config()})
    assert again.status_code == 409
    assert again.json() == {"error_code": 409, "message": "Connector c already exists"}
    bad = client.put("/connectors/d/config", json=source_config(**{"tasks.max": "0"}))
    assert bad.status_code == 400
    assert "tasks.max" in bad.json()["message"]


def test_credentials_are_forwarded(follower: FakeHerder) -> None:
    # the follower accepts anything (no auth), the leader checks: the header must travel
    open_follower = make_test_client(create_app(follower))
    without = open_follower.post("/connectors", json={"name": "c", "config": source_config()})
    assert without.status_code == 401
    assert without.json()["error_code"] == 401
    with_auth = open_follower.post("/connectors", json={"name": "c", "config": source_config()}, headers=AUTH)
    assert with_auth.status_code == 201


def test_signed_fence_is_forwarded_with_its_signature(client: Any, leader: FakeHerder) -> None:
    leader.put_connector_config("c", {**source_config(), "name": "c"}, False)
    headers = sign_request(leader.keys[0], "PUT", "/connectors/c/fence", b"")
    response = client.put("/connectors/c/fence", headers=headers)
    assert response.status_code == 204, response.text
    assert leader.calls[-1] == ("fence_zombies", ("c",))
    unsigned = client.put("/connectors/c/fence")
    assert unsigned.status_code == 400  # as Kafka Connect: a missing signature is a bad request


def test_forwarded_request_is_the_same_request(follower: FakeHerder) -> None:
    """An echo 'leader' records what it receives: method, raw path, query, body, auth, hop count."""
    received: list[dict[str, Any]] = []

    async def echo(scope: Any, receive: Any, send: Any) -> None:
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        received.append(
            {
                "method": scope["method"],
                "raw_path": scope["raw_path"],
                "query": scope["query_string"],
                "body": body,
                "headers": {k.decode().lower(): v.decode() for k, v in scope["headers"]},
            }
        )
        payload = b'{"name": "echoed"}'
        await send(
            {
                "type": "http.response.start",
                "status": 201,
                "headers": [(b"content-type", b"application/json"), (b"location", b"/connectors/echoed")],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    with served(echo) as server:
        follower.leader_url_value = server.url
        client = make_test_client(create_app(follower))
        sent = {"a b": 1, "connector.class": "X"}
        response = client.put(
            "/connectors/we%20ird/config?forward=true&x=1",
            json=sent,
            headers={**AUTH, FORWARDED_HEADER: "1"},
        )
    assert response.status_code == 201
    assert response.json() == {"name": "echoed"}
    assert response.headers["location"] == "/connectors/echoed"
    [got] = received
    assert got["method"] == "PUT"
    assert got["raw_path"] == b"/connectors/we%20ird/config"
    assert got["query"] == b"forward=true&x=1"
    assert json.loads(got["body"]) == sent
    assert got["headers"]["authorization"] == AUTH["Authorization"]
    assert got["headers"]["content-type"] == "application/json"
    assert got["headers"][FORWARDED_HEADER.lower()] == "2"


def test_hop_limit_stops_a_forwarding_loop() -> None:
    a = FakeHerder(leader=False, rest_url="http://a")
    b = FakeHerder(leader=False, rest_url="http://b")
    with served(create_app(a)) as server_a, served(create_app(b)) as server_b:
        a.leader_url_value = server_b.url  # each believes the other is the leader
        b.leader_url_value = server_a.url
        client = make_test_client(create_app(FakeHerder(leader=False, leader_url_value=server_a.url)))
        response = client.post("/connectors", json={"name": "c", "config": source_config()})
    assert response.status_code == 409
    body = response.json()
    assert body["error_code"] == 409
    assert "forwarded 2 time(s)" in body["message"]


def test_forwarding_is_refused_past_the_limit_or_when_disabled(follower: FakeHerder) -> None:
    client = make_test_client(create_app(follower), headers=AUTH)
    over = client.post(
        "/connectors", json={"name": "c", "config": source_config()}, headers={FORWARDED_HEADER: "2"}
    )
    assert over.status_code == 409
    assert "not the leader" in over.json()["message"]
    disabled = client.post("/connectors?forward=false", json={"name": "c", "config": source_config()})
    assert disabled.status_code == 409
    assert "forward=false" in disabled.json()["message"]


def test_no_leader_is_409() -> None:
    client = make_test_client(create_app(FakeHerder(leader=False, leader_url_value=None)))
    response = client.put("/connectors/c/pause")
    assert response.status_code == 409
    assert "no leader" in response.json()["message"]


def test_leader_pointing_at_itself_is_409() -> None:
    herder = FakeHerder(leader=False, rest_url="http://me:8083", leader_url_value="http://me:8083/")
    response = make_test_client(create_app(herder)).put("/connectors/c/pause")
    assert response.status_code == 409
    message = response.json()["message"]
    assert "rejoining the group" in message and "retry in a few seconds" in message
    assert "not the leader; the leader is" not in message, "no self-contradiction"


def test_unreachable_leader_is_500() -> None:
    herder = FakeHerder(leader=False, leader_url_value=f"http://127.0.0.1:{free_port()}")
    client = make_test_client(create_app(herder, forward_timeout=5))
    response = client.post("/connectors", json={"name": "c", "config": source_config()})
    assert response.status_code == 500
    assert "IO Error trying to forward" in response.json()["message"]
    json.dumps(response.json())
