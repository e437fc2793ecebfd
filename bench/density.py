"""Task density: N one-task connectors on eosconnect and on Apache Kafka Connect (Java), one broker.

Each runtime runs alone in turn (Java first, then eosconnect) against the same broker, with
exactly-once source support enabled on both. For each N (default 24 and 100) it creates N one-task
connectors, a third of each kind, all with the class names both runtimes know:

- idle source: `FileStreamSourceConnector` on an empty file;
- low-rate source: `MirrorHeartbeatConnector`, one record per second (Java Connect has no
  SequenceSource; both have MM2's heartbeat connector);
- quiet sink: `FileStreamSinkConnector` on a topic nothing writes to.

and measures:
- `running_s`: from the first POST until every connector's task is RUNNING;
- `rss_mb`: the resident memory of the runtime's whole process tree (Java: its JVM; eosconnect: the
  worker, Spark's JVM and every Python worker), idle with the N connectors, and `per_task_mb` above
  the same runtime's tree with no connector (measured after the busy task's runs alone). Both leave
  out Spark's idle pooled Python workers, those no running task reports as its process (GET
  /internal/tasks): Spark keeps a finished task's worker for reuse (`spark.python.worker.reuse`,
  which keeps a restarted task's config reader warm), and whether the N's slot host reused one or
  forked its own while one stayed pooled moved eosconnect's N = 24 figure between 0.9 and 4.3 MB
  per task. So a slot host counts in full, with what it holds from earlier tasks if it reused a
  worker; the pooled ones are printed beside;
- `pss_mb` / `per_task_pss_mb`: the same with proportional set sizes (/proc/<pid>/smaps_rollup): a
  page shared by k processes counts 1/k in each, so the pages Spark's Python workers share with the
  daemon they are forked from count once, where summed RSS counts them in every worker. Printed
  beside RSS; the goal stays on RSS;
- `idle_cpu`: CPU seconds per second of that tree over `--idle-seconds` with the N connectors, and
  `broker_cpu`, the broker's over the same seconds (the N's transactions and fetches cost it CPU the
  busy task then has not: on a 2-core machine the two together bound what "among N" can reach);
- `busy_ratio`: records/s of one busy exactly-once FileStreamSource (`--records` lines, poll
  boundaries) among the N, over its rate alone (read_committed, checked for gaps and duplicates).
  The rate is the steady one, from its first record to its last: the time to place and start the
  task differs between "alone" (a new slot host) and "among N" (a host with room) and is what
  `running_s` measures. Each is the median of `--busy-rounds` runs; "alone" here is measured in a
  runtime without connectors before the N (after untimed runs until two agree within 5 %) and again
  after them, and the better of the two counts. The two have differed by 1-33 %: the broker's JIT
  is still compiling minutes in (its C2 thread took 0.03 s/s with 100 idle connectors after 3
  minutes), so this ratio moves with the machine's drift and errs against the runtime.
- `busy_ratio_stopped`, **the goal's measure**: among the N over the rate with the N stopped (PUT
  /connectors/<c>/stop, KIP-875: no task left, the slot hosts ended), the two measured in the same
  minutes, in rounds that rotate which comes first (with the paused rounds below), so the drift
  weighs on both alike. Stopped connectors are only config records: the busy task is alone in the
  runtime. Measured where the N started within `STOPPED_ROUNDS_MAX_S` (not Java's N = 400).
- `busy_ratio_floor`: the busy task's rate with the N stopped and `bench/client_floor.py` making the
  N's Kafka traffic with bare clients instead (a transactional producer committing a transaction a
  second per heartbeat connector with its record, and its unchanging source offset in the first
  one, as eosconnect writes it (Kafka Connect writes it in every one), an idle one per file source,
  a read_committed consumer in its own group per sink), over its rate with the N stopped, in the
  same rounds. No runtime on Kafka's clients does less than that, so this is what
  any runtime could keep on this machine: where it is below 0.9 the goal is out of reach here, and
  `busy_ratio_stopped` against it is what the runtime itself costs. Measured on eosconnect's side
  only (it needs the N stopped).
- `busy_ratio_paused`: among the N over the rate with the N paused, measured alike. Not alone:
  paused tasks still cost something (their clients, the slot hosts' heartbeats), and what they
  cost lowers the denominator, in the runtime's favour.
- `alone_cores` / `among_cores`: how many of the machine's cores were busy (/proc/stat, everything:
  the runtime, the broker, this bench's reader) during the busy runs alone / among the N. With
  "alone" near the machine's cores, a fleet's idle CPU plus the broker's bounds the ratio: L cores
  of it leave at most (cores - L) / alone_cores.

eosconnect runs its default settings plus one packing setting, `eosconnect.tasks.per.slot`
(`--per-slot`, default 28: the N = 400 fill 15 of the 16 default slots, `local[16,4]`), and the
busy connector asks for a slot of its own (`eosconnect.own.slot=true`, a connector setting, as an
operator gives one to a heavy task; `--busy-shares-slot` packs it with the idle ones instead), so
it shares the machine's cores with the N but not their Python worker and its GIL.
The machine's load average is printed with every figure; on a shared machine absolute figures move
a lot. Per N measured on both sides the bench prints the issue's four goals, each PASS or FAIL:
all N RUNNING; eosconnect's RSS per task <= 2 x Java's; create -> all RUNNING within 2 x Java's
time; the busy task keeps >= 0.9 of its rate alone (`busy_ratio_stopped`). The last lines are
machine-readable:
    density N=<n> java_running_s=.. eos_running_s=.. java_per_task_mb=.. eos_per_task_mb=.. ...
    goals N=<n> all_running=PASS rss_per_task=PASS|FAIL running_time=PASS|FAIL busy_rate=PASS|FAIL ...
(the goals line ends with `busy_floor=..`, `busy_ratio_floor`, where it was measured).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import httpx
from bench.vs_kafka_connect import (
    Run,
    Side,
    TaskFailed,
    cpu_seconds,
    eos_python_worker_pids,
    file_config,
    process_tree,
    run_once,
    status_kb,
    write_lines,
)
from bench.workdir import new_workdir
from confluent_kafka.admin import AdminClient
from rich.console import Console

from eosconnect.cluster.packing import OWN_SLOT
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.kafka_connect import (
    KafkaConnectProcess,
    connect_worker_defaults,
    ensure_kafka_connect,
)
from eosconnect.storage.topics import ensure_topic
from eosconnect.tools.worker_process import WorkerProcess

console = Console(stderr=True)
STRING = "org.apache.kafka.connect.storage.StringConverter"
KINDS = ("idle_file", "heartbeat", "quiet_sink")
WARMUP_RUNS = 4
#: Rounds with the N stopped are run only where the N started within this time: resuming them
#: three times costs three such starts (Apache Kafka Connect took 378 s for N = 400).
STOPPED_ROUNDS_MAX_S = 120.0
#: Partitions of eosconnect's offsets topic here, and so of the bare-client floor's.
OFFSETS_PARTITIONS = 1
#: Connectors `all_running` restarted after a failure, by (runtime URL, name): once each at most.
RESTARTED: Counter[tuple[str, str]] = Counter()
#: Runs of the busy task that went FAILED and were run again, by side (once each at most).
BUSY_FAILED: Counter[str] = Counter()


def steady_rate(run: Run) -> float:
    """Records/s from the first record to the last (the task's start-up is `running_s`'s)."""
    span = run.seconds - run.first_s
    return (run.records - 1) / span if span > 0 and run.records > 1 else run.rate


def pss_kb(pid: int) -> int:
    """Proportional set size: each page shared by k processes counts 1/k."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("Pss:")), 0)
    except OSError:
        return 0


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _python(pid: int) -> bool:
    return Path(_cmdline(pid).split("\0", 1)[0]).name.startswith("python")


