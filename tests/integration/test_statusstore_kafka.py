"""The status store on a real broker."""

from __future__ import annotations

import json

import pytest

from eosconnect.storage.status_store import ConnectState, Status, StatusStore
from eosconnect.worker_config import WorkerConfig

pytestmark = pytest.mark.kafka


@pytest.fixture
def worker(worker_props, topic_name) -> WorkerConfig:
    return WorkerConfig.parse(
        worker_props(
            "disabled",
            status_storage_topic=topic_name("status"),
            status_storage_partitions="3",
            status_storage_replication_factor="1",
        )
    )


@pytest.fixture
def store(worker):
    s = StatusStore(worker, read_timeout_s=30)
    yield s
    s.close()


def test_round_trip(store, worker, admin, read_committed):
    assert store.start().connectors == {}
    assert len(admin.list_topics(store.topic, timeout=30).topics[store.topic].partitions) == 3

    running = Status(ConnectState.RUNNING, "w1:8083", 1)
    failed = Status(ConnectState.FAILED, "w2:8083", 2, "Traceback: boom")
    store.put_connector_status("c", running)
    for task in range(4):
        store.put_task_status("c", task, running)
    store.put_task_status("c", 3, failed)
    store.put_connector_status("gone", running)
    store.delete_connector_status("gone")

    other = StatusStore(worker)  # another worker reading from scratch
    try:
        for snap in (other.read_to_end(), store.read_to_end()):
            assert snap.connectors == {"c": running}
            assert snap.tasks_of("c") == {0: running, 1: running, 2: running, 3: failed}
    finally:
        other.close()

    raw = {r.key: r.value for r in read_committed(store.topic)}
    assert json.loads(raw[b"status-task-c-3"]) == {
        "state": "FAILED",
        "trace": "Traceback: boom",
        "worker_id": "w2:8083",
        "generation": 2,
    }
    assert raw[b"status-connector-gone"] is None


def test_incremental_and_safe_writes(store):
    store.start()
    newer = Status(ConnectState.RUNNING, "w2", 5)
    store.put_task_status("c", 0, newer)
    assert store.read_to_end().task("c", 0) == newer
    # A slow worker from an older generation must not overwrite the new owner's status.
    assert not store.put_task_status("c", 0, Status(ConnectState.FAILED, "w1", 4, "late"), safe=True)
    assert store.put_task_status("c", 0, Status(ConnectState.PAUSED, "w2", 5), safe=True)
    assert store.read_to_end().task("c", 0) == Status(ConnectState.PAUSED, "w2", 5)
    store.put_task_status("c", 0, Status(ConnectState.UNASSIGNED, "w1", 4))  # unsafe writes always land
    assert store.read_to_end().task("c", 0).state is ConnectState.UNASSIGNED
