"""Chaos soak: exactly-once through random faults, broker crashes included (`make soak`).

One real `eosconnect worker` (exactly.once.source.support=enabled) runs endless SequenceSources, one
per source transaction boundary (below), against three brokers (every topic, internal ones included,
with three replicas and min.insync.replicas=2, so losing one broker keeps exactly-once possible); for
each an exactly-once MirrorSink (transaction.producer=true) that copies its topic to `mirror.<topic>`
on the same cluster; and an exactly-once JdbcSink that writes the first source's topic into a
PostgreSQL table (`insert.mode=insert`, no key: a record written twice would be a second row); and
a PostgresCdcSource (`chaos-cdc`, transaction.boundary=connector) of a table that a thread writes
throughout in transactions of 1-4 inserts, updates and deletes (tests/support/cdc_soak.py) - the
JDBC sink and the CDC source when PostgreSQL's binaries are there (`make postgres`; `make soak`
installs them) and the brokers are plaintext. For `EOSCONNECT_SOAK_SECONDS` (default 600) the test
injects one random fault after another, each once the previous one has been recovered from (and at
least one of each kind, however short the time):

- kill_task:          SIGKILL a task's Python worker (of a source, a mirror, the JDBC sink or the CDC
                      source; Spark retries it; when that was the task's last Spark attempt it is FAILED
                      and restarted over REST)
- freeze_task:        SIGSTOP a source task's Python worker, replace it by a new generation (zombie
                      fencing), SIGCONT it 8-30 s later (its transaction timeout is 20 s): the zombie
                      must not get anything committed. The CDC source's new generation waits for
                      PostgreSQL to end the frozen task's replication connection (wal_sender_timeout,
                      60 s)
- kill_broker:        SIGKILL a broker, start it again 3-20 s later
- restart_broker:     controlled shutdown of a broker, then start it again
- reconfigure:        change a source's tasks.max (2, 3, 4): a new generation
- restart_connector:  POST /connectors/<a source, mirror, the JDBC sink or the CDC source>/restart
                      ?includeTasks=true

After each fault every task of every source's current generation must commit again, and every mirror,
the JDBC sink and the CDC source must copy on, within a bounded time. Read_committed followers check
every record as it is committed, on each source topic and each mirror's (each task's sequence must go up
by exactly one). At the end the sources are bounded (records.per.task), every task runs to its end, the
mirrors catch up, and `eosconnect.tools.verify` checks every topic whole: every source partition's
sequence complete, no gap, no duplicate, matching the committed source offsets; the JDBC sink's table
must hold every (task, seq) of its source once: 0 missing, 0 duplicates (tests/support/jdbc_sink.py's
`SequenceTable`, which also checks for duplicates after every fault). The CDC topic is checked live (no
change twice, per key in commit order) and, once the table's writer stopped, whole: every snapshot row
and committed change exactly once, per key in commit order, the last event per key equal to the row (a
tombstone for a deleted one), and each database transaction exactly one Kafka transaction holding
exactly its changes (`verify_cdc_topic`). The worker log must hold no error or traceback other than
those the injected faults explain.

`EOSCONNECT_SOAK_SPARK=standalone` (`make soak-spark`) runs the worker's tasks on a Spark standalone
cluster instead of `local[N,F]`: a master and two Spark workers, each in a mount namespace of its
own where the checkout is hidden (tests/support/spark_standalone.py), and adds a seventh fault:

- kill_spark_worker:  SIGKILL a Spark worker with its executor and the tasks' Python workers (a
                      machine lost), start a replacement 3-15 s later; the lost tasks run again

`EOSCONNECT_SOAK_SECURITY=sasl_ssl` (`make soak-secured`) runs it all on secured brokers (SCRAM-SHA-512,
TLS, an authorizer that refuses what no ACL grants), each client as its own principal with exactly
KIP-618's ACLs, the referee with Read only (tests/support/secured_soak.py).

Every source transaction boundary runs at once: a source connector (and its mirror) per boundary,
`chaos-poll`, `chaos-interval` (every 500 ms) and `chaos-connector` (SequenceSource commits every 50
records), their tasks sharing the worker, the brokers and the faults (a fault aimed at "a source"
picks one of them; every one must recover from every fault). `EOSCONNECT_SOAK_BOUNDARY=poll` (or
`interval`, `connector`) runs one alone, at three times the rate. `make soak-long` runs three random
seeds for 20 minutes each, so each boundary gets 3 x 20 minutes of faults.

The schedule comes from a seeded RNG: the seed and every fault are printed with timestamps (`make
soak` shows them live) and `EOSCONNECT_SOAK_SEED=<seed>` replays the same schedule (timings, and so
interleavings, differ from run to run). The timeline and the worker log are kept in
`.eosconnect/soak/<time>-seed<seed>/` (`EOSCONNECT_SOAK_DIR`), with the brokers' logs and the source
topics' partition segments of every broker (`data/node-N/`) if it failed.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import shutil
import signal
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.postgres import LocalPostgres, PostgresSetupError
from eosconnect.tools.verify import verify_sequence_topic
from eosconnect.tools.worker_process import WorkerProcess
from support.cdc_soak import CdcFollower, CdcWorkload, cdc_source_config, verify_cdc_topic, wait_for_changes
from support.chaos import (
    SequenceFollower,
    clock,
    committed_offsets,
    create_replicated_topic,
    endless_sequence,
    log_problems,
    replicated_worker_settings,
    unexpected_problems,
    wait_fully_replicated,
)
from support.jdbc_sink import SequenceTable
from support.secured_soak import SECURITY, kafka3_security, soak_principals  # noqa: F401 (fixture)
from support.spark_standalone import StandaloneCluster, descendants, unshare_available

SOAK_SECONDS = float(os.environ.get("EOSCONNECT_SOAK_SECONDS", "600"))
#: SequenceSource's transaction size with the connector boundary.
COMMIT_EVERY = 50
#: The source connector's transaction boundary, and the settings that make it.
BOUNDARIES: dict[str, dict[str, str]] = {
    "poll": {},
    "interval": {"transaction.boundary": "interval", "transaction.boundary.interval.ms": "500"},
    "connector": {"transaction.boundary": "connector", "transaction.commit.every": str(COMMIT_EVERY)},
}
BOUNDARY = os.environ.get("EOSCONNECT_SOAK_BOUNDARY", "all").strip().lower()
if BOUNDARY not in (*BOUNDARIES, "all"):
    raise ValueError(f"EOSCONNECT_SOAK_BOUNDARY={BOUNDARY!r}: use all or one of {', '.join(BOUNDARIES)}")
#: The boundaries this run soaks, a source connector (and a mirror) each.
SOAKED = list(BOUNDARIES) if BOUNDARY == "all" else [BOUNDARY]
SPARK_MODE = os.environ.get("EOSCONNECT_SOAK_SPARK", "local").strip().lower()
if SPARK_MODE not in ("local", "standalone"):
    raise ValueError(f"EOSCONNECT_SOAK_SPARK={SPARK_MODE!r}: use local or standalone")
SEED = int(os.environ.get("EOSCONNECT_SOAK_SEED") or random.SystemRandom().randrange(1, 2**31))
ARTIFACTS = Path(
    os.environ.get("EOSCONNECT_SOAK_DIR", Path(__file__).resolve().parents[2] / ".eosconnect/soak")
)

pytestmark = [pytest.mark.soak, pytest.mark.kafka, pytest.mark.spark, pytest.mark.cluster3]

JDBC = "chaos-jdbc"  # the sources are chaos-<boundary>, their mirrors chaos-mirror-<boundary>
CDC = "chaos-cdc"
#: The JDBC sink's tasks (the topic's 4 partitions spread over them by the consumer group).
JDBC_TASKS = 2
PARTITIONS = 4
TASK_COUNTS = (2, 3, 4)
RATE = 300 // (3 * len(SOAKED))  # records per second per source task: 300/s in all at 3 tasks each
TRANSACTION_TIMEOUT_MS = 20_000
#: How long every task may take to commit again after a fault.
RECOVERY_S = 150.0
PROGRESS = 50  # records each task must commit after a fault
KINDS = ("kill_task", "freeze_task", "kill_broker", "restart_broker", "reconfigure", "restart_connector")
if SPARK_MODE == "standalone":
    KINDS += ("kill_spark_worker",)
#: Cores of each of the two Spark workers: room for the source's 4 tasks, the mirror's 2, the JDBC
#: sink's 2 and a frozen zombie generation of the source (4), as local[12,4] gives in local mode.
SPARK_WORKER_CORES = 6

#: The mirror task's error when librdkafka's send_offsets_to_transaction() hung after the group
#: coordinator's broker died (librdkafka issues 5456, 5511): the task fails and needs a restart.
LIBRDKAFKA_HANG = "librdkafka issues 5456 and 5511"
#: Worker log lines the injected faults explain (see `log_problems`), by fault kind.
_HANG_LINE = (
    r"ERROR eosconnect\.runtime\.sink_task \[chaos-mirror-[a-z]+-\d\] failed: .* did not return within"
)
#: Known, left open: the herder's config-topic read can block in ListOffsets for its whole 60 s
#: timeout after the partition's leader died, then the tick fails (TimeoutError) and is retried.
_HERDER_STALL = (
    r"ERROR eosconnect\.cluster\.herder herder tick failed; retrying",
    r"^Traceback: TimeoutError$",
)
#: librdkafka's own lines when a broker died or restarted with a source's produce requests in flight
#: and the idempotent producer lost its sequence state (fatally, sometimes a minute later): the task
#: renews its producer and sends the transaction again (docs/architecture.md "Bounded transactions"),
#: saying so at WARN; the line librdkafka logs first is CRITICAL.
_SEQUENCE_LOST = (
    r"CRITICAL eosconnect\.kafka\.producer (TXNERR|FATAL) .*"
    r"(OUT_OF_ORDER_SEQUENCE_NUMBER|out of order sequence number)"
)
EXPECTED_PROBLEMS = {
    "kill_broker": (_HANG_LINE, _SEQUENCE_LOST, *_HERDER_STALL),
    "restart_broker": (_HANG_LINE, _SEQUENCE_LOST, *_HERDER_STALL),
    "kill_task": (
        r"ERROR Executor: Exception in task",  # Spark: the Python worker died
        r"ERROR TaskSetManager: Task \d+ in stage \S+ failed \d+ times; aborting job",
        r"ERROR eosconnect\.cluster\.jobs Spark job group \S+ ended with an error: .*Job aborted",
        r"ERROR eosconnect\.cluster\.(herder|task_health) connector \S+: task \S+ was lost: "
        r"Spark gave up on it",
    ),
    # Spark's driver, when the killed worker's executor goes (seen: "worker lost: <host:port> got
    # disassociated"; a kill can also read "Remote RPC client disassociated" or an exit code).
    "kill_spark_worker": (r"ERROR TaskSchedulerImpl: Lost executor \d+ on \S+: ",),
    "freeze_task": (  # the zombie, woken up, finds itself fenced or its transaction aborted
        r"ERROR eosconnect\.runtime\.source_task \[chaos-[a-z]+-\d\] failed: chaos-[a-z]+-\d: fenced while",
        r"ERROR eosconnect\.runtime\.source_task \[chaos-[a-z]+-\d\] failed: chaos-[a-z]+-\d: "
        r"the transaction was open for",
        r"CRITICAL eosconnect\.kafka\.producer (TXNERR|FATAL) .*(fenced|epoch)",
        # the CDC zombie, frozen in poll() with nothing in flight: PostgreSQL ended its replication
        # connection (wal_sender_timeout) to let its successor have the slot; it fails when it wakes
        r"ERROR eosconnect\.runtime\.source_task \[chaos-cdc-\d\] failed: lost the replication connection",
    ),
}


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory):
    """The Spark standalone cluster of EOSCONNECT_SOAK_SPARK=standalone; None in local mode."""
    if SPARK_MODE == "local":
        yield None
        return
    if not unshare_available():
        pytest.skip("EOSCONNECT_SOAK_SPARK=standalone needs mount namespaces (unshare -m)")
    cluster = StandaloneCluster(tmp_path_factory.mktemp("soak-spark"))
    try:
        yield cluster.start(workers=2, cores=SPARK_WORKER_CORES)
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def soak_postgres():
    """The JDBC sink target's PostgreSQL server, or None (no binaries, or secured brokers, for
    which the sink's consumer would need ACLs of its own): the soak then runs without it."""
    if SECURITY != "plaintext":
        yield None
        return
    try:
        server = LocalPostgres()
        server.start()
    except PostgresSetupError as exc:
        print(f"[chaos] no JDBC sink target: {exc}", flush=True)
        yield None
        return
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def bootstrap(kafka3: LocalKafkaCluster) -> str:
    """Everything in this module (worker_props, read_committed, ...) talks to the three brokers."""
    return kafka3.bootstrap_servers


