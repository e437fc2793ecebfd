"""What any worker answers the REST layer from memory: connectors, configs, status, health, metrics.

Reads are served from this worker's config snapshot and status board, never waiting for Kafka, so
followers answer them too (writes go to the leader, cluster/herder_writes.py). The leader answers a
task's status from what it published itself; a status another worker left in the topic is stale
there (only the leader runs tasks). Bodies follow Kafka Connect's REST API (cluster/herder_api.py).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from functools import cmp_to_key
from typing import Any

from eosconnect import __version__
from eosconnect.cluster.connector_kinds import kind_of_config
from eosconnect.cluster.herder_api import HerderError, MetricsView, NotFoundError
from eosconnect.cluster.herder_state import HerderState
from eosconnect.cluster.validation import plugin_config_infos, validate_connector_config
from eosconnect.converters.resolution import CONVERTER_ALIASES, CONVERTER_PATHS
from eosconnect.plugins.loading import (
    VERSION_SETTING,
    available_connectors,
    connector_type,
    plugin_path_connectors,
    plugin_version,
    resolve_connector_class,
)
from eosconnect.plugins.versions import compare_versions, installed_versions
from eosconnect.runtime.task import TASK_CLASS_KEY
from eosconnect.storage.acls import connector_acls, kafka_acls_command, worker_acls
from eosconnect.storage.config_state import ConfigSnapshot, TargetState
from eosconnect.storage.status_store import ConnectState, Status
from eosconnect.transforms.chain import BUILTIN_PREDICATES, BUILTIN_TRANSFORMATIONS
from eosconnect.worker_config import WorkerConfig

#: /health answers 500 when the herder's loop has not completed a tick for this long.
HEALTH_STALL_S = 60.0


class PluginRequests:
    """The REST requests about plugins and validation, the same for the distributed and the
    standalone herder: both answer them from the worker's settings and what is installed."""

    worker: WorkerConfig

    def validate_connector_config(self, plugin: str, config: Mapping[str, str]) -> dict[str, Any]:
        return validate_connector_config(
            {**config, "connector.class": config.get("connector.class", plugin)}, self.worker
        )

    def connector_plugins(self, connectors_only: bool) -> list[dict[str, str]]:
        return installed_plugins(connectors_only)

    def plugin_config(self, plugin: str, version: str | None = None) -> list[dict[str, Any]]:
        return plugin_config_infos(plugin, version)


