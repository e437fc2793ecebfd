"""The leader's answer to a silent slot host: its tasks run again elsewhere (docs/architecture.md,
"Task groups").

A slot host that has not asked for `EVACUATE_AFTER` heartbeat timeouts while Spark still runs its
Spark task is frozen or hung (SIGSTOP, swapped out, a stuck interpreter). Spark never runs it
again, since for Spark it is alive, and the leader cannot cancel it while it may hold live tasks of
other connectors (cancelling would kill them with it). Left alone, its tasks would wait for a
Spark retry that never comes. So each of its tasks of a running generation is launched again, as a
new instance of the same generation, on a host with room: the new instance's start-up fences the
silent one through the task's transactional id (KIP-618), and the silent one, if it wakes up, is
told to stop and ends quietly as a replaced instance (runtime/supersession.py). Tasks of
generations being stopped or abandoned stay: the next generation's fencing round disables them. The
host takes no new task; once nothing live is left in it, it stops by itself when it wakes up, or
its Spark job is cancelled after `eosconnect.zombie.cancel.timeout.ms` (`SlotHosts.cancel_drained`).

Why twice the heartbeat timeout: after one, the tasks show UNASSIGNED (cluster/task_health.py), and
Spark may still be starting a dead Python worker's host again (its new attempt asks for the same
tasks); after two, the host is taken for frozen. Uses `_relaunch` from cluster/generations.py.
"""

from __future__ import annotations

import logging
import time

from eosconnect.cluster.herder_state import HerderState, TaskRuntime
from eosconnect.cluster.host_loss import host_loss_detail
from eosconnect.cluster.packing import SlotHost
from eosconnect.storage.status_store import ConnectState

log = logging.getLogger(__name__)

#: A slot host silent for this many `task.heartbeat.timeout.ms` while Spark still runs it is evacuated.
EVACUATE_AFTER = 2


class HostEvacuation(HerderState):
    """`_evacuate_silent_hosts`, once per leader tick."""

    def _evacuate_silent_hosts(self) -> None:
        silent_s = EVACUATE_AFTER * self.worker.task_heartbeat_timeout_ms / 1000
        with self._lock:
            if self._last_tick is not None and time.monotonic() - self._last_tick > silent_s / 2:
                # This leader was not listening (its process stalled): the silence may be its own.
                self._hosts.forgive_silence()
                return
            for host in self._hosts.silent_hosts(silent_s):
                self._evacuate(host)

    def _evacuate(self, host: SlotHost) -> None:
        moved = {
            name: sorted(
                t
                for t, owner in run.owners.items()
                if getattr(owner, "host", None) is host and run.instances.get(t) in host.assigned
            )
            for name, run in self._runs.items()
            if run.stopping_since is None
        }
        moved = {name: tasks for name, tasks in moved.items() if tasks}
        tasks = sorted(f"{name}-{t}" for name, ts in moved.items() for t in ts)
        silence = time.monotonic() - (host.seen or time.monotonic())
        pid = f" (Python worker pid {host.memory.pid})" if host.memory and host.memory.pid else ""
        # First: the host takes no new task, so none of its tasks is placed on it again.
        self._hosts.evacuate(host, [self._runs[name].instances[t] for name, ts in moved.items() for t in ts])
        log.warning(
            "slot host %s%s has not been heard from for %.0fs while Spark still runs it (frozen or hung); "
            "running its task(s) %s in other slot hosts, where they fence the silent instances",
            host.host_id,
            pid,
            silence,
            ", ".join(tasks) or "(none of a running generation)",
        )
        for name, ts in moved.items():
            run = self._runs[name]
            self._relaunch(name, run, ts, f"slot host {host.host_id} went silent")
            for t in ts:
                detail = host_loss_detail(
                    host.host_id,
                    [m for m in tasks if m != f"{name}-{t}"],
                    self._hosts.capacity,
                    memory=host.memory,
                )
                reason = (
                    f"task {name}-{t} was started again in another slot host: its slot host {host.host_id} "
                    f"had not been heard from for {silence:.0f}s while Spark still ran it (frozen or hung); "
                    f"the new instance fences the silent one. {detail.strip()}"
                )
                runtime = self._tasks.setdefault((name, t), TaskRuntime())
                runtime.state, runtime.generation, runtime.trace = "UNASSIGNED", run.generation, reason
                self._put_task_status(name, t, ConnectState.UNASSIGNED, run.generation, reason)
