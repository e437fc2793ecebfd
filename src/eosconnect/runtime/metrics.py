"""Per-task metrics: transaction sizes (KIP-618), poll and write rates, offset commit latency.

Plain counters updated on the task's thread; `snapshot()` gives a picklable dict that travels from
the Spark task to the worker (heartbeat or task outcome), where the REST layer exports it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from eosconnect.api.metrics import PLUGIN_METRICS_KEY
from eosconnect.runtime.plugin_metrics import TaskPluginMetrics

#: One metric's value in a snapshot (`topics` is a list of names, `plugin-metrics` one entry per
#: KIP-877 metric).
Metric = float | int | str | list[str] | list[dict[str, Any]] | None


@dataclass
class TaskMetrics:
    connector: str
    task: int
    started_at: float = field(default_factory=time.monotonic)
    transactions_committed: int = 0
    transactions_aborted: int = 0
    transaction_size_min: int | None = None
    transaction_size_max: int | None = None
    _transaction_size_total: int = 0
    records_polled: int = 0
    records_written: int = 0
    records_filtered: int = 0
    offset_commits: int = 0
    #: Kafka's task-error-metrics (runtime/retry_tolerance.py): failed attempts, retries, records
    #: that failed for good, and those of them skipped (errors.tolerance=all).
    record_failures: int = 0
    retries: int = 0
    errored_records: int = 0
    records_skipped: int = 0
    offset_commit_seconds_total: float = 0.0
    offset_commit_seconds_max: float = 0.0
    #: Topics the task has written to (Kafka Connect's "active topics", GET /connectors/c/topics).
    topics: set[str] = field(default_factory=set)
    #: Time spent in the task's batch call (a source's `poll`, a sink's `put`), Kafka's
    #: `poll-batch-*-time-ms` / `put-batch-*-time-ms`.
    batches: int = 0
    batch_seconds_total: float = 0.0
    batch_seconds_max: float = 0.0
    #: When the open transaction began (monotonic), None between transactions: an exactly-once
    #: task whose transaction stays open long is about to hit `transaction.timeout.ms`.
    transaction_opened_at: float | None = None
    #: Records written to the dead letter queue (Kafka's `deadletterqueue-produce-requests`).
    dead_letters: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: The KIP-877 metrics of the task and its plugins, read into every snapshot.
    plugins: TaskPluginMetrics = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.plugins = TaskPluginMetrics(self.connector, self.task)

    def mark_started(self) -> None:
        """Rates count from here: the task's start-up (fencing, offsets read) is not throughput."""
        with self._lock:
            self.started_at = time.monotonic()

    def record_transaction(self, size: int) -> None:
        """A committed transaction of `size` records (data records, not the offset records)."""
        with self._lock:
            self.transactions_committed += 1
            self._transaction_size_total += size
            self.transaction_size_min = (
                size if self.transaction_size_min is None else min(self.transaction_size_min, size)
            )
            self.transaction_size_max = (
                size if self.transaction_size_max is None else max(self.transaction_size_max, size)
            )

    def record_abort(self) -> None:
        with self._lock:
            self.transactions_aborted += 1

    def record_transaction_open(self, opened: bool) -> None:
        """A transaction began (`opened`) or ended (committed or aborted)."""
        with self._lock:
            self.transaction_opened_at = time.monotonic() if opened else None

    def record_dead_letter(self) -> None:
        with self._lock:
            self.dead_letters += 1

    def record_poll(self, count: int) -> None:
        with self._lock:
            self.records_polled += count

    def record_write(self, count: int = 1) -> None:
        with self._lock:
            self.records_written += count

    def record_filtered(self, count: int = 1) -> None:
        with self._lock:
            self.records_filtered += count

    def record_errors(self, failures: int, retries: int, errors: int, skipped: int) -> None:
        with self._lock:
            self.record_failures += failures
            self.retries += retries
            self.errored_records += errors
            self.records_skipped += skipped

    def record_batch(self, seconds: float) -> None:
        """One call of the task's `poll` or `put`, which took `seconds`."""
        with self._lock:
            self.batches += 1
            self.batch_seconds_total += seconds
            self.batch_seconds_max = max(self.batch_seconds_max, seconds)

    def record_offset_commit(self, seconds: float) -> None:
        with self._lock:
            self.offset_commits += 1
            self.offset_commit_seconds_total += seconds
            self.offset_commit_seconds_max = max(self.offset_commit_seconds_max, seconds)

    @property
    def transaction_size_avg(self) -> float | None:
        if not self.transactions_committed:
            return None
        return self._transaction_size_total / self.transactions_committed

    def snapshot(self) -> dict[str, Metric]:
        with self._lock:
            common, elapsed = self._common(), self._elapsed()
            return {
                **common,
                "transaction-size-min": self.transaction_size_min,
                "transaction-size-max": self.transaction_size_max,
                "transaction-size-avg": self.transaction_size_avg,
                "transactions-committed": self.transactions_committed,
                "transactions-aborted": self.transactions_aborted,
                "source-record-poll-total": self.records_polled,
                "source-record-write-total": self.records_written,
                "source-record-filtered-total": self.records_filtered,
                "source-record-poll-rate": self.records_polled / elapsed,
                "source-record-write-rate": self.records_written / elapsed,
                "poll-batch-avg-time-ms": self._batch_avg_ms(),
                "poll-batch-max-time-ms": self._batch_max_ms(),
            }

    def _elapsed(self) -> float:
        return max(time.monotonic() - self.started_at, 1e-9)

    def _batch_avg_ms(self) -> float | None:
        return 1000 * self.batch_seconds_total / self.batches if self.batches else None

    def _batch_max_ms(self) -> float | None:
        return 1000 * self.batch_seconds_max if self.batches else None

    def _common(self) -> dict[str, Metric]:
        """What source and sink tasks report alike (call with the lock held)."""
        commits = self.offset_commits
        opened = self.transaction_opened_at
        total_s, max_s = self.offset_commit_seconds_total, self.offset_commit_seconds_max
        return {
            "connector": self.connector,
            "task": self.task,
            "running-seconds": self._elapsed(),
            "offset-commit-avg-time-ms": 1000 * total_s / commits if commits else None,
            "offset-commit-max-time-ms": 1000 * max_s if commits else None,
            "topics": sorted(self.topics),
            "total-record-failures": self.record_failures,
            "total-retries": self.retries,
            "total-record-errors": self.errored_records,
            "total-records-skipped": self.records_skipped,
            "offset-commit-completion-rate": commits / self._elapsed(),
            "transaction-open-age-ms": 1000 * (time.monotonic() - opened) if opened is not None else None,
            "deadletterqueue-produce-requests": self.dead_letters,
            PLUGIN_METRICS_KEY: self.plugins.snapshot(),
        }


