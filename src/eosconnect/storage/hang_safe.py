"""Calls into librdkafka that can block past the timeout they were given, made to return in time.

librdkafka's transactional calls (`commit_transaction()`, `abort_transaction()`,
`send_offsets_to_transaction()`) can block forever once the broker they wait for died or became
unreachable (librdkafka issues 5456 and 5511, open in 2.16), and a producer's `close()` waits for
its broker as long as that takes. A caller that must answer in time (a task's transaction loop, a
REST request writing the config topic) runs such a call with `call_within`, and gives up the
client once it hung (`close_in_background`): a hung client is never used again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import TypeVar

__all__ = ["HUNG_CALL_GRACE_S", "CallHung", "call_within", "close_in_background"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How much longer than its own timeout a bounded call is waited for before it counts as hung
#: (librdkafka keeps its timeouts to the millisecond when it keeps them at all; this covers a busy
#: interpreter).
HUNG_CALL_GRACE_S = 5.0


class CallHung(TimeoutError):
    """A call did not return within its limit; it goes on, on a thread of its own, and its client
    must not be used again."""


def call_within(call: Callable[[], T], limit_s: float, *, name: str) -> T:
    """`call()` on a daemon thread of its own, waited for at most `limit_s`; past that `CallHung`.
    Its exceptions are raised as they are. A daemon thread, not an executor's: a hung call must not
    hold up the process's exit."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    try:
        return future.result(timeout=limit_s)
    except FutureTimeoutError:
        raise CallHung(f"{name} did not return within {limit_s:.0f}s") from None


def close_in_background(close: Callable[[], object], *, name: str) -> None:
    """`close()` (a client's closing) on a daemon thread: closing waits for the broker, which may be
    what is missing, and the caller must not wait with it."""

    def run() -> None:
        try:
            close()
        except Exception as exc:  # a hung or fenced client may fail to close; it is given up anyway
            log.debug("closing %s: %s", name, exc)

    threading.Thread(target=run, name=f"close-{name}", daemon=True).start()
