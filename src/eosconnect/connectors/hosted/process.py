"""`ProtocolProcess`: one run of a hosted source program, its stdout read line by line.

The program writes one JSON message per line on stdout. A reader thread hands lines to the task
through a bounded queue: when the task falls behind, the thread blocks, the pipe fills, and the
program blocks in its own write, so a fast source never fills the worker's memory. Stderr goes to
the worker log (naming the connector and task) and its last lines are kept for the error of a
program that dies.

The program dies with the thread that started it (Linux's parent-death signal): when the task's
Python worker is SIGKILLed, nothing is left reading the source on the worker's behalf, and a source
that went on would hold its API's rate limit, a database slot or a lock against the task's next
instance. Elsewhere the program is only ended by `stop()`.
"""

from __future__ import annotations

import collections
import contextlib
import ctypes
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import IO, Any

from eosconnect.api.errors import ConnectException

__all__ = ["LINE_PREVIEW_CHARS", "EndOfOutput", "ProtocolProcess", "preview"]

#: How much of a bad line an error shows: enough to recognise it, not a megabyte record.
LINE_PREVIEW_CHARS = 200
#: Lines read ahead of the task at most (the backpressure bound).
QUEUE_LINES = 1000
#: Stderr lines kept for the error of a crashed program.
STDERR_TAIL_LINES = 20
#: How long a stop waits for the program after SIGTERM before SIGKILL.
STOP_GRACE_S = 5.0

#: prctl option: the signal the kernel sends the child when the thread that forked it exits.
PR_SET_PDEATHSIG = 1

log = logging.getLogger(__name__)


def _load_prctl() -> Any:
    """libc's prctl, resolved here in the parent: the child of a multithreaded process may only
    make async-signal-safe calls between fork and exec, and loading a library is not one."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


_PRCTL = _load_prctl()


def die_with_parent() -> None:
    """preexec_fn: SIGKILL for the child when the thread that started it (or its process) dies;
    nothing where the kernel has no parent-death signal."""
    if _PRCTL is not None:
        _PRCTL(PR_SET_PDEATHSIG, signal.SIGKILL)


def preview(line: str | bytes) -> str:
    text = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    text = text.rstrip("\n")
    if len(text) <= LINE_PREVIEW_CHARS:
        return text
    return text[:LINE_PREVIEW_CHARS] + f"... ({len(text)} characters)"


class EndOfOutput:
    """The program closed its stdout and exited with `returncode`."""

    def __init__(self, returncode: int) -> None:
        self.returncode = returncode


_EOF = object()


class ProtocolProcess:
    """Runs `argv` with stdout piped to a bounded line queue and stderr to the log.

    `next_line(timeout)` returns the next stdout line (str, newline stripped), None when none came
    within `timeout`, or an `EndOfOutput` once the program exited; a nonzero exit is raised as a
    `ConnectException` naming `what`, the exit code and the last stderr lines. `stop()` ends the
    program by its PID (its process group: a wrapper's children go too) and is safe to call twice.
    The program is SIGKILLed by the kernel when the thread that created this object exits (Linux):
    create it from the thread that reads it, the task's own, which outlives every sync it runs.
    """

    def __init__(
        self,
        argv: Sequence[str],
        what: str,
        logger: logging.Logger | logging.LoggerAdapter[logging.Logger],
        cwd: str | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.what = what
        self.log = logger
        self._lines: queue.Queue[object] = queue.Queue(QUEUE_LINES)
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL_LINES)
        self._stopping = threading.Event()
        self._ended: EndOfOutput | None = None
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        except OSError as exc:
            raise ConnectException(f"{what}: cannot run {self.argv[0]!r}: {exc}") from exc
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self.pid = self.proc.pid
        self._out = threading.Thread(
            target=self._read_stdout, args=(self.proc.stdout,), name=f"{what}-stdout", daemon=True
        )
        self._err = threading.Thread(
            target=self._read_stderr, args=(self.proc.stderr,), name=f"{what}-stderr", daemon=True
        )
        self._out.start()
        self._err.start()

    def _read_stdout(self, stream: IO[bytes]) -> None:
        try:
            for raw in stream:
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                while not self._stopping.is_set():
                    try:
                        self._lines.put(line, timeout=0.5)
                        break
                    except queue.Full:
                        continue
                if self._stopping.is_set():
                    return
        except (OSError, ValueError):
            pass  # closed by stop()
        finally:
            while not self._stopping.is_set():
                try:
                    self._lines.put(_EOF, timeout=0.5)
                    break
                except queue.Full:
                    continue

    def _read_stderr(self, stream: IO[bytes]) -> None:
        try:
            for raw in stream:
                line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
                if line:
                    self._stderr_tail.append(line)
                    self.log.info("%s stderr: %s", self.what, line)
        except (OSError, ValueError):
            pass

    def next_line(self, timeout: float) -> str | EndOfOutput | None:
        if self._ended is not None:
            return self._ended
        try:
            item = self._lines.get(timeout=timeout)
        except queue.Empty:
            return None
        if item is not _EOF:
            assert isinstance(item, str)
            return item
        try:
            code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.stop()
            raise ConnectException(
                f"{self.what} closed its output but did not exit within 30 s; it was stopped"
            ) from None
        self._err.join(timeout=5)
        if code != 0:
            raise ConnectException(self.crash_message(code))
        self._ended = EndOfOutput(code)
        return self._ended

    def crash_message(self, code: int) -> str:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        tail = "\n".join(self._stderr_tail)
        last = f"; its last stderr lines:\n{tail}" if tail else " (nothing on stderr)"
        return f"{self.what} ({self.argv[0]}) {how}{last}"

    def stderr_tail(self) -> list[str]:
        return list(self._stderr_tail)

    def stop(self) -> None:
        """SIGTERM to the program's process group, SIGKILL after `STOP_GRACE_S`."""
        self._stopping.set()
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_GRACE_S
            while self.proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            if self.proc.poll() is None:
                self._signal(signal.SIGKILL)
                self.proc.wait(timeout=10)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, sig)  # the session start made the program its group's leader
