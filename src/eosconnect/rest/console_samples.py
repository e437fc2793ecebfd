"""The console's memory of the last hour: throughput and lag samples of every connector and task.

The herder keeps only the latest metrics of each task (`Herder.metrics_view()`), so charts over time
need samples kept somewhere; Kafka Connect leaves that to an external Prometheus. The console is
meant to work with nothing installed, so the worker keeps a small ring buffer itself: one sample
every `interval_s` (10 s), `capacity` of them (an hour), taken by a daemon thread that starts with
the first console request, so a worker nobody looks at samples nothing.

A sample holds counters, not rates: a rate is the difference of two samples over their interval,
which is exact whatever the sampling jitter. A counter that went down (the task restarted, its
metrics began again from zero) counts from zero.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from eosconnect.cluster.herder_api import Herder, MetricsView

__all__ = ["ConsoleSamples", "Sample", "TaskCounters", "task_counters"]

log = logging.getLogger(__name__)

#: A source task's records written to Kafka, a sink task's records read from it.
_RECORDS_KEYS = ("source-record-write-total", "sink-record-read-total")


@dataclass(frozen=True)
class TaskCounters:
    """One task's counters in a sample; `lag` is Kafka's `sink-record-lag-max` (None for a source)."""

    records: float
    commits: float
    aborts: float
    lag: float | None


@dataclass(frozen=True)
class Sample:
    """Every task's counters at wall-clock time `at` (epoch seconds)."""

    at: float
    tasks: dict[tuple[str, int], TaskCounters] = field(default_factory=dict)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def task_counters(snapshot: Mapping[str, Any]) -> TaskCounters:
    """The counters the console charts, from one `TaskMetrics.snapshot()`."""
    records = next((v for k in _RECORDS_KEYS if (v := _number(snapshot.get(k))) is not None), 0.0)
    commits = _number(snapshot.get("transactions-committed"))
    if commits is None:  # a sink task: its offset commits are its transactions
        commits = _number(snapshot.get("offset-commit-completion-total"))
    return TaskCounters(
        records=records,
        commits=commits or 0.0,
        aborts=_number(snapshot.get("transactions-aborted")) or 0.0,
        lag=_number(snapshot.get("sink-record-lag-max")),
    )


def _delta(new: float, old: float) -> float:
    return new - old if new >= old else new


class ConsoleSamples:
    """A ring buffer of `Sample`s of `herder`'s tasks, one every `interval_s`, `capacity` kept."""

    def __init__(self, herder: Herder, interval_s: float = 10.0, capacity: int = 360) -> None:
        self.herder = herder
        self.interval_s = interval_s
        self.samples: deque[Sample] = deque(maxlen=capacity)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start sampling (once; later calls do nothing)."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._run, name="console-samples", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.take(self.herder.metrics_view())
            except Exception as exc:  # a herder between leaders, a broker away: try again later
                log.debug("console: could not sample the tasks' metrics: %s", exc)
            self._stop.wait(self.interval_s)

    def take(self, view: MetricsView, at: float | None = None) -> Sample:
        """Record a sample of `view` taken at `at` (default now)."""
        tasks = {
            (str(s.get("connector", "")), int(s.get("task", 0))): task_counters(s)
            for s in view.task_snapshots
        }
        sample = Sample(time.time() if at is None else at, tasks)
        with self._lock:
            self.samples.append(sample)
        return sample

    def _copy(self) -> list[Sample]:
        with self._lock:
            return list(self.samples)

    def series(self) -> dict[str, Any]:
        """The charts' data: per connector, `[[t, records/s, lag], ...]` between consecutive samples
        (lag the sum of its sink tasks' `sink-record-lag-max`, None for a source connector)."""
        samples = self._copy()
        connectors: dict[str, list[list[float | None]]] = {}
        for before, after in itertools.pairwise(samples):
            span = max(after.at - before.at, 1e-6)
            per: dict[str, tuple[float, float | None]] = {}
            for key, now in after.tasks.items():
                then = before.tasks.get(key)
                records = _delta(now.records, then.records) if then is not None else 0.0
                rate, lag = per.get(key[0], (0.0, None))
                if now.lag is not None:
                    lag = (lag or 0.0) + now.lag
                per[key[0]] = (rate + records / span, lag)
            for name, (rate, lag) in per.items():
                connectors.setdefault(name, []).append([after.at, rate, lag])
        return {"interval_s": self.interval_s, "connectors": connectors}

    def task_rates(self, window_s: float = 60.0) -> dict[tuple[str, int], dict[str, float]]:
        """Per task, records/s and commits/s over the last `window_s` of samples (at least two)."""
        samples = self._copy()
        if len(samples) < 2:
            return {}
        last = samples[-1]
        first = next((s for s in samples if last.at - s.at <= window_s and s is not last), samples[-2])
        span = max(last.at - first.at, 1e-6)
        rates = {}
        for key, now in last.tasks.items():
            then = first.tasks.get(key)
            if then is None:
                continue
            rates[key] = {
                "records_per_s": _delta(now.records, then.records) / span,
                "commits_per_s": _delta(now.commits, then.commits) / span,
            }
        return rates
