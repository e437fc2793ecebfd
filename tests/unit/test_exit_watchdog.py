"""`arm_exit_watchdog`: a stopped worker's process exits even when a thread that is not a daemon
still runs, or a call blocks holding the GIL, and says which thread and where it was."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time

PROGRAM = textwrap.dedent(
    """
    import logging, threading, time
    from eosconnect.launch import arm_exit_watchdog

    logging.basicConfig(level="INFO")

    def stuck_in_a_client_call():
        time.sleep(600)

    threading.Thread(target=stuck_in_a_client_call, name="stuck-helper").start()
    arm_exit_watchdog(0.5)
    """
)


def test_a_lingering_thread_does_not_keep_a_stopped_worker_alive() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert done.returncode == 0, done.stderr
    assert "thread 'stuck-helper' still runs" in done.stderr, done.stderr
    assert "stuck_in_a_client_call" in done.stderr  # where it was


def test_a_clean_exit_is_not_delayed() -> None:
    program = "from eosconnect.launch import arm_exit_watchdog\narm_exit_watchdog(30)\n"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "after the worker was told to stop" not in done.stderr, done.stderr
    assert time.monotonic() - started < 20  # not the watchdog's 30 s


#: libc's sleep() called through ctypes.PyDLL, which keeps the GIL for the call (as a C library's
#: blocking destructor would): no Python thread runs meanwhile, the watchdog's timer included.
HOLDS_THE_GIL = textwrap.dedent(
    """
    import ctypes, logging
    from eosconnect.launch import arm_exit_watchdog

    logging.basicConfig(level="INFO")

    def blocked_in_c_holding_the_gil():
        ctypes.PyDLL(None).sleep(600)

    arm_exit_watchdog(0.5)
    blocked_in_c_holding_the_gil()
    """
)


def test_a_call_blocking_with_the_gil_held_does_not_keep_a_stopped_worker_alive() -> None:
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", HOLDS_THE_GIL], capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 30
    assert done.returncode == 1, done.stderr  # faulthandler's exit
    assert "blocked_in_c_holding_the_gil" in done.stderr, done.stderr  # where the main thread was
