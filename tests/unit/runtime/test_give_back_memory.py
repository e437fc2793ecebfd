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

from eosconnect.runtime.host import MemoryReturn, give_back_memory, resident_bytes

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc and /proc")


def _free_200_mb_in_a_thread(kept: list[bytes]) -> None:
    def task() -> None:
        blocks = [bytes(2000) + bytes([i % 256]) for i in range(100_000)]
        kept.extend(blocks[::500])

    thread = threading.Thread(target=task)
    thread.start()
    thread.join()


def test_freed_blocks_of_a_finished_thread_leave_the_resident_set() -> None:
    kept: list[bytes] = []
    _free_200_mb_in_a_thread(kept)
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


def test_a_running_process_gives_back_only_once_it_grew_enough() -> None:
    """`MemoryReturn.if_grown`, as a running slot host calls it every turn of its loop."""
    kept: list[bytes] = []
    patient = MemoryReturn(check_s=0.0, growth_bytes=1 << 40)
    eager = MemoryReturn(check_s=0.0, growth_bytes=50 << 20)
    _free_200_mb_in_a_thread(kept)
    assert patient.if_grown() == 0, "grew by less than its threshold: nothing done"
    assert eager.if_grown() >= 100 << 20
    assert eager.if_grown() == 0, "settled at the new size: no growth since"
