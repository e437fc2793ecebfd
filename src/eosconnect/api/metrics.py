"""KIP-877 plugin metrics: the metrics a connector, task, converter, transformation or predicate
defines itself.

A connector or task gets its registry from its context (`context.plugin_metrics()`); a
converter, transformation or predicate implements `Monitorable` and is handed one
(`with_plugin_metrics`) once it is configured. Each registry carries the tags that say whose
metrics they are, as Kafka Connect's do (`connector`; `task` for a task and its plugins; for a
converter, transformation or predicate the plugin's `class` and `version` with
`converter=key|value`, `transformation=<alias>` or `predicate=<alias>`); the worker exports them on
`GET /metrics` with those tags as labels, in Kafka's `plugins` group. The runtime closes a plugin's
registry when the plugin stops, so its metrics leave `/metrics` with it.

    class CountingTask(SinkTask):
        def start(self, config):
            metrics = self.context.plugin_metrics()
            held = metrics.metric_name("buffered", "Records held", {})
            metrics.add_metric(held, Gauge(lambda: len(self.buffer)))
            self.put_sizes = metrics.add_sensor("put-size")
            self.put_sizes.add(metrics.metric_name("put-size-max", "Largest put", {}), Max())

        def put(self, records):
            self.put_sizes.record(len(records))
"""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from eosconnect.api.errors import ConnectException

__all__ = [
    "PLUGIN_METRICS_GROUP",
    "PLUGIN_METRICS_KEY",
    "Avg",
    "CumulativeCount",
    "CumulativeSum",
    "Gauge",
    "Max",
    "Measurable",
    "MetricName",
    "Min",
    "Monitorable",
    "PluginMetrics",
    "Rate",
    "Sensor",
]

log = logging.getLogger(__name__)

#: Kafka's group for plugin metrics (`kafka.connect:type=plugins,...` over JMX).
PLUGIN_METRICS_GROUP = "plugins"

#: The entry of a task's metrics snapshot that carries its plugin metrics to the worker's
#: `/metrics` (a list of `PluginMetrics.snapshot()` entries).
PLUGIN_METRICS_KEY = "plugin-metrics"

#: What a metric reads as: a number, or a string (exported only where strings are shown).
MetricValue = float | int | str | None


