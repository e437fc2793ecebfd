"""Network partitions inside the Kafka cluster under running exactly-once source tasks: three brokers
and their separate controller each on a host of its own (tests/support/netns.py), an eosconnect
worker on another, the test process reading the output with read_committed all along. Every topic
has three replicas and `min.insync.replicas=2`; both partitions the tasks write to are led by
broker 1, the broker the scenarios cut off. At the end the connector is stopped and the topic is
checked against the committed source offsets: every sequence number once, nothing missing.

`make test-long` cuts for longer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from confluent_kafka import Message
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.devkafka import CONTROLLER_NODE_ID, LocalKafkaCluster, NodePlacement
from eosconnect.tools.worker_process import WorkerProcess
from support.chaos import (
    SequenceFollower,
    Timeline,
    committed_offsets,
    data_leaders,
    endless_sequence,
    holds_exactly_the_committed,
    wait_fully_replicated,
)
from support.netns import Cut, Host, Network, netns_available
from support.workers import LONG_TESTS, wait_running, worker_settings

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.skipif(netns_available() is not None, reason=str(netns_available())),
]

TASKS = 2
RATE = 100
#: The broker the scenarios cut off: it leads every partition the tasks write to.
VICTIM = 1
TRANSACTION_TIMEOUT_MS = 10_000
#: How long broker 1 stays cut off from the rest of the cluster at least: the short form heals as soon
#: as the tasks commit on the new leaders.
ISOLATION_S = 150.0 if LONG_TESTS else 0.0
#: How long the worker hears nothing from broker 1: more than the tasks' transaction timeout.
ONE_WAY_S = 120.0 if LONG_TESTS else 20.0
#: What the tasks may take to commit again on the new leaders: the broker session, a produce to the
#: cut-off leader timing out (30 s), the aborted transaction and the producer's new metadata, on a
#: loaded machine.
RECOVERY_S = 120.0


@dataclass(frozen=True)
class Site:
    """The partitionable Kafka cluster: a host per node, the worker's host, the cluster."""

    network: Network
    nodes: dict[int, Host]
    worker_host: Host
    test_host: Host
    cluster: LocalKafkaCluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def others(self, node_id: int) -> list[Host]:
        """Every other node of the cluster (the controller and the other brokers)."""
        return [host for other, host in self.nodes.items() if other != node_id]

    def survivor_view(self) -> str:
        """A bootstrap of broker 2 alone: the cluster as its majority sees it (the cut-off broker
        keeps answering metadata from before the cut)."""
        return self.cluster.broker_bootstrap(2)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with Network() as network:
        nodes = {CONTROLLER_NODE_ID: network.add_host("controller")}
        nodes.update({i: network.add_host(f"b{i}") for i in (1, 2, 3)})
        worker_host = network.add_host("w1")
        test_host = network.attach_test_process()
        cluster = LocalKafkaCluster(
            tmp_path_factory.mktemp("kafka-split"),
            brokers=3,
            extra_config={"min.insync.replicas": "2"},
            tie_to_parent=True,
            placement={i: NodePlacement(h.address, tuple(h.launcher())) for i, h in nodes.items()},
        )
        cluster.start(timeout=180)
        try:
            yield Site(network, nodes, worker_host, test_host, cluster)
        finally:
            cluster.stop()


def create_led_topics(site: Site, layouts: dict[str, tuple[list[list[int]], dict[str, str]]]) -> None:
    """Topic name -> (replicas of each partition, the preferred leader first; its config)."""
    admin = AdminClient({"bootstrap.servers": site.bootstrap, "log_level": 0})
    topics = [NewTopic(name, len(a), replica_assignment=a, config=c) for name, (a, c) in layouts.items()]
    for future in admin.create_topics(topics).values():
        future.result(30)


