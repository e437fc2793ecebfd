"""Broker crashes under running exactly-once tasks (three brokers, every topic replicated 3x with
min.insync.replicas=2): source tasks ride out the loss of the broker that leads their data
partitions, keep committing, and the output stays exactly once after it comes back; the
exactly-once mirror sink survives a crash of its group's coordinator.

The soak (tests/soak/test_chaos.py, `make soak`) does this at random for minutes, with more kinds of
faults; this is its short, deterministic form for every `make test`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
import uuid

import pytest
from confluent_kafka import ElectionType, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.cluster.election import LeaderElection
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.runtime.task import TaskState
from eosconnect.storage.topic_reader import end_offsets
from eosconnect.storage.transactional_ids import task_transactional_id
from eosconnect.tools.verify import verify_sequence_topic
from eosconnect.worker_config import WorkerConfig
from support import fence_at_commit
from support.chaos import (
    SequenceFollower,
    create_replicated_topic,
    data_leaders,
    endless_sequence,
    group_coordinator,
    holds_exactly_the_committed,
    replicated_worker_settings,
    wait_fully_replicated,
)
from support.coordinators import coordinator_partition
from support.runtime_helpers import wait_until
from support.scripted_leader import source_task_thread

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.cluster3]

RATE = 150
#: How long a source task's commit may take before it counts as not returned (exactly_once.py).
COMMIT_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def bootstrap(kafka3: LocalKafkaCluster) -> str:
    """Everything in this module (worker_props, ...) talks to the three brokers."""
    return kafka3.bootstrap_servers


def test_sigkilled_leader_broker_keeps_exactly_once(kafka3: LocalKafkaCluster, workers, topic_name):
    bootstrap = kafka3.bootstrap_servers
    # Broker 1 leads both data partitions, so its crash moves every leader the tasks write to.
    topic = topic_name("data")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    leaders_first = [[1, 2, 3], [1, 3, 2]]
    new = NewTopic(topic, 2, replica_assignment=leaders_first, config={"min.insync.replicas": "2"})
    admin.create_topics([new])[topic].result(30)

    worker = workers("w1", **replicated_worker_settings(kafka3))
    worker.wait_for(lambda: set(data_leaders(bootstrap, topic).values()) == {1}, 30, "broker 1 to lead")
    follower = SequenceFollower(bootstrap, topic, 2).start()
    began = time.monotonic()

    def phase(text: str) -> None:
        print(f"+{time.monotonic() - began:5.1f}s {text}; committed {follower.highest()}", flush=True)

    try:
        config = endless_sequence(topic, 2, RATE)
        assert worker.create_connector("br", config).status_code == 201, "could not create the connector"
        worker.wait_for(lambda: worker.task_states("br") == ["RUNNING"] * 2, 90, "two RUNNING tasks")
        follower.wait_for_progress(range(2), 300, 60, "before the broker crash")

        wait_fully_replicated(bootstrap)
        kafka3.kill_node(1)
        crashed_at = follower.highest()
        phase("SIGKILLed broker 1")
        worker.wait_for(
            lambda: set(data_leaders(bootstrap, topic).values()) <= {2, 3}, 60, "new data partition leaders"
        )
        phase("new leaders elected")
        follower.wait_for_progress(range(2), 100, 90, "while broker 1 was down", since=crashed_at)
        phase("committing again without broker 1")
        kafka3.start_node(1)
        phase("broker 1 is back")
        follower.wait_for_progress(range(2), 100, 90, "after broker 1 came back")
        phase("committing with broker 1 back")

        worker.stop_connector("br")
        offsets = worker.request("GET", "/connectors/br/offsets").json()["offsets"]
        committed = {o["partition"]["task"]: o["offset"]["seq"] for o in offsets}
        seen = holds_exactly_the_committed(bootstrap, topic, follower, committed)
        phase(f"stopped with committed offsets {committed}; verified {seen} records")
    finally:
        follower.stop()


@pytest.mark.long
def test_mirror_sink_survives_a_crash_of_its_group_coordinator(
    kafka3: LocalKafkaCluster, workers, topic_name
):
    """The exactly-once mirror sends its offsets into each transaction for its group on the target;
    SIGKILL the broker coordinating that group. librdkafka 2.16 can then block for good inside
    send_offsets_to_transaction(), past its timeout (librdkafka issues 5456, 5511): the task used to
    stay RUNNING copying nothing. Now it either rides the crash out or fails saying why, and a
    REST restart resumes it from the group's committed offsets; the copy stays exactly once.
    (Up to two crashes: the hang needs a commit under way, about every other crash has one.)"""
    bootstrap = kafka3.bootstrap_servers
    topic = create_replicated_topic(bootstrap, topic_name("data"), 2)
    target = f"mirror.{topic}"
    worker = workers("w1", **replicated_worker_settings(kafka3))
    source = SequenceFollower(bootstrap, topic, 2).start()
    mirror = SequenceFollower(bootstrap, target, 2)
    began = time.monotonic()

    def phase(text: str) -> None:
        print(
            f"+{time.monotonic() - began:5.1f}s {text}; source {source.highest()} mirror {mirror.highest()}"
        )

    try:
        config = endless_sequence(topic, 2, RATE)
        assert worker.create_connector("src", config).status_code == 201
        mirror_config = {
            "connector.class": "MirrorSink",
            "tasks.max": "1",
            "topics": topic,
            "target.cluster.bootstrap.servers": bootstrap,
            "source.cluster.alias": "mirror",
            "transaction.producer": "true",
            "transaction.commit.interval.ms": "1000",
        }
        assert worker.create_connector("mm", mirror_config).status_code == 201
        worker.wait_for(lambda: worker.task_states("mm") == ["RUNNING"], 90, "the mirror task RUNNING")
        mirror.start()
        mirror.wait_for_progress(range(2), 300, 90, "before the crash")

        # The hang needs a commit under way at the crash: it shows up in about every other crash.
        for crash in range(2):
            wait_fully_replicated(bootstrap)
            coordinator = group_coordinator(bootstrap, "connect-mm")
            kafka3.kill_node(coordinator)
            crashed_at = source.highest()
            phase(f"crash {crash}: SIGKILLed broker {coordinator}, the coordinator of group connect-mm")
            time.sleep(4)
            kafka3.start_node(coordinator)
            phase(f"broker {coordinator} is back")

            def copied_on_or_failed(since: dict[int, int] = crashed_at) -> str | None:
                if all(mirror.highest().get(t, -1) > since[t] + 50 for t in range(2)):
                    return "copied on"
                entry = worker.status("mm")["tasks"][0]
                return "failed" if entry["state"] == "FAILED" else None

            outcome = worker.wait_for(copied_on_or_failed, 150, "the mirror to copy on or to fail")
            phase(f"the mirror {outcome}")
            if outcome == "failed":
                trace = worker.status("mm")["tasks"][0]["trace"]
                assert "librdkafka issues 5456 and 5511" in trace, trace
                assert worker.request_led("POST", "/connectors/mm/tasks/0/restart").status_code == 204
                mirror.wait_for_progress(
                    range(2), 50, 120, "after the mirror task's restart", since=crashed_at
                )
                phase("the restarted mirror copies on")
                break

        worker.stop_connector("src")
        offsets = worker.request("GET", "/connectors/src/offsets").json()["offsets"]
        committed = {o["partition"]["task"]: o["offset"]["seq"] for o in offsets}
        mirror.wait_for_progress(range(2), 0, 120, "to the source's end", since=committed)
        report = verify_sequence_topic({"bootstrap.servers": bootstrap}, target)
        phase(f"verified {report.seen} mirrored records against committed offsets {committed}")
        assert report.ok, report.anomalies
        assert mirror.highest() == committed, "the mirror holds more than the source committed"
        assert not source.anomalies and not mirror.anomalies, (source.anomalies, mirror.anomalies)
    finally:
        source.stop()
        mirror.stop()


def test_a_lone_worker_keeps_its_tasks_when_its_group_coordinator_dies(
    kafka3: LocalKafkaCluster, workers, topic_name
):
    """Issue 25: SIGKILL the broker coordinating the worker's own group for longer than the
    election's session timeout, so the only worker loses its group membership. It used to stop and
    restart every task (and a task stuck in a commit through the outage was abandoned and fenced by
    its own successor). Now it is in doubt for up to scheduled.rebalance.max.delay.ms, takes the
    leadership back when the coordinator returns, and the same task processes run on throughout;
    the output stays exactly once."""
    bootstrap = kafka3.bootstrap_servers
    topic = create_replicated_topic(bootstrap, topic_name("data"), 2)
    worker = workers("w1", **replicated_worker_settings(kafka3))
    follower = SequenceFollower(bootstrap, topic, 2).start()
    try:
        assert worker.create_connector("lone", endless_sequence(topic, 2, RATE)).status_code == 201
        worker.wait_for(lambda: worker.task_states("lone") == ["RUNNING"] * 2, 90, "two RUNNING tasks")
        follower.wait_for_progress(range(2), 200, 60, "before the crash")
        pids_before = {k: t["pid"] for k, t in worker.request("GET", "/internal/tasks").json().items()}
        log_start = worker.log_path.stat().st_size

        wait_fully_replicated(bootstrap)
        coordinator = group_coordinator(bootstrap, worker.props["group.id"])
        kafka3.kill_node(coordinator)
        crashed_at = follower.highest()
        # Past the election's 6 s session timeout (the membership is lost), and long enough that
        # the worker is in doubt for more than twice task.heartbeat.timeout.ms: its slot hosts,
        # which cannot reach a leader meanwhile, must not be taken for frozen and evacuated.
        time.sleep(16)
        kafka3.start_node(coordinator)

        def leadership_regained() -> str | None:
            text = worker.log_path.read_bytes()[log_start:].decode(errors="replace")
            return text if "again after" in text else None

        log_text = worker.wait_for(leadership_regained, 120, "the worker to take its leadership back")
        follower.wait_for_progress(range(2), 100, 90, "after the coordinator came back", since=crashed_at)
        pids_after = {k: t["pid"] for k, t in worker.request("GET", "/internal/tasks").json().items()}
        print(f"crashed coordinator {coordinator}; task pids {pids_before} -> {pids_after}")
        assert "lost its membership of group" in log_text, "the crash did not cost the membership"
        assert "stopping its tasks" not in log_text, log_text[-3000:]
        assert "has not been heard from" not in log_text, "a slot host was evacuated: " + log_text[-3000:]
        assert pids_after == pids_before, "the tasks were restarted"

        worker.stop_connector("lone")
        offsets = worker.request("GET", "/connectors/lone/offsets").json()["offsets"]
        committed = {o["partition"]["task"]: o["offset"]["seq"] for o in offsets}
        holds_exactly_the_committed(bootstrap, topic, follower, committed)
    finally:
        follower.stop()


def test_the_election_replaces_a_consumer_that_cannot_settle_and_the_leader_leads_on(
    kafka3: LocalKafkaCluster, worker_props, topic_name, caplog: pytest.LogCaptureFixture
):
    """Issue 25: the election's consumer (librdkafka) could stay out of its group for minutes after
    its coordinator's broker died and came back, so a lone worker led nobody. A consumer out of a
    settled membership for `stuck_membership_s` is now replaced by a new one. Every broker is
    killed for longer than that, then started again: the leader, in doubt meanwhile, gets its
    leadership back through the new consumer, without being demoted (same term)."""
    bootstrap = kafka3.bootstrap_servers
    configs = create_replicated_topic(bootstrap, topic_name("configs"), 1)
    worker = WorkerConfig.parse(worker_props("enabled", config_storage_topic=configs))
    idle = lambda: None  # noqa: E731  (the herder's wake-ups: nothing to wake here)
    election = LeaderElection(worker, "http://127.0.0.1:9", idle, idle, stuck_membership_s=3.0)
    caplog.set_level(logging.INFO, logger="eosconnect.cluster.election")
    election.start()
    try:
        deadline = time.monotonic() + 60
        while not election.is_leader:
            assert time.monotonic() < deadline, "the lone election never led"
            time.sleep(0.2)
        assert election.term == 1
        wait_fully_replicated(bootstrap)
        brokers = kafka3.broker_ids()
        for broker in brokers:
            kafka3.kill_node(broker)
        time.sleep(12)  # past the 6 s session and the 3 s limit: the old consumer is replaced
        for broker in brokers:
            kafka3.start_node(broker, wait=False)
        kafka3.wait_ready()
        deadline = time.monotonic() + 120
        while not election.is_leader:
            assert time.monotonic() < deadline, f"no leadership after the brokers came back:\n{caplog.text}"
            time.sleep(0.2)
        text = caplog.text
        assert "lost its membership of group" in text, text
        assert "a new consumer joins the group" in text, text
        assert "again after" in text, text  # the doubt ended with the leadership regained
        assert "did not get the leadership" not in text, text
        assert election.term == 1, "the worker was demoted and elected again instead of leading on"
    finally:
        election.stop()


def test_end_offsets_of_one_admin_client_follow_a_leader_that_restarted(
    kafka3: LocalKafkaCluster, bootstrap: str, topic_name
) -> None:
    """An admin client that listed a partition's end before its leader restarted and led again got
    _NOENT ("No leaders found") from ListOffsets for over a minute (its metadata refresh is every
    5 minutes), which stalled the leader's config reads in the chaos soak. `end_offsets` refreshes
    the client's metadata on such answers, so it follows the leader within its retries."""
    topic = create_replicated_topic(bootstrap, topic_name("moved-leader"), 1)
    partition = TopicPartition(topic, 0)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    assert end_offsets(admin, [partition], timeout=30) == {(topic, 0): 0}
    first = data_leaders(bootstrap, topic)[0]
    kafka3.stop_node(first)
    wait_until(lambda: data_leaders(bootstrap, topic)[0] not in (first, -1), 60, "another replica to lead")
    kafka3.start_node(first)

    elector = AdminClient({"bootstrap.servers": bootstrap})  # not `admin`: its metadata must stay old

    def leads_again() -> bool:
        with contextlib.suppress(Exception):  # not electable yet (the broker catches up): ask again
            elector.elect_leaders(ElectionType.PREFERRED, [partition]).result()
        return data_leaders(bootstrap, topic)[0] == first

    wait_until(leads_again, 90, f"broker {first} to lead {topic} again")
    started = time.monotonic()
    assert end_offsets(admin, [partition], timeout=60) == {(topic, 0): 0}
    assert time.monotonic() - started < 15, "the admin client kept its out-of-date leader"


