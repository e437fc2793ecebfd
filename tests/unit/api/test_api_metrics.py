"""The KIP-877 registry a plugin registers its metrics on (eosconnect.api.metrics)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import pytest

from eosconnect.api import ConnectException, Gauge, PluginMetrics, SinkRecord, SinkTaskContext
from eosconnect.api.metrics import (
    PLUGIN_METRICS_GROUP,
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    Min,
    Rate,
)

TAGS = {"connector": "c", "task": "0"}
GUIDE = Path(__file__).resolve().parents[3] / "docs" / "connector-guide.md"


def values(metrics: PluginMetrics) -> dict[str, object]:
    return {entry["name"]: entry["value"] for entry in metrics.snapshot()}


def test_metric_names_carry_the_plugins_tags_and_their_own_in_the_plugins_group() -> None:
    metrics = PluginMetrics(TAGS)
    name = metrics.metric_name("queue-size", "Records queued", {"queue": "main"})
    assert name.group == PLUGIN_METRICS_GROUP == "plugins"
    assert dict(name.tags) == {**TAGS, "queue": "main"}


def test_a_metric_cannot_replace_a_tag_the_runtime_set() -> None:
    with pytest.raises(ConnectException, match="task"):
        PluginMetrics(TAGS).metric_name("x", "", {"task": "7"})


def test_a_gauge_is_read_when_the_snapshot_is_taken() -> None:
    metrics = PluginMetrics(TAGS)
    queue: list[int] = []
    metrics.add_metric(metrics.metric_name("queue-size", "Records queued", {}), Gauge(lambda: len(queue)))
    assert values(metrics) == {"queue-size": 0}
    queue.extend([1, 2, 3])
    [entry] = metrics.snapshot()
    assert entry == {
        "name": "queue-size",
        "group": "plugins",
        "description": "Records queued",
        "tags": TAGS,
        "value": 3,
    }


def test_a_name_and_tags_taken_are_refused_but_other_tags_make_another_metric() -> None:
    metrics = PluginMetrics(TAGS)
    metrics.add_metric(metrics.metric_name("size", "", {"queue": "a"}), Gauge(lambda: 1))
    with pytest.raises(ConnectException, match="exists"):
        metrics.add_metric(metrics.metric_name("size", "", {"queue": "a"}), Gauge(lambda: 2))
    metrics.add_metric(metrics.metric_name("size", "", {"queue": "b"}), Gauge(lambda: 2))
    assert sorted(e["value"] for e in metrics.snapshot()) == [1, 2]


def test_a_gauge_that_raises_reads_as_none_and_the_others_still_read() -> None:
    metrics = PluginMetrics(TAGS)
    metrics.add_metric(metrics.metric_name("broken", "", {}), Gauge(lambda: 1 // 0))
    metrics.add_metric(metrics.metric_name("fine", "", {}), Gauge(lambda: 7))
    assert values(metrics) == {"broken": None, "fine": 7}


def test_only_gauges_and_measurables_are_metrics() -> None:
    metrics = PluginMetrics(TAGS)
    with pytest.raises(ConnectException, match="neither a Gauge nor Measurable"):
        metrics.add_metric(metrics.metric_name("size", "", {}), lambda: 1)  # type: ignore[arg-type]


def test_a_sensors_stats_see_every_recorded_value() -> None:
    metrics = PluginMetrics(TAGS)
    sensor = metrics.add_sensor("batch")
    for stat_name, stat in (
        ("avg", Avg()),
        ("max", Max()),
        ("min", Min()),
        ("sum", CumulativeSum()),
        ("count", CumulativeCount()),
        ("rate", Rate()),
    ):
        sensor.add(metrics.metric_name(f"batch-{stat_name}", "", {}), stat)
    assert metrics.add_sensor("batch") is sensor  # one sensor per name
    before = values(metrics)
    assert math.isnan(before["batch-avg"]) and math.isnan(before["batch-max"])  # type: ignore[arg-type]
    for value in (4, 10, 1):
        sensor.record(value)
    after = values(metrics)
    assert after["batch-avg"] == 5 and after["batch-max"] == 10 and after["batch-min"] == 1
    assert after["batch-sum"] == 15 and after["batch-count"] == 3
    assert after["batch-rate"] > 0  # type: ignore[operator]


def test_removing_metrics_and_sensors_takes_their_values_out() -> None:
    metrics = PluginMetrics(TAGS)
    gauge_name = metrics.metric_name("size", "", {})
    metrics.add_metric(gauge_name, Gauge(lambda: 1))
    sensor = metrics.add_sensor("batch")
    sensor.add(metrics.metric_name("batch-max", "", {}), Max())
    metrics.remove_metric(gauge_name)
    assert set(values(metrics)) == {"batch-max"}
    metrics.remove_sensor("batch")
    assert metrics.snapshot() == []
    metrics.add_metric(gauge_name, Gauge(lambda: 2))  # the name is free again
    metrics.close()
    assert metrics.snapshot() == []


def test_the_connector_guides_example_registers_what_it_says() -> None:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    (code,) = [b for b in blocks if "def with_plugin_metrics" in b]
    namespace: dict[str, Any] = {"__name__": "connector_guide_metrics_example"}
    exec(compile(code, str(GUIDE), "exec"), namespace)
    task, context = namespace["BufferingSinkTask"](), SinkTaskContext()
    task.initialize(context)
    task.start({})
    task.put([SinkRecord("orders", 0, offset, None, offset) for offset in range(3)])
    assert values(context.plugin_metrics()) == {"buffered-records": 3, "put-size-max": 3}
    transformation, registry = namespace["CountingTransformation"](), PluginMetrics(TAGS)
    transformation.with_plugin_metrics(registry)
    record = SinkRecord("orders", 0, 0, None, "v")
    assert transformation.apply(record) is record
    assert values(registry) == {"records-seen": 1}
