"""The leader's slot hosts: which connector tasks share a Spark task slot (docs/architecture.md).

With `eosconnect.tasks.per.slot=K` (K > 1) the leader places connector tasks on slot hosts, each a
one-partition Spark job running `runtime/task_group.py`, up to K tasks per host: on the running host
with the fewest tasks below K, else on a new host (a new slot). A host learns its tasks from its
heartbeat's answer (`SlotHosts.heartbeat`, asked through cluster/host_channel.py); a task leaves its
host's assignment when it reports its end, so a new Spark attempt of the host (its Python worker
died) is sent again exactly the tasks that still ran. A host empty for `HOST_IDLE_S` is told to stop.

`HostedTasks` is one connector's tasks on one host, shaped as the `SparkTaskJob` a
`GenerationRun` expects (running, error, outcomes, cancel), so the herder's bookkeeping of lost,
restarted and abandoned tasks is the same for both layouts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eosconnect.cluster.host_channel import RestHostChannel, spec_to_json
from eosconnect.cluster.jobs import SparkTaskJob
from eosconnect.runtime.task import TaskSpec
from eosconnect.runtime.task_group import SlotHostSpec, instance_of, spark_host_entry
from eosconnect.worker_config import tasks_per_slot

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from eosconnect.cluster.host_loss import HostMemory

log = logging.getLogger(__name__)

#: Connector setting: `true` gives each of the connector's tasks a Spark task slot of its own.
OWN_SLOT = "eosconnect.own.slot"
#: A host with no task for this long is told to stop (it gives its slot and Python worker back).
HOST_IDLE_S = 10.0
#: A host that has asked before (every half second) but not for this long gets no new task: its
#: Python worker may be frozen (SIGSTOP, swapped out), and a task placed there would never start.
HOST_SILENT_S = 5.0
#: At a worker's stop, how long hosts whose tasks ended get to end by themselves before a cancel.
HOST_END_WAIT_S = 2.0


def wants_own_slot(connector_config: Mapping[str, str] | None) -> bool:
    return str((connector_config or {}).get(OWN_SLOT, "false")).strip().lower() == "true"


@dataclass
class SlotHost:
    host_id: str
    job: SparkTaskJob
    capacity: int
    #: The tasks placed on the host that have not reported their end, by instance.
    assigned: dict[str, TaskSpec] = field(default_factory=dict)
    idle_since: float | None = field(default_factory=time.monotonic)
    stopping: bool = False
    #: No new task goes here: it holds a task abandoned for not stopping in time (a zombie, maybe
    #: frozen with its whole Python worker). Its other tasks go on; it stops once empty.
    closed: bool = False
    #: When it last asked for its tasks (None: not yet, its Spark task is still starting).
    seen: float | None = None
    #: Abandoned tasks left to end in their threads (`SlotHosts.cancel`): they still take room.
    lingering: set[str] = field(default_factory=set)
    #: Its Python worker's pid, size and memory limit, from its last heartbeat (cluster/host_loss.py).
    memory: HostMemory | None = None
    #: When the leader ran its live tasks again elsewhere because it went silent (`evacuate`).
    evacuated_at: float | None = None

    def mates(self, instances: Sequence[str]) -> list[str]:
        """The other tasks placed on the host (`connector-task`): they die with `instances`."""
        return sorted(f"{s.connector}-{s.task}" for i, s in self.assigned.items() if i not in instances)

    def room(self) -> int:
        if self.stopping or self.closed or self.silent() or not self.job.running():
            return 0
        return self.capacity - len(self.assigned) - len(self.lingering)

    def silent(self, for_s: float | None = None, since: float = 0.0) -> bool:
        """Not heard from for `for_s` (`HOST_SILENT_S`), counting from `since` at the earliest; a
        host not started yet is not silent."""
        limit = HOST_SILENT_S if for_s is None else for_s
        return self.seen is not None and time.monotonic() - max(self.seen, since) > limit


class HostedTasks:
    """One connector's tasks on one slot host, with the face of a `SparkTaskJob`."""

    #: Tasks sharing a slot die together: when Spark gives up on the host, every one of them failed.
    shares_slot = True

    def __init__(self, pool: SlotHosts, host: SlotHost, specs: list[TaskSpec]) -> None:
        self.pool, self.host, self.specs = pool, host, specs
        self.instances = [instance_of(s) for s in specs]
        self.job_group = f"{host.job.job_group}/{'-'.join(self.instances)}"

    def start(self) -> HostedTasks:
        return self

    def running(self) -> bool:
        return self.host.job.running() and any(i in self.host.assigned for i in self.instances)

    @property
    def error(self) -> BaseException | None:
        return None if self.host.job.running() else self.host.job.error

    @property
    def outcomes(self) -> list[dict[str, Any]]:
        ours = {(s.connector, s.task) for s in self.specs}
        return [o for o in self.host.job.outcomes if (o.get("connector"), o.get("task")) in ours]

    def failure_reason(self) -> str:
        return self.host.job.failure_reason()

    def lived_s(self) -> float:
        """The slot host's Spark job's life: Spark counts attempts per slot host, not per task."""
        return self.host.job.lived_s()

    def wait(self, timeout: float | None = None) -> list[dict[str, Any]]:
        return self.outcomes

    def cancel(self) -> None:
        self.pool.cancel(self)


