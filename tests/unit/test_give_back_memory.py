"""A Python worker gives back what a finished task freed (runtime/host.py give_back_memory).

Real glibc, real pages: a thread allocates 200 MB in 2 kB blocks (past pymalloc, into the thread's
own malloc arena, as librdkafka's queues and a busy task's records are) and frees all but one block
in 500, so no heap can shrink from its top by itself. Without `malloc_trim` the process keeps the
200 MB resident (checked when this test was written: 206 MB before and after a `gc.collect()`).
"""

from __future__ import annotations

import sys
import threading

import pytest

from eosconnect.runtime.host import give_back_memory, resident_bytes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc")


def test_freed_blocks_of_a_finished_thread_leave_the_resident_set() -> None:
    kept: list[bytes] = []

    def task() -> None:
        blocks = [bytes(2000) + bytes([i % 256]) for i in range(100_000)]
        kept.extend(blocks[::500])

    thread = threading.Thread(target=task)
    thread.start()
    thread.join()
    before = resident_bytes()
    assert before is not None

    freed = give_back_memory()

    after = resident_bytes()
    assert after is not None
    assert freed >= 100 << 20, (
        f"only {freed >> 20} MB given back (resident {before >> 20} -> {after >> 20} MB)"
    )
    assert before - after >= 100 << 20
    assert len(kept) == 200  # the blocks still in use are untouched
