"""A leader in doubt (cluster/election.py) publishes no task state, but keeps what it heard.

The Spark soak (issue 25) lost its tasks for good at a broker kill: their commits waited for the dead
broker, so they went silent and the leader published UNASSIGNED; then the leader lost its group
membership for 11 s, and the tasks' first RUNNING heartbeats came in during that doubt, unpublished.
Every heartbeat after reported no change, so the status stayed UNASSIGNED while the tasks ran on.
"""

from __future__ import annotations

from typing import Any

import pytest

from eosconnect.cluster.herder_api import ConflictError, no_leader_now
from eosconnect.storage.status_store import ConnectState
from support.leader_state import Leader


def test_a_task_heard_again_during_the_doubt_is_published_running_when_the_leader_leads_again() -> None:
    leader = Leader()
    leader.silent(0)
    leader.election.doubt = True
    assert leader.beat(0) == "run"  # the task runs on; nothing is published while in doubt
    assert leader.published(0) is ConnectState.UNASSIGNED
    leader.election.doubt = False
    leader.beat(0)  # no change since the last heartbeat, but the change was never published
    assert leader.published(0) is ConnectState.RUNNING


def test_the_tick_publishes_what_was_heard_during_the_doubt() -> None:
    """A task that reported during the doubt and not since (it ended, or it is between beats) gets
    its state published by the leader's next tick."""
    leader = Leader()
    leader.silent(1)
    leader.election.doubt = True
    leader.beat(1)
    leader.election.doubt = False
    leader._publish_held_states()
    assert leader.published(1) is ConnectState.RUNNING
    leader.silent(1)
    leader._publish_held_states()  # published once: it does not undo a later status
    assert leader.published(1) is ConnectState.UNASSIGNED


def test_a_worker_that_is_no_leader_keeps_nothing_to_publish_later() -> None:
    """An ex-leader hears from tasks its successor fenced: their states are never published, neither
    then nor if it leads again."""
    leader = Leader()
    leader.silent(0)
    leader.election.leader = False
    leader.beat(0)
    leader.election.leader = True
    leader._publish_held_states()
    assert leader.published(0) is ConnectState.UNASSIGNED


def test_a_worker_that_no_longer_leads_tells_its_tasks_to_stop_before_its_herder_stops_them() -> None:
    """Demoted while its herder's tick waits in a Kafka call (the brokers cut off): the run is still
    there, but a task asking is told "stop" at once; in doubt it is still told "run"."""
    leader = Leader()
    leader.election.doubt = True
    assert leader.beat(0) == "run"
    leader.election.leader, leader.election.doubt = False, False
    assert leader._runs["c"].stopping_since is None  # the herder has not stopped the run yet
    assert leader.beat(0) == "stop"
    assert leader.host_answer("h1", {"tasks": [{"connector": "c", "task": 1, "generation": 3}]})[
        "directives"
    ] == {"": "stop"}


def test_a_leader_in_doubt_does_not_confirm_a_task_current() -> None:
    """Asked whether a task may renew its producer (which fences every other instance of it), a
    leader in doubt answers 409 "rejoining the group": another worker may run the task's successor
    already. Its heartbeats are still answered "run", and a leader confirms."""
    leader = Leader()
    leader.election.doubt = True
    with pytest.raises(ConflictError) as refused:
        leader.beat(0, confirm=True)
    assert no_leader_now(refused.value.status_code, str(refused.value))
    assert leader.beat(0) == "run"
    leader.election.doubt = False
    assert leader.beat(0, confirm=True) == "run"
    leader.election.leader = False
    assert leader.beat(0, confirm=True) == "stop"


class HostsStandIn:
    """The leader's slot hosts (cluster/packing.py), reduced to the answer for a host's question."""

    def __init__(self, start: list[dict[str, Any]]) -> None:
        self.start = start
        self.asked = 0

    def heartbeat(self, host_id: str, running: set[str], memory: Any = None) -> dict[str, Any]:
        self.asked += 1
        return {"start": self.start, "stop": False}


def test_a_host_retried_during_the_doubt_waits_for_its_tasks_instead_of_ending() -> None:
    """A host's Python worker died and Spark ran the host again while the leader was in doubt: told
    to stop then, the new attempt ended with none of its tasks and nobody ran them again (the chaos
    soak, seed 662436141: UNASSIGNED for good). It is told to wait, and gets its tasks after the
    doubt; a worker no longer leading at all still tells it to stop."""
    leader = Leader()
    leader._hosts = HostsStandIn([{"connector": "c", "task": 1}])  # type: ignore[assignment]
    leader.election.doubt = True
    assert leader.host_heartbeat("h1", {"tasks": []}) == {"start": [], "stop": False, "directives": {}}
    assert leader._hosts.asked == 0  # no leader action while in doubt
    leader.election.doubt = False
    assert leader.host_heartbeat("h1", {"tasks": []})["start"] == [{"connector": "c", "task": 1}]
    leader.election.leader = False
    assert leader.host_heartbeat("h1", {"tasks": []})["stop"] is True
