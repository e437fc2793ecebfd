"""KIP-320 on real brokers: an unclean leader election truncates records sink tasks consumed.

Each scenario has its own topic on brokers 1 (leader L) and 2 (follower F), with
`min.insync.replicas=1` and topic-level unclean leader election. Batch A (10 records) is on both;
F stops; batch B (5 records) is only on L. Sink connectors (RecordingSinkTask on Spark) consume A+B
and commit offset 15 with B's leader epoch. Then L dies, the controller elects F without B (a new
leader epoch), batch C (8 records, longer than B, so offset 15 exists again: the silent-skip case)
lands at offsets 10..17, and L comes back and truncates B away. All scenarios share this one
truncation (one bounce of the brokers for the module):

- restarted with `log.truncation.policy=fail`: the task fails naming the partition, the committed
  offset 15 and the divergence offset 10, and puts nothing;
- restarted with `continue-from-divergence`: it puts C from offset 10 on, none skipped, counts the
  truncation and logs a warning;
- running through the leader change (one statically assigned, one a group member): librdkafka
  checks the running consumer's position after the leader change and the same policy (continue)
  applies.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, ElectionType, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.cluster.jobs import ConnectorJob
from eosconnect.devkafka import LocalKafkaCluster
from support.coordinators import coordinator_partition

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.cluster3]

log = logging.getLogger(__name__)

RECORDING = "support.connectors.RecordingSinkConnector"
LEADER, FOLLOWER = 1, 2
A = [f"A{i}" for i in range(10)]
B = [f"B{i}" for i in range(5)]
C = [f"C{i}" for i in range(8)]


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.5)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def leader_and_isr(admin: AdminClient, topic: str) -> tuple[int | None, list[int]]:
    try:
        partition = admin.list_topics(topic, timeout=5).topics[topic].partitions.get(0)
    except KafkaException:
        return None, []
    return (None, []) if partition is None else (partition.leader, sorted(partition.isrs))


def produce(bootstrap: str, topic: str, values: list[str], acks: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False})
    failures: list[str] = []
    for v in values:
        producer.produce(
            topic, v.encode(), partition=0, on_delivery=lambda e, _m: e and failures.append(str(e))
        )
    assert producer.flush(30) == 0 and not failures, failures


def committed(bootstrap: str, group: str, topic: str) -> KafkaTopicPartition | None:
    """The group's committed position on partition 0 of `topic`, with its leader epoch (None while
    there is none or the coordinator moves or loads).

    A consumer that never subscribes asks, not `AdminClient.list_consumer_group_offsets`: with
    librdkafka 2.16 that crashed the process (NULL group in rd_kafka_handle_OffsetFetch) when the
    coordinator answered with an error while the brokers bounced."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "log_level": 0})
    try:
        [position] = consumer.committed([KafkaTopicPartition(topic, 0)], timeout=10)
    except KafkaException:
        return None
    finally:
        consumer.close()
    return position if position.offset >= 0 else None


def events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def put_records(path: Path) -> list[tuple[int, str]]:
    """(offset, value) of every record `put`, in order."""
    return [(r[2], r[3]) for e in events(path) if e["call"] == "put" for r in e["records"]]


def truncation_warnings(path: Path) -> list[str]:
    return [
        e["message"]
        for e in events(path)
        if e["call"] == "log" and e["level"] == "WARNING" and "log truncation detected" in e["message"]
    ]


@dataclass
class Sink:
    """One sink connector of the module (its own topic and group `connect-<name>`) and its runs."""

    name: str
    topic: str
    policy: str
    static: bool
    spark: Any
    bootstrap: str
    workdir: Path

    @property
    def group(self) -> str:
        return f"connect-{self.name}"

    def start(self, run: str) -> tuple[ConnectorJob, Path]:
        """A Spark job running the connector's task; `run` names its call log."""
        calls = self.workdir / f"{self.name}-{run}.jsonl"
        connector = {
            "name": self.name,
            "connector.class": RECORDING,
            "tasks.max": "1",
            "topics": self.topic,
            "key.converter": "StringConverter",
            "value.converter": "StringConverter",
            "log.truncation.policy": self.policy,
            # long enough that a loaded machine does not make the group rebalance during the bounce
            "consumer.override.session.timeout.ms": "30000",
            "record.file": str(calls),
            "record.hold.back": "0",  # commit what was put, with its leader epoch
            "record.warnings": "true",
        }
        if self.static:
            connector["task.assigned.partitions"] = f"{self.topic}:0"
        worker = {
            "bootstrap.servers": self.bootstrap,
            "group.id": f"worker-{self.name}",
            "offset.storage.topic": f"offsets-{self.name}",
            "offset.storage.partitions": "1",
            "offset.storage.replication.factor": "1",
            "exactly.once.source.support": "disabled",
            "offset.flush.interval.ms": "300",
        }
        job = ConnectorJob(self.spark, connector, worker, self.workdir / f"control-{self.name}-{run}")
        return job.start(), calls