def python_worker_pids(process: WorkerProcess | KafkaConnectProcess) -> set[int]:
    """The Python workers running a runtime's tasks (none for Apache Kafka Connect)."""
    return set(eos_python_worker_pids(process).values()) if isinstance(process, WorkerProcess) else set()


@dataclass
class TreeMemory:
    """The runtime's tree without Spark's idle pooled Python workers, and those apart (MB)."""

    rss_mb: float
    pss_mb: float
    pooled_rss_mb: float
    pooled: int
    #: RSS (MB) of each process counted, by role: where a per-task figure comes from.
    roles: dict[str, list[float]] = field(default_factory=dict)

    def breakdown(self) -> str:
        """E.g. `root 148, jvm 339, python 54, 15 task processes 85-89 MB (1,290)`."""
        parts = []
        for role, sizes in sorted(self.roles.items()):
            if len(sizes) == 1:
                parts.append(f"{role} {sizes[0]:.0f}")
            else:
                parts.append(f"{len(sizes)} {role} {min(sizes):.0f}-{max(sizes):.0f} ({sum(sizes):,.0f})")
        return ", ".join(parts) + " MB"


def tree_memory(root: int, hosting: set[int]) -> TreeMemory:
    """Memory of the tree under `root`; Python workers forked by Spark's daemon whose pid is not in
    `hosting` (the pids running tasks report) are idle pooled ones, counted apart."""
    tree = process_tree(root)
    members = set(tree)
    rss_kb = pss_total_kb = pooled_kb = pooled = 0
    roles: defaultdict[str, list[float]] = defaultdict(list)
    for pid in tree:
        rss, pss = status_kb(pid, "VmRSS"), pss_kb(pid)
        parent = status_kb(pid, "PPid")
        # forked by Spark's Python daemon (itself a child of the JVM, whose classpath names pyspark)
        forked = parent in members and _python(parent) and _python(pid) and "pyspark" in _cmdline(pid)
        if forked and pid not in hosting:
            pooled_kb += rss
            pooled += 1
            continue
        rss_kb += rss
        pss_total_kb += pss
        command = _cmdline(pid)
        role = (
            "root"
            if pid == root
            else "task processes"
            if pid in hosting
            else "jvm"
            if "java" in command.split("\0", 1)[0]
            else "python"
        )
        roles[role].append(rss / 1024)
    return TreeMemory(rss_kb / 1024, pss_total_kb / 1024, pooled_kb / 1024, pooled, dict(roles))


