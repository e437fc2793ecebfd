"""What only the leader does for the REST layer: create, reconfigure, delete, pause, resume, stop, restart.

Every write is checked here (the connector's name, `tasks.max` against the Spark slots the worker can
have, the connector's own validation) and written to the config topic through the leader's
transactional writer; followers raise `NotLeaderError` and the REST layer forwards the request to the
leader. The herder's loop (cluster/herder.py) then acts on what the topic says.

Uses `connector_info` and `connector_status` (cluster/herder_reads.py) for its answers, and
`_task_finished` (cluster/generations.py) to restart a task that has already ended.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.cluster.herder_api import BadRequestError, ConflictError, NotFoundError
from eosconnect.cluster.herder_state import FINAL_STATES, HerderState
from eosconnect.cluster.names import connector_name_errors, max_placeable_tasks, tasks_max_errors
from eosconnect.cluster.validation import config_errors, config_size_problem, validate_connector_config
from eosconnect.storage.config_state import TargetState
from eosconnect.storage.status_store import ConnectState
from eosconnect.worker_config import WorkerConfig


class HerderWrites(HerderState):
    """The write side of the `Herder` protocol (leader only)."""

    def _validated(self, name: str, config: Mapping[str, str]) -> dict[str, str]:
        per_slot = self._hosts.capacity if self._hosts.packs(config) else 1
        return validated_config(name, config, self.worker, self._spark_slots(), per_slot)

    def _spark_slots(self) -> int | None:
        """The most Spark task slots this worker can ever have (None: no known bound); a connector
        whose tasks share slots (cluster/packing.py) may run `eosconnect.tasks.per.slot` in each."""
        context = self.spark.sparkContext
        return max_placeable_tasks(dict(context.getConf().getAll()), context.defaultParallelism)

    def put_connector_config(
        self, name: str, config: Mapping[str, str], allow_replace: bool
    ) -> tuple[bool, dict[str, Any]]:
        self._require_leader()
        config = self._validated(name, config)
        snapshot = self.config_store.read_to_end()
        exists = snapshot.contains(name)
        if exists and not allow_replace:
            raise ConflictError(f"Connector {name} already exists")
        self.config_store.put_connector_config(name, config, None if exists else TargetState.STARTED)
        self.config_store.read_to_end()
        self._wake()
        return not exists, self.connector_info(name)

    def create_connector(self, name: str, config: Mapping[str, str], initial_state: str) -> dict[str, Any]:
        self._require_leader()
        config = self._validated(name, config)
        if self.config_store.read_to_end().contains(name):
            raise ConflictError(f"Connector {name} already exists")
        state = {"RUNNING": TargetState.STARTED, "PAUSED": TargetState.PAUSED, "STOPPED": TargetState.STOPPED}
        if initial_state.upper() not in state:
            raise BadRequestError(f"initial_state must be RUNNING, PAUSED or STOPPED, got {initial_state!r}")
        self.config_store.put_connector_config(name, config, state[initial_state.upper()])
        self.config_store.read_to_end()
        self._wake()
        return self.connector_info(name)

    def delete_connector(self, name: str) -> None:
        self._require_leader()
        snapshot = self._snapshot_with(name)
        self.config_store.delete_connector(name)
        self.statuses.delete(name, snapshot.task_count(name))
        self._generated_from.pop(name, None)
        self.config_store.read_to_end()
        self._wake()

    def _set_target(self, name: str, state: TargetState) -> None:
        self._snapshot_with(name)
        self.config_store.put_target_state(name, state)
        self.config_store.read_to_end()
        self._wake()

    def pause_connector(self, name: str) -> None:
        self._set_target(name, TargetState.PAUSED)
        self._put_connector_status(name, ConnectState.PAUSED)

    def resume_connector(self, name: str) -> None:
        self._set_target(name, TargetState.STARTED)
        self._put_connector_status(name, ConnectState.RUNNING)

    def stop_connector(self, name: str) -> None:
        """KIP-875. The herder's loop publishes STOPPED once no task of the connector runs any more
        (`_publish_stopped`), so a client that sees STOPPED may rely on the tasks being over."""
        self._require_leader()
        self._set_target(name, TargetState.STOPPED)
        self._generated_from.pop(name, None)

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        self._require_leader()
        snapshot = self.config_store.read_to_end()
        if not snapshot.contains(name):
            raise NotFoundError(f"Connector {name} not found")
        self._generated_from.pop(name, None)
        self._connector_failures.pop(name, None)
        self._wake()
        if not include_tasks and not only_failed:
            return None
        status = self.connector_status(name)
        # KIP-745: the answer shows what is being restarted as RESTARTING.
        if not only_failed or status["connector"]["state"] == "FAILED":
            status["connector"]["state"] = "RESTARTING"
            status["connector"].pop("trace", None)
        if include_tasks:
            for entry in status["tasks"]:
                if only_failed and entry["state"] != "FAILED":
                    continue
                self.restart_task(name, entry["id"])
                entry["state"] = "RESTARTING"
                entry.pop("trace", None)
        return status

    def restart_task(self, name: str, task: int) -> None:
        self._require_leader()
        snapshot = self.config_store.read_to_end()
        if not snapshot.contains(name) or task >= snapshot.task_count(name):
            raise NotFoundError(f"Task {name}-{task} not found")
        fenced = self._uses_fencing(snapshot.connector_config(name))
        if fenced and snapshot.pending_fencing(name) and name not in self._runs:
            raise ConflictError(f"Cannot complete request: a rebalance is pending for connector {name}")
        with self._lock:
            run = self._runs.get(name)
            if run is None or run.generation != snapshot.generation(name):
                raise ConflictError(f"Cannot complete request: connector {name} has no running generation")
            runtime = self._tasks.get((name, task))
            run.restart_pending.add(task)
            if runtime is not None and runtime.state in FINAL_STATES:
                self._task_finished(name, task, run.generation, run)
            else:  # RESTARTING while it stops; it runs again once its final report is in
                self._put_task_status(name, task, ConnectState.RESTARTING, run.generation)
                run.stop_tasks.add(task)


def validated_config(
    name: str, config: Mapping[str, str], worker: WorkerConfig, slots: int | None, per_slot: int = 1
) -> dict[str, str]:
    """`config` as stored for connector `name` (its values as strings, `name` set), or
    `BadRequestError` with Kafka Connect's message and the per-field errors: the name, the size,
    `tasks.max` against the `slots` the worker can ever have (None: no bound) and the connector's
    own validation."""
    config = {str(k): str(v) for k, v in config.items()}
    if config.get("name", name) != name:
        raise BadRequestError(
            f"Connector name configuration ({config['name']}) doesn't match connector name in the URL "
            f"({name})"
        )
    config["name"] = name
    too_large = config_size_problem(config)
    if too_large:
        raise BadRequestError(too_large)
    name_problems = connector_name_errors(name)
    if name_problems:
        raise BadRequestError(f"Connector name {name!r} is invalid: {'; '.join(name_problems)}")
    too_many = tasks_max_errors(config, worker.originals, slots, per_slot)
    if too_many:
        raise BadRequestError(too_many[0], {"tasks.max": too_many})
    infos = validate_connector_config(config, worker)
    if infos["error_count"]:
        errors = config_errors(infos)
        detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items())
        raise BadRequestError(
            f"Connector configuration is invalid and contains the following {infos['error_count']} "
            f"error(s): {detail}",
            errors,
        )
    return config
