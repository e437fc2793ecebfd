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


FINALIZER_PROGRAM = textwrap.dedent(
    """
    import gc, logging, threading, time
    from eosconnect.launch import quiet_interpreter_exit

    logging.basicConfig(level="INFO")
    handler = logging.getLogger().handlers[0]
    log = logging.getLogger("py4j.clientserver")

    class LogsWhenCollected:  # as py4j's connections do in __del__
        def __init__(self):
            self.cycle = self  # collected by the interpreter's last garbage collection

        def __del__(self, log=log):
            log.info("Closing down clientserver connection")

    def logs_all_the_time():  # a daemon thread mostly inside a handler when the exit freezes it
        while True:
            with handler.lock:
                time.sleep(0.01)  # gives up the GIL holding the lock, as a write to the log does

    gc.disable()  # the cycle waits for the interpreter's exit
    LogsWhenCollected()
    threading.Thread(target=logs_all_the_time, daemon=True).start()
    time.sleep(0.1)
    quiet_interpreter_exit()
    """
)


def test_finalizers_that_log_do_not_hang_a_stopped_workers_exit() -> None:
    """The worker's last act (`quiet_interpreter_exit`) keeps finalizers from waiting for a log
    handler's lock that a daemon thread, frozen by the interpreter's exit, holds forever (without it
    this program hangs: the run's timeout fails the test)."""
    done = subprocess.run(
        [sys.executable, "-c", FINALIZER_PROGRAM], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "Closing down clientserver connection" not in done.stderr
