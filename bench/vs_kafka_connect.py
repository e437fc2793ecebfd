"""eosconnect vs Apache Kafka Connect (Java), side by side on one broker: exactly-once file and mirror jobs.

One local broker; beside it an eosconnect worker (`eosconnect worker`, Spark `local[N,F]`) and a Java
`ConnectDistributed` worker (Apache Kafka Connect 4.x from Maven Central, `devkafka.kafka_connect`),
both with the same worker settings. The same jobs run on both, interleaved (in odd rounds Java
first, in even rounds eosconnect first, so Java, eos, eos, Java, ...):

- `file_poll`, `file_interval`: `org.apache.kafka.connect.file.FileStreamSourceConnector` (the class
  name both runtimes know) on the same file of N lines of ~96 B, `exactly.once.support=required`,
  `batch.size=2000`, StringConverter, a fresh 1-partition topic; poll boundaries, then 1 s intervals.
- `mirror`: a 4-partition source topic of N records copied by `MirrorSourceConnector` (ours and
  Kafka's, 4 tasks) with exactly once; `mirror_alos`: the same with exactly-once off on both
  workers (they are restarted with `exactly.once.source.support=disabled` for it).

A run's time is from the POST /connectors until a read_committed consumer of the target topic has seen
every record; it checks the count, duplicates and gaps of every run (a run with any fails the bench).
Also measured per run: the time to the first committed record, each side's CPU seconds per million
records (the whole process tree: Java's JVM; eosconnect's driver, Spark JVM and Python workers), the
peak RSS of each side's tree and, for eosconnect, of its largest task process.

The last line is machine-readable, the median over rounds of the per-round eos/java records/s:
    vs_java file_poll=R file_interval=R mirror=R
(`mirror` is the exactly-once mirror; `mirror_alos` is printed in the table). Goal: every R >= 1.0.
The machine's load moves single runs a lot, so every run prints the load average it ran under.
`--records`/`--rounds`/`--jobs` (or EOSCONNECT_BENCH_RECORDS/_ROUNDS) give a smaller bounded form.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from bench.interleaved import SIDES, per_round_table, round_arguments, side_order
from bench.workdir import new_workdir
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from rich.console import Console
from rich.table import Table

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.kafka_connect import (
    KafkaConnectProcess,
    connect_worker_defaults,
    ensure_kafka_connect,
)
from eosconnect.storage.topics import ensure_topic
from eosconnect.tools.worker_process import WorkerProcess

console = Console(stderr=True)
LINE_BYTES = 96
FILE_JOBS = ("file_poll", "file_interval")
MIRROR_JOBS = ("mirror", "mirror_alos")
ALL_JOBS = (*FILE_JOBS, *MIRROR_JOBS)
STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"


# ------------------------------------------------------------------------------------- processes
def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def process_tree(root: int) -> list[int]:
    """`root` and all its descendants (Spark's Python daemon runs in its own session, still a child)."""
    tree, out, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(tree.get(pid, ()))
    return out


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU of the processes, plus that of their reaped children."""
    ticks = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        except (OSError, IndexError, ValueError):
            continue
    return ticks / os.sysconf("SC_CLK_TCK")


def status_kb(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def reset_peak_rss(pids: list[int]) -> None:
    for pid in pids:
        try:
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")  # resets VmHWM, the peak RSS, to the current RSS
        except OSError:
            pass


class TaskFailed(SystemExit):
    """A benchmarked task went FAILED (its connector deleted): ends the bench unless caught."""


class RssSampler:
    """Samples the summed RSS of a process tree while a run lasts (the peak of the sum)."""

    def __init__(self, root: int) -> None:
        self.root, self.peak_kb = root, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(0.25):
            total = sum(status_kb(pid, "VmRSS") for pid in process_tree(self.root))
            self.peak_kb = max(self.peak_kb, total)


# ------------------------------------------------------------------------------------- runtimes
@dataclass
class Side:
    """One runtime's worker as the bench drives it over Kafka Connect's REST API."""

    name: str
    url: str
    root_pid: int
    task_pids: Callable[[str], list[int]] = field(default=lambda _c: [])

    def post(self, name: str, config: dict[str, str]) -> None:
        deadline = time.monotonic() + 60
        while True:
            response = httpx.post(f"{self.url}/connectors", json={"name": name, "config": config}, timeout=60)
            if response.status_code == 201:
                return
            if response.status_code != 409 or time.monotonic() > deadline:
                raise SystemExit(
                    f"{self.name}: POST /connectors {name} -> {response.status_code}: {response.text}"
                )
            time.sleep(0.5)  # rebalancing / no leader yet

    def delete(self, name: str) -> None:
        httpx.delete(f"{self.url}/connectors/{name}", timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if name not in httpx.get(f"{self.url}/connectors", timeout=30).json():
                break
            time.sleep(0.3)
        time.sleep(1.0)  # let stopping tasks finish before the next run measures anything

    def failed(self, name: str) -> str | None:
        try:
            status = httpx.get(f"{self.url}/connectors/{name}/status", timeout=10).json()
        except (httpx.HTTPError, ValueError):
            return None
        for task in status.get("tasks", []):
            if task.get("state") == "FAILED":
                return str(task.get("trace", ""))[:2000]
        return None


def eos_python_worker_pids(worker: WorkerProcess) -> dict[str, int]:
    """`{"<connector>-<task>": pid}` of the Python workers running eosconnect's tasks (GET
    /internal/tasks); empty when the worker does not answer."""
    try:
        response = worker.request("GET", "/internal/tasks")
        tasks = response.json() if response.status_code == 200 else {}
    except (httpx.HTTPError, ValueError):
        return {}
    return {key: int(t["pid"]) for key, t in tasks.items() if isinstance(t, dict) and t.get("pid")}


def eos_task_pids(worker: WorkerProcess) -> Callable[[str], list[int]]:
    def pids(connector: str) -> list[int]:
        return [pid for key, pid in eos_python_worker_pids(worker).items() if key.startswith(connector + "-")]

    return pids


def worker_props(
    bootstrap: str, mode: str, java_extra: dict[str, str] | None = None
) -> dict[str, dict[str, str]]:
    """Each side's worker settings, the same on both (a group of their own per call); `mode` is
    exactly.once.source.support. `java_extra`: more settings for the Java worker only (e.g. a
    `plugin.path`)."""
    suffix = uuid.uuid4().hex[:6]
    return {
        "java": {
            **connect_worker_defaults(bootstrap, f"bench-java-{suffix}"),
            "exactly.once.source.support": mode,
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "plugin.discovery": "only_scan",
            **(java_extra or {}),
        },
        "eos": {
            **connect_worker_defaults(bootstrap, f"bench-eos-{suffix}"),
            "exactly.once.source.support": mode,
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "listeners": "http://127.0.0.1:0",
            "spark.master": "local[8,4]",
            "spark.driver.memory": "768m",
        },
    }


def start_worker(
    name: str, props: dict[str, str], workdir: Path
) -> tuple[Side, KafkaConnectProcess | WorkerProcess]:
    """Side `name`'s worker started with `props` in `workdir`: the bench's handle and the process
    (to stop or kill it). A second worker with the same props joins the first one's group."""
    if name == "java":
        # By keyword: main_class is the dataclass's second field.
        java = KafkaConnectProcess(workdir, worker_props=props)
        java.start(timeout=180)
        assert java.proc is not None
        return Side("java", java.url, java.proc.pid), java
    eos = WorkerProcess(props, workdir)
    eos.start(timeout=180)
    assert eos.proc is not None
    return Side("eos", eos.url, eos.proc.pid, eos_task_pids(eos)), eos


