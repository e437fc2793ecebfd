"""Held answers to slot hosts (cluster/host_channel.py): a steady host asks the leader to hold its
answer while there is nothing new for it, and anything new - a directive, a task to start, the
host's end - is answered at once; a host whose tasks just changed does not ask for a hold.

The leader is the real REST app served by uvicorn on loopback (rest/routes_internal.py, where the
hold lives) over an in-memory herder whose answers the test changes; the host side is the real
`RestHostChannel` with real task controls, the session key handed to it directly."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from eosconnect.cluster import host_channel
from eosconnect.cluster.host_channel import (
    HOLD_RECHECK_S,
    HOLD_S,
    HOLD_SHARE,
    SETTLE_S,
    RestHostChannel,
    spec_from_json,
)
from eosconnect.cluster.task_channel import sign_request
from eosconnect.rest import create_app
from eosconnect.runtime.control import Directive
from eosconnect.storage.session_key import SessionKey
from support.fake_herder import FakeHerder, served


class HostLeader(FakeHerder):
    """Answers slot hosts: every task the directive `directive`, `start` to start."""

    def __init__(self, key: SessionKey) -> None:
        super().__init__(keys=[key])
        self.directive = "run"
        self.start: list[dict[str, Any]] = []
        self.recorded: list[dict[str, Any]] = []
        self.looked_again = 0

    def host_heartbeat(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        self.recorded.append(dict(report))
        return self._answer(report)

    def host_answer(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        self.looked_again += 1
        return self._answer(report)

    def _answer(self, report: Mapping[str, Any]) -> dict[str, Any]:
        tasks = report.get("tasks") or []
        return {
            "start": list(self.start),
            "stop": False,
            "directives": {b["instance"]: self.directive for b in tasks},
        }


class _SessionKeyOf:
    def __init__(self, key: SessionKey) -> None:
        self.key = key

    def session_key(self, refresh: bool = False) -> SessionKey:
        return self.key


def _put(url: str, key: SessionKey, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    import json

    import httpx

    path = "/internal/hosts/h1/heartbeat"
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **sign_request(key, "PUT", path, payload)}
    started = time.monotonic()
    response = httpx.put(url + path, content=payload, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    return response.json(), time.monotonic() - started


def _beat(directive: str = "run") -> dict[str, Any]:
    return {
        "connector": "c",
        "task": 0,
        "generation": 1,
        "instance": "i1",
        "state": "RUNNING",
        "directive": directive,
    }


def test_a_steady_host_is_answered_after_the_hold_having_been_recorded_once() -> None:
    key = SessionKey.generate()
    leader = HostLeader(key)
    with served(create_app(leader)) as server:
        answer, took = _put(server.url, key, {"hold_s": HOLD_S, "tasks": [_beat()]})
    assert answer["directives"] == {"i1": "run"}
    assert HOLD_S - HOLD_RECHECK_S <= took < HOLD_S + 1.0
    assert len(leader.recorded) == 1, "the beats are recorded once, on arrival"
    assert leader.looked_again >= 4


def test_news_ends_the_hold_at_once() -> None:
    key = SessionKey.generate()
    leader = HostLeader(key)
    with served(create_app(leader)) as server:
        threading.Timer(0.3, lambda: setattr(leader, "directive", "pause")).start()
        answer, took = _put(server.url, key, {"hold_s": HOLD_S, "tasks": [_beat()]})
        assert answer["directives"] == {"i1": "pause"}
        assert took < 0.3 + 2 * HOLD_RECHECK_S + 0.3

        leader.directive = "run"
        threading.Timer(0.3, lambda: leader.start.append({"connector": "d"})).start()
        answer, took = _put(server.url, key, {"hold_s": HOLD_S, "tasks": [_beat()]})
        assert answer["start"] == [{"connector": "d"}]
        assert took < 0.3 + 2 * HOLD_RECHECK_S + 0.3


def test_no_hold_unless_asked_and_never_past_the_longest() -> None:
    key = SessionKey.generate()
    leader = HostLeader(key)
    with served(create_app(leader)) as server:
        _answer, took = _put(server.url, key, {"tasks": [_beat()]})
        assert took < HOLD_RECHECK_S
        _answer, took = _put(server.url, key, {"hold_s": 60, "tasks": [_beat()]})
        assert took < HOLD_S + 1.0
        # a directive other than the one the task holds is news: no hold
        _answer, took = _put(server.url, key, {"hold_s": HOLD_S, "tasks": [_beat("pause")]})
        assert took < HOLD_RECHECK_S


@pytest.fixture
def signed_with(monkeypatch: pytest.MonkeyPatch) -> Any:
    def use(key: SessionKey) -> None:
        monkeypatch.setattr(host_channel, "_ConfigTopicAccess", lambda _props: _SessionKeyOf(key))

    return use


def test_the_host_asks_for_a_hold_once_settled_and_hears_a_pause_at_once(signed_with: Any) -> None:
    key = SessionKey.generate()
    signed_with(key)
    leader = HostLeader(key)
    props = {"bootstrap.servers": "127.0.0.1:1"}
    with served(create_app(leader)) as server:
        spec = spec_from_json(
            {
                "connector": "c",
                "task": 0,
                "generation": 1,
                "instance": "i1",
                "task_config": {},
                "connector_config": {},
            },
            server.url,
            props,
        )
        channel = RestHostChannel(server.url, props, "h1")
        began = time.monotonic()
        while time.monotonic() - began < SETTLE_S + 0.5:
            assert channel.poll([spec]) is not None
        holds = [r["hold_s"] for r in leader.recorded]
        assert holds[0] == 0.0, "a host whose tasks just started asks without a hold"
        assert holds[-1] == HOLD_S, f"settled after {SETTLE_S} s: {holds}"
        assert all(b["directive"] == "run" for r in leader.recorded for b in r["tasks"])
        asked = time.monotonic()
        answer = channel.poll([spec])
        assert answer is not None and answer.held, "held to the end with nothing new: ask again at once"
        assert time.monotonic() - asked >= HOLD_S - HOLD_RECHECK_S

        threading.Timer(0.3, lambda: setattr(leader, "directive", "pause")).start()
        asked = time.monotonic()
        assert channel.poll([spec]) is not None
        assert time.monotonic() - asked < 0.3 + 2 * HOLD_RECHECK_S + 0.3
        assert spec.control.directive() is Directive.PAUSE  # type: ignore[union-attr]
        channel.poll([spec])
        assert leader.recorded[-1]["hold_s"] == 0.0, (
            "news: the host asks without a hold until it settles again"
        )


def test_the_hold_stays_well_inside_the_heartbeat_timeout() -> None:
    """A held request refreshes no task's last heartbeat: a worker that declares its tasks silent
    after 3 s gets holds of 1.2 s, not 2."""
    short = RestHostChannel("http://127.0.0.1:1", {"task.heartbeat.timeout.ms": "3000"}, "h1")
    assert short.hold_s() == pytest.approx(HOLD_SHARE * 3.0)
    assert RestHostChannel("http://127.0.0.1:1", {}, "h1").hold_s() == HOLD_S
