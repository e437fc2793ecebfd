"""A slot host: one Spark task (one slot, one Python worker) running several connector tasks.

Spark has no channel from the driver into a running task, so the host asks: every half second its
`HostChannel` (cluster/host_channel.py) carries the heartbeats of the connector tasks it runs to the
leader, hands each its directive, and brings back the tasks the leader placed on this host that it
does not run yet. Each connector task runs in a thread of its own with the code a lone Spark task
runs (`run_task`), so its producer, fencing, offsets, status and restarts are its own; what the
process holds once (interpreter, imported code, config-topic reader, HTTP client) is shared.

The host ends when the leader tells it to stop and none of its tasks still runs. A new Spark attempt
of the host (its Python worker died) starts with nothing and is sent again every task assigned to it
that has not ended (docs/architecture.md, "Task groups").
"""

from __future__ import annotations

import logging
import os
import resource
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from eosconnect.runtime.executor import configure_executor_logging, run_task
from eosconnect.runtime.host import MemoryReturn, resident_bytes
from eosconnect.runtime.task import TaskOutcome, TaskSpec

log = logging.getLogger(__name__)

HOST_POLL_INTERVAL_S = 0.5
#: How often a host with no task asks: a task placed on it (a new connector on a warm host) starts
#: within this time rather than at the next half-second heartbeat, which was a fifth of a short
#: sink job's time. A host stays empty only until a task comes or HOST_IDLE_S (cluster/packing.py)
#: ends it, and asks slowly again while the leader does not answer.
EMPTY_HOST_POLL_INTERVAL_S = 0.05
#: Memory given back when a task ends is logged from this much (runtime/host.py give_back_memory).
RELEASE_LOG_BYTES = 8 << 20
#: A running host looks this often whether it grew by `RELEASE_GROWTH_BYTES` since it last gave
#: memory back, and gives back what is free if so: a task's start-up (reading the offsets topic,
#: its clients' first buffers) frees most of what it allocated, and glibc kept it.
RELEASE_CHECK_S = 10.0
RELEASE_GROWTH_BYTES = 16 << 20


@dataclass
class HostAnswer:
    """The leader's answer to a host: tasks to start, and whether the host may end once empty."""

    start: list[TaskSpec] = field(default_factory=list)
    stop: bool = False
    #: The leader held the request for its whole hold and had nothing new: ask again at once
    #: (the hold was the wait; cluster/host_channel.py, "held answers").
    held: bool = False


class HostChannel(Protocol):
    def poll(self, running: Sequence[TaskSpec]) -> HostAnswer | None:
        """Report the running tasks' heartbeats (and set their directives); None if the leader did
        not answer this time."""
        ...


@dataclass
class SlotHostSpec:
    """What a slot host's Spark task gets (pickled to the executor)."""

    host_id: str
    channel: HostChannel


def host_memory() -> dict[str, int | None]:
    """This Python worker's pid, resident size and memory limit, sent with each host heartbeat so
    that the leader can tell its tasks, if the worker dies, whether it was running out of memory
    (cluster/host_loss.py). The limit is the address-space limit `spark.executor.pyspark.memory`
    sets, else the cgroup's (the container's), else None."""
    rss = resident_bytes()
    if rss is None:
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # peak, in KiB on Linux
    limit: int | None = resource.getrlimit(resource.RLIMIT_AS)[0]
    if limit is None or limit == resource.RLIM_INFINITY:
        limit = None
        try:
            with open("/sys/fs/cgroup/memory.max") as cgroup:
                raw = cgroup.read().strip()
            limit = int(raw) if raw.isdigit() else None
        except OSError:
            pass
    return {"pid": os.getpid(), "rss_bytes": rss, "memory_limit_bytes": limit}


def instance_of(spec: TaskSpec) -> str:
    return spec.control.instance or f"{spec.connector}-{spec.task}-{spec.generation}"


def run_host(host: SlotHostSpec, poll_interval_s: float = HOST_POLL_INTERVAL_S) -> list[TaskOutcome]:
    """Run the tasks the leader places on this host until told to stop and empty; never raises."""
    live: dict[str, TaskSpec] = {}
    #: Tasks that ended and are sending their final report: no longer in the host's heartbeats.
    finishing: set[str] = set()
    started: set[str] = set()
    outcomes: list[TaskOutcome] = []
    lock = threading.Lock()
    #: Held while a heartbeat is in flight: a task's final report must not be overtaken by a
    #: RUNNING sent for it in a heartbeat built before it ended (as `RestTaskControl` ensures).
    channel_lock = threading.Lock()

    def run_one(key: str, spec: TaskSpec) -> None:
        outcome = run_task(spec)
        with channel_lock, lock:
            finishing.add(key)
        try:
            spec.control.report_outcome(outcome.state.value, outcome.trace)
        except Exception:  # best effort, as a lone task's final report
            log.exception("[%s-%s] could not report how it ended", spec.connector, spec.task)
        with lock:
            outcomes.append(outcome)
            live.pop(key, None)
            finishing.discard(key)
        released(f"task {spec.connector}-{spec.task} ended", memory.now())

    memory = MemoryReturn(RELEASE_CHECK_S, RELEASE_GROWTH_BYTES)

    def released(why: str, freed: int) -> None:
        if freed >= RELEASE_LOG_BYTES:
            log.info("slot host %s: %s; %d MB given back to the system", host.host_id, why, freed >> 20)

    log.info("slot host %s started (pid %d)", host.host_id, os.getpid())
    while True:
        with channel_lock:
            with lock:
                running = [spec for key, spec in live.items() if key not in finishing]
            try:
                answer = host.channel.poll(running)
            except Exception:
                log.exception("slot host %s: asking the leader failed", host.host_id)
                answer = None
        if answer is not None:
            for spec in answer.start:
                key = instance_of(spec)
                if key in started:
                    continue
                started.add(key)
                with lock:
                    live[key] = spec
                threading.Thread(
                    target=run_one, args=(key, spec), name=f"task-{spec.connector}-{spec.task}", daemon=True
                ).start()
        with lock:
            empty = not live
        if answer is not None and answer.stop and empty:
            break
        released("its resident size grew", memory.if_grown())
        time.sleep(
            min(poll_interval_s, EMPTY_HOST_POLL_INTERVAL_S)
            if answer is not None and (empty or answer.held)
            else poll_interval_s
        )
    log.info("slot host %s ends: %d task(s) ran in it", host.host_id, len(started))
    released("the host ends and its Python worker goes back to Spark's pool", memory.now())
    return outcomes


def spark_host_entry(hosts: list[SlotHostSpec]) -> Any:
    """The function `mapPartitionsWithIndex` runs for slot hosts: partition i is `hosts[i]`; it
    yields one outcome per connector task the host ran, as `spark_task_entry` does for one."""

    def run_partition(index: int, _rows: Iterator[Any]) -> Iterator[dict[str, Any]]:
        configure_executor_logging()
        for outcome in run_host(hosts[index]):
            yield {**outcome.__dict__, "state": outcome.state.value, "pid": os.getpid()}

    return run_partition
