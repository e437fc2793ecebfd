"""The distributed herder: one per worker; the elected leader runs every connector's tasks on Spark.

Each tick the herder reads the config topic to its end. The leader then (1) holds the config
topic's write privileges (its transactional writer fences any previous leader), (2) keeps a fresh
session key, (3) regenerates task configs when a connector's config changed or the connector, which
the leader keeps started (cluster/live_connectors.py), asked for it, and (4) reconciles
Spark jobs with the config: one job per connector generation, stopped gracefully (heartbeat
directive) when its generation is replaced, the connector paused, stopped or deleted, and cancelled
if it does not stop within `task.shutdown.graceful.timeout.ms`. Followers only serve reads and
forward the rest to the leader (the REST layer does the forwarding on `NotLeaderError`).

Tasks report through signed heartbeats (cluster/task_channel.py); the herder turns reports into
status records and answers with the directive for the task's generation.

Source and sink connectors run the same way (one Spark job per generation, the same heartbeats
and states); where they differ (the exactly-once start-up protocol, the `type` shown, where their
offsets live) the herder asks the connector's `ConnectorKind` (cluster/connector_kinds.py).
"""

from __future__ import annotations

import logging
import re
import threading
import time
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from confluent_kafka.admin import AdminClient

from eosconnect import __version__
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.plugins import (
    available_connectors,
    connector_type,
    plugin_version,
    resolve_connector_class,
)
from eosconnect.api.records import SourceOffset, SourcePartition, TopicPartition
from eosconnect.api.source import SourceConnector
from eosconnect.cluster.auto_restart import AutoRestarts, RestartPolicy
from eosconnect.cluster.connector_kinds import (
    alter_sink_connector_offsets,
    fencing_producer_config,
    kind_of_config,
    uses_exactly_once_startup,
)
from eosconnect.cluster.herder_api import (
    BadRequestError,
    ConflictError,
    HerderError,
    NotFoundError,
    NotLeaderError,
)
from eosconnect.cluster.jobs import SparkTaskJob
from eosconnect.cluster.live_connectors import LiveConnectors
from eosconnect.cluster.names import connector_name_errors, max_placeable_tasks, tasks_max_errors
from eosconnect.cluster.shipping import plugin_fingerprint
from eosconnect.cluster.spark import SparkProvider, executor_slots
from eosconnect.cluster.status_board import StatusBoard
from eosconnect.cluster.task_channel import RestStartupCoordinator, RestTaskControl
from eosconnect.cluster.validation import config_errors, plugin_config_infos, validate_connector_config
from eosconnect.runtime.config import sink_consumer_group
from eosconnect.runtime.task import TASK_CLASS_KEY, TaskSpec
from eosconnect.storage import sink_offsets
from eosconnect.storage.clients import client_config
from eosconnect.storage.config_state import ConfigSnapshot, TargetState
from eosconnect.storage.config_store import ConfigStore, FencingConflict, LeaderFencedError
from eosconnect.storage.fencing_round import perform_fencing_round
from eosconnect.storage.offsets import (
    ConnectorOffsetView,
    OffsetsTopicPlacement,
    offsets_topic_for,
    write_offsets,
)
from eosconnect.storage.session_key import SessionKey
from eosconnect.storage.status_store import ConnectState, Status, StatusStore
from eosconnect.storage.topics import ensure_topic
from eosconnect.storage.transactional_ids import FencingError, fence_transactional_ids, task_transactional_id
from eosconnect.worker_config import WorkerConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

TICK_S = 0.5
#: /health answers 500 when the herder's loop has not completed a tick for this long.
HEALTH_STALL_S = 60.0
SESSION_KEY_TTL_MS = 60 * 60 * 1000
#: States a task reports when it has ended (its last heartbeat is marked final).
FINAL_STATES = frozenset({"FAILED", "STOPPED", "SUPERSEDED"})
#: Spark's reason for aborting a job whose task used up its attempts (`spark.task.maxFailures`, the F of
#: `local[N,F]`); the task number is the partition index, i.e. the position in the job's specs.
ATTEMPTS_EXHAUSTED = re.compile(r"Task (\d+) in stage \S+ failed (\d+) times[^\n]*")
#: A Python worker that could not import what the task needs, in Spark's failure text.
MISSING_MODULE = re.compile(r"No module named '([^']+)'")
#: The trace of a task launched on Spark that has not reported yet.
LAUNCHED = "launched on Spark; waiting for the task's first heartbeat"


@dataclass
class TaskRuntime:
    """What the leader knows about one running task instance, from its heartbeats."""

    state: str = "UNASSIGNED"
    trace: str | None = None
    generation: int = -1
    pid: int | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    #: When the task was last heard from (or launched); a task silent for `task.heartbeat.timeout.ms`
    #: is not RUNNING, whatever it said last.
    last_seen: float = field(default_factory=time.monotonic)
    #: Spark's attempt number of the task's last heartbeat (0 = first attempt).
    attempt: int = 0


@dataclass
class GenerationRun:
    """The Spark job(s) running one generation of a connector's tasks."""

    connector: str
    generation: int
    task_count: int
    job: SparkTaskJob
    extra_jobs: list[SparkTaskJob] = field(default_factory=list)
    stopping_since: float | None = None
    restart_pending: set[int] = field(default_factory=set)
    stop_tasks: set[int] = field(default_factory=set)
    #: The Spark job each task runs in now: the generation's job, or the one that restarted it.
    owners: dict[int, SparkTaskJob] = field(default_factory=dict)
    #: Jobs whose end the herder has looked at (`_recover_lost_tasks`).
    ended_jobs: set[str] = field(default_factory=set)

    def running(self) -> bool:
        return self.job.running() or any(j.running() for j in self.extra_jobs)


