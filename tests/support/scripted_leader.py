"""A source task run on a thread of the test's process, under a scripted control that answers as
the leader answers a task's current instance: for tests that need the task's own code paths (a
renewal in place, a resend) with real brokers and no worker around it."""

from __future__ import annotations

import threading

from eosconnect.runtime.control import Directive, TaskControl
from eosconnect.runtime.executor import run_source_task
from eosconnect.runtime.startup import LocalStartupCoordinator
from eosconnect.runtime.task import TASK_CLASS_KEY, TaskSpec

__all__ = ["ScriptedLeader", "source_task_thread"]


class ScriptedLeader(TaskControl):
    """The leader's answers to the task's current instance: run until told to stop, never
    superseded, always confirmed current. With `current_for`, the leader's word turns after that
    many questions (superseded, confirmed current): from then on it answers as to a replaced
    instance, the way a zombie renewing on an old word learns the truth at its next question.
    Counts the questions."""

    def __init__(self, current_for: int | None = None) -> None:
        self.stop = threading.Event()
        self.current_for = current_for
        self.asked_superseded = 0
        self.asked_current = 0

    def _still_current(self) -> bool:
        asked = self.asked_superseded + self.asked_current
        return self.current_for is None or asked <= self.current_for

    def directive(self) -> Directive:
        return Directive.STOP if self.stop.is_set() else Directive.RUN

    @property
    def leader(self) -> ScriptedLeader:
        return self

    def superseded(self, wait_s: float = 0.0) -> bool:
        self.asked_superseded += 1
        return not self._still_current()

    def confirmed_current(self) -> bool:
        self.asked_current += 1
        return self._still_current()


def source_task_thread(
    bootstrap: str,
    worker: dict[str, str],
    name: str,
    data: str,
    task_class: str,
    total: int,
    current_for: int | None = None,
    **settings: str,
) -> tuple[threading.Thread, ScriptedLeader, dict[str, object]]:
    """Task 0 of a SequenceSource connector writing `total` records to `data`, run in this process
    (not started), with a `ScriptedLeader(current_for)` control; its `TaskOutcome` lands in the
    dict's "result"."""
    connector = {
        "name": name,
        "connector.class": "SequenceSource",
        "topic": data,
        "records.per.task": str(total),
        "batch.size": "5",
        **settings,
    }
    task_config = {**connector, "task.index": "0", TASK_CLASS_KEY: task_class}
    control = ScriptedLeader(current_for)
    coordinator = LocalStartupCoordinator(
        worker["group.id"], {"bootstrap.servers": bootstrap}, 1, generation=0
    )
    spec = TaskSpec(name, 0, task_config, connector, worker, control, coordinator, generation=0)
    outcome: dict[str, object] = {}
    return threading.Thread(target=lambda: outcome.update(result=run_source_task(spec))), control, outcome
