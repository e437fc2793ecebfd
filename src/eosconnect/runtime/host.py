"""What the worker's processes need from the machine they run on: a cache directory, and child
processes that die with their parent.

Both were first written for the development tools (devkafka), but the worker uses them as well:
the Spark application packs what executors need into the cache, and the MirrorMaker driver ties
the workers it spawns to itself. They live here so that no part of the worker imports a
development tool (docs/architecture.md).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from pathlib import Path

__all__ = ["cache_root", "die_with_parent"]


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
