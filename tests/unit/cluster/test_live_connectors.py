"""The leader's started connectors: their callbacks reach the herder, and they are stopped when
they fail, are replaced or are no longer wanted. No Kafka needed: the connector only watches a file."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.cluster.live_connectors import LiveConnectors
from eosconnect.runtime.task import TASK_CLASS_KEY


def config(watch: Path, tasks_max: int = 3) -> dict[str, str]:
    return {
        "name": "w",
        "connector.class": "support.connectors.WatchingSequenceConnector",
        "tasks.max": str(tasks_max),
        "topic": "t",
        "watch.file": str(watch),
    }


def eventually(check, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


@pytest.fixture
def woken() -> threading.Event:
    return threading.Event()


@pytest.fixture
def live_connectors(woken: threading.Event):
    connectors = LiveConnectors({"bootstrap.servers": "127.0.0.1:1"}, woken.set)
    yield connectors
    connectors.stop_all()


def test_a_request_for_task_configs_wakes_the_herder_once(live_connectors, woken, tmp_path: Path):
    watch = tmp_path / "watch"
    watch.write_text("tasks=1")
    live = live_connectors.start("w", config(watch))
    first = live_connectors.task_configs(live)
    assert [c["task.index"] for c in first] == ["0"]
    assert first[0][TASK_CLASS_KEY].endswith("SequenceSourceTask")
    assert not live_connectors.take_request(live)

    watch.write_text("tasks=2")
    assert eventually(woken.is_set), "the herder was not woken"
    assert live_connectors.take_request(live)
    assert not live_connectors.take_request(live), "one request is taken once"
    assert [c["task.index"] for c in live_connectors.task_configs(live)] == ["0", "1"]
    assert live.instance is not None and live.instance.context.client_config is not None


def test_an_error_is_kept_and_the_instance_stopped(live_connectors, woken, tmp_path: Path):
    watch = tmp_path / "watch"
    watch.write_text("tasks=1")
    live = live_connectors.start("w", config(watch))
    instance = live.instance
    watch.write_text("fail")
    assert eventually(lambda: live.error is not None)
    assert "the watched source is gone" in str(live.error)
    assert woken.is_set()

    live_connectors.fail(live)
    assert live.instance is None and live_connectors.get("w") is live, "failed, but still known"
    assert not instance._thread.is_alive(), "stop() was called"  # type: ignore[union-attr]


def test_replaced_and_unwanted_connectors_are_stopped(live_connectors, tmp_path: Path):
    watch = tmp_path / "watch"
    watch.write_text("tasks=1")
    old = live_connectors.start("w", config(watch))
    old_instance = old.instance
    new = live_connectors.start("w", config(watch, tasks_max=2))
    assert not old_instance._thread.is_alive() and old.instance is None  # type: ignore[union-attr]
    assert live_connectors.get("w") is new

    live_connectors.retain(["other"])
    assert live_connectors.get("w") is None and new.instance is None


def test_a_connector_that_cannot_start_leaves_nothing_behind(live_connectors, tmp_path: Path):
    with pytest.raises(ConfigException):
        live_connectors.start("w", {**config(tmp_path / "watch"), "connector.class": "NoSuchConnector"})
    assert live_connectors.get("w") is None
