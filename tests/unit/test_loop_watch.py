"""LoopWatch: a task thread that stops coming back to its loop is named once, with its stack."""

from __future__ import annotations

import logging
import threading
import time

from eosconnect.runtime.loop_watch import LoopWatch

WARN_AFTER_S = 0.2


def a_call_that_does_not_return(asked: threading.Event, release: threading.Event, watch: LoopWatch) -> None:
    watch.asked()
    asked.set()
    release.wait(10)
    watch.asked()  # the loop's next turn


def test_a_thread_away_from_its_loop_is_named_once_with_where_it_is(caplog):
    watch = LoopWatch("sink-0", warn_after_s=WARN_AFTER_S)
    asked, release = threading.Event(), threading.Event()
    thread = threading.Thread(target=a_call_that_does_not_return, args=(asked, release, watch))
    thread.start()
    try:
        asked.wait(5)
        with caplog.at_level(logging.INFO, logger="eosconnect.runtime.loop_watch"):
            watch.check()
            assert "has not come back" not in caplog.text, "too early: a loop turn may take a while"
            time.sleep(WARN_AFTER_S + 0.05)
            watch.check()
            watch.check()
            assert caplog.text.count("[sink-0] has not come back to its loop") == 1
            assert "a_call_that_does_not_return" in caplog.text and "release.wait(10)" in caplog.text
            release.set()
            thread.join(5)
            assert "[sink-0] back in its loop after" in caplog.text
    finally:
        release.set()
        thread.join(5)


def test_a_loop_that_never_asked_or_ended_is_not_reported(caplog):
    watch = LoopWatch("source-0", warn_after_s=0.0)
    with caplog.at_level(logging.WARNING):
        watch.check()  # never asked: nothing known about its thread
        finished = threading.Thread(target=watch.asked)
        finished.start()
        finished.join()
        time.sleep(0.01)
        watch.check()  # asked, then its thread ended
    assert caplog.text == ""