def source_config(topic: str, tasks: int, boundary: str) -> dict[str, str]:
    return {
        **endless_sequence(topic, tasks, RATE),
        "producer.override.transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS),
        **BOUNDARIES[boundary],
    }


def mirror_config(topic: str, bootstrap: str) -> dict[str, str]:
    return {
        "connector.class": "MirrorSink",
        "tasks.max": "2",
        "topics": topic,
        "target.cluster.bootstrap.servers": bootstrap,
        "source.cluster.alias": "mirror",
        "transaction.producer": "true",
        "transaction.commit.interval.ms": "1000",
    }


@dataclass
class Connector:
    name: str
    config: dict[str, str]
    follower: (
        SequenceFollower | SequenceTable
    )  # of the topic or table it writes (CdcFollower: a SequenceFollower)
    #: The source whose records it carries (a mirror, the JDBC sink); None for a source.
    feeds: Connector | None = None

    @property
    def source(self) -> Connector:
        return self.feeds or self

    @property
    def tasks(self) -> int:
        return int(self.config["tasks.max"])


class Chaos:
    """The fault injector: the connectors as the test drives them, and the timeline."""

    def __init__(
        self,
        worker: WorkerProcess,
        cluster: LocalKafkaCluster,
        sources: list[Connector],
        mirrors: list[Connector],
        rng: random.Random,
        timeline: Path,
        spark: StandaloneCluster | None = None,
        jdbc: Connector | None = None,
        cdc: Connector | None = None,
    ) -> None:
        self.worker = worker
        self.jdbc = jdbc
        self.cdc = cdc
        self.spark = spark
        self.cluster = cluster
        self.sources = sources
        self.mirrors = mirrors
        self.rng = rng
        self.started = time.monotonic()
        self.timeline = timeline
        self.faults: Counter[str] = Counter()
        self.recovery: dict[str, list[float]] = {}
        self.current = "start-up"
        self.hang_restarts = 0

    # ------------------------------------------------------------------ bookkeeping
    def pick(self, choices: list[Connector]) -> Connector:
        """One of `choices` at random; with one, no draw, so a one-boundary run's seed replays the
        schedules of the soak before it ran every boundary at once."""
        return choices[0] if len(choices) == 1 else self.rng.choice(choices)

    def log(self, text: str) -> None:
        line = f"[chaos {clock()} +{time.monotonic() - self.started:6.1f}s] {text}"
        print(line, flush=True)
        with self.timeline.open("a") as f:
            f.write(line + "\n")

    def dead(self) -> str | None:
        """Why waiting is pointless: the worker process is gone."""
        assert self.worker.proc is not None
        code = self.worker.proc.poll()
        return None if code is None else f"the worker exited with {code}; log:\n{self.worker.tail(60)}"

    def internal_tasks(self, connector: Connector) -> dict[int, dict[str, Any]]:
        runtimes = self.worker.request("GET", "/internal/tasks").json()
        return {r["task"]: r for r in runtimes.values() if r["connector"] == connector.name}

    def restart_hung(self) -> None:
        """A mirror task that failed because librdkafka hung (see LIBRDKAFKA_HANG) is restarted over
        REST, as its error says to, and counted: it is a known availability bug upstream, not lost
        exactly-once. Everything else FAILED stays failed, and the recovery wait times out."""
        for mirror in self.mirrors:
            for entry in self.worker.status(mirror.name).get("tasks", []):
                if entry["state"] == "FAILED" and LIBRDKAFKA_HANG in entry.get("trace", ""):
                    task = entry["id"]
                    self.worker.request("POST", f"/connectors/{mirror.name}/tasks/{task}/restart")
                    self.hang_restarts += 1
                    what = f"{mirror.name}-{task} FAILED as librdkafka hung"
                    self.log(f"{self.current}: {what}; restarted it over REST")

    def watch(self) -> str | None:
        """Called while waiting for progress: restarts hung mirror tasks; why to stop waiting, if any."""
        with contextlib.suppress(Exception):  # REST not answering for a moment
            self.restart_hung()
        return self.dead()

    def dump_state(self, artifacts: Path, kafka3: LocalKafkaCluster) -> None:
        """Before a failed soak's logs are kept, what no log line says: every thread's stack of the
        worker and of each task's process (SIGUSR1, runtime/loop_watch.py) into the worker log; each
        broker's threads (SIGQUIT: the JVM's thread dump, into its stdout, kept as
        kafka-node-N.stdout.log); and the worker's metrics twice, 5 s apart (what still moves)."""
        assert self.worker.proc is not None
        pids = {self.worker.proc.pid}
        with contextlib.suppress(Exception):  # REST not answering: the worker's own stacks still
            runtimes = self.worker.request("GET", "/internal/tasks").json().values()
            pids |= {r["pid"] for r in runtimes if r.get("pid")}
        for pid in sorted(pids):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGUSR1)
        brokers = {b: kafka3.node(b).pid for b in (100, *kafka3.broker_ids())}
        for pid in brokers.values():
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGQUIT)
        self.log(f"asked processes {sorted(pids)} and Kafka nodes {brokers} for their threads' stacks")
        for round_ in (1, 2):
            with contextlib.suppress(Exception):
                metrics = self.worker.request("GET", "/metrics").text
                (artifacts / f"metrics-{round_}.txt").write_text(metrics)
            time.sleep(5)

    def all_running(self, connector: Connector) -> bool:
        """tasks.max tasks, all RUNNING in one generation, by status and by their heartbeats."""
        self.restart_hung()
        if self.worker.task_states(connector.name) != ["RUNNING"] * connector.tasks:
            return False
        runtimes = self.internal_tasks(connector)
        current = [runtimes.get(t) for t in range(connector.tasks)]
        if any(r is None or r["state"] != "RUNNING" or not r["pid"] for r in current):
            return False
        return len({r["generation"] for r in current if r}) == 1

    def wait(self, check: Callable[[], Any], timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            reason = self.dead()
            if reason:
                raise AssertionError(f"{self.current}: {reason}")
            try:
                last = check()
                if last:
                    return last
            except Exception as exc:  # REST not answering for a moment, a key not there yet
                last = exc
            time.sleep(0.5)
        statuses = [self.worker.request("GET", f"/connectors/{c.name}/status").text for c in self.connectors]
        raise AssertionError(
            f"{self.current}: timed out after {timeout:.0f}s waiting for {what} (last: {last!r}); "
            f"seed {SEED}; status {statuses}; worker log:\n{self.worker.tail(60)}"
        )

    @property
    def connectors(self) -> tuple[Connector, ...]:
        extra = (self.jdbc, self.cdc)
        return (*self.sources, *self.mirrors, *(c for c in extra if c is not None))

    def committed(self) -> str:
        """Records committed so far, per source."""
        counts = [f"{s.name} {sum(seq + 1 for seq in s.follower.highest().values())}" for s in self.sources]
        if self.cdc is not None and isinstance(self.cdc.follower, CdcFollower):
            counts.append(f"{self.cdc.name} {self.cdc.follower.progress()}")
        return ", ".join(counts)

    def recovered(self, kind: str) -> None:
        """Every task RUNNING, every source task committing again and the mirror copying on."""
        began = time.monotonic()
        for connector in self.connectors:
            self.wait(
                lambda c=connector: self.all_running(c),
                RECOVERY_S,
                f"{connector.tasks} RUNNING tasks of {connector.name} after {self.current}",
            )
        source_at = {c.name: c.follower.highest() for c in self.connectors if c.feeds is None}
        for connector in self.connectors:
            connector.follower.wait_for_progress(
                range(connector.source.tasks),
                PROGRESS,
                max(10.0, RECOVERY_S - (time.monotonic() - began)),
                f"on {connector.follower.topic} after {self.current} (seed {SEED})",
                alive=self.watch,
                since=source_at[connector.source.name],  # a mirror must get past where its source was
            )
        took = time.monotonic() - began
        self.recovery.setdefault(kind, []).append(took)
        self.log(f"recovered from {self.current} in {took:.1f}s; committed: {self.committed()}")
        for connector in self.connectors:
            if connector.follower.anomalies:
                raise AssertionError(
                    f"{connector.follower.topic} broke exactly-once around {self.current} (seed {SEED}): "
                    f"{connector.follower.anomalies[:10]}"
                )

    # ------------------------------------------------------------------ faults
    def inject(self, kind: str) -> None:
        self.faults[kind] += 1
        self.current = f"fault #{sum(self.faults.values())} {kind}"
        getattr(self, kind)()

    def request(self, method: str, path: str, **kwargs: Any) -> Any:
        """A REST request as an operator's script makes it: a 409 (the worker is rebalancing, or in
        doubt of its leadership after its group coordinator's broker died) is retried for up to
        RECOVERY_S, as Kafka Connect's clients do; anything else is answered at once."""
        deadline = time.monotonic() + RECOVERY_S
        while True:
            response = self.worker.request(method, path, **kwargs)
            if response.status_code != 409 or time.monotonic() > deadline:
                return response
            self.log(f"{self.current}: {method} {path} -> 409 ({response.json().get('message')}); retrying")
            time.sleep(2)

    def put_config(self, connector: Connector, config: dict[str, str]) -> None:
        response = self.request("PUT", f"/connectors/{connector.name}/config", json=config)
        assert response.status_code == 200, f"{self.current}: PUT config answered {response.text}"
        connector.config = config

    def kill_task(self) -> None:
        connector = self.rng.choice(self.connectors)
        task = self.rng.randrange(connector.tasks)
        pid = self.internal_tasks(connector)[task]["pid"]
        os.kill(pid, signal.SIGKILL)
        self.log(f"{self.current}: SIGKILLed the Python worker of task {connector.name}-{task} (pid {pid})")

        def outcome() -> str | None:
            runtime = self.internal_tasks(connector)[task]
            if runtime["state"] == "FAILED":
                return "FAILED"
            return "retried" if runtime["pid"] not in (None, pid) else None

        if self.wait(outcome, RECOVERY_S, f"task {connector.name}-{task} to be retried") == "FAILED":
            # That was the task's last Spark attempt (local[N,4]): FAILED, as any failed task.
            trace = self.worker.status(connector.name)["tasks"][task].get("trace", "")
            assert "Spark gave up on it" in trace, f"{self.current}: unexpected failure: {trace}"
            time.sleep(5)  # its slot-mates (packed in the same Python worker) are FAILED with it
            restarted = []
            for each in self.connectors:  # as an operator would: every task Spark gave up on
                for i, status in enumerate(self.worker.status(each.name)["tasks"]):
                    if status["state"] == "FAILED" and "Spark gave up on it" in status.get("trace", ""):
                        response = self.request("POST", f"/connectors/{each.name}/tasks/{i}/restart")
                        assert response.status_code == 204, response.text
                        restarted.append(f"{each.name}-{i}")
            self.log(
                f"{self.current}: Spark gave up on the task's slot host after its last attempt; restarted "
                f"over REST: {', '.join(restarted)}"
            )
        self.recovered("kill_task")

    def freeze_task(self) -> None:
        source = self.pick(self.sources + ([self.cdc] if self.cdc is not None else []))
        task = self.rng.randrange(source.tasks)
        freeze_s = self.rng.uniform(8, 30)
        if source is self.cdc:
            # one task reads the slot: a new generation of it, by a setting that changes nothing else
            poll_ms = "250" if source.config["poll.interval.ms"] == "200" else "200"
            change, replacement = (
                {"poll.interval.ms": poll_ms},
                f"a new generation (poll.interval.ms={poll_ms})",
            )
        else:
            new_count = self.rng.choice([n for n in TASK_COUNTS if n != source.tasks])
            change, replacement = {"tasks.max": str(new_count)}, f"a generation of {new_count} tasks"
        pid = self.internal_tasks(source)[task]["pid"]
        os.kill(pid, signal.SIGSTOP)
        frozen_at = time.monotonic()
        self.log(
            f"{self.current}: SIGSTOPped the Python worker of task {source.name}-{task} (pid {pid}) for "
            f"{freeze_s:.0f}s "
            f"({'beyond' if freeze_s * 1000 > TRANSACTION_TIMEOUT_MS else 'within'} its transaction "
            f"timeout); replacing it by {replacement}"
        )
        try:
            self.put_config(source, {**source.config, **change})
            self.recovered("freeze_task")
            rest = freeze_s - (time.monotonic() - frozen_at)
            if rest > 0:
                time.sleep(rest)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
        self.log(
            f"{self.current}: SIGCONT to the zombie (pid {pid}) {time.monotonic() - frozen_at:.0f}s later"
        )
        time.sleep(3)  # whatever the zombie still tries, it tries now
        self.recovered("freeze_task")

    def _broker(self) -> int:
        wait_fully_replicated(self.cluster.client_config())
        return self.rng.choice(self.cluster.broker_ids())

    def kill_broker(self) -> None:
        broker = self._broker()
        down_s = self.rng.uniform(3, 20)
        before = {source.name: source.follower.highest() for source in self.sources}
        self.cluster.kill_node(broker)
        self.log(f"{self.current}: SIGKILLed broker {broker}; starting it again in {down_s:.0f}s")
        time.sleep(down_s)
        during = 0
        for source in self.sources:
            now, then = source.follower.highest(), before[source.name]
            during += sum(now.get(t, -1) - then.get(t, -1) for t in range(source.tasks))
        self.cluster.start_node(broker)
        self.log(f"{self.current}: broker {broker} is back; {during} records were committed meanwhile")
        self.recovered("kill_broker")

    def restart_broker(self) -> None:
        broker = self._broker()
        self.cluster.stop_node(broker)
        self.log(f"{self.current}: stopped broker {broker} (controlled shutdown); starting it again")
        self.cluster.start_node(broker)
        self.recovered("restart_broker")

    def kill_spark_worker(self) -> None:
        """A machine of the Spark cluster is lost: its worker, executor and the tasks' Python workers."""
        assert self.spark is not None
        alive = [w for w in self.spark.workers if w.proc.poll() is None]
        victim = self.rng.choice(alive)
        below = set(descendants(victim.proc.pid))
        tasks = sorted(
            f"{r['connector']}-{r['task']}"
            for r in self.worker.request("GET", "/internal/tasks").json().values()
            if r.get("pid") in below
        )
        victim.kill()
        down_s = self.rng.uniform(3, 15)
        self.log(
            f"{self.current}: SIGKILLed Spark {victim.name} with its executor and tasks {tasks}; "
            f"a replacement joins in {down_s:.0f}s"
        )
        time.sleep(down_s)
        replacement = self.spark.add_worker(cores=SPARK_WORKER_CORES)
        self.log(f"{self.current}: Spark {replacement.name} joined")
        self.recovered("kill_spark_worker")

    def reconfigure(self) -> None:
        source = self.pick(self.sources)
        new_count = self.rng.choice([n for n in TASK_COUNTS if n != source.tasks])
        self.log(f"{self.current}: {source.name} tasks.max {source.tasks} -> {new_count}")
        self.put_config(source, {**source.config, "tasks.max": str(new_count)})
        self.recovered("reconfigure")

    def restart_connector(self) -> None:
        connector = self.rng.choice(self.connectors)
        path = f"/connectors/{connector.name}/restart?includeTasks=true"
        response = self.request("POST", path)
        self.log(f"{self.current}: POST {path} -> {response.status_code}")
        assert response.status_code == 202, f"{self.current}: {response.text}"
        self.recovered("restart_connector")


@pytest.mark.timeout(SOAK_SECONDS + 1200)
def test_exactly_once_through_chaos(
    kafka3: LocalKafkaCluster,
    spark_cluster: StandaloneCluster | None,
    soak_postgres: LocalPostgres | None,
    workers,
    topic_name,
    tmp_path: Path,
):
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per REST call drowns the timeline
    bootstrap = kafka3.bootstrap_servers
    rng = random.Random(SEED)
    principals = soak_principals(kafka3)  # EOSCONNECT_SOAK_SECURITY: tests/support/secured_soak.py
    # room for a frozen zombie generation next to the sources' tasks, the mirrors' and the JDBC sink's
    spark = (
        {"spark.master": "local[12,4]"}
        if spark_cluster is None
        else {"spark.master": spark_cluster.url, "spark.executor.memory": "768m"}
    )
    worker = workers(
        "w1",
        **replicated_worker_settings(kafka3),
        **spark,
        **{"eosconnect.zombie.cancel.timeout.ms": "120000"},
        **principals.worker,
    )
    sources: list[Connector] = []
    mirrors: list[Connector] = []
    for boundary in SOAKED:
        topic = create_replicated_topic(principals.admin, topic_name(f"data-{boundary}"), PARTITIONS)
        mirror_topic = f"mirror.{topic}"
        source_name, mirror_name = f"chaos-{boundary}", f"chaos-mirror-{boundary}"
        source_settings = {**source_config(topic, 3, boundary), **principals.source}
        mirror_settings = {**mirror_config(topic, bootstrap), **principals.mirror}
        principals.grant(
            (source_name, source_settings),
            (mirror_name, mirror_settings),
            max(TASK_COUNTS),
            (topic, mirror_topic),
        )
        source = Connector(
            source_name, source_settings, SequenceFollower(principals.reader, topic, PARTITIONS)
        )
        sources.append(source)
        mirror_follower = SequenceFollower(principals.reader, mirror_topic, PARTITIONS)
        mirrors.append(Connector(mirror_name, mirror_settings, mirror_follower, feeds=source))
    jdbc = None
    if soak_postgres is not None:  # into PostgreSQL: the first source's records
        table = SequenceTable(soak_postgres.new_database(), sources[0].config["topic"])
        jdbc = Connector(JDBC, table.config(JDBC_TASKS), table, feeds=sources[0])
    cdc, workload = None, None
    if soak_postgres is not None:  # out of PostgreSQL: change data capture of a table written throughout
        workload = CdcWorkload(soak_postgres.new_database(), seed=rng.randrange(2**31))
        prefix = topic_name("cdc")
        cdc_topic = create_replicated_topic(principals.admin, f"{prefix}.public.chaos_cdc", 1)
        cdc_settings = {
            **cdc_source_config(workload.url, prefix),
            "producer.override.transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS),
        }
        cdc = Connector(CDC, cdc_settings, CdcFollower(principals.reader, cdc_topic, workload))
    artifacts = ARTIFACTS / f"{time.strftime('%Y%m%d-%H%M%S')}-seed{SEED}"
    artifacts.mkdir(parents=True, exist_ok=True)
    chaos = Chaos(worker, kafka3, sources, mirrors, rng, artifacts / "timeline.txt", spark_cluster, jdbc, cdc)
    chaos.log(
        f"seed {SEED} (replay: EOSCONNECT_SOAK_SEED={SEED} EOSCONNECT_SOAK_SECONDS={SOAK_SECONDS:.0f} "
        f"EOSCONNECT_SOAK_BOUNDARY={BOUNDARY} EOSCONNECT_SOAK_SPARK={SPARK_MODE} "
        f"EOSCONNECT_SOAK_SECURITY={SECURITY} make soak); {SOAK_SECONDS:.0f}s of faults, sources "
        f"{', '.join(s.name for s in sources)} ({RATE} records/s per task), Spark {SPARK_MODE}, brokers "
        f"{SECURITY}, JDBC sink and CDC source {'with PostgreSQL' if jdbc else 'left out'}; "
        f"timeline and worker log in {artifacts}"
    )
    passed = False
    try:
        for connector in (*sources, *([cdc] if cdc else [])):
            connector.follower.start()
        for connector in chaos.connectors:
            created = worker.create_connector(connector.name, connector.config)
            assert created.status_code == 201, created.text
        for mirror in mirrors:
            mirror.follower.start()  # the mirror has created its topic by the time it runs
        if cdc is not None and workload is not None:  # the snapshot read, then the table written on
            assert isinstance(cdc.follower, CdcFollower)
            wait_for_changes(cdc.follower, len(workload.snapshot), RECOVERY_S, chaos.watch)
            workload.start()
            chaos.log(
                f"{CDC}: snapshot of {len(workload.snapshot)} rows read; the table is written from now on"
            )
        chaos.recovered("start-up")

        # Every kind once, in a seeded order, then at random until the time is up.
        schedule = rng.sample(KINDS, len(KINDS))
        deadline = time.monotonic() + SOAK_SECONDS
        while schedule or time.monotonic() < deadline:
            chaos.inject(schedule.pop(0) if schedule else rng.choice(KINDS))
            time.sleep(rng.uniform(1, 6))  # quiet time: let it make progress

        # -- the end: bound the sources, let every task run to the end, verify every topic whole
        chaos.current = "the final run to the end"
        if cdc is not None and workload is not None:  # it catches up while the sources run to their end
            assert isinstance(cdc.follower, CdcFollower)
            workload.stop()
            chaos.log(f"{CDC}: the workload stopped; {cdc.follower.progress()}")
        offsets = {}
        for source in sources:
            assert chaos.request("PUT", f"/connectors/{source.name}/stop").status_code == 204
            chaos.wait(
                lambda s=source: (
                    worker.status(s.name).get("connector", {}).get("state") == "STOPPED"
                    and worker.task_states(s.name) == []
                ),
                60,
                f"{source.name} STOPPED",
            )
            offsets[source.name] = committed_offsets(worker, source.name)
        total = max((max(o.values(), default=0) for o in offsets.values()), default=0) + 1 + 2 * RATE
        # chaos-connector commits only every COMMIT_EVERY records: each task ends on a commit
        total = -(-total // COMMIT_EVERY) * COMMIT_EVERY
        chaos.log(f"sources stopped at committed source offsets {offsets}; running every task to {total}")
        tasks = max(TASK_COUNTS)
        final = {"tasks.max": str(tasks), "records.per.task": str(total), "rate.per.task": "1000"}
        for source in sources:
            chaos.put_config(source, {**source.config, **final})
            assert chaos.request("PUT", f"/connectors/{source.name}/resume").status_code == 202
        for source in sources:
            chaos.wait(lambda s=source: chaos.all_running(s), RECOVERY_S, f"{source.name}'s final generation")
        end = dict.fromkeys(range(tasks), total - 1)
        for connector in chaos.connectors:
            if connector is cdc:
                continue
            connector.follower.wait_for_progress(
                range(tasks), 0, 300, f"{connector.follower.topic} to the end (seed {SEED})", chaos.watch, end
            )
        for source in sources:
            chaos.wait(
                lambda s=source: committed_offsets(worker, s.name) == end,
                60,
                f"{source.name}'s committed source offsets {end}",
            )
        time.sleep(2)
        for name in [c.follower.topic for c in (*sources, *mirrors)]:
            report = verify_sequence_topic(
                principals.reader, name, tasks=tasks, records_per_task=total, timeout=300
            )
            chaos.log(
                f"verified {name}: {report.seen} records of {report.expected} expected, {report.duplicates} "
                f"duplicates, {report.missing} missing, {report.unexpected} unexpected"
            )
            assert report.ok, f"exactly-once broken in {name} (seed {SEED}): {report.anomalies}"
        if jdbc is not None:
            assert isinstance(jdbc.follower, SequenceTable)
            rows, duplicates, missing = jdbc.follower.verify(tasks, total)
            chaos.log(
                f"verified table {jdbc.follower.table}: {rows} rows of {tasks * total} expected, "
                f"{duplicates} duplicates, {missing} missing"
            )
            assert (rows, duplicates, missing) == (tasks * total, 0, 0), (
                f"exactly-once broken in the JDBC sink's table (seed {SEED}): {jdbc.follower.anomalies}"
            )
        if cdc is not None and workload is not None:
            assert isinstance(cdc.follower, CdcFollower)
            changes = len(workload.snapshot) + workload.changes
            took = wait_for_changes(cdc.follower, changes, 300, chaos.watch)
            chaos.log(f"{CDC}: all {changes} events read {took:.1f}s after the sources' verification")
            cdc_report = verify_cdc_topic(principals.reader, cdc.follower.topic, workload)
            chaos.log(f"verified {cdc.follower.topic}: {cdc_report.summary()}")
            assert cdc_report.ok, (
                f"exactly-once broken in {cdc.follower.topic} (seed {SEED}): {cdc_report.anomalies()}"
            )
        for connector in chaos.connectors:
            assert not connector.follower.anomalies, (
                f"seen live (seed {SEED}): {connector.follower.anomalies}"
            )
            assert chaos.request("DELETE", f"/connectors/{connector.name}").status_code == 204

        problems = log_problems(worker.log_path.read_text(errors="replace"))
        expected = [p for kind in chaos.faults for p in EXPECTED_PROBLEMS.get(kind, ())]
        unexpected = unexpected_problems(problems, expected)
        chaos.log(f"worker log: {len(problems)} error lines or tracebacks, {len(unexpected)} unexpected")
        for problem in problems:  # each with the injected fault that explains it, for the report
            kinds = sorted(
                k for k in chaos.faults if not unexpected_problems([problem], EXPECTED_PROBLEMS.get(k, ()))
            )
            chaos.log(f"  explained by {' or '.join(kinds) or 'nothing'}: {problem[:300]}")
        assert not unexpected, f"errors no injected fault explains (seed {SEED}):\n" + "\n".join(
            unexpected[:30]
        )
        passed = True
    finally:
        for connector in chaos.connectors:
            connector.follower.stop()
        recovery = {k: f"max {max(v):.0f}s" for k, v in chaos.recovery.items()}
        chaos.log(
            f"faults injected: {dict(chaos.faults)}; recovery times: {recovery}; mirror tasks restarted "
            f"after librdkafka hung: {chaos.hang_restarts}"
        )
        for connector in chaos.connectors:
            for reseek in getattr(connector.follower, "reseeks", []):
                chaos.log(f"the soak's own reader of {connector.follower.topic} stopped fetching; {reseek}")
        if not passed and worker.proc is not None and worker.proc.poll() is None:
            chaos.dump_state(artifacts, kafka3)
        if worker.log_path.exists():
            shutil.copy(worker.log_path, artifacts / "worker.log")
        if not passed:
            for broker in (100, *kafka3.broker_ids()):
                with contextlib.suppress(OSError):
                    shutil.copy(kafka3.log_file(broker), artifacts / f"kafka-node-{broker}.log")
                with contextlib.suppress(OSError):  # the thread dumps of `dump_state`
                    stdout = kafka3.log_file(broker).with_name("stdout.log")
                    shutil.copy(stdout, artifacts / f"kafka-node-{broker}.stdout.log")
                # the source and mirror topics' segments, for kafka-dump-log.sh (producer ids, epochs,
                # sequences and transaction markers around an anomaly)
                for connector in (*sources, *mirrors):
                    topic = connector.follower.topic
                    for partition in kafka3.data_dir(broker).glob(f"{topic}-*"):
                        with contextlib.suppress(OSError):
                            shutil.copytree(partition, artifacts / "data" / f"node-{broker}" / partition.name)
