"""Kafka Connect's RetryWithToleranceOperator for the converter and transformation stages.

What a connector's `errors.*` settings do to a record the converters or transformations fail on,
for source and sink tasks alike, as in Apache Kafka Connect:

- A `RetriableException` (e.g. a schema registry that does not answer) is retried for up to
  `errors.retry.timeout` ms (0, the default: not retried; -1: forever), waiting 300 ms, 600 ms,
  1.2 s, ... between attempts; a wait that would exceed `errors.retry.delay.max.ms` is a random
  wait below it instead, and no wait goes past the deadline. A task asked to stop stops waiting.
- When the retries ran out, or for any other exception, the record failed: with
  `errors.tolerance=none` the task fails; with `errors.tolerance=all` the record is skipped (a sink
  dead-letters it, see runtime/dead_letter.py; sources have no dead letter queue in Kafka either)
  and its offset is committed like any other's.
- `errors.log.enable=true` logs each failed record at ERROR in Kafka's words ("Error encountered in
  task ..."), with the record when `errors.log.include.messages=true`.

Counters, under Kafka's task-error-metrics names: `total-record-failures` (failed attempts),
`total-retries`, `total-record-errors` (records that failed for good), `total-records-skipped`.

`put()` raising `RetriableException` is not this: as in Kafka, the runtime gives the batch to `put`
again (paused meanwhile) until it is taken (runtime/sink_task.py).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from eosconnect.api.errors import RetriableException

__all__ = ["RetryWithTolerance", "ToleranceSettings", "log_failed_record"]

T = TypeVar("T")

#: Kafka's RetryWithToleranceOperator.RETRIES_DELAY_MIN_MS: the first wait, doubled per attempt.
RETRIES_DELAY_MIN_MS = 300


@dataclass(frozen=True)
class ToleranceSettings:
    """A connector's `errors.*` settings for failed records (Kafka's names and defaults)."""

    retry_timeout_ms: int = 0
    retry_delay_max_ms: int = 60_000
    tolerate_all: bool = False
    log_errors: bool = False
    log_messages: bool = False

    @classmethod
    def parse(cls, config: Mapping[str, Any]) -> ToleranceSettings:
        def flag(name: str) -> bool:
            return str(config.get(name, "false")).strip().lower() == "true"

        return cls(
            retry_timeout_ms=int(config.get("errors.retry.timeout") or 0),
            retry_delay_max_ms=max(1, int(config.get("errors.retry.delay.max.ms") or 60_000)),
            tolerate_all=str(config.get("errors.tolerance", "none")).strip().lower() == "all",
            log_errors=flag("errors.log.enable"),
            log_messages=flag("errors.log.include.messages"),
        )

    @property
    def retries(self) -> bool:
        return self.retry_timeout_ms != 0


def log_failed_record(
    logger: logging.Logger | logging.LoggerAdapter,
    task: str,
    stage: str,
    class_name: str,
    where: str,
    exc: BaseException,
) -> None:
    """Kafka's LogReporter line for a record that failed in `stage` (errors.log.enable=true)."""
    logger.error(
        "Error encountered in task %s. Executing stage '%s' with class '%s', where %s: %s",
        task,
        stage,
        class_name,
        where,
        exc,
    )


class RetryWithTolerance:
    """Runs a stage's operation with `errors.retry.*`; counts attempts, retries, errors and skips."""

    def __init__(
        self,
        settings: ToleranceSettings,
        *,
        stopping: Callable[[], bool] = lambda: False,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        metrics: Any = None,
    ) -> None:
        self.settings = settings
        #: A `TaskMetrics` (or None): the counters also go to the task's metrics.
        self.task_metrics = metrics
        self.stopping, self.sleep, self.clock = stopping, sleep, clock
        self.failures = self.retries = self.errors = self.skipped = 0
        self._lock = threading.Lock()

    def delay_ms(self, attempt: int, remaining_ms: float) -> float:
        """Kafka's backoff before retry number `attempt` (1, 2, ...), never past the deadline."""
        delay = float(RETRIES_DELAY_MIN_MS << min(attempt - 1, 40))
        cap = self.settings.retry_delay_max_ms
        if delay > cap:
            delay = random.uniform(0, cap)
        return max(0.0, min(delay, remaining_ms))

    def execute(self, operation: Callable[[], T]) -> T:
        """`operation()`, retried on `RetriableException` within errors.retry.timeout; the last
        exception propagates when the retries ran out (or are not enabled), any other at once."""
        timeout = self.settings.retry_timeout_ms
        deadline = float("inf") if timeout < 0 else self.clock() + timeout / 1000
        attempt = 0
        while True:
            attempt += 1
            try:
                return operation()
            except RetriableException:
                self._count(failures=1)
                remaining_ms = (deadline - self.clock()) * 1000
                if remaining_ms <= 0 or self.stopping():
                    raise
                self._count(retries=1)
                self._wait(self.delay_ms(attempt, remaining_ms) / 1000)
            except Exception:
                self._count(failures=1)
                raise

    def failed(self) -> bool:
        """A record failed for good: True if it is to be skipped (errors.tolerance=all)."""
        self._count(errors=1, skipped=1 if self.settings.tolerate_all else 0)
        return self.settings.tolerate_all

    def _wait(self, seconds: float) -> None:
        """Sleep in short steps, so that a task asked to stop does not wait out a long delay."""
        end = self.clock() + seconds
        while (left := end - self.clock()) > 0 and not self.stopping():
            self.sleep(min(left, 0.5))

    def _count(self, *, failures: int = 0, retries: int = 0, errors: int = 0, skipped: int = 0) -> None:
        with self._lock:
            self.failures += failures
            self.retries += retries
            self.errors += errors
            self.skipped += skipped
        if self.task_metrics is not None:
            self.task_metrics.record_errors(failures, retries, errors, skipped)

    def metrics(self) -> dict[str, int]:
        with self._lock:
            return {
                "total-record-failures": self.failures,
                "total-retries": self.retries,
                "total-record-errors": self.errors,
                "total-records-skipped": self.skipped,
            }
