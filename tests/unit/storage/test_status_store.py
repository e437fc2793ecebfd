"""Status topic records → StatusSnapshot."""

from __future__ import annotations

import json

import pytest

from eosconnect.storage.status_store import ConnectState, Status, build_status_snapshot


def test_value_format_matches_kafka_connect() -> None:
    value = Status(ConnectState.FAILED, "w1:8083", 7, "Traceback ...").to_value()
    assert json.loads(value) == {
        "state": "FAILED",
        "trace": "Traceback ...",
        "worker_id": "w1:8083",
        "generation": 7,
    }
    assert Status.from_value(value) == Status(ConnectState.FAILED, "w1:8083", 7, "Traceback ...")
    assert json.loads(Status(ConnectState.RUNNING, "w").to_value())["trace"] is None


def test_latest_per_key_and_tombstones() -> None:
    running = Status(ConnectState.RUNNING, "w1", 1).to_value()
    failed = Status(ConnectState.FAILED, "w2", 2, "boom").to_value()
    snap = build_status_snapshot(
        [
            ("status-connector-c", running),
            ("status-task-c-0", running),
            ("status-task-c-1", running),
            ("status-task-c-1", failed),
            ("status-task-my-conn-0", running),
            ("status-connector-d", running),
            ("status-connector-d", None),
        ]
    )
    assert snap.connector("c") == Status(ConnectState.RUNNING, "w1", 1)
    assert snap.connector("d") is None
    assert snap.tasks_of("c") == {
        0: Status(ConnectState.RUNNING, "w1", 1),
        1: Status(ConnectState.FAILED, "w2", 2, "boom"),
    }
    assert snap.task("my-conn", 0) is not None


@pytest.mark.parametrize(
    "record",
    [
        ("status-connector-c", b"nope"),
        ("status-connector-c", b'{"state": "DANCING", "worker_id": "w", "generation": 1}'),
        ("status-connector-c", b'{"state": "RUNNING", "generation": 1}'),
        ("status-task-c-x", Status(ConnectState.RUNNING, "w").to_value()),
        ("other", b"{}"),
        (None, b"{}"),
    ],
)
def test_garbage_skipped(record: tuple[str | None, bytes]) -> None:
    snap = build_status_snapshot(
        [record, ("status-connector-ok", Status(ConnectState.RUNNING, "w").to_value())]
    )
    assert snap.skipped == 1
    assert snap.connector("ok") is not None and snap.connector("c") is None


def test_topic_usage_records_ignored() -> None:
    snap = build_status_snapshot([("status-topic-t:connector-c", b'{"topic": {}}')])
    assert snap.skipped == 0