class SlotHosts:
    """The leader's slot hosts. Methods are called under the herder's lock, or take the pool's."""

    def __init__(
        self, spark: Callable[[], SparkSession], worker_url: str, worker_props: Mapping[str, str]
    ) -> None:
        self._spark = spark
        self.worker_url = worker_url
        self.worker_props = dict(worker_props)
        self.capacity = tasks_per_slot(worker_props)
        self.hosts: dict[str, SlotHost] = {}
        self._lock = threading.RLock()
        #: Host silences count from here at the earliest (`forgive_silence`).
        self._listening_since = 0.0

    @property
    def enabled(self) -> bool:
        return self.capacity > 1

    def packs(self, connector_config: Mapping[str, str] | None) -> bool:
        """Whether the connector's tasks go to slot hosts."""
        return self.enabled and not wants_own_slot(connector_config)

    def slots_held(self) -> int:
        with self._lock:
            return sum(1 for h in self.hosts.values() if h.job.running())

    def new_slots_needed(self, count: int) -> int:
        """Slots `count` more tasks take: new hosts for what the running ones have no room for."""
        with self._lock:
            room = sum(max(0, h.room()) for h in self.hosts.values())
        return math.ceil(max(0, count - room) / self.capacity)

    def place(self, specs: list[TaskSpec]) -> list[HostedTasks]:
        """Put each spec on the host with the fewest tasks below capacity (new hosts as needed)."""
        placed: dict[str, list[TaskSpec]] = {}
        with self._lock:
            for spec in specs:
                open_hosts = [h for h in self.hosts.values() if h.room() > 0]
                host = min(open_hosts, key=lambda h: len(h.assigned)) if open_hosts else self._new_host()
                host.assigned[instance_of(spec)] = spec
                host.idle_since = None
                placed.setdefault(host.host_id, []).append(spec)
            return [HostedTasks(self, self.hosts[h], s) for h, s in placed.items()]

    def _new_host(self) -> SlotHost:
        host_id = uuid.uuid4().hex[:12]
        channel = RestHostChannel(self.worker_url, self.worker_props, host_id)
        job = SparkTaskJob(
            self._spark(),
            f"eosconnect-host-{host_id}",
            [SlotHostSpec(host_id, channel)],
            f"eosconnect slot host {host_id} (up to {self.capacity} connector tasks)",
            entry=spark_host_entry,
        )
        host = SlotHost(host_id, job, self.capacity)
        self.hosts[host_id] = host
        job.start()
        log.info("started slot host %s (Spark job group %s)", host_id, job.job_group)
        return host

    def heartbeat(self, host_id: str, running: set[str], memory: HostMemory | None = None) -> dict[str, Any]:
        """A host's question: the tasks to start (placed on it, not running there) and whether it
        may end once empty. An unknown host (an earlier leader's, or one already told to stop) ends."""
        with self._lock:
            host = self.hosts.get(host_id)
            if host is None:
                return {"start": [], "stop": True}
            host.memory = memory or host.memory
            host.seen = time.monotonic()
            if not host.assigned and not host.stopping:
                host.idle_since = host.idle_since or time.monotonic()
                if time.monotonic() - host.idle_since > HOST_IDLE_S:
                    host.stopping = True
                    log.info("slot host %s has had no task for %.0fs; stopping it", host_id, HOST_IDLE_S)
            return self._answer(host, running)

    def pending(self, host_id: str, running: set[str]) -> dict[str, Any]:
        """What `heartbeat` would answer now, recording nothing (asked while a host's request is held)."""
        with self._lock:
            host = self.hosts.get(host_id)
            return {"start": [], "stop": True} if host is None else self._answer(host, running)

    @staticmethod
    def _answer(host: SlotHost, running: set[str]) -> dict[str, Any]:
        start = [spec_to_json(s) for i, s in host.assigned.items() if i not in running]
        return {"start": start, "stop": host.stopping}

    def ended(self, instance: str | None) -> None:
        """A task reported its end: it leaves its host (a retry of the host will not run it again)."""
        if not instance:
            return
        with self._lock:
            for host in self.hosts.values():
                host.lingering.discard(instance)
                if host.assigned.pop(instance, None) is not None and not host.assigned:
                    host.idle_since = time.monotonic()

    def close(self, hosted: HostedTasks) -> None:
        """`hosted` was abandoned (it did not stop in time): its host takes no new task, so the next
        generation does not land in a Python worker that may be frozen, and the host can be
        cancelled once the zombie is its only task (`cancel`)."""
        with self._lock:
            hosted.host.closed = True

    def silent_hosts(self, for_s: float) -> list[SlotHost]:
        """Hosts Spark still runs that have not asked for `for_s` (frozen or hung Python workers),
        not yet evacuated."""
        with self._lock:
            return [
                h
                for h in self.hosts.values()
                if h.evacuated_at is None and h.job.running() and h.silent(for_s, self._listening_since)
            ]

    def evacuate(self, host: SlotHost, instances: Sequence[str]) -> None:
        """`instances` (the host's live tasks) run again elsewhere, and fence these: the host takes
        no new task, and they leave its assignment (a later Spark attempt of the host, or the host
        waking up, does not run them again; woken up, they are told to stop as replaced instances).
        Its Spark job is cancelled once nothing live is left in it (`cancel_drained`)."""
        with self._lock:
            host.closed = True
            host.evacuated_at = time.monotonic()
            for i in instances:
                if host.assigned.pop(i, None) is not None:
                    host.lingering.add(i)

    def forgive_silence(self) -> None:
        """The leader itself was not listening (a stalled process): hosts' silence counts from now
        for evacuation (`silent_hosts`); a host silent that long still takes no new task."""
        with self._lock:
            self._listening_since = time.monotonic()

    def cancel_drained(self, after_s: float) -> None:
        """Cancel the Spark job of each evacuated host that has held no live task for `after_s`
        (`eosconnect.zombie.cancel.timeout.ms`, as for abandoned generations): Spark kills its
        Python worker, frozen or not, and its slot is free. Its replaced tasks cannot write: their
        successors fenced them. A host that wakes up before then drains and stops by itself."""
        drained: list[SlotHost] = []
        with self._lock:
            now = time.monotonic()
            for host in self.hosts.values():
                if (
                    host.evacuated_at is not None
                    and not host.assigned
                    and not host.stopping
                    and now - host.evacuated_at > after_s
                ):
                    host.stopping = True
                    drained.append(host)
        for host in drained:
            if host.job.running():
                log.info("slot host %s: cancelling its Spark job (its tasks run elsewhere)", host.host_id)
                host.job.cancel()

    def cancel(self, hosted: HostedTasks) -> None:
        """A zombie's host is cancelled only if it runs no live task of another connector; else the
        zombie (fenced by the next generation) is left to end in its thread. (A host whose live
        tasks went silent with it was evacuated: they run elsewhere, and are no longer its.)"""
        with self._lock:
            host = hosted.host
            others = [s for i, s in host.assigned.items() if i not in hosted.instances]
            for i in hosted.instances:
                host.assigned.pop(i, None)
            if others:
                host.lingering.update(hosted.instances)
                log.warning(
                    "not cancelling slot host %s for %s: it also runs %s; the fenced task is left to end",
                    host.host_id,
                    ", ".join(f"{s.connector}-{s.task}" for s in hosted.specs),
                    ", ".join(f"{s.connector}-{s.task}" for s in others),
                )
                return
            host.stopping = True
        if host.job.running():
            host.job.cancel()

    def reap(self) -> None:
        with self._lock:
            for host_id, host in list(self.hosts.items()):
                if not host.job.running():
                    del self.hosts[host_id]

    def stop_all(self) -> None:
        with self._lock:
            for host in self.hosts.values():
                host.stopping = True

    def wait_ended(self, deadline: float) -> None:
        """Wait until every host's Spark job has ended, or until `deadline` (time.monotonic())."""
        while time.monotonic() < deadline:
            with self._lock:
                if not any(h.job.running() for h in self.hosts.values()):
                    return
            time.sleep(0.05)

    def cancel_all(self) -> None:
        with self._lock:
            hosts = list(self.hosts.values())
        for host in hosts:
            if host.job.running():
                host.job.cancel()
