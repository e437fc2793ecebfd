"""Network partitions under running exactly-once source tasks: a broker and two workers each on a
host of their own (tests/support/netns.py), links between them cut and healed, the output read by
the test process with read_committed all along and checked at the end: every sequence number up to
the committed source offsets once, nothing missing, nothing twice.

The worker's timeouts are made short so that a partition of ~30 s outlasts all of them: the
election's session (6 s), the leader's doubt grace (`scheduled.rebalance.max.delay.ms`) and the
tasks' `transaction.timeout.ms`. `make test-long` cuts for longer.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
from support.workers import LONG_TESTS, create_topics, wait_running, worker_settings

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.skipif(netns_available() is not None, reason=str(netns_available())),
]

TASKS = 2
RATE = 100
#: The leader's doubt grace after it lost its group membership, and the tasks' transaction timeout.
DOUBT_GRACE_MS = 10_000
TRANSACTION_TIMEOUT_MS = 10_000
#: How long a leader stays cut off: more than the election's 6 s session, the doubt grace and the
#: transaction timeout together.
CUT_S = 150.0 if LONG_TESTS else 30.0
#: What a cut leader may take to be replaced: the session, the doubt grace, the fencing of its
#: tasks' transactional ids by the new leader and the start of their successors on a loaded machine.
TAKEOVER_S = 120.0
#: From the standby's takeover, how long the cut-off worker may show its tasks RUNNING: the rest of
#: its doubt grace and a herder tick waiting out its config-topic read (10 s); after the heal, how
#: long it may take to read the standby's statuses.
STATUS_BOUND_S = 40.0
#: The longest a REST answer may take during a partition: a follower asks the brokers for the
#: leader's address for up to 10 s before it answers "no leader" (cluster/election.py).
REST_BOUND_S = 20.0
#: The longest a config-topic write may take to fail on a worker cut off from the broker: the config
#: store's write timeout (30 s) and librdkafka's hang grace (storage/hang_safe.py), with a margin
#: for a loaded machine; Kafka Connect's REST request timeout is 90 s.
WRITE_BOUND_S = 50.0


@dataclass(frozen=True)
class Site:
    """A partitionable network: the broker's host, two worker hosts, the broker on its host."""

    network: Network
    kafka_host: Host
    worker_hosts: dict[str, Host]
    cluster: LocalKafkaCluster

    @property
    def bootstrap(self) -> str:
        return self.cluster.bootstrap_servers


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with Network() as network:
        kafka_host = network.add_host("kafka")
        worker_hosts = {name: network.add_host(name) for name in ("w1", "w2")}
        network.attach_test_process()
        cluster = LocalKafkaCluster(
            tmp_path_factory.mktemp("kafka-partitioned"),
            tie_to_parent=True,
            host=kafka_host.address,
            launcher=kafka_host.launcher(),
        )
        cluster.start()
        try:
            yield Site(network, kafka_host, worker_hosts, cluster)
        finally:
            cluster.stop()


StartWorker = Callable[[str], WorkerProcess]


@pytest.fixture
def start_worker(site: Site, tmp_path: Path) -> Iterator[StartWorker]:
    """`start_worker("w1")`: an `eosconnect worker` of the test's own group on host w1, listening
    on the host's address. At the end the network is healed and the workers stopped."""
    prefix = f"part-{uuid.uuid4().hex[:8]}"
    started: list[WorkerProcess] = []

    def start(name: str) -> WorkerProcess:
        host = site.worker_hosts[name]
        props = worker_settings(
            site.bootstrap,
            prefix,
            **{
                "listeners": f"http://{host.address}:0",
                "scheduled.rebalance.max.delay.ms": str(DOUBT_GRACE_MS),
                "producer.transaction.timeout.ms": str(TRANSACTION_TIMEOUT_MS),
            },
        )
        worker = WorkerProcess(props, tmp_path / name, launcher=tuple(host.launcher()))
        started.append(worker)
        return worker.start(timeout=240)  # Spark starts slowly under load

    yield start
    site.network.heal()
    for worker in started:
        worker.stop(timeout=30)


def worker_id(worker: WorkerProcess) -> str:
    """The id a worker's tasks carry in a status: its REST `host:port`."""
    return worker.url.split("://", 1)[1]


def exited(worker: WorkerProcess) -> Callable[[], str | None]:
    """For `wait_for_progress(alive=...)`: why to stop waiting, once the worker process is gone."""

    def check() -> str | None:
        code = worker.proc.poll() if worker.proc is not None else None
        return None if code is None else f"the worker exited with {code}; its log ends:\n{worker.tail(15)}"

    return check


def running_tasks(worker: WorkerProcess) -> list[str]:
    """The task instances `worker` has heard from that have not ended."""
    runtimes = worker.request("GET", "/internal/tasks").json()
    return [key for key, runtime in runtimes.items() if runtime["state"] in ("RUNNING", "PAUSED")]


