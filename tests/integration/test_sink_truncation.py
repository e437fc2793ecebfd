"""KIP-320 on real brokers: an unclean leader election truncates records a sink task committed past.

Topic on brokers 1 (leader L) and 2 (follower F), `min.insync.replicas=1`, topic-level unclean
leader election. Batch A is on both; F stops; batch B is only on L; two sink connectors (one per
`log.truncation.policy`) consume A+B and commit offset 15 with B's leader epoch. L dies, F becomes
leader without B, batch C (longer than B, so offset 15 is valid again: the silent-skip case) is
written, L comes back and truncates B. Restarted from their committed offsets the sinks must not
read on at offset 15 as if nothing happened.

The sink tasks run in-process (`SinkTaskRunner`, the code a Spark task runs) so the test stays
well under two minutes including the cluster's start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    ElectionType,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.runtime.config import SinkConnectorConfig, WorkerConfig
from eosconnect.runtime.control import Directive
from eosconnect.runtime.sink_task import SinkTaskRunner
from eosconnect.runtime.task import TASK_CLASS_KEY, TaskOutcome, TaskSpec, TaskState

pytestmark = [pytest.mark.kafka, pytest.mark.cluster3]

LEADER, FOLLOWER = 1, 2
A = [f"A{i}" for i in range(10)]
B = [f"B{i}" for i in range(5)]
C = [f"C{i}" for i in range(8)]


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    pytest.fail(f"timed out after {timeout}s waiting for {what}")


def leader_and_isr(admin: AdminClient, topic: str) -> tuple[int | None, list[int]]:
    partition = admin.list_topics(topic, timeout=5).topics[topic].partitions.get(0)
    return (None, []) if partition is None else (partition.leader, sorted(partition.isrs))


def produce(bootstrap: str, topic: str, values: list[str], acks: str) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "enable.idempotence": False})
    failures: list[str] = []
    for v in values:
        producer.produce(
            topic, v.encode(), partition=0, on_delivery=lambda e, _m: e and failures.append(str(e))
        )
    assert producer.flush(30) == 0 and not failures, failures


def committed(bootstrap: str, group: str) -> TopicPartition | None:
    """The group's committed position on partition 0 (None while the coordinator moves or loads)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    except KafkaException:
        return None
    return next((tp for tp in result.topic_partitions if tp.offset >= 0), None)


@dataclass
class StopControl:
    """`TaskControl` for an in-process runner: RUN until `stop()`."""

    stopped: threading.Event = field(default_factory=threading.Event)

    def directive(self) -> Directive:
        return Directive.STOP if self.stopped.is_set() else Directive.RUN


@pytest.fixture
def sink_runs() -> Iterator[list[SinkRun]]:
    """Every `SinkRun` a test starts is stopped before the cluster goes: a consumer thread left
    running into interpreter shutdown can crash the process."""
    runs: list[SinkRun] = []
    yield runs
    for run in runs:
        if run.thread is not None and run.thread.is_alive():
            run.control.stopped.set()
            run.thread.join(30)


@dataclass
class SinkRun:
    """One `SinkTaskRunner` of a FileStreamSink connector on a thread."""

    name: str
    output: Path
    control: StopControl = field(default_factory=StopControl)
    outcome: TaskOutcome | None = None
    thread: threading.Thread | None = None

    def start(self, bootstrap: str, topic: str, policy: str) -> SinkRun:
        connector = {
            "name": self.name,
            "connector.class": "FileStreamSink",
            "topics": topic,
            "file": str(self.output),
            "key.converter": "StringConverter",
            "value.converter": "StringConverter",
            "log.truncation.policy": policy,
            "consumer.override.session.timeout.ms": "6000",
        }
        worker = {"bootstrap.servers": bootstrap, "offset.flush.interval.ms": "300"}
        task_config = {**connector, TASK_CLASS_KEY: "eosconnect.connectors.file_stream.FileStreamSinkTask"}
        spec = TaskSpec(self.name, 0, task_config, connector, worker, self.control)
        runner = SinkTaskRunner(spec, WorkerConfig.parse(worker), SinkConnectorConfig.parse(connector))
        self.thread = threading.Thread(target=lambda: setattr(self, "outcome", runner.run()), daemon=True)
        self.thread.start()
        return self

    def lines(self) -> list[str]:
        return self.output.read_text().splitlines() if self.output.exists() else []

    def stop(self, timeout: float = 30) -> TaskOutcome:
        self.control.stopped.set()
        return self.wait(timeout)

    def wait(self, timeout: float = 30) -> TaskOutcome:
        assert self.thread is not None
        self.thread.join(timeout)
        assert self.outcome is not None, f"{self.name} did not end within {timeout}s"
        return self.outcome


