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

This module holds the loop, steps (1) to (3) and the wiring; the other parts of the herder live in
their own modules, listed in cluster/herder_state.py (which holds the state they share) and in
docs/architecture.md.

Source and sink connectors run the same way (one Spark job per generation, the same heartbeats
and states); where they differ (the exactly-once start-up protocol, the `type` shown, where their
offsets live) the herder asks the connector's `ConnectorKind` (cluster/connector_kinds.py).
"""

from __future__ import annotations

import logging
import threading
import time
import traceback
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from eosconnect.cluster.auto_restart import AutoRestarts
from eosconnect.cluster.generations import Generations
from eosconnect.cluster.herder_reads import HerderReads
from eosconnect.cluster.herder_state import TICK_S, HerderState
from eosconnect.cluster.herder_writes import HerderWrites
from eosconnect.cluster.host_evacuation import HostEvacuation
from eosconnect.cluster.live_connectors import LiveConnectors
from eosconnect.cluster.offsets_admin import OffsetsAdmin
from eosconnect.cluster.packing import SlotHosts
from eosconnect.cluster.retirements import Retirements
from eosconnect.cluster.shipping import plugin_fingerprint
from eosconnect.cluster.spark import SparkProvider
from eosconnect.cluster.status_board import StatusBoard
from eosconnect.cluster.task_health import TaskHealth
from eosconnect.cluster.zombie_fencing import ZombieFencing
from eosconnect.storage.clients import client_config
from eosconnect.storage.config_state import ConfigSnapshot, TargetState
from eosconnect.storage.config_store import ConfigStore
from eosconnect.storage.config_writers import LeaderFencedError
from eosconnect.storage.session_key import SessionKey
from eosconnect.storage.status_store import ConnectState, StatusStore
from eosconnect.storage.topic_reader import ReadTimeout
from eosconnect.storage.topics import ensure_topic
from eosconnect.worker_config import WorkerConfig, relaunch_min_attempt_s, zombie_cancel_timeout_s

log = logging.getLogger(__name__)

#: How long a tick's read of the config topic may take: a read waits for a transaction open on the
#: topic (the leader's own are short), and a tick that waits longer holds up everything the herder
#: does, a demoted leader's stepping down first of all (Kafka Connect's is `worker.sync.timeout.ms`,
#: 3 s).
TICK_READ_TIMEOUT_S = 10.0

SESSION_KEY_TTL_MS = 60 * 60 * 1000


class DistributedHerder(
    HerderReads,
    HerderWrites,
    OffsetsAdmin,
    ZombieFencing,
    Generations,
    HostEvacuation,
    TaskHealth,
    HerderState,
):
    """One worker's herder: the REST layer's `Herder` (cluster/herder_api.py), run by the leader's loop."""

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
        self._runs = {}
        self._abandoned = []
        self._zombie_cancel_s = zombie_cancel_timeout_s(worker.originals)
        self._relaunch_min_attempt_s = relaunch_min_attempt_s(worker.originals)
        self._tasks = {}
        self._hosts = SlotHosts(lambda: self.spark, self.rest_url, worker.originals)
        self._generated_from = {}
        self._connector_failures = {}
        self._live = LiveConnectors(worker.originals, self._wake)
        self._unassigned = {}
        self._lock = threading.RLock()
        self._fence_locks = {}
        self._fencing_rounds = {}
        self._wakeup = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="herder", daemon=True)
        self._cluster_id = None
        self._claimed_term = -1
        #: The election term the last tick acted in as the leader; None after it acted as a follower.
        self._led_term: int | None = None
        self._plugins_at_start = plugin_fingerprint(worker.plugin_path)
        self._plugins_warned = self._plugins_at_start
        self._last_tick = None
        self._auto_restarts = AutoRestarts()
        self._retirements = Retirements()
        #: Set by the REST app: applies a cluster-wide logger level (KIP-976) on this worker.
        self.on_cluster_logger_level: Any = None
        self._applied_logger_levels: dict[str, int] = {}

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
        self.config_store.close()
        self.statuses.stop()
        self.status_store.close()
        self._spark.release()

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
        snapshot = self._tick_snapshot()
        self._apply_cluster_logger_levels(snapshot)
        if self.election.in_doubt:
            # Lost membership, rejoining (cluster/election.py): the tasks run on untouched, and no
            # leader action is taken until the group either gives the leadership back or not.
            # Slot hosts could not reach a leader meanwhile: their silence counts from its return
            # (else a host is evacuated, its tasks restarted, as soon as the leadership is back).
            self._hosts.forgive_silence()
            return
        if not self.election.is_leader:
            self._led_term = None
            self._end_leadership(snapshot)
            if self._spark.active and not self._runs and not any(r.running() for r in self._abandoned):
                self._abandoned.clear()
                self._spark.release_if_holding()  # a standby holds no executors
            return
        if self._led_term not in (None, self.election.term):
            # Demoted and elected again while one tick was busy (a Kafka call waits out its timeout
            # while the broker is out of reach): what this herder ran belongs to the former term, and
            # its tasks may have ended on their own meanwhile; end it as a demotion does, and lead
            # afresh (a new claim fences the former term's writer).
            log.warning(
                "worker %s lost the leadership and got it back (term %d) while the herder was busy",
                self.worker_id,
                self.election.term,
            )
            self._end_leadership(snapshot)
        self._led_term = self.election.term
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
        self._retire_ended_connectors(snapshot)
        self._evacuate_silent_hosts()
        self._check_heartbeats()

    def _tick_snapshot(self) -> ConfigSnapshot:
        """The config topic read to its end within `TICK_READ_TIMEOUT_S`. A worker that is not the
        leader (or one in doubt) acts on its last snapshot when the read fails: stepping down must
        not wait for brokers out of reach. A leader's tick fails instead (it acts only on the end)."""
        try:
            return self.config_store.read_to_end(TICK_READ_TIMEOUT_S)
        except (ReadTimeout, KafkaException) as exc:
            if self.election.is_leader:
                raise
            log.info(
                "worker %s could not read the config topic (%s); acting on its last view", self.worker_id, exc
            )
            return self.config_store.snapshot

    def _end_leadership(self, snapshot: ConfigSnapshot) -> None:
        """What a demoted leader does: give up the config topic writer and the connectors, stop its
        tasks, and forget what it generated, so that a later leadership starts afresh."""
        if self.config_store.has_write_privileges:
            self.config_store.relinquish_write_privileges()
        self._live.stop_all()
        self._generated_from.clear()
        self._retirements.forget()
        if any(run.stopping_since is None for run in self._runs.values()):  # once, not every tick
            log.warning("worker %s lost leadership; stopping its tasks", self.worker_id)
            self._stop_all_runs(wait=False)
            self.statuses.forget_published()
        self._reap_runs(snapshot)

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
        """For a connector that is not STOPPED (a STOPPED one's status is `_publish_stopped`'s)."""
        if snapshot.target_state(connector) == TargetState.PAUSED:
            return ConnectState.PAUSED
        return ConnectState.RUNNING

    def session_keys(self) -> list[SessionKey]:
        snapshot = self.config_store.snapshot
        keys = [snapshot.session_key, snapshot.previous_session_key]
        if snapshot.session_key is None:
            keys = [self.config_store.read_to_end().session_key, None]
        return [k for k in keys if k is not None]

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
