"""How a running task learns that it must pause or stop.

Spark has no channel from the driver to a running task, so the task asks (docs/architecture.md).
`TaskControl` is that question; the worker answers it over its internal REST endpoint, tests and
single-process runs answer it with a file, which every local Spark executor can see. The worker's
control is also the `CurrentInstance` a transactional task asks whether it may renew its producer.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from eosconnect.runtime.metrics import TaskMetrics

#: How often a paused task looks at a control that cannot wake it (a file).
PAUSE_POLL_S = 0.1


class Directive(StrEnum):
    RUN = "run"
    PAUSE = "pause"
    STOP = "stop"


class CurrentInstance(Protocol):
    """The leader's word on whether this task instance is the task's current one.

    Only the leader can tell: a transactional task asks before it renews its producer in place
    (`init_transactions()` again fences every other instance of the task, so a replaced instance
    must not), and when it was fenced (replaced by design, or fenced by a zombie while current)."""

    def confirmed_current(self) -> bool:
        """True once the leader answers that this instance is still the task's current one."""
        ...

    def superseded(self) -> bool:
        """True once the leader answers that a newer instance replaced this one (it waits a while
        for a newer instance to report)."""
        ...


class TaskControl(ABC):
    """How a running task learns that it must pause or stop, and what it tells back.

    `directive()` is the one question every control answers. The rest default to a control with no
    worker behind it (a file, a test's script): a paused task sleeps `PAUSE_POLL_S` at a time,
    nothing is reported, and there is no leader to ask (`leader` is None), so a transactional
    task never renews its producer in place and a fenced one fails."""

    #: This launch of the task, as the leader names it ("": the task's own name is used).
    instance: str = ""

    @abstractmethod
    def directive(self) -> Directive:
        """What the task should do now; called between polls, so it must be cheap."""

    @property
    def leader(self) -> CurrentInstance | None:
        """Whom a transactional task asks whether it is the task's current instance; None: nobody."""
        return None

    def wait_while_paused(self, timeout_s: float) -> None:
        """A paused task's turn of its loop: back as soon as the directive is anything but PAUSE, or
        after `timeout_s`. A control whose directive arrives on another thread (the worker's) wakes
        the task on the change; this one is slept on for at most `PAUSE_POLL_S` a turn."""
        time.sleep(min(timeout_s, PAUSE_POLL_S))

    def confirm_paused(self) -> None:  # noqa: B027 - nothing to tell without a worker
        """The task acted on PAUSE: a control that reports the task's state (the worker's) publishes
        PAUSED only once nothing the task did before the pause is still to commit."""

    def attach(self, metrics: TaskMetrics) -> None:  # noqa: B027 - nothing to carry without a worker
        """The task's metrics, for a control whose heartbeat carries them to the worker."""

    def report_outcome(self, state: str, trace: str | None) -> None:  # noqa: B027 - nobody to tell
        """How the task ended, for a control that reports it to the worker."""


@dataclass
class FileTaskControl(TaskControl):
    """`RUN` until `path` holds `pause` or `stop`; re-read at most every `check_interval_s`."""

    path: str
    check_interval_s: float = 0.05
    _last_check: float = field(default=0.0, repr=False)
    _last: Directive = field(default=Directive.RUN, repr=False)

    def directive(self) -> Directive:
        now = time.monotonic()
        if now - self._last_check >= self.check_interval_s:
            self._last_check = now
            try:
                text = Path(self.path).read_text().strip().lower()
            except OSError:
                text = ""
            self._last = Directive(text) if text in Directive._value2member_map_ else Directive.RUN
        return self._last

    def set(self, directive: Directive) -> None:
        """Driver side: tell every task sharing this file what to do."""
        Path(self.path).write_text(directive.value)


class LocalTaskControl(TaskControl):
    """The directive of a task run in the worker's own process (the standalone worker): set by the
    herder's thread, read by the task's, with no channel in between. A paused task waits on the
    change rather than polling, and `paused` says when it has acted on the pause."""

    def __init__(self) -> None:
        self._directive = Directive.RUN
        self._changed = threading.Condition()
        self.paused = threading.Event()

    def directive(self) -> Directive:
        return self._directive

    def set(self, directive: Directive) -> None:
        with self._changed:
            if directive is not Directive.PAUSE:
                self.paused.clear()
            self._directive = directive
            self._changed.notify_all()

    def wait_while_paused(self, timeout_s: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self._directive is not Directive.PAUSE, timeout_s)

    def confirm_paused(self) -> None:
        if self._directive is Directive.PAUSE:
            self.paused.set()