class Phases:
    """Logs how long each step of the set-up took (the module's time goes there)."""

    def __init__(self) -> None:
        self.last = time.monotonic()

    def __call__(self, what: str) -> None:
        now = time.monotonic()
        log.info("%s after %.1fs", what, now - self.last)
        self.last = now


@dataclass
class Truncated:
    """The module's state after the truncation: the sinks, and the tasks that ran through it."""

    bootstrap: str
    sinks: dict[str, Sink]
    running: dict[str, tuple[ConnectorJob, Path]]
    jobs: list[ConnectorJob]

    def start(self, key: str, run: str) -> tuple[ConnectorJob, Path]:
        job, calls = self.sinks[key].start(run)
        self.jobs.append(job)
        return job, calls


def stop(job: ConnectorJob) -> dict[str, Any]:
    [outcome] = job.stop(30)
    return outcome


def name_coordinated_by(admin: AdminClient, broker: int, base: str) -> str:
    """A connector name whose group `connect-<name>` has `broker` as its coordinator, preferred
    and current, so that the group stays put while the other brokers are stopped and killed."""
    wait_for(
        lambda: bool(ps := offsets_partitions(admin)) and all(p.leader >= 0 for p in ps.values()),
        30,
        "__consumer_offsets leaders",
    )
    partitions = offsets_partitions(admin)
    for i in range(1000):
        name = f"{base}{i}"
        p = partitions[coordinator_partition(f"connect-{name}", len(partitions))]
        if p.leader == broker and p.replicas[0] == broker:
            return name
    raise AssertionError(f"no __consumer_offsets partition is led by broker {broker}: {partitions}")


def offsets_partitions(admin: AdminClient) -> dict[int, Any]:
    try:
        topic = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
    except KafkaException:
        return {}
    return dict(topic.partitions)


@pytest.fixture(scope="module")
def truncated(
    kafka3: LocalKafkaCluster, spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Truncated]:
    """A on L+F, B only on L, sinks commit past B (one keeps running), L dies, F leads without B, C."""
    bootstrap = kafka3.bootstrap_servers
    workdir = tmp_path_factory.mktemp("truncation")
    suffix = f"{int(time.time() * 1000) % 10**8}"
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    committed(bootstrap, "warm-up", "warm-up")  # creates __consumer_offsets while all brokers run
    names = {key: f"trunc-{key}-{suffix}" for key in ("fail", "continue", "running")}
    names["running-group"] = name_coordinated_by(admin, 3, f"trunc-running-group-{suffix}-")
    policies = {"fail": "fail"}
    sinks = {
        key: Sink(
            name,
            f"truncated-{key}-{suffix}",
            policies.get(key, "continue-from-divergence"),
            key == "running",  # statically assigned, like the mirror sink's tasks
            spark,
            bootstrap,
            workdir,
        )
        for key, name in names.items()
    }
    topics = [s.topic for s in sinks.values()]
    config = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    for future in admin.create_topics(
        [NewTopic(t, 1, replica_assignment=[[LEADER, FOLLOWER]], config=config) for t in topics]
    ).values():
        future.result(30)
    for t in topics:
        wait_for(lambda t=t: leader_and_isr(admin, t) == (LEADER, [LEADER, FOLLOWER]), 30, f"{t}'s ISR")
        produce(bootstrap, t, A, acks="all")

    phase = Phases()
    kafka3.stop_node(FOLLOWER)
    phase("A produced, F stopped")
    for t in topics:
        wait_for(lambda t=t: leader_and_isr(admin, t) == (LEADER, [LEADER]), 30, f"{t}'s ISR to shrink to L")
        produce(bootstrap, t, B, acks="1")

    jobs: list[ConnectorJob] = []
    phase("B produced")
    started = {key: sink.start("before") for key, sink in sinks.items()}
    jobs.extend(job for job, _ in started.values())
    for key, sink in sinks.items():
        position = None

        def at_15(sink: Sink = sink) -> bool:
            nonlocal position
            position = committed(bootstrap, sink.group, sink.topic)
            return position is not None and position.offset == 15

        wait_for(at_15, 90, f"{sink.group} to commit offset 15")
        assert position is not None and position.leader_epoch is not None and position.leader_epoch >= 0, (
            f"the committed offset must carry B's leader epoch: {position}"
        )
        assert put_records(started[key][1]) == list(enumerate(A + B))
    for key in ("fail", "continue"):
        assert stop(started[key][0])["state"] == "STOPPED"

    phase("sinks at offset 15")
    kafka3.kill_node(LEADER)
    kafka3.start_node(FOLLOWER)
    phase("L killed, F started")
    for t in topics:  # the controller elects F by itself (topic-level unclean election)
        try:
            wait_for(lambda t=t: leader_and_isr(admin, t)[0] == FOLLOWER, 20, f"an unclean election on {t}")
        except pytest.fail.Exception:
            admin.elect_leaders(ElectionType.UNCLEAN, [KafkaTopicPartition(t, 0)]).result(30)
            wait_for(lambda t=t: leader_and_isr(admin, t)[0] == FOLLOWER, 20, f"F elected on {t}")
        produce(bootstrap, t, C, acks="all")  # ISR is {F}: C lands at offsets 10..17, new epoch
    phase("F elected, C produced")
    kafka3.start_node(LEADER)
    for t in topics:
        wait_for(
            lambda t=t: leader_and_isr(admin, t) == (FOLLOWER, [LEADER, FOLLOWER]), 60, f"L to rejoin {t}"
        )
    phase("L back in the ISR: B truncated")
    yield Truncated(bootstrap, sinks, {key: started[key] for key in ("running", "running-group")}, jobs)
    for job in jobs:
        if job.running():
            job.stop(10)