def connector_config(
    kind: str, index: int, side: str, workdir: Path, quiet_topic: str, idle_file: Path, bootstrap: str
) -> dict:
    common = {"tasks.max": "1", "key.converter": STRING, "value.converter": STRING}
    if kind == "idle_file":
        return {
            **common,
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(idle_file),
            "topic": f"density-idle-{side}",
        }
    if kind == "heartbeat":
        return {
            **common,
            "connector.class": "org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",
            "source.cluster.alias": f"src{index}",
            "target.cluster.alias": "target",
            "source.cluster.bootstrap.servers": bootstrap,
            "target.cluster.bootstrap.servers": bootstrap,
            "emit.heartbeats.interval.seconds": "1",
            "heartbeats.topic.replication.factor": "1",
            "key.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter",
        }
    return {
        **common,
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "file": str(workdir / f"sink-{side}-{index}.txt"),
        "topics": quiet_topic,
    }


def cpu_rates(root_pid: int, broker_pids: list[int], seconds: float) -> tuple[float, float]:
    """CPU seconds per second over the next `seconds` of the process tree under `root_pid` and of
    the broker's processes."""
    tree, started = process_tree(root_pid), time.monotonic()
    tree_before, broker_before = cpu_seconds(tree), cpu_seconds(broker_pids)
    time.sleep(seconds)
    spent = time.monotonic() - started
    return (
        (cpu_seconds(process_tree(root_pid)) - tree_before) / spent,
        (cpu_seconds(broker_pids) - broker_before) / spent,
    )


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far, in jiffies (/proc/stat's first line)."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


def all_running(url: str, names: list[str], state: str = "RUNNING") -> int:
    """How many of `names` have every task in `state` (one GET with expand=status), or for
    "STOPPED" are stopped with no task left (KIP-875). A FAILED connector or task is restarted
    once, as an operator would (`POST /connectors/<c>/restart?includeTasks=true&onlyFailed=true`;
    Apache Kafka Connect 4.3.1 failed a MirrorHeartbeat task at start-up with a
    ConcurrentModificationException in its config store's snapshot); a second failure ends the
    bench with its trace."""
    try:
        statuses = httpx.get(f"{url}/connectors", params={"expand": "status"}, timeout=30).json()
    except (httpx.HTTPError, ValueError):
        return 0
    count = 0
    for name in names:
        status = (statuses.get(name) or {}).get("status", {})
        tasks = status.get("tasks", [])
        failed = [part for part in (status.get("connector") or {}, *tasks) if part.get("state") == "FAILED"]
        if failed:
            trace = str(failed[0].get("trace"))
            if RESTARTED[url, name]:
                raise SystemExit(f"{url}: {name} FAILED again after a restart: {trace[:2000]}")
            RESTARTED[url, name] += 1
            console.print(f"{url}: {name} FAILED, restarting it once: {trace.splitlines()[0][:300]}")
            httpx.post(
                f"{url}/connectors/{name}/restart",
                params={"includeTasks": "true", "onlyFailed": "true"},
                timeout=60,
            )
            continue
        if state == "STOPPED":
            count += (status.get("connector") or {}).get("state") == state and not tasks
        elif tasks and all(t.get("state") == state for t in tasks):
            count += 1
    return count


def set_fleet(url: str, names: list[str], action: str, state: str, limit_s: float) -> None:
    """PUT /connectors/<name>/<action> (pause, stop, resume) for each of `names`, then wait until
    every one is in `state` (see `all_running`)."""
    with httpx.Client(timeout=60) as client:
        for name in names:
            response = client.put(f"{url}/connectors/{name}/{action}")
            if response.status_code not in (202, 204):  # 204: stop, as in Kafka Connect
                raise SystemExit(f"{url}: {action} {name} answered {response.status_code}: {response.text}")
    deadline = time.monotonic() + limit_s
    while (done := all_running(url, names, state)) < len(names):
        if time.monotonic() > deadline:
            raise SystemExit(f"{url}: only {done} of {len(names)} connectors {state} after {limit_s:.0f} s")
        time.sleep(0.5)


@dataclass
class BusyRounds:
    """The busy task's median rates in `measure_side`'s rotating rounds (0.0: not measured)."""

    among: float
    paused: float
    stopped: float
    floor: float
    #: CPU s/s of the runtime's tree and of the broker with the N paused.
    paused_cpu: tuple[float, float]


@contextmanager
def client_floor(
    bootstrap: str, admin: AdminClient, counts: dict[str, int], quiet_topic: str
) -> Iterator[int]:
    """`bench/client_floor.py` making the Kafka traffic of `counts` connectors of each kind, for the
    duration; yields its pid. Stopped by pid. Its heartbeats' offsets go to a compacted topic laid
    out as eosconnect's offsets topic (`OFFSETS_PARTITIONS`)."""
    topic = f"density-floor-{uuid.uuid4().hex[:6]}"
    offsets_topic = f"{topic}-offsets"
    ensure_topic(admin, offsets_topic, OFFSETS_PARTITIONS, 1)
    command = [
        sys.executable,
        str(Path(__file__).with_name("client_floor.py")),
        bootstrap,
        f"--heartbeats={counts['heartbeat']}",
        f"--idle-producers={counts['idle_file']}",
        f"--consumers={counts['quiet_sink']}",
        f"--heartbeat-topic={topic}",
        f"--quiet-topic={quiet_topic}",
        f"--offsets-topic={offsets_topic}",
    ]
    load = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert load.stdout is not None
        if load.stdout.readline().strip() != "ready":
            raise SystemExit(f"bench/client_floor.py did not start (exit {load.wait(30)})")
        time.sleep(8)  # its transactions spread over the second, its consumers joined their groups
        yield load.pid
    finally:
        load.terminate()
        try:
            load.wait(30)
        except subprocess.TimeoutExpired:
            load.kill()
            load.wait()
        time.sleep(3)


@dataclass
class Figures:
    side: str
    n: int
    running_s: float
    rss_mb: float
    base_rss_mb: float
    pss_mb: float
    base_pss_mb: float
    idle_cpu: float
    broker_cpu: float
    busy_alone: float
    busy_among: float
    #: The busy task's rate with the N paused, measured in rounds alternating with `busy_among`.
    busy_paused: float
    #: The same with the N stopped (no task left): its rate alone, in the same window. 0.0: not
    #: measured (a side whose N took longer than `STOPPED_ROUNDS_MAX_S` to start).
    busy_stopped: float
    load: float
    #: The busy task's rate with the N stopped and their Kafka traffic made by bare clients
    #: (`bench/client_floor.py`) instead; 0.0: not measured.
    busy_floor: float = 0.0
    #: Cores the whole machine kept busy during the busy task's runs alone / among the N (median).
    alone_cores: float = 0.0
    among_cores: float = 0.0

    @property
    def per_task_mb(self) -> float:
        return (self.rss_mb - self.base_rss_mb) / self.n

    @property
    def per_task_pss_mb(self) -> float:
        return (self.pss_mb - self.base_pss_mb) / self.n

    @property
    def busy_ratio(self) -> float:
        """Among the N over alone in a runtime without connectors (the better of before and after)."""
        return self.busy_among / self.busy_alone

    @property
    def busy_ratio_stopped(self) -> float:
        """Among the N over with the N stopped, measured alternately: the goal's ratio."""
        return self.busy_among / self.busy_stopped if self.busy_stopped else float("nan")

    @property
    def busy_ratio_floor(self) -> float:
        """With the N's Kafka traffic from bare clients over with the N stopped: the bound."""
        return self.busy_floor / self.busy_stopped if self.busy_stopped and self.busy_floor else float("nan")

    @property
    def busy_ratio_paused(self) -> float:
        """Among the N over with the N paused, measured alternately (see the module docstring)."""
        return self.busy_among / self.busy_paused


def measure_side(
    side: Side,
    sizes: list[int],
    bootstrap: str,
    admin: AdminClient,
    workdir: Path,
    lines: Path,
    records: int,
    idle_seconds: float,
    busy_rounds: int,
    busy_settings: dict[str, str],
    broker_pids: list[int],
    with_floor: bool,
    hosting_pids: Callable[[], set[int]],
) -> list[Figures]:
    quiet = f"density-quiet-{side.name}-{uuid.uuid4().hex[:6]}"
    ensure_topic(admin, quiet, 1, 1, compacted=False)
    ensure_topic(admin, f"density-idle-{side.name}", 1, 1, compacted=False)
    idle_file = workdir / f"idle-{side.name}.txt"
    idle_file.write_text("")

    #: machine cores busy during each busy run, by kind (warmup, alone, alone-after, n<N>, ...)
    cores: defaultdict[str, list[float]] = defaultdict(list)

    def busy_once(tag: str, kind: str, again: bool = False) -> float:
        """One run of the busy task. One that goes FAILED is run once more (Apache Kafka Connect's
        exactly-once task failed a busy run with InvalidTxnStateException in session 35), said so
        and counted in the last lines (`busy_failed`); a second failure ends the bench."""
        topic = f"density-busy-{side.name}-{tag}-{uuid.uuid4().hex[:6]}"
        ensure_topic(admin, topic, 1, 1, compacted=False)
        config = {
            **file_config("file_poll", lines, topic),
            "exactly.once.support": "required",
            **busy_settings,
        }
        busy_before, total_before = machine_jiffies()
        try:
            run = run_once(side, "busy", 1, config, topic, 1, records, bootstrap)
        except TaskFailed as failed:
            if again:
                raise
            BUSY_FAILED[side.name] += 1
            console.print(f"[yellow]{failed}\n{side.name}: running the busy task {tag} once more")
            return busy_once(f"{tag}-again", kind, again=True)
        busy_after, total_after = machine_jiffies()
        cores[kind].append(
            (busy_after - busy_before) / max(total_after - total_before, 1) * (os.cpu_count() or 1)
        )
        if not run.ok:
            problem = f"{run.duplicates} duplicates, {run.missing} missing"
            raise SystemExit(f"{side.name} busy task {tag}: {problem}")
        return steady_rate(run)

    def busy(tag: str) -> float:
        return statistics.median(busy_once(f"{tag}-{r}", tag) for r in range(busy_rounds))

    def busy_alternating(n: int, names: list[str], with_stopped: bool) -> BusyRounds:
        """Medians of the busy task's rate among the N, with the N paused, with the N stopped and
        with their traffic from bare clients (the last two 0.0 unless `with_stopped`; the floor also
        needs `with_floor`), in rounds that rotate which comes first, so the drift of a warming
        machine (the broker's JIT still compiling minutes in) weighs on all alike."""
        among: list[float] = []
        paused: list[float] = []
        stopped: list[float] = []
        floor: list[float] = []
        paused_cpu: list[tuple[float, float]] = []

        def run_among(r: int) -> None:
            among.append(busy_once(f"n{n}-{r}", f"n{n}"))

        def run_paused(r: int) -> None:
            set_fleet(side.url, names, "pause", "PAUSED", 300 + n)
            if not paused_cpu:
                time.sleep(3)
                paused_cpu.append(cpu_rates(side.root_pid, broker_pids, 10))
            paused.append(busy_once(f"n{n}-paused-{r}", f"n{n}-paused"))
            set_fleet(side.url, names, "resume", "RUNNING", 300 + n)
            time.sleep(5)  # resumed tasks settle

        def run_floor(r: int) -> None:
            counts = {kind: sum(1 for name in names if f"-{kind}-" in name) for kind in KINDS}
            with client_floor(bootstrap, admin, counts, quiet) as load_pid:
                if r == 0:
                    load_before = cpu_seconds([load_pid])
                    tree_cpu, broker_cpu = cpu_rates(side.root_pid, broker_pids, 10)
                    load_cpu = (cpu_seconds([load_pid]) - load_before) / 10
                    console.print(
                        f"{side.name} N={n}: bare clients making the N's traffic: {load_cpu:.2f} s/s "
                        f"(broker {broker_cpu:.2f}; the runtime with the N stopped {tree_cpu:.2f})"
                    )
                floor.append(busy_once(f"n{n}-floor-{r}", f"n{n}-floor"))

        def run_stopped(r: int) -> None:
            set_fleet(side.url, names, "stop", "STOPPED", 300 + n)
            time.sleep(15)  # as after deleting them: tasks gone, slot hosts end (10 s idle)
            if with_floor and r % 2 == 1:  # the two alternate which runs first, as the rounds do
                run_floor(r)
            stopped.append(busy_once(f"n{n}-stopped-{r}", f"n{n}-stopped"))
            if with_floor and r % 2 == 0:
                run_floor(r)
            set_fleet(side.url, names, "resume", "RUNNING", 600 + 6 * n)
            time.sleep(5)

        steps = [run_among, run_paused, *([run_stopped] if with_stopped else [])]
        for r in range(busy_rounds):
            for step in steps[r % len(steps) :] + steps[: r % len(steps)]:
                step(r)
        each = {"among": among, "paused": paused, "stopped": stopped, "bare": floor}
        console.print(
            f"{side.name} N={n}: busy task's rounds (rec/s): "
            + "; ".join(f"{k} {', '.join(f'{v:,.0f}' for v in rates)}" for k, rates in each.items() if rates)
        )
        return BusyRounds(
            statistics.median(among),
            statistics.median(paused),
            statistics.median(stopped) if stopped else 0.0,
            statistics.median(floor) if floor else 0.0,
            paused_cpu[0],
        )

    # Untimed runs until two in a row agree within 5 % (at most 4): JIT, Spark's Python daemon, the
    # broker's coordinators. One was not enough: "alone" before the N ran 4-20 % below "alone" after.
    previous = busy_once("warmup-0", "warmup")
    for attempt in range(1, WARMUP_RUNS):
        rate = busy_once(f"warmup-{attempt}", "warmup")
        if abs(rate - previous) <= 0.05 * max(rate, previous):
            break
        previous = rate
    alone = busy("alone")
    time.sleep(3)
    base = tree_memory(side.root_pid, hosting_pids())
    console.print(
        f"{side.name}: no connector: RSS {base.rss_mb:.0f} MB, PSS {base.pss_mb:.0f} MB (and {base.pooled} "
        f"idle pooled Python workers, {base.pooled_rss_mb:.0f} MB; {base.breakdown()}), busy task alone "
        f"{alone:,.0f} rec/s"
    )
    out = []
    for n in sizes:
        names = [f"d{n}-{KINDS[i % 3]}-{i}" for i in range(n)]
        started = time.monotonic()
        for i, name in enumerate(names):
            side.post(
                name, connector_config(KINDS[i % 3], i, side.name, workdir, quiet, idle_file, bootstrap)
            )
        posted = time.monotonic() - started
        limit_s = 600 + 6 * n  # the POSTs alone take seconds each on a loaded machine
        deadline = started + limit_s
        running = 0
        while (running := all_running(side.url, names)) < n:
            if time.monotonic() > deadline:
                raise SystemExit(f"{side.name}: only {running} of {n} connectors RUNNING after {limit_s} s")
            time.sleep(0.5)
        running_s = time.monotonic() - started
        # settle: the tasks' first transactions, the leader's status writes and the hosts' first
        # memory trims; 10 s put the start-up's tail into eosconnect's idle CPU at N = 400 (0.37 s/s
        # there, 0.25-0.27 measured from 20 s on)
        time.sleep(30)
        idle_cpu, broker_cpu = cpu_rates(side.root_pid, broker_pids, idle_seconds)
        memory = tree_memory(side.root_pid, hosting_pids())
        rounds = busy_alternating(n, names, running_s <= STOPPED_ROUNDS_MAX_S)
        figures = Figures(
            side.name,
            n,
            running_s,
            memory.rss_mb,
            base.rss_mb,
            memory.pss_mb,
            base.pss_mb,
            idle_cpu,
            broker_cpu,
            alone,
            rounds.among,
            rounds.paused,
            rounds.stopped,
            os.getloadavg()[0],
            busy_floor=rounds.floor,
            among_cores=statistics.median(cores[f"n{n}"]),
        )
        console.print(
            f"{side.name} N={n}: all RUNNING in {running_s:.1f} s (POSTs {posted:.1f} s), "
            f"RSS {memory.rss_mb:.0f} MB "
            f"({figures.per_task_mb:.1f} MB/task; PSS {memory.pss_mb:.0f} MB, {figures.per_task_pss_mb:.1f} "
            f"MB/task; {memory.pooled} idle pooled Python workers apart, {memory.pooled_rss_mb:.0f} MB; "
            f"{memory.breakdown()}), "
            f"idle CPU {idle_cpu:.2f} s/s (broker {broker_cpu:.2f}), "
            f"busy task {rounds.among:,.0f} rec/s ({figures.busy_ratio:.2f} of alone before the N; "
            f"{figures.busy_ratio_stopped:.2f} of {rounds.stopped:,.0f} with the N stopped), "
            f"{rounds.paused:,.0f} with the N paused ({figures.busy_ratio_paused:.2f}; CPU paused "
            f"{rounds.paused_cpu[0]:.2f} s/s, broker {rounds.paused_cpu[1]:.2f}), "
            f"{rounds.floor:,.0f} with the N's traffic from bare clients ({figures.busy_ratio_floor:.2f} "
            f"of the N stopped: the bound), load {figures.load:.1f}; connectors restarted after a failure "
            f"so far: {sum(v for (url, _), v in RESTARTED.items() if url == side.url)}; the machine "
            f"kept {figures.among_cores:.2f} cores busy during the busy runs among the N"
        )
        out.append(figures)
        for name in names:
            httpx.delete(f"{side.url}/connectors/{name}", timeout=60)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and set(names) & set(httpx.get(f"{side.url}/connectors").json()):
            time.sleep(1)
        time.sleep(15)  # tasks stop, slot hosts go idle
    # "Alone" again once the N are gone: the first rounds of a fresh runtime run colder (Java's JIT,
    # the broker's caches) than the later ones among N, which made ratios above 1. The better of the
    # two is the rate alone, so a ratio errs against the runtime, never for it.
    after = busy("alone-after")
    best = max(alone, after)
    alone_cores = statistics.median(cores["alone"] + cores["alone-after"])
    console.print(
        f"{side.name}: busy task alone again {after:,.0f} rec/s (before {alone:,.0f}); using {best:,.0f} "
        f"for the ratios to 'alone'; the machine kept {alone_cores:.2f} of {os.cpu_count()} cores busy "
        "during the runs alone"
    )
    return [replace(f, busy_alone=best, alone_cores=alone_cores) for f in out]


def java_side(bootstrap: str, workdir: Path) -> tuple[KafkaConnectProcess, Callable[[], Side]]:
    props = {
        **connect_worker_defaults(bootstrap, f"density-java-{uuid.uuid4().hex[:6]}"),
        "exactly.once.source.support": "enabled",
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        "plugin.discovery": "only_scan",
    }
    java = KafkaConnectProcess(workdir / "java", worker_props=props)
    return java, lambda: Side("java", java.url, java.proc.pid)  # type: ignore[union-attr]


def eos_side(
    bootstrap: str, workdir: Path, per_slot: int, master: str | None
) -> tuple[WorkerProcess, Callable[[], Side]]:
    props = {
        **connect_worker_defaults(bootstrap, f"density-eos-{uuid.uuid4().hex[:6]}"),
        "exactly.once.source.support": "enabled",
        "offset.storage.partitions": str(OFFSETS_PARTITIONS),
        "status.storage.partitions": "1",
        "listeners": "http://127.0.0.1:0",
        "eosconnect.tasks.per.slot": str(per_slot),
        **({"spark.master": master} if master else {}),
    }
    eos = WorkerProcess(props, workdir / "eos")
    return eos, lambda: Side("eos", eos.url, eos.proc.pid)  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=os.environ.get("EOSCONNECT_BENCH_DENSITY", "24,100"))
    # 400 / 28 -> 15 slot hosts: the 16th default slot is the busy task's own.
    parser.add_argument("--per-slot", type=int, default=28, help="eosconnect.tasks.per.slot")
    parser.add_argument(
        "--busy-shares-slot",
        action="store_true",
        help="pack eosconnect's busy task with the idle ones (default: eosconnect.own.slot=true)",
    )
    parser.add_argument("--master", help="eosconnect's spark.master (default: the worker's, local[16,4])")
    parser.add_argument(
        "--records",
        type=int,
        default=2_000_000,
        help="lines of the busy task's file (8-10 s at its rate alone: shorter runs moved by +-25 %%)",
    )
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--busy-rounds", type=int, default=3, help="runs of the busy task (median)")
    parser.add_argument("--sides", default="java,eos")
    parser.add_argument("--bootstrap", help="use a running broker instead of starting one")
    parser.add_argument(
        "--no-floor", action="store_true", help="skip the rounds with the N's traffic from bare clients"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    ensure_kafka_connect()
    workdir = new_workdir("eosconnect-density-")
    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        cluster = LocalKafkaCluster(workdir / "kafka", tie_to_parent=True)
        bootstrap = cluster.start()
    results: dict[str, list[Figures]] = {}
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        lines = workdir / "lines.txt"
        write_lines(lines, args.records)
        # the broker's CPU is counted only for the broker this bench started
        broker_pids = (
            [] if cluster is None else [p for i in cluster.broker_ids() if (p := cluster.node(i).pid)]
        )
        for name in args.sides.split(","):
            process, side = (
                java_side(bootstrap, workdir)
                if name == "java"
                else eos_side(bootstrap, workdir, args.per_slot, args.master)
            )
            console.print(f"starting the {name} worker ...")
            process.start(timeout=180)
            try:
                results[name] = measure_side(
                    side(),
                    sizes,
                    bootstrap,
                    admin,
                    workdir,
                    lines,
                    args.records,
                    args.idle_seconds,
                    args.busy_rounds,
                    {} if name == "java" or args.busy_shares_slot else {OWN_SLOT: "true"},
                    broker_pids,
                    with_floor=name == "eos" and not args.no_floor,
                    hosting_pids=partial(python_worker_pids, process),
                )
            finally:
                process.stop()
    finally:
        if cluster is not None:
            cluster.stop()
    for i, n in enumerate(sizes):
        fields = [f"density N={n}"]
        for name, figures in results.items():
            f = figures[i]
            fields += [
                f"{name}_running_s={f.running_s:.1f}",
                f"{name}_rss_mb={f.rss_mb:.0f}",
                f"{name}_per_task_mb={f.per_task_mb:.1f}",
                f"{name}_per_task_pss_mb={f.per_task_pss_mb:.1f}",
                f"{name}_idle_cpu={f.idle_cpu:.2f}",
                f"{name}_broker_idle_cpu={f.broker_cpu:.2f}",
                f"{name}_busy_ratio={f.busy_ratio:.2f}",
                f"{name}_busy_ratio_stopped={f.busy_ratio_stopped:.2f}",
                f"{name}_busy_ratio_paused={f.busy_ratio_paused:.2f}",
                f"{name}_busy_ratio_floor={f.busy_ratio_floor:.2f}",
                f"{name}_alone_cores={f.alone_cores:.2f}",
                f"{name}_among_cores={f.among_cores:.2f}",
                f"{name}_busy_failed={BUSY_FAILED[name]}",
            ]
        print(" ".join(fields))
    if "java" in results and "eos" in results:
        for java, eos in zip(results["java"], results["eos"], strict=True):
            print(goals(java, eos))


def goals(java: Figures, eos: Figures) -> str:
    """The issue's four goals at one N (reaching the figures means all N were RUNNING)."""
    verdict = {
        "all_running": True,
        "rss_per_task": eos.per_task_mb <= 2 * max(java.per_task_mb, 0.0),
        "running_time": eos.running_s <= 2 * java.running_s,
        "busy_rate": eos.busy_ratio_stopped >= 0.9,
    }
    # the bound any runtime had on this machine (bare clients making the N's traffic), beside it
    floor = f" busy_floor={eos.busy_ratio_floor:.2f}" if eos.busy_floor else ""
    return (
        f"goals N={eos.n} " + " ".join(f"{k}={'PASS' if ok else 'FAIL'}" for k, ok in verdict.items()) + floor
    )


if __name__ == "__main__":
    main()