def leader_partition_keeps_exactly_once(
    site: Site, start_worker: StartWorker, cut: Callable[[Host], None]
) -> None:
    """Two workers; the leader (w1, which runs every task) is cut off from the broker by `cut` for
    `CUT_S` while its tasks hold open transactions. The standby takes over and commits on; after
    the heal the old leader runs no task and follows; the output is exactly once."""
    topic = f"part-{uuid.uuid4().hex[:8]}"
    create_topics(site.bootstrap, (topic, TASKS))
    leader, standby = start_worker("w1"), start_worker("w2")
    follower = SequenceFollower(site.bootstrap, topic, TASKS).start()
    phase = Timeline(follower)
    try:
        assert leader.create_connector("src", endless_sequence(topic, TASKS, RATE)).status_code == 201
        status = wait_running(leader, "src", TASKS)
        assert {t["worker_id"] for t in status["tasks"]} == {worker_id(leader)}, status
        follower.wait_for_progress(range(TASKS), 200, 90, "before the partition")

        cut_at = follower.highest()
        phase.restart()
        cut(site.worker_hosts["w1"])
        phase("cut the leader off from the broker")
        took = follower.wait_for_progress(
            range(TASKS), 100, TAKEOVER_S, "with the leader cut off", since=cut_at
        )
        phase(f"the standby's tasks commit: recovered in {took:.1f}s")
        status = wait_running(standby, "src", TASKS)
        assert {t["worker_id"] for t in status["tasks"]} == {worker_id(standby)}, status
        # The cut-off worker, demoted, reads no newer status than its own RUNNING: it shows that
        # as its past (UNASSIGNED), not as the truth, once its doubt grace is over.
        leader.wait_for(
            lambda: leader.task_states("src") == ["UNASSIGNED"] * TASKS,
            STATUS_BOUND_S,
            "the cut-off worker to stop showing its tasks RUNNING",
        )
        phase(f"the cut-off worker shows its tasks {leader.task_states('src')}")
        time.sleep(max(0.0, CUT_S - (time.monotonic() - phase.began)))

        healed_at = follower.highest()
        site.network.heal()
        phase("healed")
        leader.wait_for(lambda: not running_tasks(leader), 60, "no task running on the old leader")
        phase("the old leader runs no task")
        standby_running = [("RUNNING", worker_id(standby))] * TASKS
        leader.wait_for(
            lambda: [(t["state"], t["worker_id"]) for t in leader.status("src")["tasks"]] == standby_running,
            STATUS_BOUND_S,
            "the old leader to show the standby's tasks",
        )
        phase("the old leader shows the standby's tasks RUNNING")
        follower.wait_for_progress(
            range(TASKS), 100, 90, "after the heal", alive=exited(leader), since=healed_at
        )
        assert leader.proc is not None and leader.proc.poll() is None, (
            "the old leader exited:\n" + leader.tail()
        )
        status = wait_running(standby, "src", TASKS)
        assert {t["worker_id"] for t in status["tasks"]} == {worker_id(standby)}, status

        standby.stop_connector("src")
        committed = committed_offsets(standby, "src")
        seen = holds_exactly_the_committed(site.bootstrap, topic, follower, committed)
        phase(f"stopped with committed offsets {committed}; verified {seen} records")
    finally:
        follower.stop()


def test_leader_cut_off_from_the_broker_is_replaced_and_its_tasks_fenced(
    site: Site, start_worker: StartWorker
) -> None:
    """Both ways, silently (blackhole): the leader's requests and the broker's answers are lost."""
    leader_partition_keeps_exactly_once(
        site, start_worker, lambda host: site.network.cut(host, site.kafka_host, Cut.BLACKHOLE)
    )


def test_leader_whose_requests_arrive_but_not_the_answers_is_replaced(
    site: Site, start_worker: StartWorker
) -> None:
    """One way: the leader's requests (produces, commits, heartbeats) reach the broker, the broker's
    answers are lost, so the leader cannot tell whether a commit it sent took effect."""
    leader_partition_keeps_exactly_once(
        site, start_worker, lambda host: site.network.cut(site.kafka_host, host, Cut.BLACKHOLE, one_way=True)
    )


def timed(
    worker: WorkerProcess, method: str, path: str, bound: float = REST_BOUND_S, **kwargs: Any
) -> tuple[int, float, str]:
    """One REST request: its status code, the seconds it took to answer, and its body's start."""
    began = time.monotonic()
    response = httpx.request(method, worker.url + path, timeout=bound + 30, **kwargs)
    return response.status_code, time.monotonic() - began, response.text[:200]


def lone_worker_cut_off(
    site: Site, start_worker: StartWorker
) -> tuple[WorkerProcess, SequenceFollower, Timeline]:
    """A lone worker running connector "src" ("part-..." topic, `TASKS` tasks) that has committed,
    then cut off from the broker both ways, silently; its follower, and the timeline from the cut."""
    topic = f"part-{uuid.uuid4().hex[:8]}"
    create_topics(site.bootstrap, (topic, TASKS))
    worker = start_worker("w1")
    follower = SequenceFollower(site.bootstrap, topic, TASKS).start()
    phase = Timeline(follower)
    try:
        assert worker.create_connector("src", endless_sequence(topic, TASKS, RATE)).status_code == 201
        wait_running(worker, "src", TASKS)
        follower.wait_for_progress(range(TASKS), 100, 90, "before the partition")
        phase.restart()
        site.network.cut(site.worker_hosts["w1"], site.kafka_host, Cut.BLACKHOLE)
        phase("cut the worker off from the broker")
    except BaseException:
        follower.stop()
        raise
    return worker, follower, phase


