"""The election (cluster/election.py): its watch on its consumer's group membership (out of a
settled membership for too long, the consumer is replaced), and a worker out of its group does not
ask the brokers for the leader: its coordinator may be unreachable, and librdkafka 2.16's
DescribeConsumerGroups can abort the process when such a request fails (librdkafka issue 4605)."""

from __future__ import annotations

import json
import time

from eosconnect.cluster.election import STATS_INTERVAL_MS, LeaderElection, MembershipWatch
from eosconnect.worker_config import WorkerConfig


def stats(state: str, join_state: str) -> str:
    return json.dumps({"name": "c", "cgrp": {"state": state, "join_state": join_state, "stateage": 10}})


def test_a_settled_member_is_never_stuck() -> None:
    watch = MembershipWatch(0.05)
    for _ in range(4):
        time.sleep(0.03)
        watch.on_stats(stats("up", "steady"))
        assert watch.stuck_for() is None
    assert watch.last_state == "up/steady"


def test_a_member_that_does_not_settle_is_stuck_after_the_limit() -> None:
    watch = MembershipWatch(0.1)
    watch.on_stats(stats("up", "steady"))
    watch.on_stats(stats("wait-coord", "init"))  # its coordinator died
    assert watch.stuck_for() is None  # not yet
    time.sleep(0.15)
    watch.on_stats(stats("up", "wait-join"))  # found one, but no JoinGroup answer
    stuck = watch.stuck_for()
    assert stuck is not None and stuck >= 0.1
    assert watch.last_state == "up/wait-join"
    watch.on_stats(stats("up", "steady"))
    assert watch.stuck_for() is None


def test_a_consumer_that_never_joined_counts_from_its_creation() -> None:
    watch = MembershipWatch(0.05)
    assert watch.stuck_for() is None
    time.sleep(0.08)
    assert watch.stuck_for() is not None


def test_statistics_without_a_group_or_unreadable_ones_change_nothing() -> None:
    watch = MembershipWatch(0.05)
    watch.on_stats(stats("up", "steady"))
    watch.on_stats("{not json")
    watch.on_stats(json.dumps({"name": "c"}))
    assert watch.last_state == "?/?"
    time.sleep(0.08)
    assert watch.stuck_for() is not None  # no report of a settled membership since the first


def test_a_worker_whose_consumer_is_out_of_the_group_answers_no_leader_without_asking() -> None:
    # Nothing listens on the discard port: the consumer never finds its coordinator.
    worker = WorkerConfig.parse(
        {
            "bootstrap.servers": "127.0.0.1:9",
            "group.id": "election-unit",
            "config.storage.topic": "election-unit-configs",
            "offset.storage.topic": "election-unit-offsets",
            "status.storage.topic": "election-unit-status",
        }
    )
    election = LeaderElection(worker, "http://127.0.0.1:1", lambda: None, lambda: None)
    election.start()
    try:
        time.sleep(2 * STATS_INTERVAL_MS / 1000 + 0.5)  # its statistics have said where it is
        began = time.monotonic()
        assert election.leader_url(max_age_s=0) is None
        # Asking would have waited for the describe request's timeout (5 s).
        assert time.monotonic() - began < 1.0
        assert not election.is_leader
    finally:
        election.stop()
