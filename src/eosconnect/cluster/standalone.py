"""The standalone herder: Kafka Connect's `StandaloneHerder`, for `eosconnect standalone`.

One process runs every connector it was given and all their tasks, each task in a thread of its
own with the same task loop a Spark task runs (runtime/executor.py `run_task`). Nothing is kept in
Kafka but the records and the offsets of exactly-once tasks: connector configs come from files (and
the REST API, in memory, gone at exit, as in Kafka), statuses live in memory, and source offsets
live in `offset.storage.file.filename` (at least once: flushed every `offset.flush.interval.ms` and
when a task stops) unless the worker runs exactly once (`exactly.once.source.support=enabled`),
where each transaction carries its offsets to `offset.storage.topic` and a task's start-up fences
its predecessors locally (runtime/startup.py `LocalStartupCoordinator`). There is no group, no
leader, no config or status topic, and no Spark.

The herder's thread acts on what the REST threads change: each tick it (re)generates a connector's
task configs when its config changed or the connector asked for it, restarts the tasks of a new
generation, and sets every task's directive from its connector's target state.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka.admin import AdminClient

from eosconnect import __version__
from eosconnect.api.records import SourceOffset, SourcePartition
from eosconnect.cluster.connector_kinds import fencing_producer_config, kind_of_config
from eosconnect.cluster.herder_api import BadRequestError, ConflictError, MetricsView, NotFoundError
from eosconnect.cluster.herder_reads import PluginRequests
from eosconnect.cluster.herder_writes import validated_config
from eosconnect.cluster.live_connectors import LiveConnectors
from eosconnect.plugins.loading import VERSION_SETTING, plugin_version
from eosconnect.runtime.control import Directive, LocalTaskControl
from eosconnect.runtime.executor import run_task
from eosconnect.runtime.startup import LocalStartupCoordinator
from eosconnect.runtime.task import TASK_CLASS_KEY, TaskOutcome, TaskSpec, TaskState
from eosconnect.storage.acls import connector_acls, kafka_acls_command, worker_acls
from eosconnect.storage.clients import client_config
from eosconnect.storage.config_state import TargetState
from eosconnect.storage.offsets import (
    OFFSETS_FILE_SETTING,
    ConnectorOffsetView,
    FileOffsetStore,
    offsets_topic_for,
)
from eosconnect.storage.session_key import SessionKey
from eosconnect.storage.topics import ensure_topic
from eosconnect.worker_config import WorkerConfig

__all__ = ["OFFSETS_FILE_SETTING", "StandaloneHerder"]

log = logging.getLogger(__name__)

#: The herder's thread looks at its connectors at least this often (sooner when woken).
TICK_S = 0.5
#: What the internal endpoints of a distributed worker's tasks answer here.
NO_TASK_CHANNEL = "a standalone worker runs its tasks in its own process: it takes no task or host heartbeats"


class _LocalTask:
    """One task instance, running in a thread of this process from its creation; `on_end` is
    called from that thread once the task has ended (its `outcome` set)."""

    def __init__(self, spec: TaskSpec, control: LocalTaskControl, on_end: Callable[[], None]) -> None:
        self.spec = spec
        self.control = control
        self.outcome: TaskOutcome | None = None
        self._on_end = on_end
        self.thread = threading.Thread(
            target=self._run, name=f"task-{spec.connector}-{spec.task}", daemon=True
        )
        self.thread.start()

    def _run(self) -> None:
        self.outcome = run_task(self.spec)
        self._on_end()

    def state(self) -> tuple[str, str | None]:
        if self.outcome is not None:
            if self.outcome.state is TaskState.FAILED:
                return "FAILED", self.outcome.trace
            return "UNASSIGNED", "the task stopped"
        if self.control.paused.is_set():
            return "PAUSED", None
        return "RUNNING", None


@dataclass
class _Connector:
    """One connector: its config and target state, its task configs and their generation."""

    config: dict[str, str]
    target: TargetState
    task_configs: list[dict[str, str]] = field(default_factory=list)
    generation: int = -1
    generated_from: dict[str, str] | None = None
    failure: str | None = None
    tasks: dict[int, _LocalTask] = field(default_factory=dict)


class StandaloneHerder(PluginRequests):
    """The `Herder` (cluster/herder_api.py) of a standalone worker: every connector and task in
    this process. `offsets_file` is `offset.storage.file.filename`, read at once (`ConfigException`
    when it cannot be); it is not used when the worker runs exactly once, whose offsets live in
    `offset.storage.topic`."""

    def __init__(self, worker: WorkerConfig, rest_url: str, offsets_file: str | None) -> None:
        self.worker = worker
        self.rest_url = rest_url.rstrip("/")
        self.worker_id = self.rest_url.split("://", 1)[-1]
        self.offsets = (
            None if worker.exactly_once_enabled or offsets_file is None else FileOffsetStore(offsets_file)
        )
        self.on_cluster_logger_level: Any = None
        self._connectors: dict[str, _Connector] = {}
        self._lock = threading.RLock()
        self._wakeup = threading.Event()
        self._stop = threading.Event()
        self._live = LiveConnectors(worker.originals, self._wakeup.set)
        self._thread = threading.Thread(target=self._loop, name="standalone-herder", daemon=True)
        self._started = False

    # ----------------------------------------------------------------------------- life cycle
    def start(self) -> None:
        if self.offsets is None:  # exactly once: each transaction writes its offsets to the topic
            ensure_topic(
                AdminClient(client_config("admin", self.worker.originals)),
                self.worker.offset_storage_topic,
                int(self.worker.values["offset.storage.partitions"]),
                int(self.worker.values["offset.storage.replication.factor"]),
                partitions_setting="offset.storage.partitions",
                replication_setting="offset.storage.replication.factor",
            )
        self._thread.start()
        self._started = True

    def stop(self) -> None:
        """Stop every task (each commits what it sent, as Kafka's tasks do on a clean stop)."""
        self._stop.set()
        self._wakeup.set()
        self._thread.join(30)
        with self._lock:
            for connector in self._connectors.values():  # all at once: each task's final commit in parallel
                for local in connector.tasks.values():
                    local.control.set(Directive.STOP)
            for name, connector in self._connectors.items():
                self._stop_tasks(name, connector)
            self._live.stop_all()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wakeup.wait(TICK_S)
            self._wakeup.clear()
            if self._stop.is_set():
                return
            with self._lock:
                for name, connector in list(self._connectors.items()):
                    try:
                        self._reconcile(name, connector)
                    except Exception as exc:
                        log.exception("connector %s: reconciling failed", name)
                        connector.failure = f"connector {name!r}: {exc}"

    def _reconcile(self, name: str, connector: _Connector) -> None:
        if connector.target is TargetState.STOPPED:
            self._stop_tasks(name, connector)
            self._live.stop(name)
            connector.generated_from = None  # resumed, it starts afresh
            return
        live = self._live.get(name)
        if live is not None and live.error is not None and live.instance is not None:
            connector.failure = "".join(traceback.format_exception(live.error))
            log.error("connector %s failed: %s; its tasks keep running", name, live.error)
            self._live.fail(live)
        asked = live is not None and live.instance is not None and self._live.take_request(live)
        if connector.generated_from != connector.config or asked:
            try:
                if live is None or live.instance is None or connector.generated_from != connector.config:
                    live = self._live.start(name, connector.config)
                task_configs = self._live.task_configs(live)
            except Exception as exc:
                self._live.stop(name)
                self._stop_tasks(name, connector)
                connector.generated_from = dict(connector.config)
                connector.failure = f"connector {name!r} could not produce task configs: {exc}"
                log.error("%s", connector.failure)
                return
            connector.failure = None
            connector.generated_from = dict(connector.config)
            if task_configs != connector.task_configs or not connector.tasks:
                self._stop_tasks(name, connector)
                previous = len(connector.task_configs)
                connector.task_configs = task_configs
                connector.generation += 1
                for task in range(len(task_configs)):
                    self._start_task(name, connector, task, previous)
        directive = Directive.PAUSE if connector.target is TargetState.PAUSED else Directive.RUN
        for local in connector.tasks.values():
            if local.outcome is None and local.control.directive() is not directive:
                local.control.set(directive)

    def _start_task(self, name: str, connector: _Connector, task: int, previous_task_count: int = 0) -> None:
        control = LocalTaskControl()
        if connector.target is TargetState.PAUSED:
            control.set(Directive.PAUSE)
        spec = TaskSpec(
            connector=name,
            task=task,
            task_config=dict(connector.task_configs[task]),
            connector_config=dict(connector.config),
            worker_config=dict(self.worker.originals),
            control=control,
            coordinator=LocalStartupCoordinator(
                group_id=self.worker.group_id,
                producer_config=fencing_producer_config(self.worker.originals, connector.config),
                task_count=len(connector.task_configs),
                previous_task_count=previous_task_count,
                generation=connector.generation,
            ),
            generation=connector.generation,
            offset_store=self.offsets,
        )
        connector.tasks[task] = _LocalTask(spec, control, self._wakeup.set)

    def _stop_tasks(self, name: str, connector: _Connector) -> None:
        """Tell every task to stop, then wait for each within `task.shutdown.graceful.timeout.ms`
        (plus the final commit's own budget); one that does not end is left behind with a WARN."""
        for task in connector.tasks.values():
            task.control.set(Directive.STOP)
        budget_s = 2 * self.worker.task_shutdown_graceful_timeout_ms / 1000 + 5
        for index, task in connector.tasks.items():
            task.thread.join(budget_s)
            if task.thread.is_alive():
                log.warning("task %s-%d did not stop within %.0f s; leaving it behind", name, index, budget_s)
        connector.tasks.clear()

    # ----------------------------------------------------------------------------- connectors from files
    def add_connector(self, name: str, config: Mapping[str, str]) -> None:
        """A connector of the command line, validated as a REST create is (`BadRequestError`)."""
        self.put_connector_config(name, config, allow_replace=False)

    def delivery(self, name: str) -> str:
        """How the connector's records reach Kafka and where its progress is kept, for the start-up log."""
        if kind_of_config(self.connector_config(name)).is_sink:
            return "sink: its progress is its consumer group's offsets"
        if self.offsets is not None:
            return f"at least once, source offsets in {self.offsets.path} ({OFFSETS_FILE_SETTING})"
        return (
            f"exactly once, source offsets in topic {self.worker.offset_storage_topic} inside each "
            "transaction (exactly.once.source.support=enabled)"
        )

    # ----------------------------------------------------------------------------- reads
    def is_leader(self) -> bool:
        return True

    def leader_url(self) -> str | None:
        return self.rest_url

    def kafka_cluster_id(self) -> str | None:
        return None

    def _get(self, name: str) -> _Connector:
        connector = self._connectors.get(name)
        if connector is None:
            raise NotFoundError(f"Connector {name} not found")
        return connector

    def _listed_tasks(self, connector: _Connector) -> int:
        return 0 if connector.target is TargetState.STOPPED else len(connector.task_configs)

    def connectors(self) -> list[str]:
        with self._lock:
            return sorted(self._connectors)

    def connector_config(self, name: str) -> dict[str, str]:
        with self._lock:
            return dict(self._get(name).config)

    def connector_info(self, name: str) -> dict[str, Any]:
        with self._lock:
            connector = self._get(name)
            return {
                "name": name,
                "config": dict(connector.config),
                "tasks": [{"connector": name, "task": t} for t in range(self._listed_tasks(connector))],
                "type": kind_of_config(connector.config).type.value,
            }

    def connector_acls(self, name: str) -> dict[str, Any]:
        config = self.connector_config(name)
        worker = self.worker.originals
        rows = worker_acls(worker) + connector_acls(worker, name, config, sink=kind_of_config(config).is_sink)
        servers = str(worker.get("bootstrap.servers") or "<bootstrap>")
        return {
            "name": name,
            "acls": [row.to_json() for row in rows],
            "commands": [kafka_acls_command(row, row.cluster or servers) for row in rows],
        }

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            connector = self._get(name)
            return [
                {"id": {"connector": name, "task": t}, "config": dict(cfg)}
                for t, cfg in enumerate(connector.task_configs[: self._listed_tasks(connector)])
            ]

    def connector_status(self, name: str) -> dict[str, Any]:
        with self._lock:
            connector = self._get(name)
            state = {TargetState.STARTED: "RUNNING", TargetState.PAUSED: "PAUSED"}.get(
                connector.target, "STOPPED"
            )
            connector_state: dict[str, Any] = {
                "state": "FAILED" if connector.failure else state,
                "worker_id": self.worker_id,
            }
            if connector.failure:
                connector_state["trace"] = connector.failure
            connector_state["version"] = plugin_version(
                connector.config.get("connector.class"), connector.config.get(VERSION_SETTING)
            )
            tasks = []
            for t in range(self._listed_tasks(connector)):
                local = connector.tasks.get(t)
                task_state, trace = local.state() if local is not None else ("UNASSIGNED", None)
                entry: dict[str, Any] = {"id": t, "state": task_state, "worker_id": self.worker_id}
                if trace:
                    entry["trace"] = trace
                entry["version"] = plugin_version(connector.task_configs[t].get(TASK_CLASS_KEY))
                tasks.append(entry)
            kind = kind_of_config(connector.config).type.value
            return {"name": name, "connector": connector_state, "tasks": tasks, "type": kind}

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        for entry in self.connector_status(name)["tasks"]:
            if entry["id"] == task:
                return dict(entry)
        raise NotFoundError(f"Task {name}-{task} not found")

    def connector_topics(self, name: str) -> list[str]:
        """KIP-558 is not tracked by the standalone worker (its tasks report no heartbeats)."""
        return []

    def reset_connector_topics(self, name: str) -> None:
        return None

    def health(self) -> tuple[int, str, str]:
        if not self._started:
            return 503, "starting", "Worker is still starting up."
        return 200, "healthy", "Worker has completed startup and is ready to handle requests."

    def server_info(self) -> dict[str, Any]:
        return {"version": __version__, "commit": "eosconnect", "kafka_cluster_id": None}

    # ----------------------------------------------------------------------------- writes
    def put_connector_config(
        self, name: str, config: Mapping[str, str], allow_replace: bool
    ) -> tuple[bool, dict[str, Any]]:
        checked = validated_config(name, config, self.worker, None)
        with self._lock:
            existing = self._connectors.get(name)
            if existing is not None and not allow_replace:
                raise ConflictError(f"Connector {name} already exists")
            if existing is None:
                self._connectors[name] = _Connector(checked, TargetState.STARTED)
            else:
                existing.config = checked
        self._wakeup.set()
        return existing is None, self.connector_info(name)

    def create_connector(self, name: str, config: Mapping[str, str], initial_state: str) -> dict[str, Any]:
        state = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED, "STOPPED": TargetState.STOPPED}
        if initial_state.upper() not in state:
            raise BadRequestError(f"initial_state must be RUNNING, PAUSED or STOPPED, got {initial_state!r}")
        checked = validated_config(name, config, self.worker, None)
        with self._lock:
            if name in self._connectors:
                raise ConflictError(f"Connector {name} already exists")
            self._connectors[name] = _Connector(checked, state[initial_state.upper()])
        self._wakeup.set()
        return self.connector_info(name)

    def delete_connector(self, name: str) -> None:
        with self._lock:
            connector = self._get(name)
            self._stop_tasks(name, connector)
            self._live.stop(name)
            del self._connectors[name]

    def _set_target(self, name: str, target: TargetState) -> None:
        with self._lock:
            self._get(name).target = target
        self._wakeup.set()

    def pause_connector(self, name: str) -> None:
        self._set_target(name, TargetState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STARTED)

    def stop_connector(self, name: str) -> None:
        with self._lock:
            connector = self._get(name)
            connector.target = TargetState.STOPPED
            self._reconcile(name, connector)

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        with self._lock:
            connector = self._get(name)
            if not only_failed or connector.failure:
                self._live.stop(name)
                connector.generated_from = None
                connector.failure = None
            if include_tasks:
                for task, local in list(connector.tasks.items()):
                    if not only_failed or local.state()[0] == "FAILED":
                        self._restart(name, connector, task)
        self._wakeup.set()
        return self.connector_status(name) if include_tasks or only_failed else None

    def restart_task(self, name: str, task: int) -> None:
        with self._lock:
            connector = self._get(name)
            if task not in connector.tasks:
                raise NotFoundError(f"Task {name}-{task} not found")
            self._restart(name, connector, task)

    def _restart(self, name: str, connector: _Connector, task: int) -> None:
        local = connector.tasks[task]
        local.control.set(Directive.STOP)
        local.thread.join(2 * self.worker.task_shutdown_graceful_timeout_ms / 1000 + 5)
        self._start_task(name, connector, task, len(connector.task_configs))

    def fence_zombies(self, name: str, generation: int | None = None) -> None:
        raise BadRequestError(
            "Kafka Connect in standalone mode does not support exactly-once source connectors."
        )

    # ----------------------------------------------------------------------------- validation and plugins
    # ----------------------------------------------------------------------------- offsets
    def _source_offsets(
        self, name: str, config: Mapping[str, str]
    ) -> dict[SourcePartition, SourceOffset | None]:
        if self.offsets is not None:
            return dict(self.offsets.connector_offsets(name))
        view = ConnectorOffsetView.create(name, offsets_topic_for(name, dict(config), self.worker.originals))
        return dict(view.snapshot())

    def connector_offsets(self, name: str) -> dict[str, Any]:
        config = self.connector_config(name)
        if kind_of_config(config).is_sink:
            raise BadRequestError("the standalone worker does not read a sink connector's offsets")
        return {
            "offsets": [
                {"partition": partition.to_dict(), "offset": offset.to_dict()}
                for partition, offset in self._source_offsets(name, config).items()
                if offset is not None
            ]
        }

    def _stopped_file_offsets(self, name: str) -> FileOffsetStore:
        with self._lock:
            connector = self._get(name)
            if connector.target is not TargetState.STOPPED:
                raise BadRequestError(
                    "Connectors must be in the STOPPED state before their offsets can be modified. This can "
                    "be done for the specified connector by issuing a 'PUT' request to the "
                    f"'/connectors/{name}/stop' endpoint"
                )
            if self.offsets is None or kind_of_config(connector.config).is_sink:
                raise BadRequestError(
                    "the standalone worker alters only the offsets of source connectors in its offsets file"
                )
            return self.offsets

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        store = self._stopped_file_offsets(name)
        parsed: dict[SourcePartition, SourceOffset | None] = {}
        for i, entry in enumerate(offsets):
            try:
                offset = entry.get("offset")
                parsed[SourcePartition.of(entry["partition"])] = (
                    None if offset is None else SourceOffset.of(offset)
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise BadRequestError(
                    f'offsets[{i}] must be {{"partition": {{...}}, "offset": {{...}}}}: {exc}'
                ) from None
        store.write(name, parsed)
        return "The offsets for this connector have been altered successfully"

    def reset_connector_offsets(self, name: str) -> str:
        store = self._stopped_file_offsets(name)
        store.write(name, dict.fromkeys(store.connector_offsets(name)))
        return "The offsets for this connector have been reset successfully"

    # ----------------------------------------------------------------------------- internal requests
    def session_keys(self) -> list[SessionKey]:
        return []

    def task_heartbeat(self, name: str, task: int, generation: int, report: Mapping[str, Any]) -> str:
        raise BadRequestError(NO_TASK_CHANNEL)

    def host_heartbeat(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        raise BadRequestError(NO_TASK_CHANNEL)

    def host_answer(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        raise BadRequestError(NO_TASK_CHANNEL)

    def task_runtimes(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {
                f"{name}-{task}": {
                    "connector": name,
                    "task": task,
                    "state": local.state()[0],
                    "generation": connector.generation,
                    "pid": None,
                }
                for name, connector in self._connectors.items()
                for task, local in connector.tasks.items()
            }

    def metrics_view(self) -> MetricsView:
        statuses = [self.connector_status(name) for name in self.connectors()]
        return MetricsView([], statuses)

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """`scope=cluster` on a standalone worker: this worker is the cluster (Kafka does the same)."""
        if self.on_cluster_logger_level is not None:
            self.on_cluster_logger_level(namespace, level)
