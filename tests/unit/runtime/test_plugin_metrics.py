"""A task's KIP-877 registries (runtime/plugin_metrics.py): Kafka Connect's tags per plugin, one
registry per task instance, and their values in the task's metrics snapshot."""

from __future__ import annotations

from typing import Any

from eosconnect.api.metrics import PLUGIN_METRICS_KEY, Gauge
from eosconnect.converters.resolution import converter_from_config
from eosconnect.runtime.metrics import SinkTaskMetrics, TaskMetrics
from eosconnect.runtime.plugin_metrics import TaskPluginMetrics
from eosconnect.transforms.chain import TransformationChain

SUPPORT = "support.monitored_connectors"

CONFIG = {
    "key.converter": "json",
    "value.converter": f"{SUPPORT}.CountingJsonConverter",
    "transforms": "first,second",
    "transforms.first.type": f"{SUPPORT}.CountingTransformation",
    "transforms.first.predicate": "anyTopic",
    "transforms.second.type": "InsertField$Value",
    "transforms.second.static.field": "f",
    "transforms.second.static.value": "v",
    "transforms.second.predicate": "anyTopic",
    "predicates": "anyTopic",
    "predicates.anyTopic.type": f"{SUPPORT}.CountingTopicPredicate",
    "predicates.anyTopic.pattern": ".*",
}


def monitored(plugins: TaskPluginMetrics) -> None:
    plugins.monitor_pipeline(
        converter_from_config(CONFIG, is_key=True),
        converter_from_config(CONFIG, is_key=False),
        TransformationChain.from_config(CONFIG),
    )


def tags_by_name(entries: list[dict[str, Any]]) -> dict[str, dict[str, str]]:
    return {entry["name"]: entry["tags"] for entry in entries}


def test_each_monitorable_plugin_gets_kafkas_tags_and_the_others_none() -> None:
    plugins = TaskPluginMetrics("orders", 3)
    monitored(plugins)
    task = {"connector": "orders", "task": "3"}
    # the JSON key converter and InsertField are not Monitorable; the predicate two transformations
    # share registers once
    assert tags_by_name(plugins.snapshot()) == {
        "serialise-calls": {**task, "converter": "value", "class": "CountingJsonConverter"},
        "records-seen": {
            **task,
            "transformation": "first",
            "class": "CountingTransformation",
            "version": "1.2.3",
        },
        "records-tested": {**task, "predicate": "anyTopic", "class": "CountingTopicPredicate"},
    }


def test_a_restarted_task_instance_registers_its_names_again() -> None:
    plugins = TaskPluginMetrics("orders", 0)
    first = plugins.for_task()
    first.add_metric(first.metric_name("lag", "", {}), Gauge(lambda: 1))
    second = plugins.for_task()  # the first instance's metrics go with it
    second.add_metric(second.metric_name("lag", "", {}), Gauge(lambda: 2))
    assert [(e["name"], e["value"], e["tags"]) for e in plugins.snapshot()] == [
        ("lag", 2, {"connector": "orders", "task": "0"})
    ]


def test_the_task_snapshot_carries_plugin_metrics_until_the_task_closes_them() -> None:
    metrics = TaskMetrics("orders", 1)
    monitored(metrics.plugins)
    registry = metrics.plugins.for_task()
    registry.add_metric(registry.metric_name("lag", "", {}), Gauge(lambda: 5))
    names = {entry["name"] for entry in metrics.snapshot()[PLUGIN_METRICS_KEY]}  # type: ignore[union-attr]
    assert names == {"lag", "serialise-calls", "records-seen", "records-tested"}
    metrics.plugins.close()
    assert metrics.snapshot()[PLUGIN_METRICS_KEY] == []


def test_batch_times_are_kafkas_put_batch_and_poll_batch_metrics() -> None:
    sink, source = SinkTaskMetrics("s", 0), TaskMetrics("p", 0)
    assert sink.snapshot()["put-batch-avg-time-ms"] is None  # no put yet: left out of /metrics
    for seconds in (0.010, 0.030):
        sink.record_batch(seconds)
        source.record_batch(seconds)
    sink_snapshot, source_snapshot = sink.snapshot(), source.snapshot()
    assert sink_snapshot["put-batch-avg-time-ms"] == source_snapshot["poll-batch-avg-time-ms"] == 20.0
    assert sink_snapshot["put-batch-max-time-ms"] == source_snapshot["poll-batch-max-time-ms"] == 30.0