@dataclass(frozen=True)
class MetricName:
    """A metric's identity: its name, group and tags (the plugin's and the metric's own)."""

    name: str
    group: str
    description: str
    tags: Mapping[str, str] = field(default_factory=dict)

    def key(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        return self.name, tuple(sorted(self.tags.items()))


@runtime_checkable
class Measurable(Protocol):
    """A numeric metric computed when read, at `now` (seconds, `time.monotonic()`)."""

    def measure(self, now: float) -> float: ...


class Gauge:
    """A metric whose value is whatever `read()` returns when the metric is read."""

    def __init__(self, read: Callable[[], MetricValue]) -> None:
        self.read = read

    def value(self, now: float) -> MetricValue:
        return self.read()


class _Stat(ABC):
    """A statistic over the values a `Sensor` records, from the sensor's creation on."""

    @abstractmethod
    def record(self, value: float, now: float) -> None: ...

    @abstractmethod
    def measure(self, now: float) -> float: ...


class Avg(_Stat):
    """The mean of the recorded values (NaN before the first)."""

    def __init__(self) -> None:
        self.total = 0.0
        self.count = 0

    def record(self, value: float, now: float) -> None:
        self.total += value
        self.count += 1

    def measure(self, now: float) -> float:
        return self.total / self.count if self.count else float("nan")


class Max(_Stat):
    """The largest recorded value (NaN before the first)."""

    def __init__(self) -> None:
        self.value = float("nan")

    def record(self, value: float, now: float) -> None:
        self.value = value if self.value != self.value else max(self.value, value)

    def measure(self, now: float) -> float:
        return self.value


class Min(_Stat):
    """The smallest recorded value (NaN before the first)."""

    def __init__(self) -> None:
        self.value = float("nan")

    def record(self, value: float, now: float) -> None:
        self.value = value if self.value != self.value else min(self.value, value)

    def measure(self, now: float) -> float:
        return self.value


class CumulativeSum(_Stat):
    """The sum of all recorded values."""

    def __init__(self) -> None:
        self.total = 0.0

    def record(self, value: float, now: float) -> None:
        self.total += value

    def measure(self, now: float) -> float:
        return self.total


class CumulativeCount(_Stat):
    """How many values were recorded."""

    def __init__(self) -> None:
        self.count = 0

    def record(self, value: float, now: float) -> None:
        self.count += 1

    def measure(self, now: float) -> float:
        return float(self.count)


class Rate(_Stat):
    """The recorded values' sum per second since the stat was created."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.total = 0.0

    def record(self, value: float, now: float) -> None:
        self.total += value

    def measure(self, now: float) -> float:
        return self.total / max(now - self.started, 1e-9)


class Sensor:
    """Records values into the stats added to it, each read as its own metric."""

    def __init__(self, name: str, owner: PluginMetrics) -> None:
        self.name = name
        self.owner = owner
        self.stats: list[tuple[MetricName, _Stat]] = []

    def add(self, metric_name: MetricName, stat: _Stat) -> None:
        """Measure `stat` as the metric `metric_name` (from the owner's `metric_name`)."""
        self.owner.add_metric(metric_name, stat)
        self.stats.append((metric_name, stat))

    def record(self, value: float = 1.0) -> None:
        now = time.monotonic()
        with self.owner.lock:
            for _, stat in self.stats:
                stat.record(value, now)


class PluginMetrics:
    """One plugin's metrics, under the tags the runtime gave it; thread-safe.

    Names are unique per registry: adding a metric under a name and tags already taken raises, as
    Kafka's does, so two stats cannot silently share one series. `close()` (the runtime's, when the
    plugin stops) removes them all.
    """

    def __init__(self, tags: Mapping[str, str]) -> None:
        self.tags = dict(tags)
        self.lock = threading.RLock()
        self.metrics: dict[tuple[str, tuple[tuple[str, str], ...]], tuple[MetricName, Any]] = {}
        self.sensors: dict[str, Sensor] = {}

    def metric_name(self, name: str, description: str, tags: Mapping[str, str]) -> MetricName:
        """A name in the `plugins` group; `tags` add to the plugin's own, which they cannot replace."""
        clash = sorted(set(tags) & set(self.tags))
        if clash:
            raise ConnectException(f"metric {name!r}: tags {clash} are set by the runtime")
        return MetricName(name, PLUGIN_METRICS_GROUP, description, {**self.tags, **tags})

    def add_metric(self, metric_name: MetricName, provider: Measurable | Gauge) -> None:
        if not isinstance(provider, Gauge | Measurable):
            raise ConnectException(
                f"metric {metric_name.name!r}: {provider!r} is neither a Gauge nor Measurable"
            )
        with self.lock:
            if metric_name.key() in self.metrics:
                raise ConnectException(
                    f"metric {metric_name.name!r} with tags {dict(metric_name.tags)} exists"
                )
            self.metrics[metric_name.key()] = (metric_name, provider)

    def remove_metric(self, metric_name: MetricName) -> None:
        with self.lock:
            self.metrics.pop(metric_name.key(), None)

    def add_sensor(self, name: str) -> Sensor:
        """A new sensor of that name (an existing one is returned, as Kafka's `sensor(name)` does)."""
        with self.lock:
            if name not in self.sensors:
                self.sensors[name] = Sensor(name, self)
            return self.sensors[name]

    def remove_sensor(self, name: str) -> None:
        """Drop the sensor and the metrics of its stats."""
        with self.lock:
            sensor = self.sensors.pop(name, None)
            if sensor is not None:
                for metric_name, _ in sensor.stats:
                    self.metrics.pop(metric_name.key(), None)

    def close(self) -> None:
        with self.lock:
            self.metrics.clear()
            self.sensors.clear()

    def snapshot(self) -> list[dict[str, Any]]:
        """Every metric's name, group, description, tags and value, read now (picklable, JSON).
        A provider that raises reads as None: the snapshot travels in the task's heartbeat, which a
        plugin's bug must not stop."""
        now = time.monotonic()
        with self.lock:
            entries = list(self.metrics.values())
            return [
                {
                    "name": name.name,
                    "group": name.group,
                    "description": name.description,
                    "tags": dict(name.tags),
                    "value": _read(name, provider, now),
                }
                for name, provider in entries
            ]


def _read(name: MetricName, provider: Measurable | Gauge, now: float) -> MetricValue:
    try:
        return provider.value(now) if isinstance(provider, Gauge) else provider.measure(now)
    except Exception:
        log.warning("metric %s %s could not be read", name.name, dict(name.tags), exc_info=True)
        return None


class Monitorable(ABC):
    """A converter, transformation or predicate that defines metrics of its own (Kafka's `Monitorable`).

    The runtime calls `with_plugin_metrics` once the plugin is configured, before its first record.
    """

    @abstractmethod
    def with_plugin_metrics(self, metrics: PluginMetrics) -> None:
        """Register the plugin's metrics on `metrics`; keep it to record into sensors later."""
