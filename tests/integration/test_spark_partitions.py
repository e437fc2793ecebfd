"""Network partitions between a Spark executor host and the rest: the broker, the eosconnect worker
with its Spark driver, the Spark master and two Spark workers each on a host of its own
(tests/support/netns.py, tests/support/spark_standalone.py), exactly-once source tasks running in
the executors. The test process reads the output with read_committed all along; at the end the
connector is stopped and the topic checked against the committed source offsets: every sequence
number once, nothing missing.

Spark's own timeouts are short here (`spark.network.timeout` 30 s, executor heartbeats every 3 s) so
that an executor cut off from its driver is given up within the test. `make test-long` cuts for
longer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from eosconnect.cluster.herder_api import no_leader_now
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.tools.worker_process import WorkerProcess
from support.chaos import (
    SequenceFollower,
    Timeline,
    committed_offsets,
    endless_sequence,
    holds_exactly_the_committed,
)
from support.netns import Cut, Host, Network, netns_available
from support.spark_standalone import SparkWorker, StandaloneCluster, descendants, unshare_available
from support.workers import LONG_TESTS, create_topics, wait_running, worker_settings

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.skipif(netns_available() is not None, reason=str(netns_available())),
    pytest.mark.skipif(not unshare_available(), reason="needs mount namespaces (unshare -m), e.g. root"),
]

TASKS = 2
RATE = 100
TRANSACTION_TIMEOUT_MS = 10_000
#: How long an executor host stays cut off from the broker: more than the tasks' transaction timeout.
BROKER_CUT_S = 150.0 if LONG_TESTS else 30.0
#: How long an executor host stays cut off from the driver at least: past a cut-off task's orphan
#: timeout (60 s, cluster/task_channel.py) in the long form; the short form heals once the
#: replacements commit.
DRIVER_CUT_S = 150.0 if LONG_TESTS else 0.0
#: What the tasks may take to commit again: Spark giving up on the executor (30 s), starting the
#: tasks elsewhere, their producers fencing the old instances, on a loaded machine.
RECOVERY_S = 150.0


@dataclass(frozen=True)
class SparkSite:
    network: Network
    kafka_host: Host
    driver_host: Host
    cluster: LocalKafkaCluster
    spark: StandaloneCluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkSite]:
    with Network() as network:
        kafka_host = network.add_host("kafka")
        driver_host = network.add_host("driver")
        master_host = network.add_host("master")
        executor_hosts = [network.add_host(f"exec{i}") for i in (1, 2)]
        network.attach_test_process()
        cluster = LocalKafkaCluster(
            tmp_path_factory.mktemp("kafka-spark-split"),
            tie_to_parent=True,
            host=kafka_host.address,
            launcher=kafka_host.launcher(),
        )
        spark = StandaloneCluster(tmp_path_factory.mktemp("spark-split"), master_host=master_host)
        try:
            cluster.start()
            spark.start(cores=2, hosts=executor_hosts)
            yield SparkSite(network, kafka_host, driver_host, cluster, spark)
        finally:
            spark.stop()
            cluster.stop()


@pytest.fixture(scope="module")
def worker(site: SparkSite, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """The eosconnect worker on the driver's host, its tasks in the cluster's executors."""
    props = worker_settings(
        site.bootstrap,
        f"sparksplit-{uuid.uuid4().hex[:8]}",
        **{
            "listeners": f"http://{site.driver_host.address}:0",
            "spark.master": site.spark.url,
            "spark.executor.memory": "768m",
            "spark.network.timeout": "30s",
            "spark.network.timeoutInterval": "5s",  # how often the driver checks: at most the timeout
            "spark.executor.heartbeatInterval": "3s",
            "task.heartbeat.timeout.ms": "4000",
            "producer.transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS),
        },
    )
    process = WorkerProcess(
        props, tmp_path_factory.mktemp("sparksplit-worker"), launcher=tuple(site.driver_host.launcher())
    )
    try:
        yield process.start(timeout=300)
    finally:
        site.network.heal()
        process.stop(timeout=30)


@dataclass
class Running:
    """A connector of `TASKS` tasks committing, its follower, and where each task runs."""

    topic: str
    follower: SequenceFollower
    phase: Timeline
    pids: dict[str, int]
    victim: SparkWorker

    @property
    def victim_host(self) -> Host:
        assert self.victim.host is not None, "every Spark worker of the site runs on a host of its own"
        return self.victim.host

    def on_victim(self) -> list[int]:
        """The tasks whose Python worker runs below the victim's Spark worker."""
        below = set(descendants(self.victim.proc.pid))
        return sorted(int(name.rsplit("-", 1)[1]) for name, pid in self.pids.items() if pid in below)


def task_pids(worker: WorkerProcess, connector: str) -> dict[str, int]:
    """Task instance -> the pid of the Python worker it reports from (signed /internal/tasks)."""
    runtimes = worker.request("GET", "/internal/tasks").json()
    return {name: info["pid"] for name, info in runtimes.items() if name.startswith(f"{connector}-")}