def rest_answers_in_time(worker: WorkerProcess, phase: Timeline) -> None:
    """While the lone worker is still leader, in doubt and then demoted, reads answer, and once its
    membership is lost a leader's write is refused with 409 (no leader to serve it), each within
    `REST_BOUND_S`. A demoted worker does not ask the brokers for the leader while it is out of the
    group (librdkafka 2.16 aborted the process at the heal when it had: cluster/election.py)."""
    new_connector = {"name": "other", "config": endless_sequence(f"other-{uuid.uuid4().hex[:8]}", 1, RATE)}
    # Still leader (its session has not lapsed), in doubt (it has: the doubt grace runs), demoted.
    for moment in (1.0, 8.0, 8.0 + DOUBT_GRACE_MS / 1000 + 4):
        time.sleep(max(0.0, moment - (time.monotonic() - phase.began)))
        answers = {
            "list": timed(worker, "GET", "/connectors"),
            "status": timed(worker, "GET", "/connectors/src/status"),
        }
        if moment > 1.0:  # membership lost: no leader to serve a write
            answers["create"] = timed(worker, "POST", "/connectors", json=new_connector)
        phase(f"REST answers (code, seconds): { {k: (c, round(s, 1)) for k, (c, s, _) in answers.items()} }")
        slow = {k: a for k, a in answers.items() if a[1] > REST_BOUND_S}
        assert not slow, f"answers slower than {REST_BOUND_S}s at +{moment}s: {slow}"
        assert answers["list"][0] == 200 and answers["status"][0] == 200, answers
        if "create" in answers:
            code, _, text = answers["create"]
            assert code == 409 and no_leader_now(code, text), answers["create"]


def test_a_lone_worker_cut_off_past_its_doubt_grace_answers_rest_and_leads_again_after_the_heal(
    site: Site, start_worker: StartWorker
) -> None:
    """Cut off for longer than the session and the doubt grace, the lone worker answers REST in
    every phase (`rest_answers_in_time`) and stops leading and its tasks; after the heal it is
    elected again, runs the tasks from the committed offsets, and its output is exactly once."""
    worker, follower, phase = lone_worker_cut_off(site, start_worker)
    try:
        rest_answers_in_time(worker, phase)
        time.sleep(max(0.0, 8.0 + DOUBT_GRACE_MS / 1000 + 10 - (time.monotonic() - phase.began)))
        healed_at = follower.highest()
        site.network.heal()
        phase("healed")
        took = follower.wait_for_progress(
            range(TASKS), 100, TAKEOVER_S, "after the heal", alive=exited(worker), since=healed_at
        )
        phase(f"committing again: recovered in {took:.1f}s")
        assert worker.task_states("src") == ["RUNNING"] * TASKS
        worker.stop_connector("src")
        committed = committed_offsets(worker, "src")
        seen = holds_exactly_the_committed(site.bootstrap, follower.topic, follower, committed)
        phase(f"stopped with committed offsets {committed}; verified {seen} records")
    finally:
        follower.stop()


def test_a_write_to_a_worker_just_cut_off_answers_in_time(site: Site, start_worker: StartWorker) -> None:
    """PUT /pause (a write any worker may make) to the leader the moment it is cut off fails within
    the config store's write timeout (`WRITE_BOUND_S`), as Kafka Connect's does; the next write is
    not queued behind it, and both answer 500 (the config store's `ConfigWriteError`)."""
    topic = f"part-{uuid.uuid4().hex[:8]}"
    create_topics(site.bootstrap, (topic, 1))
    worker = start_worker("w1")
    assert worker.create_connector("src", endless_sequence(topic, 1, RATE)).status_code == 201
    wait_running(worker, "src", 1)
    site.network.cut(site.worker_hosts["w1"], site.kafka_host, Cut.BLACKHOLE)
    with ThreadPoolExecutor(2) as pool:
        pause = pool.submit(timed, worker, "PUT", "/connectors/src/pause", bound=WRITE_BOUND_S)
        time.sleep(1.0)
        resume = pool.submit(timed, worker, "PUT", "/connectors/src/resume", bound=WRITE_BOUND_S)
        answers = {"pause": pause.result(), "resume": resume.result()}
    print(
        f"answers (code, seconds): { {k: (c, round(s, 1)) for k, (c, s, _) in answers.items()} }", flush=True
    )
    for name, (code, took, text) in answers.items():
        assert took < WRITE_BOUND_S, (name, code, took, text)
        assert code == 500 and "ConfigWriteError" in text, (name, code, text)
