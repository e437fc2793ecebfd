"""What the worker's processes need from the machine they run on: a cache directory, child
processes that die with their parent, and memory given back when a task leaves a process.

Both were first written for the development tools (devkafka), but the worker uses them as well:
the Spark application packs what executors need into the cache, and the MirrorMaker driver ties
the workers it spawns to itself. They live here so that no part of the worker imports a
development tool (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MemoryReturn", "cache_root", "die_with_parent", "give_back_memory", "resident_bytes"]


def cache_root() -> Path:
    """`EOSCONNECT_CACHE` wins; otherwise the XDG cache dir, never the repository."""
    if env := os.environ.get("EOSCONNECT_CACHE"):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eosconnect"


def die_with_parent() -> None:
    """preexec_fn: have the kernel SIGKILL the child when the spawning process dies (tests, demo).

    Linux sends the signal when the spawning *thread* exits: spawn from a thread that outlives the child.
    """
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def resident_bytes() -> int | None:
    """This process's resident set size (Linux /proc), None where it cannot be read."""
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def give_back_memory() -> int:
    """Collect cyclic garbage and have glibc return the free pages of its heaps to the kernel;
    returns the bytes the resident size dropped by (0 where it did not or cannot tell).

    Why: a Python worker outlives its tasks (a slot host runs many, one after another, and Spark
    pools the worker for the next host), but glibc keeps what a task freed in its arenas, one per
    thread that allocated (librdkafka's queues, a task's start-up reads): the tasks that ended and
    the tasks that started in a host of 28 left 44-76 MB free but resident in it (measured when a
    host ended), and 5-12 MB in a running one. `malloc_trim(0)` releases whole free pages of every
    arena; it takes the arenas' locks, so running tasks only wait for it.
    """
    before = resident_bytes()
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc: nothing to give back this way
        return 0
    after = resident_bytes()
    return max(before - after, 0) if before is not None and after is not None else 0


@dataclass
class MemoryReturn:
    """`give_back_memory` for a long-lived process: on demand (a task ended), and when it grew by
    `growth_bytes` since it last gave memory back, looked at no more often than every `check_s`."""

    check_s: float
    growth_bytes: int
    #: The resident size right after the last give-back, and when to look again.
    _settled_bytes: int = field(default_factory=lambda: resident_bytes() or 0)
    _next_check: float = field(default_factory=time.monotonic)

    def now(self) -> int:
        """Give back now; the bytes the resident size dropped by."""
        freed = give_back_memory()
        self._settled_bytes = resident_bytes() or 0
        return freed

    def if_grown(self) -> int:
        """Give back if grown (see the class); the bytes given back, 0 if it did not look or grow."""
        if time.monotonic() < self._next_check:
            return 0
        self._next_check = time.monotonic() + self.check_s
        if (resident_bytes() or 0) - self._settled_bytes < self.growth_bytes:
            return 0
        return self.now()
