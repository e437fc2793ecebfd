"""Plugins that register KIP-877 metrics of their own (tests/integration/test_plugin_metrics.py).
Importable by Spark executors: tests/conftest.py puts the tests directory on PYTHONPATH."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from eosconnect.api.config import ConfigDef
from eosconnect.api.data.schema import Schema
from eosconnect.api.metrics import (
    CumulativeCount,
    CumulativeSum,
    Gauge,
    Max,
    Monitorable,
    PluginMetrics,
    Sensor,
)
from eosconnect.api.records import SinkRecord, SourceRecord
from eosconnect.api.sink import SinkConnector, SinkTask
from eosconnect.api.source import SourceTask
from eosconnect.api.transforms import Transformation
from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask
from eosconnect.converters.json import JsonConverter
from eosconnect.transforms.predicates import TopicNameMatches


class MonitoredSequenceTask(SequenceSourceTask):
    """A SequenceSource task with a gauge (the next sequence number) and a sensor over its polls."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        metrics = self.context.plugin_metrics()
        metrics.add_metric(
            metrics.metric_name("next-seq", "The next sequence number the task writes", {}),
            Gauge(lambda: self.next_seq),
        )
        self.poll_size = metrics.add_sensor("poll-size")
        self.poll_size.add(metrics.metric_name("poll-size-max", "Most records in one poll", {}), Max())
        self.poll_size.add(metrics.metric_name("poll-size-total", "Records polled", {}), CumulativeSum())

    def poll(self) -> list[SourceRecord] | None:
        records = super().poll()
        if records:
            self.poll_size.record(len(records))
        return records


class MonitoredSequenceConnector(SequenceSourceConnector):
    """Counts, in a gauge of its own, the task configs it generated."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self.generated = 0
        metrics = self.context.plugin_metrics()
        metrics.add_metric(
            metrics.metric_name("task-configs-generated", "Task configs generated", {}),
            Gauge(lambda: self.generated),
        )

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        configs = super().task_configs(max_tasks)
        self.generated += len(configs)
        return configs

    def task_class(self) -> type[SourceTask]:
        return MonitoredSequenceTask


class CountingTransformation(Transformation[SourceRecord], Monitorable):
    """Passes records through, counting them in a sensor of its own."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: Sensor | None = None

    def version(self) -> str:
        return "1.2.3"

    def with_plugin_metrics(self, metrics: PluginMetrics) -> None:
        self.seen = metrics.add_sensor("seen")
        self.seen.add(
            metrics.metric_name("records-seen", "Records the transformation saw", {}), CumulativeSum()
        )

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        if self.seen is not None:
            self.seen.record()
        return record


class CountingJsonConverter(JsonConverter, Monitorable):
    """A JsonConverter with a gauge of how often it was asked to serialise (a value or a column)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def with_plugin_metrics(self, metrics: PluginMetrics) -> None:
        metrics.add_metric(
            metrics.metric_name("serialise-calls", "Calls to serialise values", {}), Gauge(lambda: self.calls)
        )

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        self.calls += 1
        return super().from_connect_data(topic, schema, value)

    def from_connect_batch(
        self, topic: str, values: Sequence[Any], schema: Schema | None = None
    ) -> Sequence[bytes | None]:
        self.calls += 1
        return super().from_connect_batch(topic, values, schema)


class CountingTopicPredicate(TopicNameMatches[SourceRecord], Monitorable):
    """TopicNameMatches counting the records it tested."""

    def with_plugin_metrics(self, metrics: PluginMetrics) -> None:
        self.tested = metrics.add_sensor("tested")
        self.tested.add(metrics.metric_name("records-tested", "Records tested", {}), CumulativeCount())

    def test(self, record: SourceRecord) -> bool:
        self.tested.record()
        return super().test(record)


class SlowSinkTask(SinkTask):
    """Takes `put.delay.ms` over every non-empty put, so its consumer falls behind a full topic."""

    def start(self, config: dict[str, str]) -> None:
        self.delay_s = int(config.get("put.delay.ms", "0")) / 1000

    def put(self, records: list[SinkRecord]) -> None:
        if records:
            time.sleep(self.delay_s)


class SlowSinkConnector(SinkConnector):
    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, config: dict[str, str]) -> None:
        self.config = dict(config)

    def task_class(self) -> type[SinkTask]:
        return SlowSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.config)]
