"""Whether a process we started is still there, and whether a PID is one of our JVMs: the launchers
stop what they started by PID, so a stale PID (reused by the system for another process) must be
recognised before it is signalled."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["JVM_MARKER", "is_our_jvm", "pid_alive"]

#: Marks our JVMs on the command line so stale ones can be recognised safely.
JVM_MARKER = "-Deosconnect.devkafka=true"


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped) is not alive for our purposes.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return False
    return True


def is_our_jvm(pid: int, marker: str = JVM_MARKER) -> bool:
    """Whether `pid` is a JVM one of our launchers started (its command line holds `marker`)."""
    try:
        return marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