def test_fail_policy_fails_the_restarted_task_naming_partition_and_offsets(truncated: Truncated):
    sink = truncated.sinks["fail"]
    job, calls = truncated.start("fail", "after")
    [outcome] = job.wait(90)
    assert outcome["state"] == "FAILED", outcome
    trace = outcome["trace"] or ""
    assert f"log truncation detected on topic '{sink.topic}' partition 0" in trace, trace
    assert "the committed position is offset 15 (leader epoch 0)" in trace, trace
    assert "the log diverges at offset 10" in trace, trace
    assert f"PUT /connectors/{sink.name}/stop" in trace and f"PATCH /connectors/{sink.name}/offsets" in trace
    assert "continue-from-divergence" in trace
    assert outcome["metrics"]["sink-log-truncations-total"] == 1
    assert put_records(calls) == [], "with policy fail nothing after the truncation is put"
    position = committed(truncated.bootstrap, sink.group, sink.topic)
    assert position is not None and position.offset == 15, "a failed task leaves the offsets alone"


def wait_committed(truncated: Truncated, sink, offset: int) -> None:  # type: ignore[no-untyped-def]
    """Wait until the sink's group has committed `offset` on its partition."""

    def done() -> bool:
        position = committed(truncated.bootstrap, sink.group, sink.topic)
        return position is not None and position.offset == offset

    wait_for(
        done,
        30,
        f"offset {offset} committed",
    )


def test_continue_policy_puts_the_new_leaders_records_from_the_divergence_offset(truncated: Truncated):
    sink = truncated.sinks["continue"]
    job, calls = truncated.start("continue", "after")
    wait_for(lambda: len(put_records(calls)) >= len(C), 90, "batch C put")
    wait_committed(truncated, sink, 18)
    outcome = stop(job)
    assert outcome["state"] == "STOPPED", outcome
    assert put_records(calls) == [(10 + i, c) for i, c in enumerate(C)], "C from offset 10, none skipped"
    assert outcome["metrics"]["sink-log-truncations-total"] == 1
    [warning] = truncation_warnings(calls)
    assert f"[{sink.name}-0]" in warning and f"topic '{sink.topic}' partition 0" in warning, warning
    assert "committed position is offset 15" in warning and "continuing from offset 10" in warning, warning
    assert "5 records (offsets 10..14)" in warning, warning


@pytest.mark.parametrize("key", ["running", "running-group"])
def test_a_running_task_is_checked_after_the_leader_change(truncated: Truncated, key: str):
    """librdkafka checks a running consumer's position when the leader epoch changes; the runtime
    restarts the partition at the divergence: a static assignment by replacing that partition, an
    (eager) group member by assigning all its partitions again."""
    sink = truncated.sinks[key]
    job, calls = truncated.running[key]
    expected = list(enumerate(A + B)) + [(10 + i, c) for i, c in enumerate(C)]
    wait_for(lambda: len(put_records(calls)) >= len(expected), 60, "batch C put by the running task")
    wait_committed(truncated, sink, 18)
    outcome = stop(job)
    assert outcome["state"] == "STOPPED", outcome
    assert put_records(calls) == expected, "C from offset 10 after A and B, none skipped"
    assert outcome["metrics"]["sink-log-truncations-total"] == 1
    [warning] = truncation_warnings(calls)
    assert "continuing from offset 10" in warning, warning
    if key == "running":  # no group: only librdkafka's check of the running consumer can find it
        assert "consumed position is offset 15" in warning, warning
    else:  # a rebalance during the bounce (seen under load) finds it in the committed position first
        assert "consumed position is offset 15" in warning or "committed position is offset 15" in warning
