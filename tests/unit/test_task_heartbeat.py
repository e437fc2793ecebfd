"""`RestTaskControl`: heartbeats never block the task thread, and the final report comes last."""

from __future__ import annotations

import threading
from typing import Any

from eosconnect.cluster.task_channel import RestTaskControl
from eosconnect.runtime.control import Directive


class SlowWorker(RestTaskControl):
    """Answers heartbeats only when the test releases them; records what was reported, in order."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9", {}, "c", 0, 0)
        self.release = threading.Event()
        self.reports: list[dict[str, Any]] = []
        self.answer = Directive.STOP

    def _report(self, report: dict[str, Any]) -> Directive | None:
        if not report.get("final"):
            self.release.wait()
        self.reports.append(report)
        return self.answer


def test_directive_returns_while_the_heartbeat_is_unanswered_then_takes_its_answer() -> None:
    control = SlowWorker()
    assert control.directive() is Directive.RUN  # the beat is in flight, unanswered
    assert control.directive() is Directive.RUN
    assert control._beat is not None and control._beat.is_alive()
    control.release.set()
    control._beat.join()
    assert control.directive() is Directive.STOP
    assert [r["state"] for r in control.reports] == ["RUNNING"], "one beat at a time"


def test_final_report_waits_for_the_beat_in_flight() -> None:
    control = SlowWorker()
    control.directive()
    done = threading.Thread(target=control.report_outcome, args=("STOPPED", None))
    done.start()
    control.release.set()
    done.join()
    assert [r["state"] for r in control.reports] == ["RUNNING", "STOPPED"]
    assert control.reports[-1]["final"] is True