class EpochFollower(SequenceFollower):
    """A `SequenceFollower` that also keeps, per partition, the leader epochs (KIP-320) of the
    committed records in the order read, and notes any that goes back; and the create time of the
    first record of each epoch, when the tasks wrote to that leader first."""

    def __init__(self, site: Site, topic: str) -> None:
        # Fresh metadata every 2 s: the cut-off broker keeps serving this reader its old view.
        client = {"bootstrap.servers": site.bootstrap, "topic.metadata.refresh.interval.ms": "2000"}
        super().__init__(client, topic, TASKS)
        self.epochs: dict[int, list[int]] = {}
        #: (partition, leader epoch) -> the create time (ms) of its first committed record.
        self.first_created: dict[tuple[int, int], int] = {}

    def _note(self, message: Message) -> None:
        super()._note(message)
        epoch = message.leader_epoch()
        seen = self.epochs.setdefault(message.partition(), [])
        if epoch is not None and (not seen or seen[-1] != epoch):
            if seen and epoch < seen[-1]:
                self.anomalies.append(
                    f"partition {message.partition()}: leader epoch {epoch} after {seen[-1]}"
                )
            seen.append(epoch)
            self.first_created[(message.partition(), epoch)] = message.timestamp()[1]

    def latest_epochs(self) -> dict[int, int]:
        with self._lock:
            return {p: seen[-1] for p, seen in self.epochs.items()}

    def wrote_to_new_leaders_after(self, before: dict[int, int], since_ms: float) -> float:
        """Seconds from `since_ms` (wall clock) until every partition's first committed record of an
        epoch above `before`'s was created: when the tasks wrote to the new leaders (the latest)."""
        with self._lock:
            firsts = [
                min(ms for (p, epoch), ms in self.first_created.items() if p == partition and epoch > floor)
                for partition, floor in before.items()
            ]
        return (max(firsts) - since_ms) / 1000


