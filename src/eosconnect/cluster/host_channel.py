"""How a slot host (runtime/task_group.py) talks to the leader: one signed request per half second.

`PUT /internal/hosts/{id}/heartbeat` carries the heartbeat of every connector task the host runs
(the body a lone task sends to its own heartbeat endpoint) and brings back each one's directive and
the tasks placed on the host that it does not run yet, as plain JSON (task and connector configs,
generation, instance): the host builds their `TaskSpec`s here, with the same controls and
coordinators a lone task gets, so nothing pickled crosses HTTP. One round trip per host rather than
one per task is what keeps a host of idle tasks idle. A task's final report and its "was I
superseded?" question still go to its own endpoint (`RestTaskControl`), as rare and synchronous.

Held answers: a host whose tasks have been steady for `SETTLE_S` asks the leader to hold its answer
for up to `HOLD_S` while there is nothing new for it (`hold_s` in the body; each task's beat says
the directive it holds). The leader records the beats at once, then looks again every
`HOLD_RECHECK_S` (rest/held_answers.py: at every held request in one look) and answers as soon as a
directive differs, a task is placed on the host or the host must end; so a pause, a stop or a new
task reaches the host as fast as without a hold, and a host of idle tasks asks about every `HOLD_S`
(asking again at once after a held answer) instead of twice a second. (py-spy's GIL samples put most
of an idle host's Python time in those round trips, but a host of 28 idle tasks takes about the same
CPU with the holds as without: fewer requests, not a cheaper fleet; docs/benchmarks.md.) What the host
itself learns (a task confirming its pause, a task starting) makes it ask without a hold again until
it settles; a task's final report waits for a held request to come back (the host's channel lock
keeps reports in order). A held request refreshes no task's last heartbeat, so the hold is at most
`HOLD_SHARE` of `task.heartbeat.timeout.ms` (2 s of the default 5 s).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from eosconnect.cluster.task_channel import (
    ORPHAN_TIMEOUT_S,
    FencingRequestError,
    RestStartupCoordinator,
    RestTaskControl,
    _ConfigTopicAccess,
    _spark_attempt,
    signed_request,
    unreachable_leader,
)
from eosconnect.runtime.control import Directive
from eosconnect.runtime.task import TaskSpec
from eosconnect.runtime.task_group import HostAnswer, host_memory
from eosconnect.worker_config import task_heartbeat_timeout_s

log = logging.getLogger(__name__)


#: An idle task's metrics ride along at least this often; changed counters go with the next beat.
METRICS_REFRESH_S = 5.0
#: Longest a leader holds a steady host's request while it has nothing new for it (module doc),
#: and at most this share of `task.heartbeat.timeout.ms`.
HOLD_S = 2.0
HOLD_SHARE = 0.4
#: How often the leader looks again at a held request.
HOLD_RECHECK_S = 0.25
#: A host asks without a hold until its answers and its tasks' states have not changed for this long.
SETTLE_S = 2.0


def hold_of(report: Mapping[str, Any]) -> float:
    """The seconds a host's request may be held (0 for a host that does not ask, or asks wrongly)."""
    try:
        return min(max(float(report.get("hold_s") or 0.0), 0.0), HOLD_S)
    except (TypeError, ValueError):
        return 0.0


def answer_is_news(report: Mapping[str, Any], answer: Mapping[str, Any]) -> bool:
    """Whether the leader's answer changes anything for the host that sent `report`: a task to
    start, the host to end, or a directive other than the one the task holds."""
    if answer.get("start") or answer.get("stop"):
        return True
    directives = answer.get("directives") or {}
    return any(
        directives.get(str(beat.get("instance") or "")) != beat.get("directive")
        for beat in report.get("tasks") or []
    )


