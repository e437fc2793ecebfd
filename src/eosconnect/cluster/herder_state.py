"""What the parts of the distributed herder share: its state, and the few helpers they all use.

`DistributedHerder` (cluster/herder.py) is assembled from parts, each in its own module with one job:

- cluster/herder.py: the leader's control loop (tick, config topic, session key, task configs) and the wiring;
- cluster/generations.py: the Spark jobs running each connector generation (launch, stop, abandon, reap);
- cluster/task_health.py: what the leader knows of each task (heartbeats, silence, lost tasks, auto restarts);
- cluster/host_evacuation.py: a silent slot host's tasks run again in other hosts (packed tasks);
- cluster/zombie_fencing.py: the fencing rounds a new generation needs before its tasks run (KIP-618);
- cluster/offsets_admin.py: reading, altering and resetting the offsets of STOPPED connectors (KIP-875);
- cluster/herder_reads.py: what any worker answers the REST layer (info, configs, status, health, metrics);
- cluster/herder_writes.py: what only the leader does for the REST layer (create, delete, pause, restart).

The parts are mixins over `HerderState`: the state is one set of fields, set up by
`DistributedHerder.__init__` and guarded by `_lock` where the REST threads and the herder's thread
meet (`_runs`, `_abandoned`, `_tasks`). Splitting the state itself would put a lock hierarchy between
parts that must change it together (a heartbeat finishes a task and relaunches it in one step).
The annotations below list every field, so a part can be read without the others.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from eosconnect.cluster.auto_restart import AutoRestarts
from eosconnect.cluster.connector_kinds import uses_exactly_once_startup
from eosconnect.cluster.herder_api import NotFoundError, NotLeaderError
from eosconnect.cluster.jobs import SparkTaskJob
from eosconnect.cluster.live_connectors import LiveConnectors
from eosconnect.cluster.packing import HostedTasks, SlotHosts
from eosconnect.cluster.retirements import Retirements
from eosconnect.cluster.spark import SparkProvider
from eosconnect.cluster.status_board import StatusBoard
from eosconnect.storage.config_state import ConfigSnapshot
from eosconnect.storage.config_store import ConfigStore
from eosconnect.storage.config_writers import LeaderFencedError
from eosconnect.storage.status_store import ConnectState, Status, StatusStore
from eosconnect.worker_config import WorkerConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eosconnect.cluster.election import LeaderElection

log = logging.getLogger(__name__)

#: The herder's loop runs a tick at least this often (sooner when woken).
TICK_S = 0.5
#: States a task reports when it has ended (its last heartbeat is marked final).
FINAL_STATES = frozenset({"FAILED", "STOPPED", "SUPERSEDED"})
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
    #: The launch (`GenerationRun.instances`) the last heartbeat came from.
    instance: str | None = None
    #: A state change heard while this worker was not publishing (a leader in doubt, cluster/election.py),
    #: still to be published: the heartbeats after it report no change, so without this mark the
    #: status topic kept the state from before the doubt (UNASSIGNED from a silence) for good.
    unpublished: bool = False


@dataclass
class GenerationRun:
    """The Spark job(s) running one generation of a connector's tasks."""

    connector: str
    generation: int
    task_count: int
    #: A `SparkTaskJob`, or `HostedTasks` (packed tasks on one slot host) with the same face.
    job: SparkTaskJob | HostedTasks
    extra_jobs: list[SparkTaskJob | HostedTasks] = field(default_factory=list)
    stopping_since: float | None = None
    restart_pending: set[int] = field(default_factory=set)
    stop_tasks: set[int] = field(default_factory=set)
    #: The Spark job each task runs in now: the generation's job, or the one that restarted it.
    owners: dict[int, SparkTaskJob | HostedTasks] = field(default_factory=dict)
    #: Jobs whose end the herder has looked at (`_recover_lost_tasks`).
    ended_jobs: set[str] = field(default_factory=set)
    #: The id of each task's latest launch (its `RestTaskControl.instance`): an instance launched
    #: before (or an earlier Spark attempt of it) is told to stop and never speaks for the task.
    instances: dict[int, str] = field(default_factory=dict)
    #: Whether the tasks run on slot hosts (cluster/packing.py) rather than a Spark task each.
    packed: bool = False

    def running(self) -> bool:
        return self.job.running() or any(j.running() for j in self.extra_jobs)


