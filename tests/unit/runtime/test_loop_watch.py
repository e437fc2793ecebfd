"""LoopWatch: a task thread that stops coming back to its loop is named once, with its stack; and
SIGUSR1 asks a process for every thread's stack."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
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


WAITS_IN_A_THREAD = """
import sys, threading, time
from eosconnect.runtime.loop_watch import dump_stacks_on_sigusr1

def waiting_for_a_record_that_never_comes():
    time.sleep(60)

dump_stacks_on_sigusr1()
threading.Thread(target=waiting_for_a_record_that_never_comes, name="sink-0", daemon=True).start()
print("ready", flush=True)
sys.stdin.readline()  # the test's "go on": the process outlived its dump
print("still here", flush=True)
"""


def test_sigusr1_writes_every_threads_stack_to_stderr_and_the_process_goes_on() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-c", WAITS_IN_A_THREAD],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        proc.send_signal(signal.SIGUSR1)
        out, err = proc.communicate("go on\n", timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out == "still here\n", err
    assert "in waiting_for_a_record_that_never_comes" in err
    assert "Current thread" in err or "Thread 0x" in err