def metric_counters(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """The metrics without those that move with the clock alone (running time, rates)."""
    return {k: v for k, v in metrics.items() if k != "running-seconds" and not k.endswith("-rate")}


@dataclass
class HostedTaskControl(RestTaskControl):
    """A task's control inside a slot host: the host's request carries its heartbeat."""

    #: The counters the last beat carried, and when: a beat leaves unchanged metrics out.
    _sent_counters: dict[str, Any] | None = field(default=None, repr=False)
    _metrics_sent_at: float = field(default=0.0, repr=False)

    def directive(self) -> Directive:
        self.loop_watch().asked()
        return self._directive

    def heartbeat_body(self) -> dict[str, Any]:
        """The task's part of its host's heartbeat. Metrics whose counters did not move since the
        last beat are left out (the leader keeps what it has) unless `METRICS_REFRESH_S` passed:
        encoding, signing and reading every idle task's metrics twice a second was most of what a
        host of idle tasks, and the leader serving it, spent."""
        self.loop_watch().check()
        body = {
            "connector": self.connector,
            "task": self.task,
            "directive": self._directive.value,
            **self.report_body({"state": self.reported_state()}),
        }
        counters, now = metric_counters(body["metrics"]), time.monotonic()
        if counters == self._sent_counters and now - self._metrics_sent_at < METRICS_REFRESH_S:
            del body["metrics"]
        else:
            self._sent_counters, self._metrics_sent_at = counters, now
        return body

    def heard(self, directive: str | None) -> None:
        if directive is not None:
            self._set_directive(Directive(directive))
            self._last_ok = time.monotonic()


def spec_to_json(spec: TaskSpec) -> dict[str, Any]:
    """The leader's side: what a host needs to build the task's spec (see `spec_from_json`)."""
    return {
        "connector": spec.connector,
        "task": spec.task,
        "generation": spec.generation,
        "instance": str(getattr(spec.control, "instance", "")),
        "task_config": spec.task_config,
        "connector_config": spec.connector_config,
        "fenced": spec.coordinator is not None,
    }


def spec_from_json(data: Mapping[str, Any], worker_url: str, worker_props: dict[str, str]) -> TaskSpec:
    connector, task, generation = str(data["connector"]), int(data["task"]), int(data["generation"])
    return TaskSpec(
        connector=connector,
        task=task,
        task_config=dict(data["task_config"]),
        connector_config=dict(data["connector_config"]),
        worker_config=dict(worker_props),
        control=HostedTaskControl(
            worker_url, worker_props, connector, task, generation, instance=str(data["instance"])
        ),
        coordinator=RestStartupCoordinator(worker_url, worker_props) if data.get("fenced") else None,
        generation=generation,
    )


@dataclass
class RestHostChannel:
    worker_url: str
    worker_props: dict[str, str]
    host_id: str
    _last_ok: float = field(default_factory=time.monotonic, repr=False)
    #: Since when nothing changed: the answers brought nothing new, the tasks' states stayed put.
    _steady_since: float = field(default_factory=time.monotonic, repr=False)
    #: What the last beat said of each task (instance -> state), to see a change.
    _last_states: dict[str, str] = field(default_factory=dict, repr=False)

    def poll(self, running: Sequence[TaskSpec]) -> HostAnswer | None:
        controls = [s.control for s in running if isinstance(s.control, HostedTaskControl)]
        beats = [c.heartbeat_body() for c in controls]
        states = {str(b["instance"]): str(b["state"]) for b in beats}
        now = time.monotonic()
        if states != self._last_states:
            self._last_states, self._steady_since = states, now
        hold = self.hold_s() if beats and now - self._steady_since >= SETTLE_S else 0.0
        body = {"attempt": _spark_attempt(), **host_memory(), "hold_s": hold, "tasks": beats}
        path = f"/internal/hosts/{quote(self.host_id, safe='')}/heartbeat"
        try:
            access = _ConfigTopicAccess(self.worker_props)
            response = signed_request(access, "PUT", self.worker_url, path, body, 10.0 + hold)
            if response.status_code == 200:
                answer = response.json()
                news = answer_is_news(body, answer)
                if news:
                    self._steady_since = time.monotonic()
                directives = answer.get("directives") or {}
                for control in controls:
                    control.heard(directives.get(control.instance))
                self._last_ok = time.monotonic()
                start = [
                    spec_from_json(d, self.worker_url, self.worker_props) for d in answer.get("start") or []
                ]
                # Held for most of the hold: ask again at once. A leader that does not hold
                # answers at once, and the host keeps its heartbeat interval.
                held = hold > 0 and not news and self._last_ok - now >= hold / 2
                return HostAnswer(start, bool(answer.get("stop")), held)
            if response.status_code in (404, 410):
                return self._stop_all(controls)
            log.warning(
                "slot host %s: heartbeat answered %s: %s",
                self.host_id,
                response.status_code,
                response.text[:200],
            )
        except (httpx.HTTPError, FencingRequestError, ValueError) as exc:
            log.warning("slot host %s: heartbeat to %s failed: %s", self.host_id, self.worker_url, exc)
        if time.monotonic() - self._last_ok > ORPHAN_TIMEOUT_S:
            log.warning(
                "slot host %s: no answer from worker for %.0fs; stopping its tasks: %s",
                self.host_id,
                time.monotonic() - self._last_ok,
                unreachable_leader(self.worker_url, TimeoutError("no heartbeat answered")),
            )
            return self._stop_all(controls)
        return None

    def hold_s(self) -> float:
        """How long this host asks the leader to hold a steady answer (module doc)."""
        try:
            timeout_s = task_heartbeat_timeout_s(self.worker_props)
        except ValueError:  # the worker refused such a setting at start; keep the default's
            timeout_s = 5.0
        return min(HOLD_S, HOLD_SHARE * timeout_s)

    @staticmethod
    def _stop_all(controls: Sequence[HostedTaskControl]) -> HostAnswer:
        for control in controls:
            control.heard(Directive.STOP.value)
        return HostAnswer([], True)
