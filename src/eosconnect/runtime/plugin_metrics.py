"""The KIP-877 registries of one task: the task's own and those of its Monitorable plugins.

Tags follow Kafka Connect's: `connector` and `task` on all of them; a converter adds
`converter=key|value`, a transformation `transformation=<alias>`, a predicate `predicate=<alias>`,
each with the plugin's `class` (simple name) and, for a plugin with a `version()`, its `version`.
The task's `TaskMetrics.snapshot()` carries their values to the worker (`api.metrics.PLUGIN_METRICS_KEY`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from typing import Any

from eosconnect.api.converter import Converter
from eosconnect.api.metrics import Monitorable, PluginMetrics
from eosconnect.transforms.chain import TransformationChain

__all__ = ["TaskPluginMetrics"]


def _plugin_tags(instance: object) -> dict[str, str]:
    tags = {"class": type(instance).__name__}
    version = getattr(instance, "version", None)
    if callable(version):
        tags["version"] = str(version())
    return tags


class TaskPluginMetrics:
    """Hands out one task's registries and reads them all; `close()` drops every one of them."""

    def __init__(self, connector: str, task: int) -> None:
        self.tags = {"connector": connector, "task": str(task)}
        self.registries: list[PluginMetrics] = []
        self._task: PluginMetrics | None = None
        self._lock = threading.Lock()

    def for_task(self) -> PluginMetrics:
        """The registry of the task instance about to start; a restarted task's predecessor's
        metrics go, so the new instance registers the same names again."""
        registry = PluginMetrics(self.tags)
        with self._lock:
            if self._task is not None:
                self._task.close()
                self.registries.remove(self._task)
            self._task = registry
            self.registries.append(registry)
        return registry

    def registry(self, **extra: str) -> PluginMetrics:
        """A new registry with the task's tags and `extra` ones."""
        registry = PluginMetrics({**self.tags, **extra})
        with self._lock:
            self.registries.append(registry)
        return registry

    def monitor(self, instance: object, **extra: str) -> None:
        """Give a Monitorable plugin its registry; other plugins have none."""
        if isinstance(instance, Monitorable):
            instance.with_plugin_metrics(self.registry(**extra, **_plugin_tags(instance)))

    def monitor_pipeline(
        self, key: Converter, value: Converter, transforms: TransformationChain[Any]
    ) -> None:
        """The converters, transformations and predicates of a task's pipeline; a predicate that
        several transformations share gets one registry."""
        self.monitor(key, converter="key")
        self.monitor(value, converter="value")
        predicates: dict[str, object] = {}
        for stage in transforms.stages:
            self.monitor(stage.transformation, transformation=stage.alias)
            if stage.predicate is not None and stage.predicate_alias is not None:
                predicates.setdefault(stage.predicate_alias, stage.predicate)
        for alias, predicate in predicates.items():
            self.monitor(predicate, predicate=alias)

    def snapshot(self) -> list[dict[str, Any]]:
        with self._lock:
            registries: Iterable[PluginMetrics] = list(self.registries)
        return [entry for registry in registries for entry in registry.snapshot()]

    def close(self) -> None:
        with self._lock:
            registries, self.registries, self._task = self.registries, [], None
        for registry in registries:
            registry.close()