class HerderReads(HerderState, PluginRequests):
    """The read side of the `Herder` protocol (cluster/herder_api.py)."""

    def is_leader(self) -> bool:
        return self.election.is_leader

    def leader_url(self) -> str | None:
        return self.election.leader_url()

    def kafka_cluster_id(self) -> str | None:
        return self._cluster_id

    def server_info(self) -> dict[str, Any]:
        return {"version": __version__, "commit": "eosconnect", "kafka_cluster_id": self._cluster_id}

    def connectors(self) -> list[str]:
        return sorted(self.config_store.snapshot.connectors())

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._snapshot_with(name).connector_config(name) or {})

    @staticmethod
    def _listed_task_count(snapshot: ConfigSnapshot, name: str) -> int:
        """Tasks the REST API lists: none for a STOPPED connector (KIP-875: stopping revokes them),
        although the last task configs stay in the config topic for fencing."""
        if snapshot.target_state(name) == TargetState.STOPPED:
            return 0
        return snapshot.task_count(name)

    def connector_acls(self, name: str) -> dict[str, Any]:
        """The ACLs the worker and this connector need under the worker's settings (an eosconnect
        extension): rows for a table and the kafka-acls.sh commands that grant them."""
        config = self.connector_config(name)
        worker = self.worker.originals
        rows = worker_acls(worker) + connector_acls(worker, name, config, sink=kind_of_config(config).is_sink)
        servers = str(worker.get("bootstrap.servers") or "<bootstrap>")
        return {
            "name": name,
            "acls": [row.to_json() for row in rows],
            "commands": [kafka_acls_command(row, row.cluster or servers) for row in rows],
        }

    def connector_info(self, name: str) -> dict[str, Any]:
        snapshot = self._snapshot_with(name)
        return {
            "name": name,
            "config": dict(snapshot.connector_config(name) or {}),
            "tasks": [{"connector": name, "task": t} for t in range(self._listed_task_count(snapshot, name))],
            "type": kind_of_config(snapshot.connector_config(name)).type.value,
        }

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        snapshot = self._snapshot_with(name)
        listed = self._listed_task_count(snapshot, name)
        return [
            {"id": {"connector": name, "task": t}, "config": dict(cfg)}
            for t, cfg in enumerate(snapshot.task_configs(name)[:listed])
        ]

    def _current_status(self, name: str, task: int | None) -> Status | None:
        """From memory, never waiting for Kafka: on the leader what it published (it publishes every
        status); a task status left in the topic by another worker is stale there (only the leader
        runs tasks): the task waits for this leader to start it. Elsewhere the topic as last read,
        except what it says this worker runs: a worker that does not lead (and is not in doubt,
        keeping its tasks while it rejoins) runs no connector and no task, so a RUNNING or PAUSED
        status naming it is its own past, shown UNASSIGNED (`_not_run_here`). A worker cut off
        from the brokers keeps reading such a status from its last view of the topic; without this it
        showed the tasks it had stopped RUNNING for as long as the partition lasted."""
        topic = self.statuses.topic
        stored = topic.connector(name) if task is None else topic.task(name, task)
        if not self.election.is_leader:
            if self.election.in_doubt or stored is None or stored.worker_id != self.worker_id:
                return stored
            return _not_run_here(stored)
        published = self.statuses.published(name, task)
        if published is not None:
            return published
        if task is not None and stored is not None and stored.worker_id != self.worker_id:
            return Status(
                ConnectState.UNASSIGNED,
                self.worker_id,
                stored.generation,
                f"last reported {stored.state.value} by worker {stored.worker_id}, which no longer leads; "
                "waiting for this leader to start it",
            )
        return stored

    def connector_status(self, name: str) -> dict[str, Any]:
        snapshot = self._snapshot_with(name)
        conn = self._current_status(name, None)
        config = snapshot.connector_config(name) or {}
        connector_state: dict[str, Any] = {
            "state": conn.state.value if conn else "UNASSIGNED",
            "worker_id": conn.worker_id if conn else self.worker_id,
        }
        if conn and conn.trace:
            connector_state["trace"] = conn.trace
        connector_state["version"] = plugin_version(
            config.get("connector.class"), config.get(VERSION_SETTING)
        )
        tasks = []
        task_configs = snapshot.task_configs(name)
        for t in range(self._listed_task_count(snapshot, name)):
            st = self._current_status(name, t)
            entry: dict[str, Any] = {
                "id": t,
                "state": st.state.value if st else "UNASSIGNED",
                "worker_id": st.worker_id if st else self.worker_id,
            }
            if st and st.trace:
                entry["trace"] = st.trace
            task_class = task_configs[t].get(TASK_CLASS_KEY) if t < len(task_configs) else None
            entry["version"] = plugin_version(task_class)
            tasks.append(entry)
        kind = kind_of_config(snapshot.connector_config(name))
        return {"name": name, "connector": connector_state, "tasks": tasks, "type": kind.type.value}

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        status = self.connector_status(name)
        for entry in status["tasks"]:
            if entry["id"] == task:
                return entry
        raise NotFoundError(f"Task {name}-{task} not found")

    def connector_topics(self, name: str) -> list[str]:
        """Topics the connector's tasks have written to since this worker ran them (or since the last
        reset); empty for a connector this worker does not know, as in Kafka Connect."""
        with self._lock:
            topics = {
                t for (c, _), r in self._tasks.items() if c == name for t in r.metrics.get("topics", [])
            }
        return sorted(topics)

    def reset_connector_topics(self, name: str) -> None:
        """KIP-558 `PUT /connectors/<c>/topics/reset`: forget the connector's active topics. Running
        tasks report the topics they write again with their next heartbeats. An unknown connector has
        nothing to forget (202 as well, as in Kafka Connect)."""
        with self._lock:
            for (c, _), runtime in self._tasks.items():
                if c == name:
                    runtime.metrics["topics"] = []

    def health(self) -> tuple[int, str, str]:
        """KIP-1017: (HTTP status, status, message): 503 "starting" until the herder has read its
        config topic and knows the group's leader, 500 "unhealthy" if its loop has not completed a
        tick for a long time, else 200 "healthy"."""
        if self._last_tick is None or (not self.election.is_leader and self.election.leader_url() is None):
            return 503, "starting", "Worker is still starting up."
        stalled = time.monotonic() - self._last_tick
        if stalled > HEALTH_STALL_S:
            return (
                500,
                "unhealthy",
                f"Worker was unable to handle this request and may be unable to handle other requests: its "
                f"herder has not completed a tick for {stalled:.0f} s (is the Kafka cluster reachable?)",
            )
        return 200, "healthy", "Worker has completed startup and is ready to handle requests."

    def task_metrics(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r.metrics) for r in self._tasks.values() if r.metrics]

    def metrics_view(self) -> MetricsView:
        statuses = []
        for name in self.connectors():
            try:
                statuses.append(self.connector_status(name))
            except HerderError:
                continue
        with self._lock:
            restarts = dict(self._auto_restarts.total)
        return MetricsView(
            self.task_metrics(), statuses, restarts, self._live.plugin_metrics(), dict(self._fencing_rounds)
        )


