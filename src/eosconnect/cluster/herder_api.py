"""What the REST layer may ask of the herder, and the errors it maps to HTTP status codes.

The herder (cluster/herder.py) owns the cluster logic; the REST layer (rest/) only translates
between HTTP and these calls. Keeping the boundary a Protocol lets each side be read alone.
Bodies follow Kafka Connect's REST API (JSON shapes in the docstrings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from eosconnect.storage.session_key import SessionKey


@dataclass(frozen=True)
class MetricsView:
    """What `GET /metrics` exposes, as data: the REST layer renders it (rest/metrics.py), so the
    herder knows nothing of Prometheus."""

    #: the latest `TaskMetrics.snapshot()` of every task, from its heartbeats
    task_snapshots: list[dict[str, Any]]
    #: `GET /connectors/{c}/status` bodies
    connector_statuses: list[dict[str, Any]]
    #: automatic restarts (`errors.restart.enable`) per (connector, task)
    auto_restarts: dict[tuple[str, int], int] = field(default_factory=dict)
    #: the KIP-877 metrics of the connectors this worker runs (`PluginMetrics.snapshot()` entries)
    connector_plugin_metrics: list[dict[str, Any]] = field(default_factory=list)
    #: zombie fencing rounds (KIP-618) the leader ran per connector since it was elected
    fencing_rounds: dict[str, int] = field(default_factory=dict)


class HerderError(Exception):
    """Base of the errors the REST layer turns into `{"error_code": N, "message": ...}`."""

    status_code = 500


class NotFoundError(HerderError):
    status_code = 404


class ConflictError(HerderError):
    """Rebalance or new task configs pending, connector exists, wrong state for the operation."""

    status_code = 409


class BadRequestError(HerderError):
    """Invalid config (with per-field errors in `errors`), name mismatch, malformed input."""

    status_code = 400

    def __init__(self, message: str, errors: Mapping[str, list[str]] | None = None) -> None:
        super().__init__(message)
        self.errors = dict(errors or {})


class ForbiddenError(HerderError):
    """Unsigned, badly signed or expired internal request."""

    status_code = 403


#: What a 409 says when the group has no leader to serve a request right now: none elected, the
#: leader rejoining its group (its coordinator died or its session lapsed on a busy machine), or
#: leadership moving while the request is forwarded (rest/forwarding.py). Each asks for a retry.
NO_LEADER_NOW = ("no leader", "not the leader", "rejoining the group", "leadership is changing")


def no_leader_now(status_code: int, message: str) -> bool:
    """Whether an answer is a group's "no leader to serve this right now; retry in a few seconds"."""
    return status_code == 409 and any(said in message for said in NO_LEADER_NOW)


class NotLeaderError(HerderError):
    """Only the leader serves this; the REST layer forwards to `leader_url` (at most two hops)."""

    status_code = 409

    def __init__(self, leader_url: str | None) -> None:
        super().__init__(
            f"this worker is not the leader; the leader is {leader_url}"
            if leader_url
            else "no leader is elected right now; retry in a few seconds"
        )
        self.leader_url = leader_url


