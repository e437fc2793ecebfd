"""Prometheus exposition of task metric snapshots and connector/task states.

The herder keeps the latest `TaskMetrics.snapshot()` of every task (from heartbeats) and hands them,
with the connectors' status bodies and restart counts, to `GET /metrics` as a `MetricsView`
(cluster/herder_api.py); `render_metrics_view` renders it.
Every call builds a fresh `CollectorRegistry`, so a deleted connector's series disappear at once
and nothing is shared between apps or tests.

Series (labels `connector`, `task` unless said otherwise):

- `eosconnect_source_task_transaction_size_min|max|avg`: records per committed transaction (KIP-618)
- `eosconnect_source_task_transactions_committed_total`, `..._transactions_aborted_total`
- `eosconnect_source_task_source_record_poll_total`, `..._write_total`, `..._filtered_total`
- `eosconnect_source_task_source_record_poll_rate`, `..._write_rate` (records per second)
- `eosconnect_source_task_offset_commit_avg_time_ms`, `..._offset_commit_max_time_ms`
- any other numeric snapshot entry as `eosconnect_task_<name>` (gauge)
- `eosconnect_connectors{state}`, `eosconnect_tasks{state}`: how many connectors/tasks are in each state
- `eosconnect_connector_tasks{connector,state}`: per connector, its tasks per state
- `eosconnect_plugin_<name>` (gauge): a KIP-877 metric a connector, task, converter, transformation
  or predicate registered (api/metrics.py), labelled with its tags (`connector`, `task`, and `converter`,
  `transformation` or `predicate` with `class` and `version`); a label another series of the same
  name has and this one lacks is empty
- `eosconnect_task_auto_restarts_total`: automatic restarts of failed tasks (`errors.restart.enable`),
  once there has been one
- `eosconnect_connector_fencing_rounds_total{connector}`: zombie fencing rounds (KIP-618) the leader
  ran for the connector since it was elected, once there has been one

Unset values (a task that has not committed a transaction yet has no min/max/avg) are left out
rather than exported as 0 or NaN.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from eosconnect.api.metrics import PLUGIN_METRICS_KEY
from eosconnect.cluster.herder_api import MetricsView

__all__ = ["STATES", "TaskMetricsCollector", "build_registry", "render_metrics_view", "render_prometheus"]

STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING")
PREFIX = "eosconnect_source_task_"

# snapshot key -> (metric name without prefix, kind, help)
_KNOWN: dict[str, tuple[str, str, str]] = {
    "transaction-size-min": ("transaction_size_min", "gauge", "Fewest records in a committed transaction"),
    "transaction-size-max": ("transaction_size_max", "gauge", "Most records in a committed transaction"),
    "transaction-size-avg": ("transaction_size_avg", "gauge", "Average records per committed transaction"),
    "transactions-committed": ("transactions_committed", "counter", "Transactions committed"),
    "transactions-aborted": ("transactions_aborted", "counter", "Transactions aborted"),
    "source-record-poll-total": ("source_record_poll", "counter", "Records returned by poll()"),
    "source-record-write-total": ("source_record_write", "counter", "Records written to Kafka"),
    "source-record-filtered-total": (
        "source_record_filtered",
        "counter",
        "Records dropped by transformations",
    ),
    "source-record-poll-rate": ("source_record_poll_rate", "gauge", "Records polled per second"),
    "source-record-write-rate": ("source_record_write_rate", "gauge", "Records written per second"),
    "offset-commit-avg-time-ms": ("offset_commit_avg_time_ms", "gauge", "Average offset commit time (ms)"),
    "offset-commit-max-time-ms": ("offset_commit_max_time_ms", "gauge", "Longest offset commit time (ms)"),
}
_LABELS = ("connector", "task")


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    return None


def _metric_name(key: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_]", "_", key).strip("_").lower()


class TaskMetricsCollector(Collector):
    """A one-shot collector over snapshots and connector status bodies."""

    def __init__(
        self,
        snapshots: Iterable[Mapping[str, Any]],
        statuses: Iterable[Mapping[str, Any]] = (),
        auto_restarts: Mapping[tuple[str, int], int] | None = None,
        plugin_metrics: Iterable[Mapping[str, Any]] = (),
        fencing_rounds: Mapping[str, int] | None = None,
    ) -> None:
        #: Zombie fencing rounds (KIP-618) the leader ran per connector.
        self.fencing_rounds = dict(fencing_rounds or {})
        self.snapshots = [dict(s) for s in snapshots]
        self.statuses = [dict(s) for s in statuses]
        self.auto_restarts = dict(auto_restarts or {})
        #: KIP-877 metrics outside the tasks' snapshots: the connectors'.
        self.plugin_metrics = [dict(e) for e in plugin_metrics]

    def collect(self) -> Iterator[Metric]:
        families: dict[str, CounterMetricFamily | GaugeMetricFamily] = {}

        def family(
            name: str, kind: str, doc: str, labels: tuple[str, ...] = _LABELS
        ) -> CounterMetricFamily | GaugeMetricFamily:
            if name not in families:
                cls: type[CounterMetricFamily | GaugeMetricFamily]
                cls = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
                families[name] = cls(name, doc, labels=list(labels))
            return families[name]

        for snap in self.snapshots:
            labels = [str(snap.get("connector", "")), str(snap.get("task", ""))]
            for key, raw in snap.items():
                if key in _LABELS or key == PLUGIN_METRICS_KEY:
                    continue
                value = _number(raw)
                if value is None:
                    continue
                if key in _KNOWN:
                    suffix, kind, doc = _KNOWN[key]
                    fam = family(PREFIX + suffix, kind, doc)
                else:
                    fam = family("eosconnect_task_" + _metric_name(key), "gauge", f"Task metric {key}")
                fam.add_metric(labels, value)

        yield from _plugin_families(
            [entry for snap in self.snapshots for entry in snap.get(PLUGIN_METRICS_KEY) or ()]
            + self.plugin_metrics
        )

        if self.statuses:
            connectors: Counter[str] = Counter()
            tasks: Counter[str] = Counter()
            per_connector = family(
                "eosconnect_connector_tasks",
                "gauge",
                "Tasks of a connector per state",
                ("connector", "state"),
            )
            for status in self.statuses:
                name = str(status.get("name", ""))
                state = str((status.get("connector") or {}).get("state", "UNASSIGNED"))
                connectors[state] += 1
                mine: Counter[str] = Counter(
                    str(t.get("state", "UNASSIGNED")) for t in status.get("tasks") or []
                )
                tasks.update(mine)
                for st in sorted(set(STATES) | set(mine)):
                    per_connector.add_metric([name, st], mine.get(st, 0))
            fam_c = family("eosconnect_connectors", "gauge", "Connectors per state", ("state",))
            for st in sorted(set(STATES) | set(connectors)):
                fam_c.add_metric([st], connectors.get(st, 0))
            fam_t = family("eosconnect_tasks", "gauge", "Tasks per state", ("state",))
            for st in sorted(set(STATES) | set(tasks)):
                fam_t.add_metric([st], tasks.get(st, 0))
        else:
            for name, doc in (
                ("eosconnect_connectors", "Connectors per state"),
                ("eosconnect_tasks", "Tasks per state"),
            ):
                fam = family(name, "gauge", doc, ("state",))
                for st in STATES:
                    fam.add_metric([st], 0)

        if self.auto_restarts:
            restarts = family(
                "eosconnect_task_auto_restarts", "counter", "Automatic restarts of failed tasks."
            )
            for (connector, task), count in sorted(self.auto_restarts.items()):
                restarts.add_metric([connector, str(task)], count)

        if self.fencing_rounds:
            fencings = family(
                "eosconnect_connector_fencing_rounds",
                "counter",
                "Zombie fencing rounds the leader ran for the connector (KIP-618).",
                ("connector",),
            )
            for connector, rounds in sorted(self.fencing_rounds.items()):
                fencings.add_metric([connector], rounds)

        yield from families.values()


def _plugin_families(entries: Iterable[Mapping[str, Any]]) -> Iterator[Metric]:
    """One gauge family per KIP-877 metric name, its tags as labels (the union over its series,
    since plugins of one name may carry different tags)."""
    by_name: dict[str, list[tuple[dict[str, str], float, str]]] = {}
    for entry in entries:
        value = _number(entry.get("value"))
        if value is None or value != value:  # unset (a stat before its first record: NaN)
            continue
        tags = {_metric_name(k): str(v) for k, v in (entry.get("tags") or {}).items()}
        name = "eosconnect_plugin_" + _metric_name(str(entry.get("name", "")))
        by_name.setdefault(name, []).append((tags, value, str(entry.get("description") or "")))
    for name, series in by_name.items():
        labels = sorted({label for tags, _, _ in series for label in tags})
        fam = GaugeMetricFamily(name, series[0][2] or f"Plugin metric {name}", labels=labels)
        for tags, value, _ in series:
            fam.add_metric([tags.get(label, "") for label in labels], value)
        yield fam


def build_registry(
    snapshots: Iterable[Mapping[str, Any]],
    statuses: Iterable[Mapping[str, Any]] = (),
    auto_restarts: Mapping[tuple[str, int], int] | None = None,
    plugin_metrics: Iterable[Mapping[str, Any]] = (),
    fencing_rounds: Mapping[str, int] | None = None,
) -> CollectorRegistry:
    """A fresh registry holding the snapshots (TaskMetrics.snapshot() dicts), the states counted
    from connector status bodies (`GET /connectors/{c}/status` shape) and the restart counts."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(
        TaskMetricsCollector(snapshots, statuses, auto_restarts, plugin_metrics, fencing_rounds)
    )
    return registry


def render_prometheus(
    snapshots: Iterable[Mapping[str, Any]],
    statuses: Iterable[Mapping[str, Any]] = (),
    auto_restarts: Mapping[tuple[str, int], int] | None = None,
    plugin_metrics: Iterable[Mapping[str, Any]] = (),
    fencing_rounds: Mapping[str, int] | None = None,
) -> bytes:
    """Prometheus text exposition (format 0.0.4) of `build_registry(...)`."""
    return generate_latest(build_registry(snapshots, statuses, auto_restarts, plugin_metrics, fencing_rounds))


def render_metrics_view(view: MetricsView) -> bytes:
    return render_prometheus(
        view.task_snapshots,
        view.connector_statuses,
        view.auto_restarts,
        view.connector_plugin_metrics,
        view.fencing_rounds,
    )