@contextmanager
def runtimes(
    bootstrap: str, workdir: Path, mode: str, java_extra: dict[str, str] | None = None
) -> Iterator[dict[str, Side]]:
    """Both workers with the same settings (`worker_props`), stopped on the way out."""
    props = worker_props(bootstrap, mode, java_extra)
    processes: list[KafkaConnectProcess | WorkerProcess] = []
    try:
        console.print(f"starting the Java Connect worker and the eosconnect worker ({mode}) ...")
        sides = {}
        for name in SIDES:
            sides[name], process = start_worker(name, props[name], workdir / f"{name}-{mode}")
            processes.append(process)
        yield sides
    finally:
        for process in reversed(processes):
            process.stop()


# ------------------------------------------------------------------------------------- one run
@dataclass
class Run:
    job: str
    side: str
    round: int
    seconds: float
    first_s: float
    records: int
    duplicates: int
    missing: int
    cpu_per_million: float
    peak_rss_mb: float
    task_rss_mb: float | None
    load: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds

    @property
    def ok(self) -> bool:
        return self.duplicates == 0 and self.missing == 0


def leading_number(value: bytes) -> int:
    """The record's number where the value starts with it (8 digits): file lines, mirrored records."""
    return int(value[:8])


def watch(
    bootstrap: str,
    topic: str,
    partitions: int,
    expected: int,
    timeout: float,
    number: Callable[[bytes], int] = leading_number,
    stop: threading.Event | None = None,
) -> Iterator[float | None]:
    """Yields once when ready to read (None), then the times the first and the last record were seen,
    then (seen, duplicates, missing). `number(value)` is the record's number (by default the value
    starts with it, 8 digits). `stop` set: it stops reading as at the timeout."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-watch-{uuid.uuid4().hex[:6]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 20,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    yield None
    seen = bytearray(expected)
    count = duplicates = 0
    first = None
    deadline = time.monotonic() + timeout
    try:
        while count < expected and time.monotonic() < deadline and not (stop and stop.is_set()):
            for message in consumer.consume(10_000, 0.05):
                if message.error() is not None:
                    continue
                if first is None:
                    first = time.monotonic()
                n = number(message.value())
                if n < expected and not seen[n]:
                    seen[n] = 1
                    count += 1
                else:
                    duplicates += 1
        last = time.monotonic()
        # A short grace period catches duplicates written after the last new record.
        for message in consumer.consume(10_000, 0.5):
            if message.error() is None:
                duplicates += 1
    finally:
        consumer.close()
    yield first
    yield last
    yield (count, duplicates, expected - count)  # type: ignore[misc]


def run_once(
    side: Side,
    job: str,
    round_no: int,
    config: dict[str, str],
    topic: str,
    partitions: int,
    expected: int,
    bootstrap: str,
    number: Callable[[bytes], int] = leading_number,
) -> Run:
    name = f"{job}-{side.name}-{uuid.uuid4().hex[:6]}"
    stop = threading.Event()
    watcher = watch(bootstrap, topic, partitions, expected, timeout=600, number=number, stop=stop)
    next(watcher)
    results: list[object] = []
    reader = threading.Thread(target=lambda: results.extend(watcher), daemon=True)
    tree = process_tree(side.root_pid)
    reset_peak_rss(tree)
    cpu_before = cpu_seconds(tree)
    task_rss = 0
    with RssSampler(side.root_pid) as sampler:
        started = time.monotonic()
        reader.start()
        side.post(name, config)
        while reader.is_alive():
            reader.join(1.0)
            for pid in side.task_pids(name):
                task_rss = max(task_rss, status_kb(pid, "VmHWM"))
            if reader.is_alive() and (trace := side.failed(name)):
                stop.set()  # the reader would otherwise poll for up to 600 s beside the next runs
                side.delete(name)
                raise TaskFailed(f"{side.name} {job} task FAILED:\n{trace}")
    cpu = cpu_seconds(process_tree(side.root_pid)) - cpu_before
    first, last, (seen, duplicates, missing) = results  # type: ignore[misc]
    side.delete(name)
    if first is None:
        raise SystemExit(f"{side.name} {job}: no record arrived in 600 s")
    return Run(
        job=job,
        side=side.name,
        round=round_no,
        seconds=last - started,  # type: ignore[operator]
        first_s=first - started,  # type: ignore[operator]
        records=seen,
        duplicates=duplicates,
        missing=missing,
        cpu_per_million=cpu / expected * 1e6,
        peak_rss_mb=sampler.peak_kb / 1024,
        task_rss_mb=task_rss / 1024 if side.name == "eos" else None,
        load=os.getloadavg()[0],
    )


# ------------------------------------------------------------------------------------- the jobs
def write_lines(path: Path, count: int) -> None:
    pad = "x" * (LINE_BYTES - 10)
    with path.open("w") as f:
        for start in range(0, count, 10_000):
            f.write("".join(f"{i:08d} {pad}\n" for i in range(start, min(count, start + 10_000))))


def fill_source_topic(bootstrap: str, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "enable.idempotence": True})
    pad = b"y" * (LINE_BYTES - 9)
    for i in range(count):
        while True:
            try:
                producer.produce(topic, value=b"%08d " % i + pad, key=b"%d" % (i % 1000), partition=i % 4)
                break
            except BufferError:
                producer.poll(0.1)
    if producer.flush(120):
        raise SystemExit("could not fill the mirror's source topic")


def file_config(job: str, path: Path, topic: str) -> dict[str, str]:
    return {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1",
        "file": str(path),
        "topic": topic,
        "batch.size": "2000",
        "key.converter": STRING,
        "value.converter": STRING,
        "exactly.once.support": "required",
        "transaction.boundary": "poll" if job == "file_poll" else "interval",
        "transaction.boundary.interval.ms": "1000",
    }


def mirror_config(side: str, job: str, bootstrap: str, source_topic: str, alias: str) -> dict[str, str]:
    config = {
        "connector.class": "org.apache.kafka.connect.mirror.MirrorSourceConnector",
        "tasks.max": "4",
        "topics": source_topic,
        "source.cluster.alias": alias,
        "source.cluster.bootstrap.servers": bootstrap,
        "key.converter": BYTES,
        "value.converter": BYTES,
    }
    if job == "mirror":
        config["exactly.once.support"] = "required"
    if side == "java":
        config.update(
            {
                "target.cluster.alias": "target",
                "target.cluster.bootstrap.servers": bootstrap,
                "replication.factor": "1",
                "offset-syncs.topic.replication.factor": "1",
                "sync.topic.acls.enabled": "false",
                "sync.topic.configs.enabled": "false",
                "emit.heartbeats.enabled": "false",
            }
        )
        if job == "mirror":
            config["source.cluster.consumer.isolation.level"] = "read_committed"
            config["consumer.isolation.level"] = "read_committed"
    else:
        config["target.topic.replication.factor"] = "1"
    return config


def run_job(
    job: str,
    round_no: int,
    sides: dict[str, Side],
    bootstrap: str,
    admin: AdminClient,
    lines: Path,
    source_topic: str,
    records: int,
) -> list[Run]:
    runs = []
    for side_name in side_order(round_no):
        side = sides[side_name]
        tag = uuid.uuid4().hex[:6]
        if job in FILE_JOBS:
            topic, partitions = f"bench-{job}-{side_name}-{tag}", 1
            ensure_topic(admin, topic, 1, 1, compacted=False)
            config = file_config(job, lines, topic)
        else:
            alias, partitions = f"{side_name}{tag}", 4
            topic = f"{alias}.{source_topic}"
            config = mirror_config(side_name, job, bootstrap, source_topic, alias)
        run = run_once(side, job, round_no, config, topic, partitions, records, bootstrap)
        console.print(
            f"  round {round_no} {job:13} {side_name:4}: {run.rate:9,.0f} rec/s  {run.seconds:6.2f} s  "
            f"first {run.first_s:5.2f} s  dups {run.duplicates} missing {run.missing}  "
            f"cpu {run.cpu_per_million:5.1f} s/M  rss {run.peak_rss_mb:6.0f} MB"
            + (f" (task {run.task_rss_mb:.0f} MB)" if run.task_rss_mb else "")
            + f"  load {run.load:.1f}"
        )
        if not run.ok:
            raise SystemExit(
                f"{side_name} {job} round {round_no}: {run.duplicates} duplicates, {run.missing} missing"
            )
        runs.append(run)
    return runs


def report(runs: list[Run], jobs: tuple[str, ...], rounds: int) -> dict[str, float]:
    out = Console()
    per_round, medians = per_round_table(
        "Per round: records/s from POST to the last record read_committed (eos/java)",
        runs,
        jobs,
        rounds,
        extra=(
            ("java first s", lambda pair: f"{pair['java'].first_s:.2f}"),
            ("eos first s", lambda pair: f"{pair['eos'].first_s:.2f}"),
        ),
    )
    out.print(per_round)
    summary = Table(title="Medians per job and side")
    for col in ("job", "side", "rec/s", "first record s", "CPU s / M records", "peak RSS MB", "task RSS MB"):
        summary.add_column(col, justify="right")
    for job in jobs:
        for side in SIDES:
            mine = [run for run in runs if run.job == job and run.side == side]
            if not mine:
                continue
            task = [run.task_rss_mb for run in mine if run.task_rss_mb]
            summary.add_row(
                job,
                side,
                f"{statistics.median(r.rate for r in mine):,.0f}",
                f"{statistics.median(r.first_s for r in mine):.2f}",
                f"{statistics.median(r.cpu_per_million for r in mine):.1f}",
                f"{max(r.peak_rss_mb for r in mine):.0f}",
                f"{max(task):.0f}" if task else "-",
            )
    out.print(summary)
    return medians


def main() -> None:
    parser = round_arguments(__doc__.splitlines()[0], 200_000, ALL_JOBS)
    parser.add_argument("--bootstrap", help="use a running broker instead of starting one")
    args = parser.parse_args()
    jobs = tuple(j for j in ALL_JOBS if j in args.jobs.split(","))
    ensure_kafka_connect()
    workdir = new_workdir("eosconnect-vs-java-")
    cluster = None
    bootstrap = args.bootstrap
    if bootstrap is None:
        cluster = LocalKafkaCluster(workdir / "kafka", tie_to_parent=True)
        bootstrap = cluster.start()
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        lines = workdir / "lines.txt"
        write_lines(lines, args.records)
        source_topic = f"bench-mirror-source-{uuid.uuid4().hex[:6]}"
        if any(j in MIRROR_JOBS for j in jobs):
            ensure_topic(admin, source_topic, 4, 1, compacted=False)
            fill_source_topic(bootstrap, source_topic, args.records)
        runs: list[Run] = []
        for mode, mode_jobs in (
            ("enabled", ("file_poll", "file_interval", "mirror")),
            ("disabled", ("mirror_alos",)),
        ):
            selected = tuple(j for j in mode_jobs if j in jobs)
            if not selected:
                continue
            with runtimes(bootstrap, workdir, mode) as sides:
                # Untimed warm-up of both sides (JIT, Spark's Python daemon, the broker's coordinators).
                warm = selected[0]
                console.print(f"warming up both sides with {warm} ...")
                run_job(warm, 1, sides, bootstrap, admin, lines, source_topic, args.records)
                for round_no in range(1, args.rounds + 1):
                    for job in selected:
                        runs.extend(
                            run_job(job, round_no, sides, bootstrap, admin, lines, source_topic, args.records)
                        )
        medians = report(runs, jobs, args.rounds)
        print(
            " ".join(
                ["vs_java"]
                + [
                    f"{job}={medians[job]:.2f}"
                    for job in ("file_poll", "file_interval", "mirror")
                    if job in medians
                ]
            )
        )
    finally:
        if cluster is not None:
            cluster.stop()


if __name__ == "__main__":
    main()