def test_a_source_commit_that_does_not_return_in_time_is_settled_by_a_new_producer(
    kafka3: LocalKafkaCluster, bootstrap: str, topic_name, worker_props, read_committed, caplog
) -> None:
    """The broker coordinating a source task's transactions freezes (SIGSTOP) right after the task
    asked for a commit, while the partitions it writes stay led by live brokers. The commit cannot
    return in time (the chaos soak, seed 1350680724, saw its request wait 60 s for a coordinator
    connection and the task FAILED). The task, confirmed current, renews its producer (which finds
    the coordinator that took over and ends the transaction), reads its offsets back to learn
    whether the transaction committed, and goes on: never FAILED, every record exactly once."""
    brokers = sorted(kafka3.broker_ids())
    admin = AdminClient({"bootstrap.servers": bootstrap})
    warm = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"warm-{topic_name('txn')}"})
    warm.init_transactions(60)  # __transaction_state exists from here on
    states = admin.list_topics("__transaction_state", timeout=10).topics["__transaction_state"].partitions
    worker = worker_props("enabled")
    name = f"commit-timeout-{uuid.uuid4().hex[:6]}"
    partition = coordinator_partition(task_transactional_id(worker["group.id"], name, 0), len(states))
    coordinator = states[partition].leader
    away = [b for b in brokers if b != coordinator]  # the freeze stalls no produce request
    data, offsets = topic_name("data"), worker["offset.storage.topic"]
    for topic, compacted in ((data, False), (offsets, True)):
        config = {"min.insync.replicas": "2", **({"cleanup.policy": "compact"} if compacted else {})}
        admin.create_topics([NewTopic(topic, 1, replica_assignment=[away], config=config)])[topic].result(30)
    task, control, outcome = source_task_thread(
        bootstrap,
        worker,
        name,
        data,
        f"{fence_at_commit.__name__}.FenceAtCommitTask",
        600,
        **{"rate.per.task": "200"},
    )
    fence_at_commit.HOLD.reset()
    fence_at_commit.OFFSETS_TOPIC["name"] = offsets  # already in the transaction at the hold
    caplog.set_level("INFO", logger="eosconnect")
    pid = kafka3.node(coordinator).pid
    assert pid is not None
    task.start()
    try:
        wait_until(lambda: len(read_committed(data)) >= 100, 60, "the first committed records")
        fence_at_commit.HOLD.arm.set()
        assert fence_at_commit.HOLD.at_commit.wait(30), "no commit was held"
        os.kill(pid, signal.SIGSTOP)
        fence_at_commit.HOLD.released.set()  # the commit goes out to the frozen coordinator
        time.sleep(COMMIT_TIMEOUT_S + 5)  # thawed earlier, it would answer NOT_COORDINATOR in time
    finally:
        fence_at_commit.HOLD.released.set()
        os.kill(pid, signal.SIGCONT)
    try:
        wait_until(
            lambda: len(read_committed(data, timeout=10)) >= 600 or not task.is_alive(), 120, "every record"
        )
    finally:
        control.stop.set()
        task.join(60)
    result = outcome["result"]
    assert result.state is TaskState.STOPPED, result.trace  # type: ignore[attr-defined]
    said = [r.getMessage() for r in caplog.records if "did not return in time" in r.getMessage()]
    assert said, "the commit returned in time: the freeze missed it"
    assert control.asked_current >= 1  # it asked the leader before it renewed
    report = verify_sequence_topic({"bootstrap.servers": bootstrap}, data)
    assert report.ok, report.anomalies
    assert report.seen == 600
    wait_fully_replicated(bootstrap)  # the thawed broker back in sync for the module's next test
