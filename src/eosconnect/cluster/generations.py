"""The Spark jobs of the leader's connector generations: launch, stop, abandon, reap (docs/architecture.md).

One Spark job runs one generation of a connector's tasks (cluster/jobs.py), plus one more job for
every task run again in that generation (a restart, or tasks lost with a failed job). Each tick the
leader reconciles the jobs with the config topic: a generation replaced, paused, stopped or deleted
is stopped gracefully (its tasks read the directive in their heartbeat answer) and abandoned if it
does not stop within `task.shutdown.graceful.timeout.ms` (KIP-618: the next generation's fencing
disables its tasks; their job is cancelled after `eosconnect.zombie.cancel.timeout.ms`). A connector
with task configs and no running generation is launched when Spark has free task slots for all of
its tasks, else its tasks show UNASSIGNED with the slots needed and free.

Uses from the other parts: `_recover_lost_tasks` and `_auto_restart` (cluster/task_health.py),
`_fence_ahead` (cluster/zombie_fencing.py).
"""

from __future__ import annotations

import logging
import threading
import time
import uuid

from eosconnect.cluster.herder_state import LAUNCHED, GenerationRun, HerderState, TaskRuntime
from eosconnect.cluster.jobs import SparkTaskJob, retire_connector
from eosconnect.cluster.packing import HOST_END_WAIT_S, OWN_SLOT, HostedTasks
from eosconnect.cluster.shipping import plugin_fingerprint
from eosconnect.cluster.spark import executor_slots
from eosconnect.cluster.task_channel import RestStartupCoordinator, RestTaskControl
from eosconnect.runtime.task import TaskSpec
from eosconnect.storage.config_state import ConfigSnapshot, TargetState
from eosconnect.storage.status_store import ConnectState
from eosconnect.worker_config import TASKS_PER_SLOT

log = logging.getLogger(__name__)


