"""One log line per repeated problem, with a count, instead of one per occurrence.

With the broker down every Kafka client of a worker reports the same failure every second (and the
herder its failed tick): ~1,300 ERROR lines in three minutes that bury the one line saying what
happened. `RepeatFilter` passes a WARNING-or-worse message the first time it is seen, counts the
identical ones after it (numbers masked, so "after 3ms" and "after 5ms" are the same message), and
lets one through per `interval_s` with the count: "(repeated 57 times in the last 60 s)". When the
problem ends (a different message, say "connected"), the next occurrence is new again.
Lower levels pass untouched.

    handler.addFilter(RepeatFilter())      # or install_repeat_filter(logging.getLogger())

The interval defaults to 60 s; `EOSCONNECT_LOG_REPEAT_INTERVAL_S` changes it for a worker and the
Spark Python workers it starts (which inherit its environment).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["INTERVAL_ENV", "RepeatFilter", "default_interval", "install_repeat_filter"]

#: Environment variable: seconds between two lines of one repeated message (default 60).
INTERVAL_ENV = "EOSCONNECT_LOG_REPEAT_INTERVAL_S"

_NUMBER = re.compile(r"\d+")


def default_interval() -> float:
    """`EOSCONNECT_LOG_REPEAT_INTERVAL_S` if set to a positive number, else 60 s."""
    raw = os.environ.get(INTERVAL_ENV, "")
    try:
        value = float(raw)
    except ValueError:
        return 60.0
    return value if value > 0 else 60.0


@dataclass
class _Seen:
    last_emitted: float
    suppressed: int = 0


class RepeatFilter(logging.Filter):
    """Logging filter: each WARNING+ message once per `interval_s`, then with the repeat count."""

    def __init__(
        self, interval_s: float | None = None, level: int = logging.WARNING, capacity: int = 512
    ) -> None:
        super().__init__()
        self.interval_s = default_interval() if interval_s is None else interval_s
        self.level = level
        self.capacity = capacity
        self._seen: OrderedDict[tuple[str, int, str], _Seen] = OrderedDict()
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < self.level:
            return True
        try:
            text = record.getMessage()
        except Exception:
            return True
        if record.exc_info and record.exc_info[1] is not None:
            text_key = f"{text} {type(record.exc_info[1]).__name__}: {record.exc_info[1]}"
        else:
            text_key = text
        key = (record.name, record.levelno, _NUMBER.sub("#", text_key))
        now = time.monotonic()
        with self._lock:
            seen = self._seen.get(key)
            if seen is None:
                self._seen[key] = _Seen(now)
                while len(self._seen) > self.capacity:
                    self._seen.popitem(last=False)
                return True
            self._seen.move_to_end(key)
            if now - seen.last_emitted < self.interval_s:
                seen.suppressed += 1
                return False
            repeated, elapsed = seen.suppressed, now - seen.last_emitted
            seen.suppressed, seen.last_emitted = 0, now
        if repeated:
            record.msg = f"{text} (repeated {repeated} more times in the last {elapsed:.0f} s)"
            record.args = None
        return True

    def forget(self) -> None:
        """Start afresh (e.g. after recovery): the next occurrence of every message is new."""
        with self._lock:
            self._seen.clear()


def install_repeat_filter(
    logger: logging.Logger | None = None, interval_s: float | None = None
) -> RepeatFilter:
    """Add one `RepeatFilter` to every handler of `logger` (default: the root logger); returns it."""
    target = logger if logger is not None else logging.getLogger()
    repeat_filter = RepeatFilter(interval_s)
    for handler in target.handlers:
        if not any(isinstance(f, RepeatFilter) for f in handler.filters):
            handler.addFilter(repeat_filter)
    return repeat_filter
