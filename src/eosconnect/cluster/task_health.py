"""What the leader knows of each task, and what it does when a task is in trouble.

Tasks report through signed heartbeats (cluster/task_channel.py): `task_heartbeat` records state,
metrics and pid, publishes state changes (the leader only) and answers with the task's directive
(run | pause | stop). From there the leader finds tasks in trouble, once per tick:

- silent: no heartbeat for `task.heartbeat.timeout.ms` means not RUNNING: UNASSIGNED with the reason
  (executor lost, waiting for a free slot, attempt n of m) until its next attempt reports;
- a silent slot host (packed tasks) that Spark still runs, after twice that: its tasks run again in
  other hosts and fence the silent instances (cluster/host_evacuation.py);
- lost: its Spark job ended while it still ran (Spark gave up on one task: that one is FAILED with
  Spark's reason, the others run again at once, in one more job of the same generation);
- failed, of a connector with `errors.restart.enable=true`: restarted with back-off (cluster/auto_restart.py).

Uses `_relaunch`, `_task_finished` and `_busy_slots` from cluster/generations.py.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from eosconnect.cluster.auto_restart import RestartPolicy
from eosconnect.cluster.connector_kinds import fencing_producer_config
from eosconnect.cluster.herder_api import ConflictError
from eosconnect.cluster.herder_state import FINAL_STATES, LAUNCHED, GenerationRun, HerderState, TaskRuntime
from eosconnect.cluster.host_evacuation import EVACUATE_AFTER
from eosconnect.cluster.host_loss import HostMemory, host_loss_detail
from eosconnect.cluster.spark import executor_slots
from eosconnect.storage.config_state import ConfigSnapshot, TargetState
from eosconnect.storage.status_store import ConnectState
from eosconnect.storage.transactional_ids import fence_transactional_ids, task_transactional_id
from eosconnect.worker_config import RELAUNCH_MIN_ATTEMPT

log = logging.getLogger(__name__)

#: Spark's reason for aborting a job whose task used up its attempts (`spark.task.maxFailures`, the F of
#: `local[N,F]`); the task number is the partition index, i.e. the position in the job's specs.
ATTEMPTS_EXHAUSTED = re.compile(r"Task (\d+) in stage \S+ failed (\d+) times[^\n]*")
#: A Python worker that could not import what the task needs, in Spark's failure text.
MISSING_MODULE = re.compile(r"No module named '([^']+)'")


class TaskHealth(HerderState):
    """Heartbeats in, task states out; silent, lost and failed tasks."""

    def task_heartbeat(self, name: str, task: int, generation: int, report: Mapping[str, Any]) -> str:
        state = str(report.get("state", "RUNNING"))
        leader, in_doubt = self.election.is_leader, self.election.in_doubt
        if report.get("confirm") and in_doubt:
            # A task asks whether it may renew its producer, which fences every other instance of
            # it (`RestTaskControl.confirmed_current`). In doubt, another worker may lead already
            # and run the task's successor: only the end of the doubt can tell.
            raise ConflictError(
                f"worker {self.worker_id} is rejoining the group: whether {name}-{task} is the task's "
                "current instance is known once it leads again or another worker does"
            )
        with self._lock:
            run = self._runs.get(name)
            runtime = self._tasks.setdefault((name, task), TaskRuntime())
            if report.get("final"):  # it leaves its slot host, replaced instances too
                self._hosts.ended(report.get("instance"))
            if self._stale_instance(run, runtime, task, generation, report):
                # A newer instance of the task runs (a restart, a relaunch, a later Spark attempt):
                # this one stops, and its reports never overwrite the newer one's state.
                return "stop"
            changed = (runtime.state, runtime.generation) != (state, generation)
            if run is None or run.generation == generation or runtime.generation <= generation:
                runtime.state, runtime.generation = state, generation
                runtime.trace = report.get("trace")
                runtime.pid = report.get("pid")
                if "metrics" in report:  # a slot host leaves unchanged ones out (host_channel.py)
                    runtime.metrics = dict(report["metrics"] or {})
                runtime.last_seen = time.monotonic()
                runtime.attempt = int(report.get("attempt") or 0)
                runtime.instance = report.get("instance") or runtime.instance
            directive = self._directive(run, name, task, generation)
            current = run is not None and run.generation == generation
            # Only the leader publishes task states. A worker that lost leadership (say, a frozen
            # ex-leader that woke up) still hears from its old tasks, which its successor fenced:
            # their FAILED would overwrite the successor's RUNNING for the same task ids. A leader in
            # doubt publishes nothing either, but keeps the change for when it leads again.
            publish = (changed or runtime.unpublished) and current and state != "SUPERSEDED"
            if publish:
                runtime.unpublished = in_doubt and not leader
            if report.get("final") and self._task_finished(name, task, generation, run):
                # Restarted: the relaunch published RESTARTING, which stands until the new instance
                # reports; the old instance's end, written after it, would replace it.
                publish = False
        if publish and leader:
            self._put_task_status(
                name,
                task,
                ConnectState(state) if state in ConnectState.__members__ else ConnectState.FAILED,
                generation,
                runtime.trace,
            )
        return directive

    def _directive(self, run: GenerationRun | None, name: str, task: int, generation: int) -> str:
        """run | pause | stop for an instance of `generation` that is not stale (`_stale_instance`).

        A worker that does not lead (neither leader nor in doubt) answers "stop" whatever its runs
        say: its herder stops them at its next tick, but a tick can wait a minute in a Kafka call
        while the brokers are cut off, and a task asking meanwhile whether it was replaced
        (`RestTaskControl.superseded`) must not be told "run" by a worker another one replaced."""
        if not self.election.is_leader and not self.election.in_doubt:
            return "stop"
        if run is None or run.generation != generation or run.stopping_since is not None:
            return "stop"
        if task in run.stop_tasks:
            return "stop"
        if self.config_store.snapshot.target_state(name) == TargetState.PAUSED:
            return "pause"
        return "run"

    @staticmethod
    def _stale_instance(
        run: GenerationRun | None, runtime: TaskRuntime, task: int, generation: int, report: Mapping[str, Any]
    ) -> bool:
        """Whether the reporting instance was replaced within its generation: the leader launched
        the task again since (`GenerationRun.instances`), or a later Spark attempt of the same launch
        has reported. (Instances of older generations are told to stop by their generation.)"""
        instance = report.get("instance")
        if run is None or run.generation != generation or not instance:
            return False
        latest = run.instances.get(task)
        if latest is not None and instance != latest:
            return True
        attempt = int(report.get("attempt") or 0)
        return runtime.generation == generation and runtime.instance == instance and attempt < runtime.attempt

    def host_heartbeat(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        """A slot host's request (cluster/host_channel.py): each task's heartbeat, answered with its
        directive by instance, and the tasks placed on the host that it does not run yet."""
        directives: dict[str, str] = {}
        for beat in report.get("tasks") or []:
            instance = str(beat.get("instance") or "")
            directives[instance] = self.task_heartbeat(
                str(beat["connector"]), int(beat["task"]), int(beat["generation"]), beat
            )
        if not self.election.is_leader:
            # In doubt (cluster/election.py) the leader starts nothing, but a host it launched must
            # not end: a Spark retry of a host whose Python worker died asks now for the tasks it
            # must run again, and a host that ended then (its Spark task done) would never run
            # again, its tasks left UNASSIGNED for good. It asks again
            # every half second and gets them once the doubt ends; a worker that lost the
            # leadership for good tells it to stop (and cancels its Spark job with its tasks).
            return {"start": [], "stop": not self.election.in_doubt, "directives": directives}
        answer = self._hosts.heartbeat(host_id, set(directives), HostMemory.from_report(report))
        return {**answer, "directives": directives}

    def host_answer(self, host_id: str, report: Mapping[str, Any]) -> dict[str, Any]:
        """What `host_heartbeat` would answer the same report now, recording nothing: asked again
        while the host's request is held (cluster/host_channel.py, "held answers"). Recording the
        beats again would be wrong, not just redundant: a task may have sent its final report since
        the beat was built, and a RUNNING must not overtake it."""
        directives: dict[str, str] = {}
        with self._lock:
            for beat in report.get("tasks") or []:
                name, task, generation = str(beat["connector"]), int(beat["task"]), int(beat["generation"])
                run, runtime = self._runs.get(name), self._tasks.get((name, task))
                stale = runtime is not None and self._stale_instance(run, runtime, task, generation, beat)
                directives[str(beat.get("instance") or "")] = (
                    "stop" if stale else self._directive(run, name, task, generation)
                )
        if not self.election.is_leader:
            return {"start": [], "stop": not self.election.in_doubt, "directives": directives}
        return {**self._hosts.pending(host_id, set(directives)), "directives": directives}

    def _host_loss(self, owner: object, task: int, reason: str = "") -> str:
        """For a task of a slot host (`HostedTasks`): the host, the mates that died with it, and
        whether it ran out of memory (cluster/host_loss.py); "" for a task with a slot of its own."""
        host = getattr(owner, "host", None)
        if host is None:
            return ""
        own = [i for s, i in zip(owner.specs, owner.instances, strict=True) if s.task == task]  # type: ignore[attr-defined]
        mates = host.mates(own)
        return host_loss_detail(host.host_id, mates, self._hosts.capacity, reason, host.memory)

    def _check_heartbeats(self) -> None:
        """A task not heard from for `task.heartbeat.timeout.ms` is not RUNNING (nor PAUSED): its
        executor was lost or its Python worker died, and Spark runs it again when it has a slot and
        attempts left. It shows UNASSIGNED with that reason until its next attempt reports."""
        timeout_s = self.worker.task_heartbeat_timeout_ms / 1000
        now = time.monotonic()
        self._publish_held_states()
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
            busy = self._busy_slots()
            slots = executor_slots(self.spark)
            for name, t, runtime in silent:
                waiting = (
                    f"waiting for a free Spark task slot: running tasks hold {busy}, Spark has {slots}"
                    if slots < busy
                    else "waiting for Spark to run it again"
                )
                heard = "since it was launched" if runtime.trace == LAUNCHED else f"for over {timeout_s:g}s"
                reason = (
                    f"no heartbeat from task {name}-{t} {heard} (its executor was lost, or its Python "
                    f"worker died or has not started); {waiting} (last attempt {runtime.attempt + 1} of "
                    f"{self._max_attempts()})"
                )
                if runtime.trace != LAUNCHED:
                    owner = self._runs[name].owners.get(t)
                    hosted = self._host_loss(owner, t)
                    reason = f"{reason}. {hosted.strip()}" if hosted else reason
                    if hosted and getattr(owner, "host", None) is not None and owner.host.job.running():  # type: ignore[union-attr]
                        reason += (
                            f" If its slot host stays silent for {EVACUATE_AFTER * timeout_s:g}s while Spark "
                            "still runs it, the task is started again in another slot host."
                        )
                if runtime.state == "UNASSIGNED" and runtime.trace == reason:
                    continue
                if runtime.state != "UNASSIGNED":
                    log.warning("connector %s: %s", name, reason)
                runtime.state, runtime.trace = "UNASSIGNED", reason
                self._put_task_status(name, t, ConnectState.UNASSIGNED, runtime.generation, reason)

    def _publish_held_states(self) -> None:
        """Publish the task states heard while this leader was in doubt (`TaskRuntime.unpublished`):
        a task that reported RUNNING again then, or ended, would otherwise keep the status it had
        before (say UNASSIGNED from the silence of a commit that waited for a dead broker)."""
        with self._lock:
            held = [
                (name, t, runtime)
                for name, run in self._runs.items()
                for t in range(run.task_count)
                if run.stopping_since is None
                and (runtime := self._tasks.get((name, t))) is not None
                and runtime.unpublished
                and runtime.generation == run.generation
            ]
            for _name, _t, runtime in held:
                runtime.unpublished = False
        for name, t, runtime in held:
            if runtime.state in ConnectState.__members__:
                self._put_task_status(name, t, ConnectState(runtime.state), runtime.generation, runtime.trace)

    def _max_attempts(self) -> int:
        """Attempts Spark gives a task: the F of `local[N,F]`, else `spark.task.maxFailures`."""
        conf = self.spark.sparkContext.getConf()
        local = re.fullmatch(r"local\[[^,\]]+,\s*(\d+)\]", conf.get("spark.master", ""))
        if local:
            return int(local.group(1))
        if conf.get("spark.master", "").startswith("local"):
            return 1
        return int(conf.get("spark.task.maxFailures", "4") or 4)

    def _recover_lost_tasks(self, name: str, run: GenerationRun) -> None:
        """Tasks whose Spark job ended while they still ran (no final report) are lost.

        That happens when Spark gives up on a job: one task used up its attempts (the F of
        `local[N,F]`, `spark.task.maxFailures` on a cluster; a long-running task collects them over
        its whole life, since no attempt ever succeeds) and Spark kills the job's other tasks with
        it. The task Spark gave up on is FAILED with Spark's reason, as any failed task (restart it
        over REST); the others did nothing wrong and run again at once. Left alone, the connector
        would write nothing more while its status still said RUNNING.

        Unless the attempts were spread out: when they lived `eosconnect.relaunch.min.attempt.ms` or
        more on average, the Python worker was lost now and then rather than in a crash loop, and
        every lost task runs again at once (a new instance, which fences the last attempt's
        producer), as Kafka Connect reassigns a dead worker's tasks however often that happens."""
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
            shared = getattr(job, "shares_slot", False)  # tasks sharing a slot die together
            attempts, lived_s = (int(exhausted.group(2)) if exhausted else 0), job.lived_s()
            spread_out = self._attempts_spread_out(attempts, lived_s)
            if spread_out:
                log.warning(
                    "connector %s: Spark gave up on job %s after %d attempts in %.0fs, one every %.0fs on "
                    "average (not a crash loop: %s): running task(s) %s again in a new Spark job instead of "
                    "failing them",
                    name,
                    job.job_group,
                    attempts,
                    lived_s,
                    lived_s / attempts,
                    self._relaunch_setting(),
                    lost,
                )
                gave_up_on: set[int] = set()
            elif exhausted and not shared:
                gave_up_on = {job.specs[int(exhausted.group(1))].task}
            else:
                gave_up_on = set(lost)
            self._fence_lost_tasks(name, sorted(gave_up_on & set(lost)))
            for t in sorted(gave_up_on & set(lost)):
                detail = self._loss_detail(job, t, exhausted, shared, reason)
                trace = (
                    f"task {name}-{t} was lost: {detail}Restart it with "
                    f"POST /connectors/{name}/tasks/{t}/restart.\n\n{reason}"
                )
                log.error("connector %s: %s", name, trace.splitlines()[0])
                self._mark_ended(name, run, t, "FAILED", trace)
            others = [t for t in lost if t not in gave_up_on]
            if others:
                if not spread_out:  # that case was said above
                    log.warning(
                        "connector %s: Spark job %s ended (%s) and took task(s) %s down; running them again",
                        name,
                        job.job_group,
                        reason.splitlines()[0][:300],
                        others,
                    )
                for t in others:
                    self._mark_ended(name, run, t, "RESTARTING", None)
                why = "lost after spread-out attempts" if spread_out else "lost with a failed Spark job"
                self._relaunch(name, run, others, why)

    def _loss_detail(
        self, job: Any, task: int, exhausted: re.Match[str] | None, shared: bool, reason: str
    ) -> str:
        """Why a lost task that Spark gave up on is FAILED, and what to do about it: a missing module
        in the executors' Python, else the attempts Spark used up or the job's error (and, for a task
        sharing its slot, what ended the slot host)."""
        missing = MISSING_MODULE.search(str(job.error))
        if missing:
            return (
                f"the executors' Python ({self.spark.sparkContext.pythonExec}) cannot import module "
                f"{missing.group(1)!r}. Let the worker ship its environment (leave "
                "spark.archives and spark.pyspark.python unset), or install eosconnect and the "
                "connector into the executors' environment (spark.archives, spark.pyspark.python, "
                "the container image); "
                "connector code can also ship from the worker's plugin.path. "
            )
        detail = (
            f"Spark gave up on it ({exhausted.group(0).rstrip(',')}): its Python worker died once "
            "per attempt. A long-running task gets spark.task.maxFailures attempts (the F of the "
            f"master local[N,F]) over its whole life; {self._why_not_relaunched()}. "
            if exhausted
            else "its Spark job ended with an error. "
        )
        if shared:
            detail += self._host_loss(job, task, reason)
        return detail

    def _relaunch_setting(self) -> str:
        return f"{RELAUNCH_MIN_ATTEMPT}={round(self._relaunch_min_attempt_s * 1000)}"

    def _why_not_relaunched(self) -> str:
        """For a FAILED task's trace: why Spark's give-up was not followed by a relaunch."""
        if self._relaunch_min_attempt_s == 0:
            return f"{self._relaunch_setting()} leaves such tasks FAILED"
        return f"these came faster than {self._relaunch_setting()} per attempt on average: a crash loop"

    def _attempts_spread_out(self, attempts: int, lived_s: float) -> bool:
        """Did `attempts` that took `lived_s` in all live `eosconnect.relaunch.min.attempt.ms` or more
        on average? (0 attempts: the job did not end by using them up.)"""
        floor_s = self._relaunch_min_attempt_s
        return floor_s > 0 and attempts > 0 and lived_s / attempts >= floor_s

    def _fence_lost_tasks(self, name: str, tasks: list[int]) -> None:
        """Fence the transactional ids of tasks Spark gave up on, before anything can restart them.

        The last attempt may have died inside a transaction, and no successor will fence it until
        the task is restarted (maybe never): the broker would hold that transaction open until
        `transaction.timeout.ms`, and with it every read_committed reader of its partitions, the
        siblings' start-up read of the offsets topic included. Fencing aborts it now. It runs before
        the task is marked FAILED, so no restart (REST or automatic) can race it."""
        config = self.config_store.snapshot.connector_config(name)
        if not tasks or not self._uses_fencing(config):
            return
        ids = [task_transactional_id(self.worker.group_id, name, t) for t in tasks]
        try:
            fence_transactional_ids(fencing_producer_config(self.worker.originals, config or {}), ids, 10.0)
            log.info(
                "connector %s: fenced %s of the task(s) Spark gave up on, so an open transaction of "
                "theirs is aborted now, not after transaction.timeout.ms",
                name,
                ", ".join(ids),
            )
        except Exception as exc:  # the broker aborts it at transaction.timeout.ms anyway
            log.warning(
                "connector %s: could not fence %s of the task(s) Spark gave up on (%s); an open "
                "transaction of theirs holds read_committed readers until transaction.timeout.ms",
                name,
                ", ".join(ids),
                exc,
            )

    def _mark_ended(self, name: str, run: GenerationRun, task: int, state: str, trace: str | None) -> None:
        runtime = self._tasks.setdefault((name, task), TaskRuntime())
        if runtime.generation > run.generation:
            return
        runtime.state, runtime.generation, runtime.trace, runtime.pid = state, run.generation, trace, None
        if state in ConnectState.__members__:  # SUPERSEDED is no status: a newer task replaces it
            self._put_task_status(name, task, ConnectState(state), run.generation, trace)

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
                run.restart_pending.add(t)
                self._task_finished(name, t, run.generation, run)
            else:
                note = f"gave up after {policy.max_attempts} automatic restarts (errors.restart.max.attempts)"
                log.error("connector %s: task %d %s", name, t, note)
                self._put_task_status(name, t, ConnectState.FAILED, run.generation, f"{note}\n\n{cause}")

    def task_runtimes(self) -> dict[str, dict[str, Any]]:
        """Internal view for operators and tests: pid, state and generation of every known task.

        A deleted connector's tasks are listed while they are still stopping (their run is kept
        until they end), and no longer after that."""
        existing = set(self.config_store.snapshot.connectors())
        with self._lock:
            return {
                f"{c}-{t}": {
                    "connector": c,
                    "task": t,
                    "state": r.state,
                    "generation": r.generation,
                    "pid": r.pid,
                    "instance": r.instance,
                }
                for (c, t), r in self._tasks.items()
                if c in existing or c in self._runs
            }