def truncate_under_committed_sinks(
    kafka3: LocalKafkaCluster, topic: str, runs: dict[str, SinkRun], policies: dict[str, str]
) -> None:
    """A on L+F, B only on L, the sinks commit past B, then L dies and F leads without B."""
    bootstrap = kafka3.bootstrap_servers
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[LEADER, FOLLOWER]], config=config)])[
        topic
    ].result(30)
    wait_for(lambda: leader_and_isr(admin, topic) == (LEADER, [LEADER, FOLLOWER]), 30, "the topic's ISR")
    produce(bootstrap, topic, A, acks="all")

    kafka3.stop_node(FOLLOWER)
    wait_for(lambda: leader_and_isr(admin, topic) == (LEADER, [LEADER]), 30, "the ISR to shrink to L")
    produce(bootstrap, topic, B, acks="1")

    for key, run in runs.items():
        run.start(bootstrap, topic, policies[key])
        group = f"connect-{run.name}"
        wait_for(
            lambda g=group: (c := committed(bootstrap, g)) is not None and c.offset == 15,
            60,
            f"{group} at 15",
        )
        assert run.stop().state is TaskState.STOPPED
        assert run.lines() == A + B
        position = committed(bootstrap, group)
        assert position is not None and position.leader_epoch is not None and position.leader_epoch >= 0, (
            f"the committed offset must carry B's leader epoch: {position}"
        )

    kafka3.kill_node(LEADER)
    kafka3.start_node(FOLLOWER)
    try:  # the controller elects F by itself (topic-level unclean election) within seconds
        wait_for(lambda: leader_and_isr(admin, topic)[0] == FOLLOWER, 15, "an unclean election of F")
    except pytest.fail.Exception:
        admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition(topic, 0)]).result(30)
        wait_for(lambda: leader_and_isr(admin, topic)[0] == FOLLOWER, 15, "F elected by elect_leaders")
    produce(bootstrap, topic, C, acks="all")  # ISR is {F}: C lands at offsets 10..17, epoch bumped
    kafka3.start_node(LEADER)
    wait_for(
        lambda: leader_and_isr(admin, topic) == (FOLLOWER, [LEADER, FOLLOWER]), 60, "L to truncate, rejoin"
    )


def test_truncation_below_committed_offsets_is_never_silent(
    kafka3: LocalKafkaCluster, tmp_path: Path, caplog: pytest.LogCaptureFixture, sink_runs: list[SinkRun]
):
    started = time.monotonic()
    suffix = f"{int(time.time() * 1000) % 10**8}"
    topic = f"truncated-{suffix}"
    runs = {
        "fail": SinkRun(f"trunc-fail-{suffix}", tmp_path / "fail.txt"),
        "continue": SinkRun(f"trunc-continue-{suffix}", tmp_path / "continue.txt"),
    }
    sink_runs.extend(runs.values())
    policies = {"fail": "fail", "continue": "continue-from-divergence"}
    truncate_under_committed_sinks(kafka3, topic, runs, policies)
    bootstrap = kafka3.bootstrap_servers

    # fail: the task ends FAILED naming the partition, both offsets and the REST fix; nothing put.
    failing = SinkRun(runs["fail"].name, runs["fail"].output)
    sink_runs.append(failing.start(bootstrap, topic, policies["fail"]))
    outcome = failing.wait(60)
    assert outcome.state is TaskState.FAILED, outcome
    trace = outcome.trace or ""
    assert f"log truncation detected on topic '{topic}' partition 0" in trace, trace
    assert "the committed position is offset 15 (leader epoch" in trace, trace
    assert "the log diverges at offset 10" in trace, trace
    name = runs["fail"].name
    assert f"PUT /connectors/{name}/stop" in trace and f"PATCH /connectors/{name}/offsets" in trace
    assert f"DELETE /connectors/{name}/offsets" in trace
    assert outcome.metrics["sink-log-truncations-total"] == 1
    assert failing.lines() == A + B, "with policy fail nothing after the truncation is delivered"
    position = committed(bootstrap, f"connect-{name}")
    assert position is not None and position.offset == 15, "a failed task leaves the offsets alone"

    # continue-from-divergence: a WARNING, a count, and C delivered from the divergence offset.
    caplog.set_level(logging.WARNING, logger="eosconnect.runtime.sink_task")
    resumed = SinkRun(runs["continue"].name, runs["continue"].output).start(
        bootstrap, topic, policies["continue"]
    )
    group = f"connect-{resumed.name}"
    wait_for(lambda: len(resumed.lines()) >= len(A + B + C), 60, "batch C delivered")
    wait_for(
        lambda: (c := committed(bootstrap, group)) is not None and c.offset == 18, 30, "offset 18 committed"
    )
    outcome = resumed.stop()
    assert outcome.state is TaskState.STOPPED, outcome
    assert resumed.lines() == A + B + C, "C is delivered once, from the divergence offset 10"
    assert outcome.metrics["sink-log-truncations-total"] == 1
    warnings = [
        r.getMessage()
        for r in caplog.records
        if r.levelno == logging.WARNING and "log truncation detected" in r.getMessage()
    ]
    assert len(warnings) == 1, warnings
    assert f"[{resumed.name}-0]" in warnings[0] and f"topic '{topic}' partition 0" in warnings[0]
    assert "offset 15" in warnings[0] and "continuing from offset 10" in warnings[0]
    assert time.monotonic() - started < 110
