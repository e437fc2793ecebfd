"""Python logging levels behind Kafka Connect's `/admin/loggers` API.

Levels are accepted under their Python names (DEBUG, INFO, WARNING, ERROR, CRITICAL) and their
log4j names (TRACE, WARN, FATAL, OFF, ALL), case-insensitively, and reported under Python names
(TRACE, OFF and ALL as such). Setting a logger's level also sets it on every existing descendant
logger (as Kafka Connect does with log4j); `root` is the root logger and reaches every logger.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

__all__ = ["LoggerLevels", "parse_level"]

TRACE = 5
_BY_NAME = {
    "ALL": 1,
    "TRACE": TRACE,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 50,
}
_NAMES = {1: "ALL", TRACE: "TRACE", logging.CRITICAL + 50: "OFF"}
ROOT = "root"


def parse_level(text: str) -> int | None:
    return _BY_NAME.get(text.strip().upper())


def level_name(level: int) -> str:
    return _NAMES.get(level) or logging.getLevelName(level)


class LoggerLevels:
    """Reads and sets levels and remembers when the API last set each one (`last_modified`, ms)."""

    def __init__(self) -> None:
        self._modified: dict[str, int] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _manager_loggers() -> dict[str, Any]:
        return dict(logging.Logger.manager.loggerDict)

    def _entry(self, name: str, logger: logging.Logger) -> dict[str, Any]:
        return {"level": level_name(logger.getEffectiveLevel()), "last_modified": self._modified.get(name)}

    def all_levels(self) -> dict[str, dict[str, Any]]:
        """Loggers whose level is set explicitly, and the root logger."""
        out = {ROOT: self._entry(ROOT, logging.getLogger())}
        for name, logger in sorted(self._manager_loggers().items()):
            if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET:
                out[name] = self._entry(name, logger)
        return out

    def level(self, name: str) -> dict[str, Any] | None:
        """The effective level of a logger that exists (or is an ancestor of one); None otherwise."""
        if name == ROOT:
            return self._entry(ROOT, logging.getLogger())
        known = self._manager_loggers()
        if name not in known:
            return None
        return self._entry(name, logging.getLogger(name))

    def set_level(self, name: str, level: int) -> list[str]:
        """Set `name` and its existing descendants; returns the names affected."""
        now = int(time.time() * 1000)
        with self._lock:
            if name == ROOT:
                targets = [ROOT] + [
                    n for n, lg in self._manager_loggers().items() if isinstance(lg, logging.Logger)
                ]
            else:
                prefix = name + "."
                targets = [name] + [
                    n
                    for n, lg in self._manager_loggers().items()
                    if n.startswith(prefix) and isinstance(lg, logging.Logger)
                ]
            for target in targets:
                logger = logging.getLogger() if target == ROOT else logging.getLogger(target)
                logger.setLevel(level)
                self._modified[target] = now
        return sorted(set(targets))