@dataclass
class SinkTaskMetrics(TaskMetrics):
    """A sink task's counters under Kafka Connect's sink metric names.

    Same counters as a source task, other meanings: `records_polled` are records read from Kafka,
    `records_written` records handed to `put`, `records_filtered` records dropped by a
    transformation or skipped as malformed (`errors.tolerance=all`); `topics` are the topics read.
    `log_truncations` counts partitions found truncated below the task's position (KIP-320), which
    operators must see even when `log.truncation.policy` lets the task continue.
    """

    log_truncations: int = 0

    def record_log_truncation(self) -> None:
        with self._lock:
            self.log_truncations += 1

    #: Kafka's `sink-record-lag-max` (runtime/consumer_lag.py); None until measured.
    record_lag_max: int | None = None

    def record_lag(self, lag: int | None) -> None:
        with self._lock:
            self.record_lag_max = lag

    def snapshot(self) -> dict[str, Metric]:
        with self._lock:
            common, elapsed = self._common(), self._elapsed()
            return {
                **common,
                "sink-record-read-total": self.records_polled,
                "sink-record-send-total": self.records_written,
                "sink-record-skipped-total": self.records_filtered,
                "sink-record-read-rate": self.records_polled / elapsed,
                "sink-record-send-rate": self.records_written / elapsed,
                "offset-commit-completion-total": self.offset_commits,
                "put-batch-avg-time-ms": self._batch_avg_ms(),
                "put-batch-max-time-ms": self._batch_max_ms(),
                "sink-log-truncations-total": self.log_truncations,
                "sink-record-lag-max": self.record_lag_max,
            }
