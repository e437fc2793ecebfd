"""An in-memory `Herder` for testing the HTTP layer only (status codes, bodies, forwarding).

Deliberately simple: no Kafka, no Spark, no generations beyond a counter. Connectors are
"running" as soon as they are created; the real herder's behaviour is tested end to end elsewhere.

Knobs for tests:
- `leader=False` + `leader_url_value`: every write raises NotLeaderError(leader_url_value);
- `keys`: the session keys accepted for internal requests (current first);
- `fail_with`: an exception raised by `connectors()` (to test the 500 barrier);
- `calls`: the (method, args) of every write, to check what reached the herder.
"""

from __future__ import annotations

import contextlib
import copy
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from eosconnect.cluster.herder_api import (
    BadRequestError,
    ConflictError,
    MetricsView,
    NotFoundError,
    NotLeaderError,
)
from eosconnect.rest.server import RestServer
from eosconnect.storage.session_key import SessionKey

SOURCE_CLASS = "eosconnect.connectors.sequence.SequenceSourceConnector"
SINK_CLASS = "tests.support.fake.FakeSinkConnector"

PLUGINS = [
    {"class": SOURCE_CLASS, "type": "source", "version": "0.1.0"},
    {"class": SINK_CLASS, "type": "sink", "version": "1.2.3"},
    {"class": "eosconnect.transforms.InsertField", "type": "transformation", "version": "0.1.0"},
    {"class": "eosconnect.transforms.HasTopic", "type": "predicate", "version": "0.1.0"},
    {"class": "eosconnect.converters.json.JsonConverter", "type": "converter", "version": "0.1.0"},
]

CONFIG_DEFS = [
    {
        "name": "connector.class",
        "type": "STRING",
        "required": True,
        "default_value": None,
        "importance": "HIGH",
        "documentation": "The connector's class",
        "group": "Common",
        "order": 1,
        "width": "LONG",
        "display_name": "Connector class",
        "dependents": [],
    },
    {
        "name": "tasks.max",
        "type": "INT",
        "required": False,
        "default_value": "1",
        "importance": "HIGH",
        "documentation": "Maximum number of tasks",
        "group": "Common",
        "order": 2,
        "width": "SHORT",
        "display_name": "Tasks max",
        "dependents": [],
    },
]


def _resolve(cls: str) -> dict[str, str] | None:
    def norm(name: str) -> str:
        return name[: -len("Connector")] if name.endswith("Connector") else name

    for plugin in PLUGINS:
        if plugin["type"] not in ("source", "sink"):
            continue
        full = plugin["class"]
        short = full.rsplit(".", 1)[-1]
        if cls in (full, short) or norm(cls) in (norm(full), norm(short)):
            return plugin
    return None