def _not_run_here(stored: Status) -> Status:
    """How a follower shows a RUNNING or PAUSED status naming itself: UNASSIGNED, since only the
    leader runs tasks and the status is what this worker reported while it led."""
    if stored.state not in (ConnectState.RUNNING, ConnectState.PAUSED):
        return stored  # FAILED, STOPPED, UNASSIGNED: true of the instance that reported it
    return Status(
        ConnectState.UNASSIGNED,
        stored.worker_id,
        stored.generation,
        f"last reported {stored.state.value} by this worker ({stored.worker_id}) while it led; a follower "
        "runs nothing, and no other leader's status for it has been read here yet (ask another worker, or "
        "this one once it reaches the status topic again)",
    )


def installed_plugins(connectors_only: bool) -> list[dict[str, str]]:
    """`GET /connector-plugins`: every connector, then (unless `connectors_only`) the transformations,
    predicates and converters, as Kafka Connect lists them."""
    plugins: list[dict[str, str]] = []
    seen: set[str] = set()
    # Short names first (built-ins, entry points, registered), then plugin.path's classes.
    for short, path in [*sorted(available_connectors().items()), *plugin_path_connectors().items()]:
        if str(path) in seen:  # one class may have several names (e.g. Kafka's class name)
            continue
        seen.add(str(path))
        try:
            cls = resolve_connector_class(short)
            kind = connector_type(cls).value
            # KIP-891: one entry per installed version, oldest first (plugins/versions.py)
            versions = sorted(installed_versions(cls, str(path)), key=cmp_to_key(compare_versions))
        except Exception:
            kind, versions = "source", ["unknown"]
        plugins.extend({"class": str(path), "type": kind, "version": v} for v in versions or ["unknown"])
    if not connectors_only:
        # As Kafka Connect lists them: every transformation, predicate and converter under its Java
        # class name (Kafka's, and Confluent's for the Schema Registry converters).
        for kind, names in (
            ("transformation", BUILTIN_TRANSFORMATIONS),
            ("predicate", BUILTIN_PREDICATES),
            ("converter", [*CONVERTER_ALIASES, *CONVERTER_PATHS]),
        ):
            plugins.extend(
                {"class": name, "type": kind, "version": __version__}
                for name in sorted(names)
                if name.startswith(("org.", "io."))
            )
    return plugins
