"""A task thread that does not come back to its loop: said once at WARN, with where it is.

Every task loop asks for its directive on each turn (`TaskControl.directive`). A thread that stops
asking is inside a call that does not return, and nothing else says so: a lone task's heartbeats
keep it RUNNING for the leader for `BLOCKED_BEAT_S` (cluster/task_channel.py), a packed task's for
as long as its slot host beats, and the only sign left is a connector whose output stopped (a
mirror can stop copying for minutes with no line in the log). The heartbeat side checks
the watch and names the call the thread is in; the next turn of the loop says it came back.

For what the watch cannot see (a loop that turns but does nothing, a process whose every thread
waits), `dump_stacks_on_sigusr1` lets an operator or a test ask any worker or task process for every
thread's stack: `kill -USR1 <pid>` writes them to its stderr, the worker's log.
"""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
import threading
import time
import traceback

__all__ = ["STUCK_WARN_S", "LoopWatch", "dump_stacks_on_sigusr1"]

log = logging.getLogger(__name__)

#: Longer than any call a healthy loop makes (a commit that waits out a dead broker takes up to a
#: minute), shorter than the 90 s after which a lone task's heartbeats stop.
STUCK_WARN_S = 60.0
#: Innermost frames shown: enough to see the library call and the runtime code that made it.
STACK_FRAMES = 12


def dump_stacks_on_sigusr1() -> None:
    """SIGUSR1 writes every thread's Python stack to stderr. faulthandler answers it in C, so it
    works even while a thread holds the GIL in a blocked call; it does not stop the process."""
    faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True)


class LoopWatch:
    """When the task thread last asked for its directive, and whether its absence was reported."""

    def __init__(self, task_id: str, warn_after_s: float = STUCK_WARN_S) -> None:
        self.task_id = task_id
        self.warn_after_s = warn_after_s
        #: monotonic time of the last question; 0.0 until the loop first asks
        self.last_asked = 0.0
        self._thread: int | None = None
        self._reported = False

    def asked(self) -> None:
        """Called by the task thread on every turn of its loop."""
        now = time.monotonic()
        if self._reported:
            self._reported = False
            log.info("[%s] back in its loop after %.0fs", self.task_id, now - self.last_asked)
        self.last_asked = now
        self._thread = threading.get_ident()

    def check(self) -> None:
        """Called from the heartbeat side: a WARN with the thread's stack once per absence."""
        if self._thread is None or self._reported:
            return
        away_s = time.monotonic() - self.last_asked
        if away_s < self.warn_after_s:
            return
        frame = sys._current_frames().get(self._thread)
        if frame is None:
            return  # the thread has ended; its outcome is reported elsewhere
        self._reported = True
        where = "".join(traceback.format_stack(frame)[-STACK_FRAMES:])
        log.warning(
            "[%s] has not come back to its loop for %.0fs (still RUNNING for the leader while its "
            "heartbeats go on); its thread is in:\n%s",
            self.task_id,
            away_s,
            where,
        )