def running_connector(site: SparkSite, worker: WorkerProcess) -> Running:
    topic = f"sparksplit-{uuid.uuid4().hex[:8]}"
    create_topics(site.bootstrap, (topic, TASKS))
    body = {"name": topic, "config": endless_sequence(topic, TASKS, RATE)}

    def create() -> httpx.Response | None:
        # The first connector waits for the Spark application's executors: minutes on a loaded
        # machine, more than WorkerProcess.request's 60 s.
        response = httpx.post(f"{worker.url}/connectors", json=body, timeout=600)
        return None if no_leader_now(response.status_code, response.text) else response

    created = worker.wait_for(create, 300, "a leader to take the connector")
    assert created.status_code == 201, created.text
    wait_running(worker, topic, TASKS, timeout=300)
    follower = SequenceFollower(site.bootstrap, topic, TASKS).start()
    follower.wait_for_progress(range(TASKS), 200, 120, "before the partition")
    pids = task_pids(worker, topic)
    victim = max(site.spark.workers, key=lambda w: len(set(pids.values()) & set(descendants(w.proc.pid))))
    running = Running(topic, follower, Timeline(follower), pids, victim)
    assert running.on_victim(), f"no task runs in a Spark worker: {pids}"
    return running


def stopped_exactly_once(site: SparkSite, worker: WorkerProcess, running: Running) -> None:
    worker.stop_connector(running.topic, timeout=120)
    committed = committed_offsets(worker, running.topic)
    seen = holds_exactly_the_committed(site.bootstrap, running.topic, running.follower, committed)
    running.phase(f"stopped with committed offsets {committed}; verified {seen} records")


def test_an_executor_host_cut_off_from_the_broker_commits_again_after_the_heal(
    site: SparkSite, worker: WorkerProcess
) -> None:
    """The executor host running the most tasks loses the broker (both ways, silently), not its
    driver: its tasks keep reporting to the worker, their transactions cannot complete and abort on
    the coordinator's timeout; the tasks elsewhere commit on. After the heal the cut-off tasks commit
    again from their committed offsets."""
    running = running_connector(site, worker)
    follower, phase = running.follower, running.phase
    try:
        cut_off = running.on_victim()
        elsewhere = [t for t in range(TASKS) if t not in cut_off]
        cut_at = follower.highest()
        phase.restart()
        site.network.cut(running.victim_host, site.kafka_host, Cut.BLACKHOLE)
        phase(f"cut {running.victim.name} (tasks {cut_off}) off from the broker")
        if elsewhere:
            follower.wait_for_progress(elsewhere, 100, 60, "on the other executor", since=cut_at)
            phase(f"tasks {elsewhere} commit on")
        time.sleep(max(0.0, BROKER_CUT_S - (time.monotonic() - phase.began)))
        phase(f"the worker shows the tasks {worker.task_states(running.topic)}")

        healed_at = follower.highest()
        site.network.heal()
        phase.restart()
        phase("healed")
        took = follower.wait_for_progress(range(TASKS), 100, RECOVERY_S, "after the heal", since=healed_at)
        phase(f"every task commits again: recovered in {took:.1f}s")
        wait_running(worker, running.topic, TASKS, timeout=60)
        stopped_exactly_once(site, worker, running)
    finally:
        follower.stop()


def test_an_executor_host_cut_off_from_the_driver_is_replaced_and_its_tasks_commit_no_more(
    site: SparkSite, worker: WorkerProcess
) -> None:
    """The executor host running the most tasks loses its driver and the worker (both ways,
    silently), not the broker: its tasks write on for a while, unheard. The leader shows them not
    RUNNING once silent; Spark gives the executor up and runs the tasks on the other one, whose
    producers fence the old instances (KIP-618), so an old instance's commit after its replacement
    started is refused by the broker; the old ones stop on their own once they have heard from no
    worker for their orphan timeout. The output is exactly once."""
    running = running_connector(site, worker)
    follower, phase = running.follower, running.phase
    try:
        cut_off = running.on_victim()
        phase.restart()
        site.network.cut(running.victim_host, site.driver_host, Cut.BLACKHOLE)
        phase(f"cut {running.victim.name} (tasks {cut_off}) off from the driver")
        worker.wait_for(
            lambda: all(worker.task_states(running.topic)[t] != "RUNNING" for t in cut_off),
            30,
            "the cut-off tasks shown not RUNNING",
        )
        phase(f"the worker shows the tasks {worker.task_states(running.topic)}")

        def replaced() -> bool:
            pids = task_pids(worker, running.topic)
            below = set(descendants(running.victim.proc.pid))
            return len(pids) == TASKS and not below & set(pids.values())

        worker.wait_for(replaced, RECOVERY_S, "every task running outside the cut-off executor")
        # The old instances reach the broker and may have committed until the replacements fenced
        # them: what counts is that the replacements commit, and that nothing is doubled.
        replaced_at = follower.highest()
        phase(f"tasks {cut_off} run in the other executor")
        took = follower.wait_for_progress(
            range(TASKS), 100, RECOVERY_S, "after the replacement", since=replaced_at
        )
        phase(f"the replacements commit: {took:.1f}s after they reported")
        wait_running(worker, running.topic, TASKS, timeout=60)
        time.sleep(max(0.0, DRIVER_CUT_S - (time.monotonic() - phase.began)))

        healed_at = follower.highest()
        site.network.heal()
        phase.restart()
        phase("healed")
        follower.wait_for_progress(range(TASKS), 100, 60, "after the heal", since=healed_at)
        assert replaced(), (
            f"a task runs in the once cut-off executor again: {task_pids(worker, running.topic)}"
        )
        stopped_exactly_once(site, worker, running)
    finally:
        follower.stop()
