"""How often a slot host asks the leader: quickly while empty (a task placed on a warm host starts at
once), at the heartbeat interval while the leader does not answer (no flood of failed requests)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from eosconnect.runtime.task import TaskSpec
from eosconnect.runtime.task_group import HostAnswer, SlotHostSpec, run_host


class ScriptedLeader:
    """Answers the host's questions from a script, then tells it to stop."""

    def __init__(self, answers: list[HostAnswer | None]) -> None:
        self.answers = answers
        self.asked = 0

    def poll(self, running: Sequence[TaskSpec]) -> HostAnswer | None:
        self.asked += 1
        return self.answers.pop(0) if self.answers else HostAnswer(stop=True)


def hosted(answers: list[HostAnswer | None], interval_s: float) -> tuple[float, int]:
    leader = ScriptedLeader(answers)
    began = time.monotonic()
    assert run_host(SlotHostSpec("h1", leader), poll_interval_s=interval_s) == []
    return time.monotonic() - began, leader.asked


def test_an_empty_host_asks_again_well_before_its_heartbeat_interval():
    took, asked = hosted([HostAnswer() for _ in range(6)], interval_s=1.0)
    assert asked == 7
    assert took < 3.0  # six waits of the 1 s interval would be 6 s


def test_a_host_whose_leader_does_not_answer_asks_at_its_heartbeat_interval():
    took, asked = hosted([None, None], interval_s=1.0)
    assert asked == 3
    assert took >= 2.0