class Herder(Protocol):
    worker_id: str
    rest_url: str

    def is_leader(self) -> bool: ...

    def leader_url(self) -> str | None: ...

    def kafka_cluster_id(self) -> str | None: ...

    # ---- connectors (reads are served by any worker from its config snapshot)
    def connectors(self) -> list[str]: ...

    def connector_info(self, name: str) -> dict[str, Any]:
        """`{"name", "config", "tasks": [{"connector", "task"}], "type": "source"}`."""
        ...

    def connector_config(self, name: str) -> dict[str, str]: ...

    def connector_acls(self, name: str) -> dict[str, Any]:
        """`{"name", "acls": [{"principal", "operation", "resource_type", ...}], "commands": [...]}`."""
        ...

    def task_configs(self, name: str) -> list[dict[str, Any]]:
        """`[{"id": {"connector", "task"}, "config": {...}}]`."""
        ...

    def connector_status(self, name: str) -> dict[str, Any]:
        """`{"name", "connector": {"state", "worker_id", "trace"?}, "tasks": [{"id", "state",
        "worker_id", "trace"?}], "type": "source"}`."""
        ...

    def task_status(self, name: str, task: int) -> dict[str, Any]: ...

    def connector_topics(self, name: str) -> list[str]:
        """Active topics (KIP-558); empty, not NotFoundError, for an unknown connector."""
        ...

    def reset_connector_topics(self, name: str) -> None:
        """KIP-558: forget the connector's active topics (nothing to do for an unknown connector)."""
        ...

    def health(self) -> tuple[int, str, str]:
        """KIP-1017 `GET /health`: (HTTP status 200 | 503 | 500, "healthy" | "starting" |
        "unhealthy", message)."""
        ...

    # ---- writes (leader only: NotLeaderError elsewhere)
    def put_connector_config(
        self, name: str, config: Mapping[str, str], allow_replace: bool
    ) -> tuple[bool, dict[str, Any]]:
        """Validate (BadRequestError with per-field errors) and store; returns (created, info)."""
        ...

    def create_connector(self, name: str, config: Mapping[str, str], initial_state: str) -> dict[str, Any]:
        """`POST /connectors` with `initial_state` (KIP-980): create a connector whose first target
        state is `initial_state` (RUNNING | PAUSED | STOPPED, upper case), so a PAUSED or STOPPED
        connector never starts its tasks. ConflictError if it exists; validation as in
        put_connector_config. Returns the info body. (The REST layer calls this only for PAUSED and
        STOPPED; without `initial_state`, or with RUNNING, it calls
        put_connector_config(name, config, allow_replace=False).)"""
        ...

    def delete_connector(self, name: str) -> None: ...

    def pause_connector(self, name: str) -> None: ...

    def resume_connector(self, name: str) -> None: ...

    def stop_connector(self, name: str) -> None: ...

    def restart_connector(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        """None for a plain connector restart (204); the status body when include_tasks/only_failed (202)."""
        ...

    def restart_task(self, name: str, task: int) -> None: ...

    def fence_zombies(self, name: str, generation: int | None = None) -> None:
        """Internal: fence the previous generation's producers (KIP-618 zombie fencing round).

        `generation` is the requesting task's; when given and already fenced, no round is needed."""
        ...

    # ---- validation and plugins
    def validate_connector_config(self, plugin: str, config: Mapping[str, str]) -> dict[str, Any]:
        """Kafka Connect's ConfigInfos: `{"name", "error_count", "groups", "configs": [{"definition":
        {...}, "value": {"name", "value", "recommended_values", "errors", "visible"}}]}`."""
        ...

    def connector_plugins(self, connectors_only: bool) -> list[dict[str, str]]:
        """`[{"class", "type", "version"}]`."""
        ...

    def plugin_config(self, plugin: str, version: str | None = None) -> list[dict[str, Any]]:
        """A plugin's config definitions, of the installed version in `version` (a version or Maven
        range, KIP-891) when given; NotFoundError for no such plugin or no version in the range."""
        ...

    # ---- offsets of a STOPPED connector
    def connector_offsets(self, name: str) -> dict[str, Any]:
        """`{"offsets": [{"partition": {...}, "offset": {...}}]}`."""
        ...

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str: ...

    def reset_connector_offsets(self, name: str) -> str: ...

    # ---- internal requests
    def session_keys(self) -> list[SessionKey]:
        """The session keys a signed internal request may use: the current key first, then the
        previous one (rotation). Empty before the leader has distributed one (requests then get 403)."""
        ...

    def task_heartbeat(self, name: str, task: int, generation: int, report: Mapping[str, Any]) -> str:
        """A running task reports state and metrics; returns the directive: run | pause | stop."""
        ...

    def host_heartbeat(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        """A slot host reports its tasks' heartbeats; returns `{"directives": {instance: directive},
        "start": [task...], "stop": bool}` (cluster/packing.py)."""
        ...

    def host_answer(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        """What `host_heartbeat` would answer the same report now, recording nothing (asked again
        while the host's request is held: cluster/host_channel.py)."""
        ...

    def task_runtimes(self) -> dict[str, dict[str, Any]]:
        """Internal, for operators and tests: `{"<c>-<t>": {"connector", "task", "state", "generation",
        "pid"}}` for every task instance this worker has heard from (pid of its Python worker)."""
        ...

    def metrics_view(self) -> MetricsView:
        """Every task's and connector's metrics, for `GET /metrics`."""
        ...
