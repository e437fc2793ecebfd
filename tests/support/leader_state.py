"""A leader's heartbeat bookkeeping (cluster/task_health.py) without a worker: one running
generation of two tasks, statuses on a `StatusBoard` whose writer never starts."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from eosconnect.cluster.herder_state import GenerationRun, TaskRuntime
from eosconnect.cluster.status_board import StatusBoard
from eosconnect.cluster.task_health import TaskHealth
from eosconnect.storage.config_state import ConfigSnapshot
from eosconnect.storage.status_store import ConnectState


@dataclass
class Election:
    leader: bool = True
    doubt: bool = False

    @property
    def is_leader(self) -> bool:
        return self.leader and not self.doubt

    @property
    def in_doubt(self) -> bool:
        return self.leader and self.doubt


@dataclass
class ConfigStore:
    snapshot: ConfigSnapshot = field(default_factory=ConfigSnapshot)


class Leader(TaskHealth):
    """The heartbeat bookkeeping of a leader with one running generation of two tasks; statuses go
    to a real `StatusBoard` whose writer is never started (what it published is its overlay)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._runs = {"c": GenerationRun("c", 3, 2, job=None)}  # type: ignore[arg-type]  # no Spark job
        self._tasks = {("c", t): TaskRuntime(state="RUNNING", generation=3) for t in range(2)}
        self.election = Election()  # type: ignore[assignment]
        self.statuses = StatusBoard(store=None)  # type: ignore[arg-type]
        self.config_store = ConfigStore()  # type: ignore[assignment]
        self.worker_id = "w1"

    def beat(self, task: int, state: str = "RUNNING", **extra: Any) -> str:
        return self.task_heartbeat("c", task, 3, {"state": state, **extra})

    def published(self, task: int) -> ConnectState | None:
        status = self.statuses.published("c", task)
        return status.state if status is not None else None

    def silent(self, task: int) -> None:
        """What `_check_heartbeats` does to a task silent for `task.heartbeat.timeout.ms`."""
        self._tasks[("c", task)].state = "UNASSIGNED"
        self._put_task_status("c", task, ConnectState.UNASSIGNED, 3, "no heartbeat")