@pytest.fixture(scope="module")
def worker(site: Site, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    """An `eosconnect worker` on host w1 whose internal topics (three replicas) are led by brokers 2
    and 3: the scenarios are about the data's leader. Each test heals the network at its end."""
    prefix = f"split-{uuid.uuid4().hex[:8]}"
    compact = {"cleanup.policy": "compact"}
    create_led_topics(
        site,
        {
            f"{prefix}-configs": ([[2, 3, 1]], compact),
            f"{prefix}-offsets": ([[3, 2, 1]], compact),
            f"{prefix}-status": ([[2, 3, 1]], compact),
        },
    )
    props = worker_settings(
        site.bootstrap,
        prefix,
        **{
            "listeners": f"http://{site.worker_host.address}:0",
            "config.storage.replication.factor": "3",
            "offset.storage.replication.factor": "3",
            "status.storage.replication.factor": "3",
            "producer.transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS),
        },
    )
    process = WorkerProcess(
        props, tmp_path_factory.mktemp("split-worker"), launcher=tuple(site.worker_host.launcher())
    )
    try:
        yield process.start(timeout=240)
    finally:
        site.network.heal()
        process.stop(timeout=30)


@pytest.fixture
def topic(site: Site, worker: WorkerProcess) -> Iterator[str]:
    """A data topic of `TASKS` partitions all led by `VICTIM`; the network healed at the end."""
    name = f"split-{uuid.uuid4().hex[:8]}"
    create_led_topics(site, {name: ([[VICTIM, 2, 3], [VICTIM, 3, 2]], {})})
    try:
        yield name
    finally:
        site.network.heal()


def running_and_committing(worker: WorkerProcess, topic: str, site: Site) -> tuple[EpochFollower, Timeline]:
    """Connector `topic` writing to `topic` and committing; its follower and timeline."""
    assert worker.create_connector(topic, endless_sequence(topic, TASKS, RATE)).status_code == 201
    wait_running(worker, topic, TASKS, timeout=180)
    follower = EpochFollower(site, topic).start()
    follower.wait_for_progress(range(TASKS), 200, 120, "before the partition")
    assert set(data_leaders(site.survivor_view(), topic).values()) == {VICTIM}
    return follower, Timeline(follower)


def stopped_exactly_once(worker: WorkerProcess, site: Site, follower: EpochFollower, phase: Timeline) -> None:
    worker.stop_connector(follower.topic, timeout=120)
    committed = committed_offsets(worker, follower.topic)
    seen = holds_exactly_the_committed(site.bootstrap, follower.topic, follower, committed)
    phase(f"stopped with committed offsets {committed}; verified {seen} records; epochs {follower.epochs}")


def test_a_leader_cut_off_from_the_controller_and_the_other_brokers_loses_its_partitions(
    site: Site, worker: WorkerProcess, topic: str
) -> None:
    """Broker 1 leads both data partitions and is cut off (both ways, silently) from the controller
    and the other brokers, not from the worker. The controller fences it after its broker session
    and moves its leaderships to the in-sync replicas with a new leader epoch; the cut-off broker,
    not knowing, still takes the tasks' produces but cannot get them replicated (its followers are
    gone, its ISR cannot shrink without the controller), so none is acknowledged and the open
    transactions abort. The tasks commit again on the new leaders, the records carry the new epochs;
    after the heal broker 1 truncates what it took alone and is back in sync."""
    process = worker
    follower, phase = running_and_committing(process, topic, site)
    try:
        before = follower.latest_epochs()
        cut_at, cut_wall_ms = follower.highest(), time.time() * 1000
        phase.restart()
        # The test's reader too: left with the cut-off broker, it read that broker's stale view
        # (nothing new) for a minute after the tasks had moved on.
        site.network.isolate(site.nodes[VICTIM], [*site.others(VICTIM), site.test_host], Cut.BLACKHOLE)
        phase(f"cut broker {VICTIM} off from the controller, the other brokers and the test's reader")
        process.wait_for(
            lambda: VICTIM not in data_leaders(site.survivor_view(), topic).values(),
            60,
            "the controller to move the data partitions' leaders",
        )
        phase(f"leaders moved: {data_leaders(site.survivor_view(), topic)}")
        took = follower.wait_for_progress(
            range(TASKS), 100, RECOVERY_S, "with broker 1 cut off", since=cut_at
        )
        moved = follower.latest_epochs()
        assert all(moved[p] > before[p] for p in range(TASKS)), (before, moved)
        wrote = follower.wrote_to_new_leaders_after(before, cut_wall_ms)
        phase(
            f"the tasks commit on the new leaders (epochs {before} -> {moved}): read {took:.1f}s after "
            f"the cut, written from {wrote:.1f}s (record create times)"
        )
        assert process.task_states(topic) == ["RUNNING"] * TASKS
        time.sleep(max(0.0, ISOLATION_S - (time.monotonic() - phase.began)))

        healed_at = follower.highest()
        site.network.heal()
        phase.restart()
        phase("healed")
        wait_fully_replicated(site.survivor_view(), 120)
        phase(f"broker {VICTIM} back in sync: every partition fully replicated")
        follower.wait_for_progress(range(TASKS), 100, 60, "after the heal", since=healed_at)
        stopped_exactly_once(process, site, follower, phase)
    finally:
        follower.stop()


def test_a_worker_whose_requests_reach_the_partitions_leader_but_not_the_answers_commits_after_the_heal(
    site: Site, worker: WorkerProcess, topic: str
) -> None:
    """One way, between the worker and broker 1 only: the worker's produces reach the leader of its
    partitions, which appends and replicates them, but the acknowledgements are lost; the cluster
    itself is whole, so no leader moves. No transaction can complete (a commit waits for the
    acknowledgements), the open ones abort on their timeout and what broker 1 appended stays
    uncommitted; after the heal the tasks commit again, from their committed offsets."""
    process = worker
    follower, phase = running_and_committing(process, topic, site)
    try:
        phase.restart()
        site.network.cut(site.nodes[VICTIM], site.worker_host, Cut.BLACKHOLE, one_way=True)
        phase(f"cut broker {VICTIM}'s answers to the worker")
        time.sleep(ONE_WAY_S)
        assert set(data_leaders(site.survivor_view(), topic).values()) == {VICTIM}
        phase(f"leaders unmoved; the worker shows its tasks {process.task_states(topic)}")

        healed_at = follower.highest()
        site.network.heal()
        phase.restart()
        phase("healed")
        took = follower.wait_for_progress(range(TASKS), 100, RECOVERY_S, "after the heal", since=healed_at)
        phase(f"the tasks commit again: recovered in {took:.1f}s")
        wait_running(process, topic, TASKS, timeout=60)
        stopped_exactly_once(process, site, follower, phase)
    finally:
        follower.stop()
