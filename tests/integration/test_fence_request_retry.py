"""A starting exactly-once task's fencing request (PUT /connectors/<c>/fence, signed) waits out a
group with no leader to serve it - the 409 "retry in a few seconds" a worker answers while its
leader rejoins the group - instead of failing the task; any other refusal still fails it at once.

The worker is the real REST app served by uvicorn on loopback, over an in-memory herder; the session
key the task would read from the config topic is handed to it directly."""

from __future__ import annotations

import threading
import time

import pytest

from eosconnect.cluster.task_channel import FENCE_RETRY_S, FencingRequestError, RestStartupCoordinator
from eosconnect.rest import create_app
from eosconnect.storage.session_key import SessionKey
from support.fake_herder import FakeHerder, served, source_config


class _SessionKeyOf:
    """Stands in for the task's config-topic reader: only its session key is used here."""

    def __init__(self, key: SessionKey) -> None:
        self.key = key

    def session_key(self, refresh: bool = False) -> SessionKey:
        return self.key


def _coordinator(url: str, key: SessionKey, timeout_s: float) -> RestStartupCoordinator:
    coordinator = RestStartupCoordinator(
        url, {"bootstrap.servers": "127.0.0.1:1"}, request_timeout_s=timeout_s
    )
    coordinator.access = _SessionKeyOf(key)  # type: ignore[assignment]
    return coordinator


def _herder_without_leader(key: SessionKey) -> FakeHerder:
    herder = FakeHerder(leader=False, leader_url_value=None, keys=[key])
    herder.configs["c"] = source_config()
    return herder


def test_fencing_waits_while_the_group_has_no_leader() -> None:
    key = SessionKey.generate()
    herder = _herder_without_leader(key)
    with served(create_app(herder)) as server:
        elected = threading.Timer(2.5 * FENCE_RETRY_S, lambda: setattr(herder, "leader", True))
        elected.start()
        started = time.monotonic()
        try:
            _coordinator(server.url, key, timeout_s=30).fence_zombies("c", 3)
        finally:
            elected.cancel()
        waited = time.monotonic() - started
    assert herder.calls == [("fence_zombies", ("c", 3))], "fenced once, by the leader once there was one"
    assert waited >= 2.5 * FENCE_RETRY_S


def test_fencing_gives_up_after_its_timeout_with_the_leaders_answer() -> None:
    key = SessionKey.generate()
    herder = _herder_without_leader(key)
    with served(create_app(herder)) as server, pytest.raises(FencingRequestError) as failed:
        _coordinator(server.url, key, timeout_s=2.5 * FENCE_RETRY_S).fence_zombies("c")
    assert "HTTP 409" in str(failed.value) and "no leader" in str(failed.value)
    assert herder.calls == []


def test_other_refusals_fail_at_once() -> None:
    key = SessionKey.generate()
    herder = FakeHerder(keys=[key])  # the leader, but the connector does not exist: 404
    with served(create_app(herder)) as server:
        started = time.monotonic()
        with pytest.raises(FencingRequestError, match="HTTP 404"):
            _coordinator(server.url, key, timeout_s=30).fence_zombies("missing")
        assert time.monotonic() - started < FENCE_RETRY_S
