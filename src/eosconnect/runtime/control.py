"""How a running task learns that it must pause or stop.

Spark has no channel from the driver to a running task, so the task asks (docs/architecture.md).
`TaskControl` is that question; the worker answers it over its internal REST endpoint, tests and
single-process runs answer it with a file, which every local Spark executor can see.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Protocol, runtime_checkable

#: How often a paused task looks at a control that cannot wake it (a file).
PAUSE_POLL_S = 0.1


class Directive(StrEnum):
    RUN = "run"
    PAUSE = "pause"
    STOP = "stop"


@runtime_checkable
class TaskControl(Protocol):
    def directive(self) -> Directive:
        """What the task should do now; called between polls, so it must be cheap."""
        ...


def wait_while_paused(control: TaskControl, timeout_s: float) -> None:
    """A paused task's turn of its loop: back as soon as the directive is no longer PAUSE, or after
    `timeout_s`. A control whose directive arrives on another thread (the worker's) wakes the task on
    the change; others are slept on for at most `PAUSE_POLL_S` a turn. Waking a paused task ten times a
    second cost a fleet of paused connectors nearly what the same fleet cost running idle."""
    wait = getattr(control, "wait_while_paused", None)
    if wait is not None:
        wait(timeout_s)
    else:
        time.sleep(min(timeout_s, PAUSE_POLL_S))


def confirm_paused(control: TaskControl) -> None:
    """The task acted on PAUSE: tell a control that reports the task's state (the worker's), so
    that PAUSED is published only once nothing the task did before the pause is still to commit."""
    confirm = getattr(control, "confirm_paused", None)
    if confirm is not None:
        confirm()


@dataclass
class FileTaskControl:
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


class LocalTaskControl:
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