class DistributedHerder:
    def __init__(self, worker: WorkerConfig, spark: SparkProvider, rest_url: str) -> None:
        from eosconnect.cluster.election import LeaderElection

        self.worker = worker
        self._spark = spark
        self.rest_url = rest_url.rstrip("/")
        self.worker_id = self.rest_url.split("://", 1)[-1]
        self.config_store = ConfigStore(worker)
        self.status_store = StatusStore(worker)
        self.statuses = StatusBoard(self.status_store)
        self.election = LeaderElection(worker, self.rest_url, self._wake, self._wake)
        self._runs: dict[str, GenerationRun] = {}
        self._abandoned: list[GenerationRun] = []
        self._zombie_cancel_s = (
            int(worker.originals.get("eosconnect.zombie.cancel.timeout.ms", "60000")) / 1000
        )
        self._tasks: dict[tuple[str, int], TaskRuntime] = {}
        self._generated_from: dict[str, Mapping[str, str]] = {}
        self._connector_failures: dict[str, str] = {}
        self._live = LiveConnectors(worker.originals, self._wake)
        self._unassigned: dict[str, str] = {}
        self._lock = threading.RLock()
        self._fence_locks: dict[str, threading.Lock] = {}
        self._wakeup = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="herder", daemon=True)
        self._cluster_id: str | None = None
        self._claimed_term = -1
        self._plugins_at_start = plugin_fingerprint(worker.plugin_path)
        self._plugins_warned = self._plugins_at_start
        self._last_tick: float | None = None
        self._auto_restarts = AutoRestarts()
        #: Set by the REST app: applies a cluster-wide logger level (KIP-976) on this worker.
        self.on_cluster_logger_level: Any = None
        self._applied_logger_levels: dict[str, int] = {}

    # ======================================================================== lifecycle
    def start(self) -> None:
        admin = AdminClient(client_config("admin", self.worker.originals))
        ensure_topic(
            admin,
            self.worker.offset_storage_topic,
            int(self.worker.values["offset.storage.partitions"]),
            int(self.worker.values["offset.storage.replication.factor"]),
            partitions_setting="offset.storage.partitions",
            replication_setting="offset.storage.replication.factor",
        )
        self.config_store.start()
        self.status_store.start()
        self.statuses.start()
        try:
            self._cluster_id = admin.describe_cluster(request_timeout=10).result(timeout=15).cluster_id
        except Exception:
            self._cluster_id = None
        self.election.start()
        self._thread.start()
        log.info(
            "worker %s started (group %s, exactly.once.source.support=%s)",
            self.worker_id,
            self.worker.group_id,
            self.worker.exactly_once_source_support.value,
        )

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        self._thread.join(30)
        self._live.stop_all()
        self._stop_all_runs(wait=True)
        self.election.stop()
        self.config_store.relinquish_write_privileges()
        self.statuses.stop()
        self.status_store.close()
        self._spark.release()

    def _wake(self) -> None:
        self._wakeup.set()

    @property
    def spark(self) -> SparkSession:
        """The leader's Spark application, created when first needed (a standby holds none)."""
        return self._spark.get()

    # ======================================================================== the loop
    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wakeup.wait(TICK_S)
            self._wakeup.clear()
            try:
                self._tick()
                self._last_tick = time.monotonic()
            except Exception:
                log.exception("herder tick failed; retrying")
                time.sleep(1)

    def _tick(self) -> None:
        snapshot = self.config_store.read_to_end()
        self._apply_cluster_logger_levels(snapshot)
        if not self.election.is_leader:
            if self.config_store.has_write_privileges:
                self.config_store.relinquish_write_privileges()
            self._live.stop_all()
            self._generated_from.clear()  # a later leadership starts the connectors afresh
            if any(run.stopping_since is None for run in self._runs.values()):  # once, not every tick
                log.warning("worker %s lost leadership; stopping its tasks", self.worker_id)
                self._stop_all_runs(wait=False)
                self.statuses.forget_published()
            self._reap_runs(snapshot)
            if self._spark.active and not self._runs and not any(r.running() for r in self._abandoned):
                self._abandoned.clear()
                self._spark.release_if_holding()  # a standby holds no executors
            return
        if not self.config_store.has_write_privileges:
            if self._claimed_term == self.election.term:
                # We held the config topic in this term and lost it: another leader fenced our writer.
                # Re-claiming would fence the real leader; step down and let the group decide.
                log.warning(
                    "worker %s was fenced as leader; stepping down and rejoining the group", self.worker_id
                )
                self.election.step_down()
                return
            try:
                self.config_store.claim_write_privileges()
                self._claimed_term = self.election.term
            except LeaderFencedError as exc:
                log.warning("could not claim the config topic: %s", exc)
                return
            snapshot = self.config_store.read_to_end()
        self._ensure_session_key(snapshot)
        self.spark  # noqa: B018  (the application starts on becoming leader, while configs are reconciled)
        wrote = [
            bool(self._isolated(c, "generating task configs", self._reconcile_task_configs, c, snapshot))
            for c in snapshot.connectors()
        ]
        self._live.retain(snapshot.connectors())
        # Launch from what is in the topic now: a generation written just above must not be
        # launched as the one it replaces (its tasks would only find themselves superseded).
        snapshot = self.config_store.read_to_end() if any(wrote) else self.config_store.snapshot
        self._reconcile_runs(snapshot)
        self._check_heartbeats()

    def _isolated(self, connector: str, what: str, step: Any, *args: Any) -> Any:
        """Run one connector's step of the tick; its failure fails that connector (FAILED with the
        reason), never the tick, so one connector cannot keep the others from being served.
        A fenced leader still ends the tick (it must step down)."""
        try:
            return step(*args)
        except LeaderFencedError:
            raise
        except Exception as exc:
            message = f"connector {connector!r}: {what} failed: {exc}"
            if self._connector_failures.get(connector) != message:
                log.exception("%s", message)
                self._connector_failures[connector] = message
                self._put_connector_status(connector, ConnectState.FAILED, trace=message)
            return None

    def _ensure_session_key(self, snapshot: ConfigSnapshot) -> None:
        now_ms = int(time.time() * 1000)
        key = snapshot.session_key
        if key is None or key.expired(now_ms, SESSION_KEY_TTL_MS):
            self.config_store.put_session_key(SessionKey.generate(now_ms))
            self.config_store.read_to_end()
            log.info("leader %s distributed a new session key", self.worker_id)

    def _reconcile_task_configs(self, connector: str, snapshot: ConfigSnapshot) -> bool:
        """Regenerate the connector's task configs if its config changed or the running connector
        asked for it (cluster/live_connectors.py); True if it wrote some."""
        config = snapshot.connector_config(connector)
        if config is None or snapshot.target_state(connector) == TargetState.STOPPED:
            self._live.stop(connector)
            return False
        live = self._live.get(connector)
        if self._generated_from.get(connector) == config and live is not None:
            if live.error is not None:
                if live.instance is not None:
                    self._connector_raised(connector, live.error)
                    self._live.fail(live)
                return False
            if not self._live.take_request(live):
                return False
        try:
            if live is None or self._generated_from.get(connector) != config:
                live = self._live.start(connector, config)
            task_configs = self._live.task_configs(live)
        except Exception as exc:
            self._live.stop(connector)
            message = f"connector {connector!r} could not produce task configs: {exc}"
            if self._connector_failures.get(connector) != message:
                log.error(message)
                self._connector_failures[connector] = message
                self._put_connector_status(connector, ConnectState.FAILED, trace=message)
            return False
        self._connector_failures.pop(connector, None)
        wrote = (
            tuple(task_configs) != tuple(snapshot.task_configs(connector))
            or snapshot.generation(connector) is None
        )
        if wrote:
            self.config_store.put_task_configs(connector, task_configs)
            log.info("connector %s: wrote %d task configs (new generation)", connector, len(task_configs))
        self._generated_from[connector] = config
        self._put_connector_status(connector, self._connector_state(snapshot, connector))
        return wrote

    def _connector_raised(self, connector: str, error: BaseException) -> None:
        """The connector failed itself (`context.raise_error`): FAILED until restarted or
        reconfigured; its tasks keep running, as in Kafka Connect."""
        trace = "".join(traceback.format_exception(error))
        log.error("connector %s failed: %s; its tasks keep running", connector, error)
        self._put_connector_status(connector, ConnectState.FAILED, trace=trace)

    def _connector_state(self, snapshot: ConfigSnapshot, connector: str) -> ConnectState:
        target = snapshot.target_state(connector)
        if target == TargetState.PAUSED:
            return ConnectState.PAUSED
        if target == TargetState.STOPPED:
            return ConnectState.STOPPED
        return ConnectState.RUNNING

    # ======================================================================== Spark jobs
    def _reconcile_runs(self, snapshot: ConfigSnapshot) -> None:
        graceful_s = self.worker.task_shutdown_graceful_timeout_ms / 1000
        with self._lock:
            for name, run in list(self._runs.items()):
                latest = snapshot.generation(name)
                target = snapshot.target_state(name)
                obsolete = (
                    not snapshot.contains(name) or target == TargetState.STOPPED or latest != run.generation
                )
                if obsolete and run.stopping_since is None:
                    run.stopping_since = time.monotonic()
                    log.info("connector %s: stopping generation %s", name, run.generation)
                overdue = (
                    run.stopping_since is not None and time.monotonic() - run.stopping_since > graceful_s
                )
                if run.stopping_since is None:
                    self._recover_lost_tasks(name, run)
                    self._auto_restart(name, run, snapshot)
                if overdue and run.running():
                    # KIP-618: tasks that do not stop in time are abandoned, not waited for; the
                    # next generation's fencing round disables them. Their Spark job is
                    # cancelled later, once they can no longer do harm or hold slots for long.
                    log.warning(
                        "connector %s: %d task(s) of generation %s did not stop within %.0fs; abandoning",
                        name,
                        run.task_count,
                        run.generation,
                        graceful_s,
                    )
                    del self._runs[name]
                    self._abandoned.append(run)
            for run in list(self._abandoned):
                if not run.running():
                    self._abandoned.remove(run)
                elif (
                    run.stopping_since is not None
                    and time.monotonic() - run.stopping_since > self._zombie_cancel_s
                ):
                    for job in (run.job, *run.extra_jobs):
                        if job.running():
                            job.cancel()
            self._reap_runs(snapshot)
            busy = sum(r.task_count for r in (*self._runs.values(), *self._abandoned))
            slots = executor_slots(self.spark)
            for name in snapshot.connectors():
                if name in self._runs:
                    continue
                if snapshot.target_state(name) == TargetState.STOPPED:
                    self._publish_stopped(name)
                    continue
                generation = snapshot.generation(name)
                count = snapshot.task_count(name)
                if generation is None or count == 0 or name in self._connector_failures:
                    continue
                if count > slots - busy and not self._spark.on_demand_executors:
                    none_yet = " (no Spark executor has registered yet)" if slots == 0 else ""
                    reason = (
                        f"not enough free Spark task slots: connector {name!r} needs {count}, "
                        f"{max(0, slots - busy)} of {slots} are free{none_yet}; waiting for executors, or "
                        "lower tasks.max or give Spark more cores/executors"
                    )
                    if self._unassigned.get(name) != reason:
                        self._unassigned[name] = reason
                        log.warning(reason)
                        for t in range(count):
                            self._put_task_status(name, t, ConnectState.UNASSIGNED, generation, reason)
                    continue
                self._unassigned.pop(name, None)
                run = self._isolated(
                    name, "launching its tasks", self._launch, name, snapshot, generation, list(range(count))
                )
                if run is not None:
                    self._runs[name] = run
                    busy += count

    def _publish_stopped(self, name: str) -> None:
        """A STOPPED connector's status, once its generation has stopped or been abandoned (the
        abandoned tasks are fenced before any new generation starts)."""
        published = self.statuses.published(name)
        if published is None or published.state != ConnectState.STOPPED:
            self._put_connector_status(name, ConnectState.STOPPED)

    def _auto_restart(self, name: str, run: GenerationRun, snapshot: ConfigSnapshot) -> None:
        """Restart failed tasks of connectors that opted in (cluster/auto_restart.py)."""
        policy = RestartPolicy.of(snapshot.connector_config(name) or {})
        now = time.monotonic()
        for t in range(run.task_count):
            runtime = self._tasks.get((name, t))
            current = runtime is not None and runtime.generation == run.generation
            state = runtime.state if runtime is not None and current else "UNASSIGNED"
            action = self._auto_restarts.observe(name, t, state, policy, now)
            if action is None or policy is None:
                continue
            kind, delay = action
            attempt = self._auto_restarts.attempts(name, t)
            limit = "" if policy.max_attempts < 0 else f" of {policy.max_attempts}"
            cause = (runtime.trace if runtime is not None else None) or ""
            if kind == "schedule":
                note = f"automatic restart {attempt}{limit} in {delay:.1f} s (errors.restart.enable=true)"
                log.warning("connector %s: task %d failed; %s", name, t, note)
                self._put_task_status(name, t, ConnectState.FAILED, run.generation, f"{note}\n\n{cause}")
            elif kind == "restart":
                log.info("connector %s: restarting failed task %d (attempt %d%s)", name, t, attempt, limit)
                assert runtime is not None
                runtime.state = "RESTARTING"
                run.restart_pending.add(t)
                self._put_task_status(name, t, ConnectState.RESTARTING, run.generation)
                self._task_finished(name, t, run.generation, run)
            else:
                note = f"gave up after {policy.max_attempts} automatic restarts (errors.restart.max.attempts)"
                log.error("connector %s: task %d %s", name, t, note)
                self._put_task_status(name, t, ConnectState.FAILED, run.generation, f"{note}\n\n{cause}")

    def _reap_runs(self, snapshot: ConfigSnapshot) -> None:
        with self._lock:
            for name, run in list(self._runs.items()):
                if run.stopping_since is not None and not run.running():
                    del self._runs[name]
                    log.info("connector %s: generation %s stopped", name, run.generation)
                    if snapshot.contains(name) and snapshot.target_state(name) == TargetState.STOPPED:
                        for t in range(run.task_count):
                            self._put_task_status(name, t, ConnectState.STOPPED, run.generation)

    def _launch(
        self, name: str, snapshot: ConfigSnapshot, generation: int, tasks: list[int]
    ) -> GenerationRun:
        self._warn_if_plugins_changed()
        specs = [self._spec(name, snapshot, generation, t) for t in tasks]
        group = f"eosconnect-{name}-gen{generation}-{int(time.time() * 1000)}"
        job = SparkTaskJob(self.spark, group, specs, f"eosconnect connector {name} generation {generation}")
        for t in tasks:
            self._tasks[(name, t)] = TaskRuntime(state="UNASSIGNED", generation=generation, trace=LAUNCHED)
            self._put_task_status(name, t, ConnectState.UNASSIGNED, generation, LAUNCHED)
        if any(spec.coordinator is not None for spec in specs):
            threading.Thread(
                target=self._fence_ahead, args=(name, generation), name=f"fence-{name}", daemon=True
            ).start()
        job.start()
        log.info(
            "connector %s: launched generation %s (%d tasks) as Spark job group %s",
            name,
            generation,
            len(tasks),
            group,
        )
        run = GenerationRun(name, generation, snapshot.task_count(name), job)
        run.owners = dict.fromkeys(tasks, job)
        return run

    def _warn_if_plugins_changed(self) -> None:
        """Imported connector modules stay loaded in the driver and in Spark's reused Python workers,
        so a change on plugin.path takes effect only after a worker restart: say so, once per change."""
        now = plugin_fingerprint(self.worker.plugin_path)
        if now not in (self._plugins_at_start, self._plugins_warned):
            self._plugins_warned = now
            log.warning(
                "a file on plugin.path (%s) changed since this worker started; tasks keep running the code "
                "loaded at start: restart the worker for the change to take effect",
                ",".join(self.worker.plugin_path),
            )

    def _spec(self, name: str, snapshot: ConfigSnapshot, generation: int, task: int) -> TaskSpec:
        connector_config = dict(snapshot.connector_config(name) or {})
        worker_props = dict(self.worker.originals)
        fenced = self._uses_fencing(connector_config)
        coordinator = RestStartupCoordinator(self.rest_url, worker_props) if fenced else None
        return TaskSpec(
            connector=name,
            task=task,
            task_config=dict(snapshot.task_config(name, task) or {}),
            connector_config=connector_config,
            worker_config=worker_props,
            control=RestTaskControl(self.rest_url, worker_props, name, task, generation),
            coordinator=coordinator,
            generation=generation,
        )

    def _uses_fencing(self, connector_config: Mapping[str, str] | None) -> bool:
        """Whether the connector's tasks go through the exactly-once start-up (sources, and sinks
        that deliver exactly once)."""
        return self.worker.exactly_once_enabled and uses_exactly_once_startup(connector_config)

    def _stop_all_runs(self, wait: bool) -> None:
        with self._lock:
            for run in self._runs.values():
                if run.stopping_since is None:
                    run.stopping_since = time.monotonic()
            runs = list(self._runs.values())
        if wait:
            deadline = time.monotonic() + self.worker.task_shutdown_graceful_timeout_ms / 1000
            while any(r.running() for r in runs) and time.monotonic() < deadline:
                time.sleep(0.1)
            for run in runs:
                for job in (run.job, *run.extra_jobs):
                    if job.running():
                        job.cancel()

    # ======================================================================== task channel
    def task_heartbeat(self, name: str, task: int, generation: int, report: Mapping[str, Any]) -> str:
        state = str(report.get("state", "RUNNING"))
        with self._lock:
            run = self._runs.get(name)
            runtime = self._tasks.setdefault((name, task), TaskRuntime())
            changed = (runtime.state, runtime.generation) != (state, generation)
            if run is None or run.generation == generation or runtime.generation <= generation:
                runtime.state, runtime.generation = state, generation
                runtime.trace = report.get("trace")
                runtime.pid = report.get("pid")
                runtime.metrics = dict(report.get("metrics") or {})
                runtime.last_seen = time.monotonic()
                runtime.attempt = int(report.get("attempt") or 0)
            directive = "stop"
            if run is not None and run.generation == generation and run.stopping_since is None:
                if task in run.stop_tasks:
                    directive = "stop"
                elif self.config_store.snapshot.target_state(name) == TargetState.PAUSED:
                    directive = "pause"
                else:
                    directive = "run"
            current = run is not None and run.generation == generation
            if report.get("final"):
                self._task_finished(name, task, generation, run)
        # Only the leader publishes task states. A worker that lost leadership (say, a frozen
        # ex-leader that woke up) still hears from its old tasks, which its successor fenced:
        # their FAILED would overwrite the successor's RUNNING for the same task ids.
        if changed and current and state != "SUPERSEDED" and self.election.is_leader:
            self._put_task_status(
                name,
                task,
                ConnectState(state) if state in ConnectState.__members__ else ConnectState.FAILED,
                generation,
                runtime.trace,
            )
        return directive

    def _check_heartbeats(self) -> None:
        """A task not heard from for `task.heartbeat.timeout.ms` is not RUNNING (nor PAUSED): its
        executor was lost or its Python worker died, and Spark runs it again when it has a slot and
        attempts left. It shows UNASSIGNED with that reason until its next attempt reports."""
        timeout_s = self.worker.task_heartbeat_timeout_ms / 1000
        now = time.monotonic()
        with self._lock:
            silent = [
                (name, t, runtime)
                for name, run in self._runs.items()
                if run.stopping_since is None
                for t in range(run.task_count)
                if (runtime := self._tasks.get((name, t))) is not None
                and runtime.generation == run.generation
                and runtime.state in ("RUNNING", "PAUSED", "UNASSIGNED", "RESTARTING")
                and now - runtime.last_seen > timeout_s
            ]
            if not silent:
                return
            busy = sum(r.task_count for r in self._runs.values())
            slots = executor_slots(self.spark)
            for name, t, runtime in silent:
                waiting = (
                    f"waiting for a free Spark task slot: running tasks need {busy}, Spark has {slots}"
                    if slots < busy
                    else "waiting for Spark to run it again"
                )
                heard = "since it was launched" if runtime.trace == LAUNCHED else f"for over {timeout_s:g}s"
                reason = (
                    f"no heartbeat from task {name}-{t} {heard} (its executor was lost, or its Python "
                    f"worker died or has not started); {waiting} (last attempt {runtime.attempt + 1} of "
                    f"{self._max_attempts()})"
                )
                if runtime.state == "UNASSIGNED" and runtime.trace == reason:
                    continue
                if runtime.state != "UNASSIGNED":
                    log.warning("connector %s: %s", name, reason)
                runtime.state, runtime.trace = "UNASSIGNED", reason
                self._put_task_status(name, t, ConnectState.UNASSIGNED, runtime.generation, reason)

    def _max_attempts(self) -> int:
        """Attempts Spark gives a task: the F of `local[N,F]`, else `spark.task.maxFailures`."""
        conf = self.spark.sparkContext.getConf()
        local = re.fullmatch(r"local\[[^,\]]+,\s*(\d+)\]", conf.get("spark.master", ""))
        if local:
            return int(local.group(1))
        if conf.get("spark.master", "").startswith("local"):
            return 1
        return int(conf.get("spark.task.maxFailures", "4") or 4)

    def _task_finished(self, name: str, task: int, generation: int, run: GenerationRun | None) -> None:
        if run is None or run.generation != generation or task not in run.restart_pending:
            return
        run.restart_pending.discard(task)
        run.stop_tasks.discard(task)
        self._relaunch(name, run, [task], "restart")
        log.info("connector %s: restarted task %d", name, task)

    def _relaunch(self, name: str, run: GenerationRun, tasks: list[int], why: str) -> None:
        """Run `tasks` of `run`'s generation again, as one more Spark job of that generation."""
        snapshot = self.config_store.snapshot
        label = "-".join(str(t) for t in tasks)
        extra = SparkTaskJob(
            self.spark,
            f"eosconnect-{name}-gen{run.generation}-task{label}-{int(time.time() * 1000)}",
            [self._spec(name, snapshot, run.generation, t) for t in tasks],
            f"eosconnect tasks {label} of {name}: {why}",
        )
        for t in tasks:
            run.owners[t] = extra
            self._tasks.setdefault((name, t), TaskRuntime()).last_seen = time.monotonic()
        run.extra_jobs.append(extra.start())

    def _recover_lost_tasks(self, name: str, run: GenerationRun) -> None:
        """Tasks whose Spark job ended while they still ran (no final report) are lost.

        That happens when Spark gives up on a job: one task used up its attempts (the F of
        `local[N,F]`, `spark.task.maxFailures` on a cluster; a long-running task collects them over
        its whole life, since no attempt ever succeeds) and Spark kills the job's other tasks with
        it. The task Spark gave up on is FAILED with Spark's reason, as any failed task (restart it
        over REST); the others did nothing wrong and run again at once. Left alone, the connector
        would write nothing more while its status still said RUNNING."""
        for job in (run.job, *run.extra_jobs):
            if job.running() or job.job_group in run.ended_jobs:
                continue
            run.ended_jobs.add(job.job_group)
            lost = sorted(
                t
                for t, owner in run.owners.items()
                if owner is job and self._tasks.get((name, t), TaskRuntime()).state not in FINAL_STATES
            )
            if not lost:
                continue
            if job.error is None:  # the job ended, but a task's final report never arrived
                for outcome in job.outcomes:
                    if outcome.get("task") in lost:
                        self._mark_ended(name, run, outcome["task"], outcome["state"], outcome.get("trace"))
                continue
            reason = job.failure_reason()
            exhausted = ATTEMPTS_EXHAUSTED.search(reason)
            gave_up_on = {job.specs[int(exhausted.group(1))].task} if exhausted else set(lost)
            for t in sorted(gave_up_on & set(lost)):
                detail = (
                    f"Spark gave up on it ({exhausted.group(0).rstrip(',')}): its Python worker died once "
                    "per attempt. A long-running task gets spark.task.maxFailures attempts (the F of the "
                    "master local[N,F]) over its whole life. "
                    if exhausted
                    else "its Spark job ended with an error. "
                )
                missing = MISSING_MODULE.search(str(job.error))
                if missing:
                    detail = (
                        f"the executors' Python ({self.spark.sparkContext.pythonExec}) cannot import module "
                        f"{missing.group(1)!r}. Let the worker ship its environment (leave "
                        "spark.archives and spark.pyspark.python unset), or install eosconnect and the "
                        "connector into the executors' environment (spark.archives, spark.pyspark.python, "
                        "the container image); "
                        "connector code can also ship from the worker's plugin.path. "
                    )
                trace = (
                    f"task {name}-{t} was lost: {detail}Restart it with "
                    f"POST /connectors/{name}/tasks/{t}/restart.\n\n{reason}"
                )
                log.error("connector %s: %s", name, trace.splitlines()[0])
                self._mark_ended(name, run, t, "FAILED", trace)
            others = [t for t in lost if t not in gave_up_on]
            if others:
                log.warning(
                    "connector %s: Spark job %s ended (%s) and took task(s) %s down; running them again",
                    name,
                    job.job_group,
                    reason.splitlines()[0][:300],
                    others,
                )
                for t in others:
                    self._mark_ended(name, run, t, "RESTARTING", None)
                self._relaunch(name, run, others, "lost with a failed Spark job")

    def _mark_ended(self, name: str, run: GenerationRun, task: int, state: str, trace: str | None) -> None:
        runtime = self._tasks.setdefault((name, task), TaskRuntime())
        if runtime.generation > run.generation:
            return
        runtime.state, runtime.generation, runtime.trace, runtime.pid = state, run.generation, trace, None
        if state in ConnectState.__members__:  # SUPERSEDED is no status: a newer task replaces it
            self._put_task_status(name, task, ConnectState(state), run.generation, trace)

    def task_runtimes(self) -> dict[str, dict[str, Any]]:
        """Internal view for operators and tests: pid, state and generation of every known task."""
        with self._lock:
            return {
                f"{c}-{t}": {
                    "connector": c,
                    "task": t,
                    "state": r.state,
                    "generation": r.generation,
                    "pid": r.pid,
                }
                for (c, t), r in self._tasks.items()
            }

    # ======================================================================== fencing
    def fence_zombies(self, name: str, generation: int | None = None) -> None:
        self._require_leader()
        if generation is not None and self._already_fenced(self.config_store.snapshot, name, generation):
            return  # every task of a generation asks; only the first needs a round
        lock = self._fence_locks.setdefault(name, threading.Lock())
        with lock:
            if generation is not None and self._already_fenced(self.config_store.snapshot, name, generation):
                return
            snapshot = self.config_store.read_to_end()
            if not snapshot.contains(name):
                raise NotFoundError(f"Connector {name} not found")
            # Fencing runs with the connector's producer settings. When they cannot reach the
            # cluster, init_transactions() only says "timed out"; the clients' error callbacks
            # say why (connection refused, authentication failed, ...): keep those for the answer.
            producer_config = fencing_producer_config(
                self.worker.originals, snapshot.connector_config(name) or {}
            )
            client_errors: list[str] = []

            def on_client_error(err: Any) -> None:
                text = str(err.str() if hasattr(err, "str") else err)
                if text not in client_errors and len(client_errors) < 5:
                    client_errors.append(text)

            producer_config["error_cb"] = on_client_error
            try:
                perform_fencing_round(self.config_store, snapshot, name, producer_config)
            except FencingConflict as exc:
                raise ConflictError(
                    f"new task configs for connector {name} arrived during fencing: {exc}"
                ) from exc
            except FencingError as exc:
                servers = producer_config.get("bootstrap.servers")
                reported = f"; the producers reported: {'; '.join(client_errors)}" if client_errors else ""
                raise HerderError(
                    f"zombie fencing for connector {name} failed: {exc} (connector producer "
                    f"bootstrap.servers={servers}){reported}"
                ) from exc
            except LeaderFencedError as exc:
                raise NotLeaderError(self.election.leader_url(max_age_s=0)) from exc

    def _fence_ahead(self, name: str, generation: int) -> None:
        """Run the generation's fencing round while Spark launches its tasks, as Kafka Connect's
        leader fences before it assigns them: the tasks' own fence requests (step 1 of their
        start-up) then find it done and are answered at once. A failure here is only logged: the
        tasks ask again, and their request reports the error."""
        try:
            self.fence_zombies(name, generation)
        except Exception as exc:
            log.info("connector %s: fencing ahead of its tasks failed (they will ask again): %s", name, exc)

    @staticmethod
    def _already_fenced(snapshot: ConfigSnapshot, name: str, generation: int) -> bool:
        """The round for `generation` (or a later one) is done, as this leader last read the topic.

        Safe to answer from memory: only the leader writes task configs, so a newer generation than
        the one in memory cannot be fenced yet without this worker knowing; and the task re-checks
        its generation against the topic itself right after (DESIGN.md section 3, step 2)."""
        latest = snapshot.generation(name)
        return latest is not None and latest >= generation and not snapshot.pending_fencing(name)

    def session_keys(self) -> list[SessionKey]:
        snapshot = self.config_store.snapshot
        keys = [snapshot.session_key, snapshot.previous_session_key]
        if snapshot.session_key is None:
            keys = [self.config_store.read_to_end().session_key, None]
        return [k for k in keys if k is not None]

    # ======================================================================== Herder API: reads
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

    def _snapshot_with(self, name: str) -> ConfigSnapshot:
        snapshot = self.config_store.snapshot
        if not snapshot.contains(name):
            snapshot = self.config_store.read_to_end()
            if not snapshot.contains(name):
                raise NotFoundError(f"Connector {name} not found")
        return snapshot

    def connector_config(self, name: str) -> dict[str, str]:
        return dict(self._snapshot_with(name).connector_config(name) or {})

    @staticmethod
    def _listed_task_count(snapshot: ConfigSnapshot, name: str) -> int:
        """Tasks the REST API lists: none for a STOPPED connector (KIP-875: stopping revokes them),
        although the last task configs stay in the config topic for fencing."""
        if snapshot.target_state(name) == TargetState.STOPPED:
            return 0
        return snapshot.task_count(name)

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
        runs tasks): the task waits for this leader to start it. Elsewhere the topic as last read."""
        topic = self.statuses.topic
        stored = topic.connector(name) if task is None else topic.task(name, task)
        if not self.election.is_leader:
            return stored
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
        connector_state["version"] = plugin_version(config.get("connector.class"))
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

    def set_cluster_logger_level(self, namespace: str, level: str) -> None:
        """KIP-976 `scope=cluster`: every worker of the group (this one included) applies the level
        when it reads the record from the config topic."""
        self.config_store.put_logger_level(namespace, level)
        self._apply_cluster_logger_levels(self.config_store.read_to_end())

    def _apply_cluster_logger_levels(self, snapshot: ConfigSnapshot) -> None:
        apply = self.on_cluster_logger_level
        for namespace, (level, offset) in snapshot.logger_levels.items():
            if self._applied_logger_levels.get(namespace, -1) >= offset:
                continue
            self._applied_logger_levels[namespace] = offset
            if apply is not None:
                try:
                    apply(namespace, level)
                except Exception as exc:
                    log.warning("could not apply cluster logger level %s=%s: %s", namespace, level, exc)

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

    # ======================================================================== Herder API: writes
    def _require_leader(self) -> None:
        if not self.election.is_leader:
            raise NotLeaderError(self.election.leader_url())

    def _validated(self, name: str, config: Mapping[str, str]) -> dict[str, str]:
        config = {str(k): str(v) for k, v in config.items()}
        if config.get("name", name) != name:
            raise BadRequestError(
                f"Connector name configuration ({config['name']}) doesn't match connector name in the URL "
                f"({name})"
            )
        config["name"] = name
        name_problems = connector_name_errors(name)
        if name_problems:
            raise BadRequestError(f"Connector name {name!r} is invalid: {'; '.join(name_problems)}")
        too_many = tasks_max_errors(config, self.worker.originals, self._placeable_tasks())
        if too_many:
            raise BadRequestError(too_many[0], {"tasks.max": too_many})
        infos = validate_connector_config(config, self.worker)
        if infos["error_count"]:
            errors = config_errors(infos)
            detail = "; ".join(f"{k}: {' '.join(v)}" for k, v in errors.items())
            raise BadRequestError(
                f"Connector configuration is invalid and contains the following {infos['error_count']} "
                f"error(s): {detail}",
                errors,
            )
        return config

    def _placeable_tasks(self) -> int | None:
        context = self.spark.sparkContext
        conf = dict(context.getConf().getAll())
        return max_placeable_tasks(conf, context.defaultParallelism)

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
            self._put_task_status(name, task, ConnectState.RESTARTING, run.generation)
            if runtime is not None and runtime.state in ("FAILED", "STOPPED", "SUPERSEDED"):
                self._task_finished(name, task, run.generation, run)
            else:
                run.stop_tasks.add(task)

    # ======================================================================== validation, plugins
    def validate_connector_config(self, plugin: str, config: Mapping[str, str]) -> dict[str, Any]:
        return validate_connector_config(
            {**config, "connector.class": config.get("connector.class", plugin)}, self.worker
        )

    def connector_plugins(self, connectors_only: bool) -> list[dict[str, str]]:
        plugins = []
        seen: set[str] = set()
        for short, path in sorted(available_connectors().items()):
            if str(path) in seen:  # one class may have several names (e.g. Kafka's class name)
                continue
            seen.add(str(path))
            try:
                cls = resolve_connector_class(short)
                kind, version = connector_type(cls).value, cls().version()
            except Exception:
                kind, version = "source", "unknown"
            plugins.append({"class": str(path), "type": kind, "version": version})
        return plugins

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        return plugin_config_infos(plugin)

    # ======================================================================== status helpers
    def _put_connector_status(self, name: str, state: ConnectState, trace: str | None = None) -> None:
        self.statuses.put_connector(name, Status(state, self.worker_id, 0, trace))

    def _put_task_status(
        self, name: str, task: int, state: ConnectState, generation: int, trace: str | None = None
    ) -> None:
        self.statuses.put_task(name, task, Status(state, self.worker_id, generation, trace))

    # ======================================================================== offsets (STOPPED connectors)
    def _stopped_connector(self, name: str) -> tuple[ConfigSnapshot, OffsetsTopicPlacement]:
        snapshot = self._snapshot_with(name)
        if snapshot.target_state(name) == TargetState.STOPPED:
            self._wait_for_run_to_end(name)
        if snapshot.target_state(name) != TargetState.STOPPED or name in self._runs:
            raise BadRequestError(
                f"Connectors must be in the STOPPED state before their offsets can be modified. This can be "
                "done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{name}/stop' endpoint"
            )
        config = dict(snapshot.connector_config(name) or {})
        return snapshot, offsets_topic_for(name, config, self.worker.originals)

    def _wait_for_run_to_end(self, name: str) -> None:
        """A stop is accepted before the tasks are down: they see it on their next heartbeat, report
        STOPPED, and the herder reaps their Spark job a tick later. Kafka Connect's herder finishes
        the stop before it serves the next request, so an offsets request right after PUT /stop (or
        once the status says STOPPED) succeeds there; wait for the run here instead of refusing.
        Bounded: a run still there after the graceful shutdown timeout is abandoned (leaves _runs)."""
        graceful_s = self.worker.task_shutdown_graceful_timeout_ms / 1000
        deadline = time.monotonic() + graceful_s + 4 * TICK_S
        while name in self._runs and time.monotonic() < deadline:
            self._wake()
            time.sleep(0.05)

    def _sink_admin_config(self, snapshot: ConfigSnapshot, name: str) -> dict[str, Any] | None:
        """The admin settings for a sink connector's consumer group; None for a source connector."""
        config = snapshot.connector_config(name)
        if not kind_of_config(config).is_sink:
            return None
        return client_config("admin", self.worker.originals, config)

    def connector_offsets(self, name: str) -> dict[str, Any]:
        snapshot = self._snapshot_with(name)
        sink_admin = self._sink_admin_config(snapshot, name)
        if sink_admin is not None:
            return {"offsets": sink_offsets.read_sink_offsets(sink_admin, sink_consumer_group(name))}
        placement = offsets_topic_for(
            name, dict(snapshot.connector_config(name) or {}), self.worker.originals
        )
        view = ConnectorOffsetView.create(name, placement)
        return {
            "offsets": [
                {"partition": partition.to_dict(), "offset": offset.to_dict()}
                for partition, offset in view.snapshot().items()
            ]
        }

    def _write_offsets_of_stopped(
        self, name: str, offsets: dict[SourcePartition, SourceOffset | None]
    ) -> None:
        self._require_leader()
        snapshot, placement = self._stopped_connector(name)
        if self.worker.exactly_once_enabled:
            self._fence_last_generation(snapshot, name)
        write_offsets(
            placement.client if placement.separate else placement.global_producer_config,
            placement.topic,
            name,
            offsets,
        )
        if placement.separate:
            write_offsets(placement.global_producer_config, placement.global_topic, name, offsets)

    def _fence_last_generation(self, snapshot: ConfigSnapshot, name: str) -> None:
        """Zombies of the last generation could still commit offsets over the user's: fence them."""
        count = max(snapshot.task_count_record(name) or 0, snapshot.task_count(name))
        fence_transactional_ids(
            fencing_producer_config(self.worker.originals, snapshot.connector_config(name) or {}),
            [task_transactional_id(self.worker.group_id, name, t) for t in range(count)],
        )

    def _sink_offsets_of_stopped(
        self, name: str, offsets: Mapping[TopicPartition, int] | None
    ) -> dict[str, Any] | None:
        """For a STOPPED sink connector: its own say first (KIP-875's hook, e.g. an exactly-once
        mirror's target-side offsets, after fencing its zombies), then the admin settings for its
        consumer group. None for a source connector."""
        self._require_leader()
        sink_admin = self._sink_admin_config(self._snapshot_with(name), name)
        if sink_admin is not None:
            snapshot, _ = self._stopped_connector(name)  # raises unless STOPPED (waiting for a stop)
            config = snapshot.connector_config(name) or {}
            if self._uses_fencing(config):
                self._fence_last_generation(snapshot, name)
            try:
                alter_sink_connector_offsets(config, offsets)
            except ConfigException as exc:
                raise BadRequestError(str(exc), exc.errors) from None
        return sink_admin

    def alter_connector_offsets(self, name: str, offsets: list[dict[str, Any]]) -> str:
        self._require_leader()
        if self._sink_admin_config(self._snapshot_with(name), name) is not None:
            try:
                parsed_sink = sink_offsets.parse_sink_offsets(offsets)
            except ConfigException as exc:
                raise BadRequestError(str(exc), exc.errors) from None
            wanted = {TopicPartition(tp.topic, tp.partition): tp.offset for tp in parsed_sink}
            sink_admin = self._sink_offsets_of_stopped(name, wanted)
            assert sink_admin is not None
            sink_offsets.alter_sink_offsets(sink_admin, sink_consumer_group(name), parsed_sink)
            return "The offsets for this connector have been altered successfully"
        parsed: dict[SourcePartition, SourceOffset | None] = {}
        for i, entry in enumerate(offsets):
            try:
                partition = SourcePartition.of(entry["partition"])
                offset = entry.get("offset")
                parsed[partition] = None if offset is None else SourceOffset.of(offset)
            except (KeyError, TypeError, ValueError) as exc:
                raise BadRequestError(
                    f'offsets[{i}] must be {{"partition": {{...}}, "offset": {{...}}}}: {exc}'
                ) from None
        self._require_leader()
        self._stopped_connector(name)  # 400 unless STOPPED, before the connector is asked
        self._source_alter_offsets(name, parsed)
        self._write_offsets_of_stopped(name, parsed)
        return "The offsets for this connector have been altered successfully"

    def _source_alter_offsets(self, name: str, offsets: dict[SourcePartition, SourceOffset | None]) -> None:
        """KIP-875: the source connector has its say before anything is written (400 if it refuses)."""
        config = dict(self._snapshot_with(name).connector_config(name) or {})
        try:
            connector = resolve_connector_class(config.get("connector.class", ""))()
        except (ConfigException, TypeError):
            return  # a class that cannot load has no say; the stored config still names it
        if not isinstance(connector, SourceConnector):
            return
        try:
            connector.alter_offsets(config, offsets)
        except (ConfigException, ValueError, TypeError, ConnectException) as exc:
            raise BadRequestError(f"Failed to alter offsets of connector {name}: {exc}") from None

    def reset_connector_offsets(self, name: str) -> str:
        sink_admin = self._sink_offsets_of_stopped(name, None)
        if sink_admin is not None:
            sink_offsets.reset_sink_offsets(sink_admin, sink_consumer_group(name))
            return "The offsets for this connector have been reset successfully"
        current = self.connector_offsets(name)["offsets"]
        tombstones: dict[SourcePartition, SourceOffset | None] = {
            SourcePartition.of(o["partition"]): None for o in current
        }
        self._stopped_connector(name)  # 400 unless STOPPED, before the connector is asked
        self._source_alter_offsets(name, tombstones)
        self._write_offsets_of_stopped(name, tombstones)
        return "The offsets for this connector have been reset successfully"

    # ======================================================================== metrics
    def task_metrics(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r.metrics) for r in self._tasks.values() if r.metrics]

    def metrics_text(self) -> bytes:
        from eosconnect.rest.metrics import render_prometheus

        statuses = []
        for name in self.connectors():
            try:
                statuses.append(self.connector_status(name))
            except HerderError:
                continue
        text = render_prometheus(self.task_metrics(), statuses)
        with self._lock:
            extra = self._auto_restarts.metrics_lines() if self._auto_restarts.total else []
        return text + "".join(f"{line}\n" for line in extra).encode("utf-8")
