"""A slot host's heartbeat leaves out the metrics of a task whose counters did not move, and the
leader keeps the last ones it heard: an idle fleet's hosts spent most of their CPU, and the leader
much of its own, encoding, signing and reading the same metrics twice a second."""

from __future__ import annotations

import pytest

from eosconnect.cluster import host_channel
from eosconnect.cluster.host_channel import HostedTaskControl
from eosconnect.runtime.metrics import TaskMetrics
from support.leader_state import Leader


def control_with_metrics() -> tuple[HostedTaskControl, TaskMetrics]:
    control = HostedTaskControl("http://127.0.0.1:9", {}, "c", 0, 3, instance="i-1")
    metrics = TaskMetrics("c", 0)
    control.attach(metrics)
    return control, metrics


def test_unchanged_metrics_are_left_out_until_they_move_or_the_refresh_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    control, metrics = control_with_metrics()
    first = control.heartbeat_body()
    assert first["metrics"]["source-record-poll-total"] == 0, "a new instance's first beat carries them"
    second = control.heartbeat_body()
    assert "metrics" not in second and second["state"] == "RUNNING" and second["instance"] == "i-1"
    metrics.record_poll(7)
    assert control.heartbeat_body()["metrics"]["source-record-poll-total"] == 7
    assert "metrics" not in control.heartbeat_body()
    monkeypatch.setattr(host_channel, "METRICS_REFRESH_S", 0.0)
    assert control.heartbeat_body()["metrics"]["source-record-poll-total"] == 7, "the refresh"


def test_the_leader_keeps_the_last_metrics_when_a_beat_leaves_them_out() -> None:
    leader = Leader()
    leader.beat(0, metrics={"source-record-poll-total": 7})
    leader.beat(0)
    assert leader._tasks[("c", 0)].metrics == {"source-record-poll-total": 7}
    leader.beat(0, metrics={"source-record-poll-total": 9})
    assert leader._tasks[("c", 0)].metrics == {"source-record-poll-total": 9}
