"""Keep Python's cycle collector off the heap that exists when a task's loop starts.

A sink task keeps thousands of young objects alive at a time (a batch's records, the rows a
database sink buffers until its flush), so they survive the young generations and are promoted to
the oldest one; each time enough have been promoted, a full collection walks the whole heap:
modules, the SQL toolkit's metadata, the clients, everything the process loaded. In JdbcSink's
path (`bench/jdbc_sink_cpu.py`) that was about 4 of 14 CPU microseconds per row.

`gc.freeze()` moves every object tracked at that moment into a permanent generation that
collections skip (as CPython's docs suggest for long-running servers); the records created
afterwards are collected as usual, and reference counting frees everything. What is
frozen is given back to the collector (`gc.unfreeze()`) when the last task running in the
process leaves its loop, so cyclic garbage made of start-up objects is collected then.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["frozen_heap"]

_lock = threading.Lock()
#: Task loops running in this process inside `frozen_heap` (tasks may share a process).
_holders = 0


@contextmanager
def frozen_heap() -> Iterator[None]:
    """Freeze the heap for the duration (see the module doc); nested and concurrent uses count."""
    global _holders
    with _lock:
        _holders += 1
        gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.unfreeze()
