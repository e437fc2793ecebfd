"""`frozen_heap`: the heap at a task loop's start is out of the cycle collector's way while any loop
runs, and given back (so its cyclic garbage is collected) when the last one leaves."""

from __future__ import annotations

import gc
import weakref

from eosconnect.runtime.frozen_heap import frozen_heap


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_frozen_while_any_loop_runs_and_collected_after_the_last() -> None:
    gc.collect()
    assert gc.get_freeze_count() == 0
    with frozen_heap():
        assert gc.get_freeze_count() > 0
        with frozen_heap():  # a second task in the same process
            pass
        assert gc.get_freeze_count() > 0, "the first loop still runs"
    assert gc.get_freeze_count() == 0


def test_cyclic_garbage_of_the_frozen_heap_is_collected_after_the_loop() -> None:
    gc.collect()
    cycle = _Cycle()
    alive = weakref.ref(cycle)
    with frozen_heap():
        del cycle
        gc.collect()
        assert alive() is not None, "frozen: not collected during the loop"
    gc.collect()
    assert alive() is None


def test_an_exception_in_the_loop_unfreezes() -> None:
    try:
        with frozen_heap():
            raise RuntimeError("the loop failed")
    except RuntimeError:
        pass
    assert gc.get_freeze_count() == 0
