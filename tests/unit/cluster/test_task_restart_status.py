"""A restarted task's status follows its new instance: RESTARTING until that instance reports, then
whatever it reports, also when it fails exactly as the instance before it did (a JdbcSink on a
topic with malformed JSON fails on its first record every time it runs)."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from eosconnect.cluster.generations import Generations
from eosconnect.cluster.herder_state import GenerationRun
from eosconnect.cluster.herder_writes import HerderWrites
from eosconnect.storage.config_state import ConfigSnapshot
from eosconnect.storage.status_store import ConnectState
from support.leader_state import Leader

TRACE = "Traceback (most recent call last):\n...\nDataException: malformed JSON"


class RestartingLeader(Leader, HerderWrites, Generations):
    """The leader of `Leader` with the REST restart and the relaunch bookkeeping; a relaunch only
    counts (no Spark job)."""

    def __init__(self) -> None:
        super().__init__()
        snapshot = ConfigSnapshot(
            connector_configs={"c": {"connector.class": "JdbcSink"}},
            task_counts={"c": 2},
            generations={"c": 3},
        )
        self.config_store = SimpleNamespace(snapshot=snapshot, read_to_end=lambda: snapshot)  # type: ignore[assignment]
        self.worker = SimpleNamespace(exactly_once_enabled=False)  # type: ignore[assignment]
        self._hosts = SimpleNamespace(ended=lambda instance: None)  # type: ignore[assignment]
        self._generated_from, self._connector_failures = {}, {}
        self._wakeup = threading.Event()
        self.relaunched: list[int] = []
        for t in range(2):
            self._put_task_status("c", t, ConnectState.RUNNING, 3)

    def _relaunch(self, name: str, run: GenerationRun, tasks: list[int], why: str) -> None:
        self.relaunched.extend(tasks)

    def connector_status(self, name: str) -> dict[str, Any]:
        return {
            "connector": {"state": "RUNNING"},
            "tasks": [{"id": t, "state": self.published(t).value} for t in range(2)],  # type: ignore[union-attr]
        }

    def trace(self, task: int) -> str | None:
        status = self.statuses.published("c", task)
        return status.trace if status is not None else None


def failed_once() -> RestartingLeader:
    leader = RestartingLeader()
    leader.beat(0, "FAILED", trace=TRACE, final=True)
    assert leader.published(0) is ConnectState.FAILED
    return leader


def test_a_task_that_fails_again_right_after_its_restart_is_failed_with_its_trace() -> None:
    leader = failed_once()
    leader.restart_task("c", 0)
    assert leader.published(0) is ConnectState.RESTARTING
    assert leader.relaunched == [0]
    leader.beat(0, "FAILED", trace=TRACE, final=True)  # no heartbeat before: it failed at once
    assert leader.published(0) is ConnectState.FAILED
    assert leader.trace(0) == TRACE


def test_restarting_only_failed_tasks_finds_it_again_every_time() -> None:
    leader = failed_once()
    for attempt in range(1, 7):
        answer = leader.restart_connector("c", include_tasks=True, only_failed=True)
        assert answer is not None and [t["state"] for t in answer["tasks"]] == ["RESTARTING", "RUNNING"]
        if attempt % 2:  # it may get a heartbeat in before it fails, or not
            leader.beat(0, "RUNNING")
        leader.beat(0, "FAILED", trace=TRACE, final=True)
        assert leader.published(0) is ConnectState.FAILED, f"restart {attempt}"
    assert leader.relaunched == [0] * 6


def test_a_running_task_stays_restarting_while_it_stops_and_runs_again() -> None:
    """Its last heartbeats and its final STOPPED come after the restart's RESTARTING: none of them
    replaces it before the new instance reports."""
    leader = RestartingLeader()
    leader.restart_task("c", 1)
    assert leader.published(1) is ConnectState.RESTARTING and leader.relaunched == []
    assert leader.beat(1) == "stop"
    leader.beat(1, "STOPPED", final=True)
    assert leader.published(1) is ConnectState.RESTARTING
    assert leader.relaunched == [1]
    leader.beat(1, "FAILED", trace=TRACE, final=True)
    assert leader.published(1) is ConnectState.FAILED