class FakeHerder:
    def __init__(
        self,
        *,
        worker_id: str = "fake-worker:8083",
        rest_url: str = "http://fake-worker:8083",
        leader: bool = True,
        leader_url_value: str | None = None,
        keys: list[SessionKey] | None = None,
        cluster_id: str | None = "fake-cluster-id",
    ) -> None:
        self.worker_id = worker_id
        self.rest_url = rest_url
        self.leader = leader
        self.leader_url_value = leader_url_value
        self.keys: list[SessionKey] = list(keys or [])
        self.cluster_id = cluster_id
        self.configs: dict[str, dict[str, str]] = {}
        self.target: dict[str, str] = {}
        self.topics_reset: set[str] = set()
        self.task_state: dict[tuple[str, int], str] = {}
        self.offsets: dict[str, list[dict[str, Any]]] = {}
        self.generation: dict[str, int] = {}
        self.snapshots: dict[tuple[str, int], dict[str, Any]] = {}
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.fail_with: Exception | None = None
        self._lock = threading.RLock()

    @classmethod
    def follower_of(cls, leader: FakeHerder, leader_url: str | None, **kwargs: Any) -> FakeHerder:
        """A non-leader sharing `leader`'s state (as a worker reading the same config topic would);
        its writes raise NotLeaderError(leader_url)."""
        follower = cls(leader=False, leader_url_value=leader_url, keys=leader.keys, **kwargs)
        for attr in ("configs", "target", "task_state", "offsets", "generation", "snapshots"):
            setattr(follower, attr, getattr(leader, attr))
        follower._lock = leader._lock
        return follower

    # ---------------------------------------------------------------- helpers
    def _write(self, method: str, *args: Any) -> None:
        if not self.leader:
            raise NotLeaderError(self.leader_url_value)
        self.calls.append((method, args))

    def _get(self, name: str) -> dict[str, str]:
        if name not in self.configs:
            raise NotFoundError(f"Connector {name} not found")
        return self.configs[name]

    def _tasks(self, name: str) -> int:
        return int(self._get(name).get("tasks.max", "1"))

    def _type(self, name: str) -> str:
        plugin = _resolve(self._get(name)["connector.class"])
        return plugin["type"] if plugin else "unknown"

    def _validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        errors: dict[str, list[str]] = {}
        cls = config.get("connector.class")
        if not cls:
            errors["connector.class"] = [
                'Missing required configuration "connector.class" which has no default value.'
            ]
        elif _resolve(cls) is None:
            errors["connector.class"] = [
                f"Failed to find any class that implements Connector and which name matches {cls}"
            ]
        raw = config.get("tasks.max", "1")
        try:
            if int(raw) < 1:
                errors["tasks.max"] = [
                    f"Invalid value {raw} for configuration tasks.max: Value must be at least 1"
                ]
        except ValueError:
            errors["tasks.max"] = [
                f"Invalid value {raw} for configuration tasks.max: Not a number of type INT"
            ]
        return errors

    def _reset_tasks(self, name: str) -> None:
        for key in [k for k in self.task_state if k[0] == name]:
            del self.task_state[key]
        state = {"STARTED": "RUNNING", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}[self.target[name]]
        if state != "STOPPED":
            for i in range(self._tasks(name)):
                self.task_state[(name, i)] = state

    # ---------------------------------------------------------------- Herder
    def is_leader(self) -> bool:
        return self.leader

    def leader_url(self) -> str | None:
        return self.rest_url if self.leader else self.leader_url_value

    def kafka_cluster_id(self) -> str | None:
        return self.cluster_id

    def connectors(self) -> list[str]:
        if self.fail_with is not None:
            raise self.fail_with
        with self._lock:
            return sorted(self.configs)

    def connector_info(self, name: str) -> dict[str, Any]:
        with self._lock:
            config = dict(self._get(name))
            tasks = [{"connector": name, "task": i} for (c, i) in sorted(self.task_state) if c == name]
            return {"name": name, "config": config, "tasks": tasks, "type": self._type(name)}

    def connector_config(self, name: str) -> dict[str, str]:
        with self._lock:
            return dict(self._get(name))

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            config = self._get(name)
            return [
                {"id": {"connector": name, "task": i}, "config": {**config, "task.index": str(i)}}
                for (c, i) in sorted(self.task_state)
                if c == name
            ]

    def connector_status(self, name: str) -> dict[str, Any]:
        with self._lock:
            self._get(name)
            conn_state = {"STARTED": "RUNNING", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}[self.target[name]]
            tasks = []
            for (c, i), state in sorted(self.task_state.items()):
                if c != name:
                    continue
                entry: dict[str, Any] = {"id": i, "state": state, "worker_id": self.worker_id}
                if state == "FAILED":
                    entry["trace"] = "RuntimeError: boom"
                tasks.append(entry)
            return {
                "name": name,
                "connector": {"state": conn_state, "worker_id": self.worker_id},
                "tasks": tasks,
                "type": self._type(name),
            }

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        with self._lock:
            status = self.connector_status(name)
            for entry in status["tasks"]:
                if entry["id"] == task:
                    return entry
            raise NotFoundError(f"No status found for task {name}-{task}")

    def connector_topics(self, name: str) -> list[str]:
        with self._lock:
            config = self.configs.get(name, {})
            return [config["topic"]] if "topic" in config and name not in self.topics_reset else []

    def reset_connector_topics(self, name: str) -> None:
        with self._lock:
            self.topics_reset.add(name)

    def health(self) -> tuple[int, str, str]:
        if self.fail_with is not None:
            raise self.fail_with
        return 200, "healthy", "Worker has completed startup and is ready to handle requests."

    def put_connector_config(
        self, name: str, config: Mapping[str, str], allow_replace: bool
    ) -> tuple[bool, dict[str, Any]]:
        with self._lock:
            self._write("put_connector_config", name, dict(config), allow_replace)
            exists = name in self.configs
            if exists and not allow_replace:
                raise ConflictError(f"Connector {name} already exists")
            errors = self._validate(config)
            if errors:
                raise BadRequestError(
                    "Connector configuration is invalid and contains the following "
                    f"{sum(map(len, errors.values()))} error(s)",
                    errors,
                )
            self.configs[name] = dict(config)
            if not exists:
                self.target[name] = "STARTED"
            self.generation[name] = self.generation.get(name, 0) + 1
            self._reset_tasks(name)
            return (not exists), self.connector_info(name)

    def create_connector(self, name: str, config: Mapping[str, str], initial_state: str) -> dict[str, Any]:
        with self._lock:
            self._write("create_connector", name, dict(config), initial_state)
            if name in self.configs:
                raise ConflictError(f"Connector {name} already exists")
            errors = self._validate(config)
            if errors:
                raise BadRequestError("Connector configuration is invalid", errors)
            self.configs[name] = dict(config)
            self.target[name] = {"RUNNING": "STARTED", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}[
                initial_state
            ]
            self.generation[name] = 1
            self._reset_tasks(name)
            return self.connector_info(name)

    def delete_connector(self, name: str) -> None:
        with self._lock:
            self._write("delete_connector", name)
            self._get(name)
            del self.configs[name]
            del self.target[name]
            self.offsets.pop(name, None)
            for key in [k for k in self.task_state if k[0] == name]:
                del self.task_state[key]

    def _set_target(self, name: str, target: str) -> None:
        self._get(name)
        self.target[name] = target
        self._reset_tasks(name)

    def pause_connector(self, name: str) -> None:
        with self._lock:
            self._write("pause_connector", name)
            self._set_target(name, "PAUSED")

    def resume_connector(self, name: str) -> None:
        with self._lock:
            self._write("resume_connector", name)
            self._set_target(name, "STARTED")

    def stop_connector(self, name: str) -> None:
        with self._lock:
            self._write("stop_connector", name)
            self._set_target(name, "STOPPED")

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        with self._lock:
            self._write("restart_connector", name, include_tasks, only_failed)
            self._get(name)
            if not include_tasks and not only_failed:
                return None
            status = self.connector_status(name)
            if include_tasks:
                for entry in status["tasks"]:
                    if not only_failed or entry["state"] == "FAILED":
                        entry["state"] = "RESTARTING"
                        entry.pop("trace", None)
                        self.task_state[(name, entry["id"])] = "RUNNING"
            if not only_failed:
                status["connector"]["state"] = "RESTARTING"
            return status

    def restart_task(self, name: str, task: int) -> None:
        with self._lock:
            self._write("restart_task", name, task)
            self._get(name)
            if (name, task) not in self.task_state:
                raise NotFoundError(f"Unknown task {name}-{task}")
            self.task_state[(name, task)] = "RUNNING"

    def fence_zombies(self, name: str, generation: int | None = None) -> None:
        with self._lock:
            self._write("fence_zombies", *((name,) if generation is None else (name, generation)))
            self._get(name)

    def validate_connector_config(self, plugin: str, config: Mapping[str, str]) -> dict[str, Any]:
        if _resolve(plugin) is None:
            raise BadRequestError(
                f"Failed to find any class that implements Connector and which name matches {plugin}"
            )
        errors = self._validate(config)
        configs = []
        for definition in CONFIG_DEFS:
            key = definition["name"]
            configs.append(
                {
                    "definition": copy.deepcopy(definition),
                    "value": {
                        "name": key,
                        "value": config.get(key, definition["default_value"]),
                        "recommended_values": [],
                        "errors": errors.get(key, []),
                        "visible": True,
                    },
                }
            )
        return {
            "name": _resolve(plugin)["class"],  # type: ignore[index]
            "error_count": sum(len(v) for v in errors.values()),
            "groups": ["Common"],
            "configs": configs,
        }

    def connector_plugins(self, connectors_only: bool) -> list[dict[str, str]]:
        if connectors_only:
            return [dict(p) for p in PLUGINS if p["type"] in ("source", "sink")]
        return [dict(p) for p in PLUGINS]

    def plugin_config(self, plugin: str, version: str | None = None) -> list[dict[str, Any]]:
        if _resolve(plugin) is None:
            raise NotFoundError(f"Unknown plugin {plugin}.")
        return copy.deepcopy(CONFIG_DEFS)

    def _require_stopped(self, name: str) -> None:
        self._get(name)
        if self.target[name] != "STOPPED":
            raise BadRequestError(
                "Connectors must be in the STOPPED state before their offsets can be modified. "
                "This can be done for the specified connector by issuing a 'PUT' request to the '/connectors/"
                + name
                + "/stop' endpoint"
            )

    def connector_offsets(self, name: str) -> dict[str, Any]:
        with self._lock:
            self._get(name)
            return {"offsets": copy.deepcopy(self.offsets.get(name, []))}

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        with self._lock:
            self._write("alter_connector_offsets", name, offsets)
            self._require_stopped(name)
            current = {tuple(sorted(e["partition"].items())): e for e in self.offsets.get(name, [])}
            for entry in offsets:
                key = tuple(sorted(entry["partition"].items()))
                if entry["offset"] is None:
                    current.pop(key, None)
                else:
                    current[key] = copy.deepcopy(entry)
            self.offsets[name] = list(current.values())
            return "The offsets for this connector have been altered successfully"

    def reset_connector_offsets(self, name: str) -> str:
        with self._lock:
            self._write("reset_connector_offsets", name)
            self._require_stopped(name)
            self.offsets[name] = []
            return "The offsets for this connector have been reset successfully"

    def session_keys(self) -> list[SessionKey]:
        return list(self.keys)

    def task_heartbeat(self, name: str, task: int, generation: int, report: Mapping[str, Any]) -> str:
        with self._lock:
            self._get(name)
            self.calls.append(("task_heartbeat", (name, task, generation, dict(report))))
            if (name, task) not in self.task_state and self.target[name] != "STOPPED":
                raise NotFoundError(f"Unknown task {name}-{task}")
            if generation < self.generation.get(name, 0):
                return "stop"
            if report.get("state"):
                self.task_state[(name, task)] = str(report["state"])
            if report.get("metrics"):
                self.snapshots[(name, task)] = dict(report["metrics"])
            return {"STARTED": "run", "PAUSED": "pause", "STOPPED": "stop"}[self.target[name]]

    def task_runtimes(self) -> dict[str, dict[str, Any]]:
        return {}

    def metrics_view(self) -> MetricsView:
        with self._lock:
            statuses = [self.connector_status(n) for n in sorted(self.configs)]
            return MetricsView(list(self.snapshots.values()), statuses)


# ---------------------------------------------------------------------- test helpers


def make_test_client(app: Any, **kwargs: Any) -> Any:
    """FastAPI's TestClient (imported here so its deprecation notice about httpx is silenced once)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient
    return TestClient(app, **kwargs)


@contextlib.contextmanager
def served(app: Any, **kwargs: Any) -> Iterator[RestServer]:
    """The app served by uvicorn on a free loopback port for the duration of the block."""
    server = RestServer(app, host="127.0.0.1", port=0, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()


def source_config(**extra: Any) -> dict[str, Any]:
    return {"connector.class": SOURCE_CLASS, "tasks.max": "1", **extra}