class Generations(HerderState):
    """The leader's Spark jobs, one `GenerationRun` per connector (`_runs`), and the abandoned ones."""

    def _reconcile_runs(self, snapshot: ConfigSnapshot) -> None:
        """Bring the running generations in line with `snapshot`, under the lock: stop the obsolete,
        cancel abandoned ones once they can do no harm, reap what ended, launch what is missing."""
        with self._lock:
            self._stop_obsolete(snapshot)
            self._cancel_abandoned()
            self._reap_runs(snapshot)
            self._hosts.cancel_drained(self._zombie_cancel_s)
            self._hosts.reap()
            self._launch_missing(snapshot)

    def _stop_obsolete(self, snapshot: ConfigSnapshot) -> None:
        """Runs of a removed, stopped or superseded generation begin stopping; the others have lost
        tasks recovered and failed ones restarted; a run that outlives the graceful timeout is
        abandoned (caller holds the lock)."""
        graceful_s = self.worker.task_shutdown_graceful_timeout_ms / 1000
        for name, run in list(self._runs.items()):
            latest = snapshot.generation(name)
            target = snapshot.target_state(name)
            obsolete = (
                not snapshot.contains(name) or target == TargetState.STOPPED or latest != run.generation
            )
            if obsolete and run.stopping_since is None:
                run.stopping_since = time.monotonic()
                log.info("connector %s: stopping generation %s", name, run.generation)
            overdue = run.stopping_since is not None and time.monotonic() - run.stopping_since > graceful_s
            if run.stopping_since is None:
                self._recover_lost_tasks(name, run)
                self._auto_restart(name, run, snapshot)
            if overdue and run.running():
                # KIP-618: tasks that do not stop in time are abandoned, not waited for; the
                # next generation's fencing round disables them. Their Spark job is
                # cancelled later, once they can do no harm and hold no slots for long.
                log.warning(
                    "connector %s: %d task(s) of generation %s did not stop within %.0fs; abandoning",
                    name,
                    run.task_count,
                    run.generation,
                    graceful_s,
                )
                del self._runs[name]
                self._abandoned.append(run)
                for job in (run.job, *run.extra_jobs):
                    if isinstance(job, HostedTasks):
                        self._hosts.close(job)

    def _cancel_abandoned(self) -> None:
        """Forget abandoned runs that ended; cancel the Spark jobs of those still running after
        the zombie grace (caller holds the lock)."""
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

    def _launch_missing(self, snapshot: ConfigSnapshot) -> None:
        """Launch every connector of `snapshot` with no run yet, as far as free task slots allow;
        the others are reported UNASSIGNED with the reason (caller holds the lock)."""
        busy = self._busy_slots()
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
            packed = self._hosts.packs(snapshot.connector_config(name))
            needed = self._hosts.new_slots_needed(count) if packed else count
            if needed > slots - busy and not self._spark.on_demand_executors:
                none_yet = " (no Spark executor has registered yet)" if slots == 0 else ""
                reason = (
                    f"not enough free Spark task slots: connector {name!r} needs {needed} for its "
                    f"{count} task(s), {max(0, slots - busy)} of {slots} are free{none_yet}; waiting "
                    f"for executors, or lower tasks.max, give Spark more cores/executors, or "
                    f"{self._packing_hint(packed)}"
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
                busy += needed

    def _busy_slots(self) -> int:
        """Spark task slots held: a slot per task of unpacked runs (live or abandoned), a slot per
        running slot host."""
        unpacked = sum(r.task_count for r in (*self._runs.values(), *self._abandoned) if not r.packed)
        return unpacked + self._hosts.slots_held()

    def _packing_hint(self, packed: bool) -> str:
        setting = f"{TASKS_PER_SLOT} (worker)"
        if packed:
            return f"run more tasks per slot: raise {setting}, now {self._hosts.capacity}"
        if self._hosts.enabled:
            return f"let the connector share slots: drop {OWN_SLOT}=true"
        return f"run several tasks per slot: set {setting} to more than 1"

    def _publish_stopped(self, name: str) -> None:
        """A STOPPED connector's status, once its generation has stopped or been abandoned (the
        abandoned tasks are fenced before any new generation starts)."""
        published = self.statuses.published(name)
        if published is None or published.state != ConnectState.STOPPED:
            self._put_connector_status(name, ConnectState.STOPPED)

    def _retire_ended_connectors(self, snapshot: ConfigSnapshot) -> None:
        """Connectors deleted or stopped whose tasks have all ended are retired (`Connector.retired`,
        cluster/retirements.py): never while one of their tasks, abandoned ones too, may still run."""
        self._retirements.observe(snapshot)
        with self._lock:
            due = self._retirements.due(self._has_running_tasks)
        for retirement in due:
            log.info(
                "connector %s: %s and its tasks ended; retiring it",
                retirement.name,
                "deleted" if retirement.deleted else "stopped",
            )
            retire_connector(retirement.config, self.worker.originals, retirement.deleted)

    def _has_running_tasks(self, name: str) -> bool:
        return name in self._runs or any(r.connector == name and r.running() for r in self._abandoned)

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
        packed = self._hosts.packs(snapshot.connector_config(name))
        jobs: list[SparkTaskJob | HostedTasks] = (
            list(self._hosts.place(specs))
            if packed
            else [
                SparkTaskJob(self.spark, group, specs, f"eosconnect connector {name} generation {generation}")
            ]
        )
        for t in tasks:
            self._tasks[(name, t)] = TaskRuntime(state="UNASSIGNED", generation=generation, trace=LAUNCHED)
            self._put_task_status(name, t, ConnectState.UNASSIGNED, generation, LAUNCHED)
        if any(spec.coordinator is not None for spec in specs):
            threading.Thread(
                target=self._fence_ahead, args=(name, generation), name=f"fence-{name}", daemon=True
            ).start()
        for job in jobs:
            job.start()
        log.info(
            "connector %s: launched generation %s (%d tasks) as %s",
            name,
            generation,
            len(tasks),
            " and ".join(j.job_group for j in jobs) if packed else f"Spark job group {group}",
        )
        run = GenerationRun(name, generation, snapshot.task_count(name), jobs[0], jobs[1:], packed=packed)
        run.owners = {spec.task: job for job in jobs for spec in job.specs}
        run.instances = {spec.task: _instance_of(spec) for spec in specs}
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
            control=RestTaskControl(
                self.rest_url, worker_props, name, task, generation, instance=uuid.uuid4().hex[:12]
            ),
            coordinator=coordinator,
            generation=generation,
        )

    def _stop_all_runs(self, wait: bool) -> None:
        self._hosts.stop_all()
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
            # Hosts whose tasks ended learn at their next question (every 50 ms once empty) that they
            # may end; only those still running after that are cancelled.
            self._hosts.wait_ended(max(deadline, time.monotonic() + HOST_END_WAIT_S))
            self._hosts.cancel_all()

    def _task_finished(self, name: str, task: int, generation: int, run: GenerationRun | None) -> bool:
        """Run an ended task again if a restart waits for it; whether it did.

        The leader's record of the task says RESTARTING from here, as its status does: a new instance
        that fails as the last one did must differ from the record, or its FAILED (the same state,
        often the same trace) counts as no change and RESTARTING stays for good."""
        if run is None or run.generation != generation or task not in run.restart_pending:
            return False
        run.restart_pending.discard(task)
        run.stop_tasks.discard(task)
        runtime = self._tasks.setdefault((name, task), TaskRuntime())
        runtime.state, runtime.trace, runtime.pid = "RESTARTING", None, None
        self._put_task_status(name, task, ConnectState.RESTARTING, generation)
        self._relaunch(name, run, [task], "restart")
        log.info("connector %s: restarted task %d", name, task)
        return True

    def _relaunch(self, name: str, run: GenerationRun, tasks: list[int], why: str) -> None:
        """Run `tasks` of `run`'s generation again, as one more Spark job of that generation."""
        snapshot = self.config_store.snapshot
        label = "-".join(str(t) for t in tasks)
        specs = [self._spec(name, snapshot, run.generation, t) for t in tasks]
        extras: list[SparkTaskJob | HostedTasks] = (
            list(self._hosts.place(specs))
            if run.packed
            else [
                SparkTaskJob(
                    self.spark,
                    f"eosconnect-{name}-gen{run.generation}-task{label}-{int(time.time() * 1000)}",
                    specs,
                    f"eosconnect tasks {label} of {name}: {why}",
                )
            ]
        )
        for spec in specs:  # from now on the earlier instance is told to stop (and may be fenced)
            run.instances[spec.task] = _instance_of(spec)
        for extra in extras:
            for spec in extra.specs:
                run.owners[spec.task] = extra
                self._tasks.setdefault((name, spec.task), TaskRuntime()).last_seen = time.monotonic()
            run.extra_jobs.append(extra.start())


def _instance_of(spec: TaskSpec) -> str:
    return str(getattr(spec.control, "instance", ""))
