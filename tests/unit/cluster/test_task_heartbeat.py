"""`RestTaskControl`: heartbeats never block the task thread, go on while it is blocked, and the final
report comes last."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from eosconnect.cluster import task_channel
from eosconnect.cluster.task_channel import RestTaskControl
from eosconnect.runtime.control import Directive


class SlowWorker(RestTaskControl):
    """Answers heartbeats only when the test releases them; records what was reported, in order."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9", {}, "c", 0, 0)
        self.release = threading.Event()
        self.reports: list[dict[str, Any]] = []
        self.answer = Directive.STOP
        self.in_flight = 0
        self.most_in_flight = 0

    def _report(self, report: dict[str, Any]) -> Directive | None:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        if not report.get("final"):
            self.release.wait()
        self.reports.append(report)
        self.in_flight -= 1
        return self.answer


def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_directive_returns_while_the_heartbeat_is_unanswered_then_takes_its_answer() -> None:
    control = SlowWorker()
    assert control.directive() is Directive.RUN  # the beat is in flight, unanswered
    assert control.directive() is Directive.RUN
    assert control._beat is not None and control._beat.is_alive()
    control.release.set()
    wait_for(lambda: control.directive() is Directive.STOP)
    control.report_outcome("STOPPED", None)
    assert control.most_in_flight == 1, "one beat at a time"
    assert not control._beat.is_alive()


def test_final_report_waits_for_the_beat_in_flight() -> None:
    control = SlowWorker()
    control.directive()
    done = threading.Thread(target=control.report_outcome, args=("STOPPED", None))
    done.start()
    control.release.set()
    done.join()
    assert [r["state"] for r in control.reports] == ["RUNNING", "STOPPED"]
    assert control.reports[-1]["final"] is True


def test_heartbeats_go_on_while_the_task_thread_is_blocked() -> None:
    """The issue-25 soak: a commit waiting for a dead broker kept the task thread from asking, its
    heartbeats stopped, and the leader took the live task for a lost one after 5 s."""
    control = SlowWorker()
    control.release.set()
    control.answer = Directive.RUN
    control.directive()  # then the task thread blocks and asks nothing
    wait_for(lambda: len(control.reports) >= 3)
    control.report_outcome("STOPPED", None)
    assert control.reports[-1]["final"] is True
    assert all(not r.get("final") for r in control.reports[:-1])


def test_heartbeats_stop_once_the_task_thread_asked_nothing_for_too_long(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A task thread stuck for good (or a task that ended without its final report) goes silent."""
    monkeypatch.setattr(task_channel, "BLOCKED_BEAT_S", 0.3)
    control = SlowWorker()
    control.release.set()
    control.answer = Directive.RUN
    control.directive()
    assert control._beat is not None
    control._beat.join(5.0)
    assert not control._beat.is_alive()
    assert 1 <= len(control.reports) <= 2


@pytest.mark.parametrize("hosted", [False, True])
def test_a_task_reports_paused_only_once_it_acted_on_the_pause(hosted):
    """PAUSED must not be published while a commit the task made before the pause may still become
    visible: the control reports PAUSED only after the task thread confirmed it (its loop committed
    what was open), and a resume clears the confirmation."""
    from eosconnect.cluster.host_channel import HostedTaskControl

    if hosted:
        control: RestTaskControl = HostedTaskControl("http://127.0.0.1:9", {}, "c", 0, 0)
        hear = control.heard  # type: ignore[attr-defined]
    else:
        control = RestTaskControl("http://127.0.0.1:9", {}, "c", 0, 0)
        hear = control._set_directive
    hear("pause" if hosted else Directive.PAUSE)
    assert control.reported_state() == "RUNNING", "the task thread has not seen the pause yet"
    control.confirm_paused()
    assert control.reported_state() == "PAUSED"
    hear("run" if hosted else Directive.RUN)
    control.confirm_paused()  # a late confirmation of the earlier pause
    assert control.reported_state() == "RUNNING"
    hear("pause" if hosted else Directive.PAUSE)
    assert control.reported_state() == "RUNNING"


def test_a_paused_task_waits_until_its_directive_changes_and_survives_pickling() -> None:
    import pickle

    control = pickle.loads(pickle.dumps(RestTaskControl("http://127.0.0.1:9", {}, "c", 0, 0)))
    control._set_directive(Directive.PAUSE)
    started = time.monotonic()
    control.wait_while_paused(0.2)
    assert time.monotonic() - started >= 0.2, "still paused: waits the whole timeout"
    threading.Timer(0.3, control._set_directive, args=(Directive.RUN,)).start()
    started = time.monotonic()
    control.wait_while_paused(30.0)
    assert control._directive is Directive.RUN  # (directive() would start heartbeats to nowhere)
    assert time.monotonic() - started < 10.0, "the resume wakes the waiting task"
