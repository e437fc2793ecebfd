"""Connectors the leader keeps started while they run, so that they can ask for new task configs.

Kafka Connect keeps each connector's `Connector` object started on one worker: its own threads
watch the world outside (new tables, new topics or partitions) and call
`context.request_task_reconfiguration()`, or `context.raise_error()` when something is beyond
repair. Here the leader holds those objects. The herder asks, on every tick, whether a connector
asked for new task configs (`take_request`), and writes them when they differ from the stored ones:
a new generation, so the exactly-once start-up fences the previous tasks before the new ones run.
A connector that raised an error stays failed, without an instance, until it is restarted or its
config changes (Kafka Connect's rule); its tasks keep running meanwhile.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eosconnect.api.connector import Connector
from eosconnect.api.context import ConnectorContext
from eosconnect.api.metrics import PluginMetrics
from eosconnect.cluster.jobs import connector_task_configs, start_connector

log = logging.getLogger(__name__)


@dataclass
class LiveConnector:
    """One started connector, or the error that failed it (then `instance` is None)."""

    name: str
    config: Mapping[str, str]
    instance: Connector | None
    requested: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    #: The instance's KIP-877 metrics (`context.plugin_metrics()`), closed when it stops.
    metrics: PluginMetrics = field(default_factory=lambda: PluginMetrics({}))


class LiveConnectors:
    """The leader's started connectors, by name. Only the herder's thread calls these methods;
    connectors call back (`request_task_reconfiguration`, `raise_error`) from any thread."""

    def __init__(self, worker_props: Mapping[str, str], wake: Callable[[], None]) -> None:
        self._worker_props = dict(worker_props)
        self._wake = wake
        self._live: dict[str, LiveConnector] = {}

    def get(self, name: str) -> LiveConnector | None:
        return self._live.get(name)

    def start(self, name: str, config: Mapping[str, str]) -> LiveConnector:
        """Start `name` with `config`, stopping the instance it had; raises what `start()` raises."""
        self.stop(name)
        live = LiveConnector(name, dict(config), None, metrics=PluginMetrics({"connector": name}))
        context = ConnectorContext(
            request_task_reconfiguration=lambda: self._on_request(live),
            raise_error=lambda error: self._on_error(live, error),
            metrics_registry=live.metrics,
        )
        live.instance = start_connector(config, self._worker_props, context)
        self._live[name] = live
        return live

    def task_configs(self, live: LiveConnector) -> list[dict[str, str]]:
        assert live.instance is not None, f"connector {live.name} is not started"
        configs = connector_task_configs(live.instance, live.config)
        tasks_max = int(str(live.config.get("tasks.max", "1")).strip() or 1)
        if len(configs) > tasks_max:  # Kafka Connect's tasks.max.enforce (KIP-1004)
            raise ValueError(
                f"the connector generated {len(configs)} task configs, more than its tasks.max={tasks_max}; "
                "this is a bug in the connector (task_configs(max_tasks) must return at most max_tasks)"
            )
        return configs

    @staticmethod
    def take_request(live: LiveConnector) -> bool:
        """True once for every time the connector asked for new task configs since the last call."""
        if not live.requested.is_set():
            return False
        live.requested.clear()
        return True

    def fail(self, live: LiveConnector) -> None:
        """Stop the instance of a connector that raised an error; the entry keeps the error."""
        self._stop_instance(live)

    def stop(self, name: str) -> None:
        live = self._live.pop(name, None)
        if live is not None:
            self._stop_instance(live)

    def retain(self, names: Iterable[str]) -> None:
        """Stop every connector not in `names` (deleted or stopped ones)."""
        keep = set(names)
        for name in [n for n in self._live if n not in keep]:
            self.stop(name)

    def stop_all(self) -> None:
        self.retain(())

    def plugin_metrics(self) -> list[dict[str, Any]]:
        """The started connectors' KIP-877 metrics (`PluginMetrics.snapshot()` entries). Called from
        the REST threads: it reads a copy of the table, and each registry is thread-safe."""
        registries = [live.metrics for live in list(self._live.values())]
        return [entry for registry in registries for entry in registry.snapshot()]

    # ----------------------------------------------------------------------------- callbacks
    def _on_request(self, live: LiveConnector) -> None:
        log.info("connector %s asked for new task configs", live.name)
        live.requested.set()
        self._wake()

    def _on_error(self, live: LiveConnector, error: BaseException) -> None:
        log.error("connector %s raised an error: %s", live.name, error)
        live.error = error
        self._wake()

    @staticmethod
    def _stop_instance(live: LiveConnector) -> None:
        instance, live.instance = live.instance, None
        live.metrics.close()
        if instance is None:
            return
        try:
            instance.stop()
        except Exception:
            log.exception("connector %s: stop() raised", live.name)
