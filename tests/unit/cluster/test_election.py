"""The election's watch on its consumer's group membership (cluster/election.py `MembershipWatch`):
out of a settled membership for too long, the consumer is replaced."""

from __future__ import annotations

import json
import time

from eosconnect.cluster.election import MembershipWatch


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
