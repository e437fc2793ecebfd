"""What a worker that does not lead shows of the statuses it left in the topic when it led: it runs
no connector and no task, so its own RUNNING and PAUSED are history (UNASSIGNED, naming what it last
reported); another worker's statuses, its own final ones, and what a leader in doubt shows are the
topic's as last read. A worker cut off from the brokers reads nothing newer for as long as the
partition lasts."""

from __future__ import annotations

from types import SimpleNamespace

from eosconnect.cluster.herder_reads import HerderReads
from eosconnect.storage.config_state import ConfigSnapshot
from eosconnect.storage.status_store import ConnectState, Status, StatusSnapshot
from support.leader_state import Election


class Reads(HerderReads):
    """The reads of a worker `w1` whose status topic, as last read, holds `tasks` of connector "c"."""

    def __init__(self, connector: Status, tasks: list[Status], election: Election) -> None:
        snapshot = ConfigSnapshot(
            connector_configs={"c": {"connector.class": "SequenceSource"}},
            task_counts={"c": len(tasks)},
            generations={"c": 3},
        )
        self.config_store = SimpleNamespace(snapshot=snapshot)  # type: ignore[assignment]
        topic = StatusSnapshot(connectors={"c": connector}, tasks={("c", t): s for t, s in enumerate(tasks)})
        self.statuses = SimpleNamespace(topic=topic, published=lambda name, task=None: None)  # type: ignore[assignment]
        self.election = election  # type: ignore[assignment]
        self.worker_id = "w1"


def states(reads: Reads) -> list[tuple[str, str]]:
    status = reads.connector_status("c")
    entries = [status["connector"], *status["tasks"]]
    return [(entry["state"], entry["worker_id"]) for entry in entries]


def test_a_demoted_worker_shows_its_own_running_tasks_unassigned_naming_what_it_last_reported() -> None:
    running = Status(ConnectState.RUNNING, "w1", 3)
    reads = Reads(running, [running, Status(ConnectState.PAUSED, "w1", 3)], Election(leader=False))
    assert states(reads) == [("UNASSIGNED", "w1")] * 3
    trace = reads.connector_status("c")["tasks"][1]["trace"]
    assert trace.startswith("last reported PAUSED by this worker (w1) while it led; a follower runs nothing")


def test_another_workers_status_and_its_own_final_ones_are_shown_as_read() -> None:
    reads = Reads(
        Status(ConnectState.RUNNING, "w2", 4),
        [
            Status(ConnectState.RUNNING, "w2", 4),
            Status(ConnectState.FAILED, "w1", 3, "Traceback ..."),
            Status(ConnectState.UNASSIGNED, "w1", 3, "no heartbeat"),
        ],
        Election(leader=False),
    )
    assert states(reads) == [("RUNNING", "w2"), ("RUNNING", "w2"), ("FAILED", "w1"), ("UNASSIGNED", "w1")]


def test_a_leader_in_doubt_shows_its_tasks_as_last_read_it_keeps_them_while_it_rejoins() -> None:
    running = Status(ConnectState.RUNNING, "w1", 3)
    reads = Reads(running, [running], Election(leader=True, doubt=True))
    assert states(reads) == [("RUNNING", "w1")] * 2
