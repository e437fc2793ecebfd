"""An executor process keeps one config store per worker group across the tasks it runs (so a reused
Spark Python worker reads only what is new), and only the most recently used few."""

from __future__ import annotations

import pytest

from eosconnect.cluster import task_channel
from eosconnect.cluster.task_channel import _ConfigTopicAccess, _process_store


@pytest.fixture(autouse=True)
def _no_stores_left_behind():
    task_channel._stores.clear()
    yield
    task_channel._stores.clear()


def _props(group: str) -> dict[str, str]:
    return {"bootstrap.servers": "127.0.0.1:1", "group.id": group}


def test_tasks_of_one_worker_group_share_the_process_store():
    first = _ConfigTopicAccess(_props("a")).store()
    assert _ConfigTopicAccess(dict(_props("a"))).store() is first
    assert _process_store(_props("b")) is not first


def test_the_least_recently_used_store_is_closed_beyond_the_limit(monkeypatch):
    closed: list[str] = []
    stores = {g: _process_store(_props(g)) for g in ("a", "b")}
    for group, store in stores.items():
        monkeypatch.setattr(store, "close", lambda group=group: closed.append(group))
    _process_store(_props("a"))  # a is now the most recently used
    _process_store(_props("c"))
    assert closed == ["b"]
    assert _process_store(_props("a")) is stores["a"]
    assert _process_store(_props("b")) is not stores["b"]  # a new one
