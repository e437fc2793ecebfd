"""Held answers to slot hosts (cluster/host_channel.py): a steady host asks the leader to hold its
answer while there is nothing new for it, and anything new - a directive, a task to start, the
host's end - is answered at once; a host whose tasks just changed does not ask for a hold.

The leader is the real REST app served by uvicorn on loopback (rest/routes_internal.py, where the
hold lives) over an in-memory herder whose answers the test changes; the host side is the real
`RestHostChannel` with real task controls, the session key handed to it directly."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from eosconnect.cluster import host_channel
from eosconnect.cluster.herder_api import BadRequestError
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
    """Answers slot hosts: every task the directive `directive`, `start` to start (to the host
    `starts_on` only, when set); counts its looks again at held reports in `looks`."""

    def __init__(self, key: SessionKey) -> None:
        super().__init__(keys=[key])
        self.directive = "run"
        self.start: list[dict[str, Any]] = []
        self.starts_on: str | None = None
        self.recorded: list[dict[str, Any]] = []
        self.looks: list[tuple[float, str]] = []
        self.failing: set[str] = set()

    def host_heartbeat(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        self.recorded.append(dict(report))
        return self._answer(host_id, report)

    def host_answer(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        self.looks.append((time.monotonic(), host_id))
        if host_id in self.failing:
            raise BadRequestError(f"host {host_id} cannot be answered")
        return self._answer(host_id, report)

    def _answer(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        tasks = report.get("tasks") or []
        return {
            "start": list(self.start) if self.starts_on in (None, host_id) else [],
            "stop": False,
            "directives": {b["instance"]: self.directive for b in tasks},
        }


class _SessionKeyOf:
    def __init__(self, key: SessionKey) -> None:
        self.key = key

    def session_key(self, refresh: bool = False) -> SessionKey:
        return self.key


def _put(url: str, key: SessionKey, body: dict[str, Any]) -> tuple[dict[str, Any], float]:
    response, took = _put_as("h1", url, key, body)
    assert response.status_code == 200, response.text
    return response.json(), took


def _put_as(host: str, url: str, key: SessionKey, body: dict[str, Any]) -> tuple[httpx.Response, float]:
    path = f"/internal/hosts/{host}/heartbeat"
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **sign_request(key, "PUT", path, payload)}
    started = time.monotonic()
    response = httpx.put(url + path, content=payload, headers=headers, timeout=10)
    return response, time.monotonic() - started


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
    assert len(leader.looks) >= 4


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


def test_held_requests_of_many_hosts_are_looked_at_together() -> None:
    """Eight hosts held at once, arriving 30 ms apart: the leader looks at all of them in one go
    per `HOLD_RECHECK_S` (not each on its own clock, which made a look every 30 ms), one host whose
    answer fails gets its error while the others are held on, and news for one host ends that
    host's hold only."""
    key = SessionKey.generate()
    leader = HostLeader(key)
    leader.failing.add("h7")
    hosts = [f"h{i}" for i in range(8)]

    def put(host: str) -> tuple[httpx.Response, float]:
        body = {"hold_s": HOLD_S, "tasks": [{**_beat(), "instance": f"i-{host}"}]}
        return _put_as(host, server.url, key, body)

    with served(create_app(leader)) as server, ThreadPoolExecutor(len(hosts)) as pool:
        futures = {}
        for host in hosts:
            futures[host] = pool.submit(put, host)
            time.sleep(0.03)
        time.sleep(0.3)
        leader.starts_on, leader.start = "h3", [{"connector": "d"}]
        results = {host: future.result() for host, future in futures.items()}

    failed, failed_took = results["h7"]
    assert failed.status_code == 400 and "h7 cannot be answered" in failed.text
    assert failed_took < 3 * HOLD_RECHECK_S + 0.3, "the failing host is told at its first look"
    news, news_took = results["h3"]
    assert news.status_code == 200 and news.json()["start"] == [{"connector": "d"}]
    assert news_took < 0.5 + 2 * HOLD_RECHECK_S + 0.3
    for host in set(hosts) - {"h3", "h7"}:
        response, took = results[host]
        assert response.status_code == 200 and response.json()["start"] == []
        assert HOLD_S - HOLD_RECHECK_S <= took < HOLD_S + 1.0, host
    looks = sorted(t for t, _host in leader.looks)
    rounds = 1 + sum(1 for a, b in itertools.pairwise(looks) if b - a > 0.01)
    assert len(looks) >= 6 * 4, "every held host is looked at again each round"
    assert rounds <= HOLD_S / HOLD_RECHECK_S + 3, f"{len(looks)} looks in {rounds} rounds"


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
