"""A starting exactly-once task's fencing request (PUT /connectors/<c>/fence, signed) waits out a
group with no leader to serve it - the 409 "retry in a few seconds" a worker answers while its
leader rejoins the group - and a request broken off mid-exchange, instead of failing the task; any
other refusal, and a worker that cannot be reached, still fail it at once.

The worker is the real REST app served by uvicorn on loopback, over an in-memory herder; the session
key the task would read from the config topic is handed to it directly."""

from __future__ import annotations

import contextlib
import socket
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


class _BreaksFirstConnection:
    """A loopback TCP relay to `target` that reads the first connection's request and closes it
    unanswered - a request broken off mid-exchange, as a reset keep-alive connection does - and
    relays every later connection both ways."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        self.target = (host, int(port))
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.broken = 0
        self._threads: list[threading.Thread] = []
        self._serving = threading.Thread(target=self._serve, daemon=True)
        self._serving.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            if self.broken == 0:
                self.broken += 1
                conn.recv(65536)
                conn.close()
                continue
            upstream = socket.create_connection(self.target)
            for a, b in ((conn, upstream), (upstream, conn)):
                thread = threading.Thread(target=self._pipe, args=(a, b), daemon=True)
                thread.start()
                self._threads.append(thread)

    @staticmethod
    def _pipe(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.listener.close()
        self._serving.join(5)
        for thread in self._threads:
            thread.join(5)


def test_a_request_broken_off_mid_exchange_is_asked_again_on_a_new_connection() -> None:
    key = SessionKey.generate()
    herder = FakeHerder(keys=[key])
    herder.configs["c"] = source_config()
    with served(create_app(herder)) as server:
        relay = _BreaksFirstConnection(server.url)
        try:
            _coordinator(relay.url, key, timeout_s=30).fence_zombies("c", 3)
        finally:
            relay.close()
    assert relay.broken == 1, "the first request was broken off"
    assert herder.calls == [("fence_zombies", ("c", 3))], "asked again, and fenced once"


def test_a_worker_that_cannot_be_reached_fails_at_once_naming_the_advertised_address() -> None:
    unused = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{unused.getsockname()[1]}"
    unused.close()  # nothing listens there: connection refused
    started = time.monotonic()
    with pytest.raises(FencingRequestError, match=r"rest\.advertised\.host\.name"):
        _coordinator(url, SessionKey.generate(), timeout_s=30).fence_zombies("c", 3)
    assert time.monotonic() - started < FENCE_RETRY_S