class HerderParts(Protocol):
    """The methods the herder's parts call on one another; each is implemented by one part.

    For the type checker `HerderState` is a `HerderParts`, so every such call is checked against
    these signatures and every part's implementation must match them (an incompatible one is an
    error). At run time `DistributedHerder`, which inherits every part, has them all; the protocol
    is not among its bases, so nothing changes there.
    """

    def connector_info(self, name: str) -> dict[str, Any]: ...  # herder_reads.py

    def connector_status(self, name: str) -> dict[str, Any]: ...  # herder_reads.py

    def _task_finished(  # generations.py
        self, name: str, task: int, generation: int, run: GenerationRun | None
    ) -> bool: ...

    # generations.py
    def _relaunch(self, name: str, run: GenerationRun, tasks: list[int], why: str) -> None: ...

    def _fence_ahead(self, name: str, generation: int) -> None: ...  # zombie_fencing.py

    def _busy_slots(self) -> int: ...  # generations.py

    def _recover_lost_tasks(self, name: str, run: GenerationRun) -> None: ...  # task_health.py

    # task_health.py
    def _auto_restart(self, name: str, run: GenerationRun, snapshot: ConfigSnapshot) -> None: ...


if TYPE_CHECKING:
    _PartsBase = HerderParts
else:
    _PartsBase = object


class HerderState(_PartsBase):
    """The herder's fields (set by `DistributedHerder.__init__`) and the helpers every part uses."""

    worker: WorkerConfig
    rest_url: str
    #: host:port of this worker's REST listener, as status records name it.
    worker_id: str
    config_store: ConfigStore
    status_store: StatusStore
    #: Statuses this worker publishes, and the status topic as last read.
    statuses: StatusBoard
    election: LeaderElection
    _spark: SparkProvider
    #: The slot hosts packed connector tasks run on (`eosconnect.tasks.per.slot` > 1).
    _hosts: SlotHosts
    #: The running generation of each connector (at most one).
    _runs: dict[str, GenerationRun]
    #: Generations that did not stop in time; their Spark jobs are cancelled after `_zombie_cancel_s`.
    _abandoned: list[GenerationRun]
    _zombie_cancel_s: float
    #: `eosconnect.relaunch.min.attempt.ms` in seconds (task_health.py `_recover_lost_tasks`).
    _relaunch_min_attempt_s: float
    #: Every task instance heard from, by (connector, task).
    _tasks: dict[tuple[str, int], TaskRuntime]
    #: The connector config each connector's task configs were last generated from.
    _generated_from: dict[str, Mapping[str, str]]
    #: Why a connector failed (its tasks are not launched until it is restarted or reconfigured).
    _connector_failures: dict[str, str]
    #: Connectors whose tasks wait for free Spark task slots, and why.
    _unassigned: dict[str, str]
    _live: LiveConnectors
    _auto_restarts: AutoRestarts
    #: Connectors deleted or stopped, retired once their tasks ended (cluster/retirements.py).
    _retirements: Retirements
    _lock: threading.RLock
    _fence_locks: dict[str, threading.Lock]
    #: Zombie fencing rounds this worker ran as the leader, per connector (KIP-618).
    _fencing_rounds: dict[str, int]
    _wakeup: threading.Event
    _cluster_id: str | None
    #: When the loop last completed a tick (monotonic), for /health.
    _last_tick: float | None
    _plugins_at_start: str
    _plugins_warned: str

    @property
    def spark(self) -> SparkSession:
        """The leader's Spark application, created when first needed (a standby holds none)."""
        return self._spark.get()

    def _wake(self) -> None:
        self._wakeup.set()

    def _require_leader(self) -> None:
        if not self.election.is_leader:
            raise NotLeaderError(self.election.leader_url())

    def _snapshot_with(self, name: str) -> ConfigSnapshot:
        snapshot = self.config_store.snapshot
        if not snapshot.contains(name):
            snapshot = self.config_store.read_to_end()
            if not snapshot.contains(name):
                raise NotFoundError(f"Connector {name} not found")
        return snapshot

    def _uses_fencing(self, connector_config: Mapping[str, str] | None) -> bool:
        """Whether the connector's tasks go through the exactly-once start-up (sources, and sinks
        that deliver exactly once)."""
        return self.worker.exactly_once_enabled and uses_exactly_once_startup(connector_config)

    def _put_connector_status(self, name: str, state: ConnectState, trace: str | None = None) -> None:
        self.statuses.put_connector(name, Status(state, self.worker_id, 0, trace))

    def _put_task_status(
        self, name: str, task: int, state: ConnectState, generation: int, trace: str | None = None
    ) -> None:
        self.statuses.put_task(name, task, Status(state, self.worker_id, generation, trace))

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
