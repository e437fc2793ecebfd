"""How a task on a Spark executor talks to its worker: signed HTTP requests to the leader.

Spark has no driver-to-task channel (docs/architecture.md), so the task asks:
- `RestStartupCoordinator` runs the leader-dependent start-up steps of an exactly-once task: the
  signed fencing request (step 1) and the generation checks against the config topic (steps 2, 5);
- `RestTaskControl` is the task's heartbeat: every half second it reports state and metrics and
  learns whether to run, pause or stop.

Both read the session key from the config topic themselves (it lives there, docs/architecture.md), so
nothing secret travels inside the pickled task spec. Both are pickled to executors: clients and
stores are created lazily on the executor.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import httpx

from eosconnect.cluster.herder_api import no_leader_now
from eosconnect.runtime.control import CurrentInstance, Directive, TaskControl
from eosconnect.runtime.loop_watch import LoopWatch
from eosconnect.runtime.metrics import TaskMetrics
from eosconnect.runtime.startup import GenerationSuperseded
from eosconnect.storage.config_store import ConfigStore
from eosconnect.storage.session_key import SessionKey, sign_request
from eosconnect.worker_config import WorkerConfig, doubt_grace_s

log = logging.getLogger(__name__)

HEARTBEAT_INTERVAL_S = 0.5
#: Heartbeats go on for this long after the task thread last asked for its directive: a task thread
#: inside a long Kafka call (a commit waiting out a dead broker, up to 60 s) is alive and must not look
#: silent to the leader (`task.heartbeat.timeout.ms`, 5 s); one stuck for longer does.
BLOCKED_BEAT_S = 90.0
#: How long a fenced task asks the leader whether a newer instance replaced it (see `superseded`).
SUPERSEDED_WAIT_S = 10.0
#: How long a task whose producer must be renewed keeps asking a leader that does not answer (see
#: `confirmed_current`): a leader busy with a dead broker's partitions can miss a request or two.
CONFIRM_WAIT_S = 30.0
#: A task that cannot reach its worker for this long stops: its worker is gone or partitioned away,
#: and a successor will fence it anyway.
ORPHAN_TIMEOUT_S = 60.0


#: How often a starting task asks again for fencing while the group has no leader to serve it.
FENCE_RETRY_S = 1.0


class FencingRequestError(RuntimeError):
    """The leader refused or failed the fencing request; the message carries its answer."""


#: This process's config stores, by worker settings, most recently used last. Spark reuses its
#: Python workers from task to task: a store kept between tasks reads only what is new, with clients
#: already connected, where a new one read the whole topic with new clients (0.1-0.3 s of every
#: exactly-once task's start-up, and again for its first heartbeat). Beyond `_STORES_KEPT`
#: worker groups the oldest store is closed.
_STORES_KEPT = 2
_stores: OrderedDict[tuple[tuple[str, str], ...], ConfigStore] = OrderedDict()
_stores_lock = threading.Lock()


def _process_store(worker_props: dict[str, str]) -> ConfigStore:
    key = tuple(sorted(worker_props.items()))
    with _stores_lock:
        store = _stores.pop(key, None)
        if store is None:
            store = ConfigStore(WorkerConfig.parse(worker_props))
        _stores[key] = store
        evicted = [_stores.popitem(last=False)[1] for _ in range(len(_stores) - _STORES_KEPT)]
    for old in evicted:
        old.close()  # thread-safe; a task still holding it would only make new clients
    return store


@dataclass
class _ConfigTopicAccess:
    """The config topic as an executor sees it: the session key and the generations, read through
    this process's store for the worker group (`_process_store`)."""

    worker_props: dict[str, str]

    def store(self) -> ConfigStore:
        return _process_store(self.worker_props)

    def session_key(self, refresh: bool = False) -> SessionKey:
        store = self.store()
        snapshot = store.read_to_end() if refresh or store.snapshot.session_key is None else store.snapshot
        if snapshot.session_key is None:
            raise FencingRequestError("the config topic holds no session key yet; the leader writes one")
        return snapshot.session_key


_http_client: httpx.Client | None = None
_http_client_lock = threading.Lock()


def _http() -> httpx.Client:
    """One HTTP client per process, shared by its tasks' threads (httpx clients are thread-safe).
    `httpx.request()` builds a client, and with it an SSL context, per call: 60-120 ms of CPU on
    the task's start-up path (the fencing request) and again on every half-second heartbeat."""
    global _http_client
    with _http_client_lock:
        if _http_client is None:
            _http_client = httpx.Client()
        return _http_client


#: What a forked child inherited: kept referenced, never used or closed (librdkafka handles are
#: not fork-safe, and freeing one would run its destructor in the child).
_inherited: list[Any] = []


def _replace_http(broken: httpx.Client) -> None:
    """Drop the shared client after a request on it broke off mid-exchange, so the next request
    opens new connections. The old client is kept referenced, not closed: other threads may be in a
    request on it, and closing it under them would break theirs too."""
    global _http_client
    with _http_client_lock:
        if _http_client is broken:
            _inherited.append(broken)
            _http_client = None


def _forget_after_fork() -> None:
    """A forked child must not share its parent's connections: it starts with no client or store."""
    global _http_client, _http_client_lock, _stores_lock
    _inherited.extend([_http_client, *_stores.values()])
    _stores.clear()
    _http_client, _http_client_lock, _stores_lock = None, threading.Lock(), threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)


def signed_request(
    access: _ConfigTopicAccess, method: str, url: str, path: str, body: dict[str, Any], timeout: float
) -> httpx.Response:
    """Send a request signed with the current session key, re-reading the key once on a 403."""
    payload = json.dumps(body).encode()
    response: httpx.Response | None = None
    for attempt in range(2):
        headers = {
            "Content-Type": "application/json",
            **sign_request(access.session_key(attempt > 0), method, path, payload),
        }
        client = _http()
        try:
            response = client.request(method, url + path, content=payload, headers=headers, timeout=timeout)
        except httpx.TransportError as exc:
            if not isinstance(exc, httpx.ConnectError | httpx.TimeoutException):
                _replace_http(client)
            raise
        if response.status_code != 403:
            return response
    assert response is not None
    return response


def unreachable_leader(url: str, exc: BaseException) -> str:
    return (
        f"this task could not reach its worker at {url} ({type(exc).__name__}: {exc}); tasks call the "
        "leader's advertised REST URL: set rest.advertised.host.name (and rest.advertised.port, "
        "rest.advertised.listener, listeners) to an address the Spark executors can reach"
    )


def _spark_attempt() -> int:
    """The Spark attempt number of the running task (0 outside Spark)."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        return context.attemptNumber() if context is not None else 0
    except Exception:
        return 0


@dataclass
class RestStartupCoordinator:
    worker_url: str
    worker_props: dict[str, str]
    request_timeout_s: float = 120.0
    access: _ConfigTopicAccess = field(init=False)

    def __post_init__(self) -> None:
        self.access = _ConfigTopicAccess(self.worker_props)

    def fence_zombies(self, connector: str, generation: int | None = None) -> None:
        """Ask the leader to fence; while the group has no leader to serve it (409: none elected,
        or the leader rejoining its group, as after a membership session lapsed on a loaded
        machine), ask again every `FENCE_RETRY_S` for up to `request_timeout_s`: that answer says
        "retry in a few seconds", and failing the task on it failed tasks started in those 0.2 s."""
        deadline = time.monotonic() + self.request_timeout_s
        while True:
            try:
                response = signed_request(
                    self.access,
                    "PUT",
                    self.worker_url,
                    f"/connectors/{quote(connector, safe='')}/fence",
                    {} if generation is None else {"generation": generation},
                    self.request_timeout_s,
                )
            except httpx.TransportError as exc:
                # A request that reached the worker and broke off (the connection reset or closed
                # under it) is asked again on new connections: fencing a generation twice is a no-op.
                # One that never connected, or timed out, names the setting that fixes the address.
                broke_off = not isinstance(exc, httpx.ConnectError | httpx.TimeoutException)
                if broke_off and time.monotonic() + FENCE_RETRY_S < deadline:
                    log.info(
                        "connector %r: the fencing request broke off (%s: %s); asking again in %.0f s",
                        connector,
                        type(exc).__name__,
                        exc,
                        FENCE_RETRY_S,
                    )
                    time.sleep(FENCE_RETRY_S)
                    continue
                raise FencingRequestError(unreachable_leader(self.worker_url, exc)) from exc
            if response.status_code < 300:
                return
            try:
                message = str(response.json().get("message", response.text))
            except (ValueError, AttributeError):
                message = response.text
            if no_leader_now(response.status_code, message) and time.monotonic() + FENCE_RETRY_S < deadline:
                log.info(
                    "connector %r: the leader cannot fence zombies right now (%s); asking again in %.0f s",
                    connector,
                    message,
                    FENCE_RETRY_S,
                )
                time.sleep(FENCE_RETRY_S)
                continue
            raise FencingRequestError(
                f"the leader could not fence zombies of connector {connector!r} "
                f"(HTTP {response.status_code}): {message}"
            )

    def ensure_latest_generation(self, connector: str, generation: int) -> None:
        snapshot = self.access.store().read_to_end()
        latest = snapshot.generation(connector)
        if latest != generation:
            raise GenerationSuperseded(
                f"connector {connector!r}: this task belongs to generation {generation}, the config topic's "
                f"latest is {latest}"
            )
        if snapshot.pending_fencing(connector):
            raise GenerationSuperseded(
                f"connector {connector!r}: generation {generation} has no task-count record yet "
                "(a newer fencing round is due)"
            )


@dataclass
class RestTaskControl(TaskControl):
    worker_url: str
    worker_props: dict[str, str]
    connector: str
    task: int
    generation: int
    #: This launch of the task (set by the leader): a later launch, or a later Spark attempt of this
    #: one, makes the leader answer this instance "stop" (see `superseded`).
    instance: str = ""
    _metrics: TaskMetrics | None = field(default=None, repr=False)
    #: When the task thread last asked for its directive; says so if it stops asking (loop_watch.py).
    _loop: LoopWatch | None = field(default=None, repr=False)
    _last_ok: float = field(default_factory=time.monotonic, repr=False)
    _directive: Directive = field(default=Directive.RUN, repr=False)
    #: The task thread acted on the current PAUSE (`confirm_paused`): only then is it PAUSED.
    _pause_confirmed: bool = field(default=False, repr=False)
    _beat: threading.Thread | None = field(default=None, repr=False)
    _ended: bool = field(default=False, repr=False)
    #: Notified on every change of `_directive`: a paused task waits on it (`wait_while_paused`).
    _changed: threading.Condition = field(default_factory=threading.Condition, repr=False)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state.update(_metrics=None, _beat=None, _loop=None, _changed=None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _changed=threading.Condition())

    @property
    def leader(self) -> CurrentInstance:
        """The leader answers this control's heartbeats, so it is asked through them."""
        return self

    def attach(self, metrics: TaskMetrics) -> None:
        self._metrics = metrics

    def loop_watch(self) -> LoopWatch:
        if self._loop is None:
            self._loop = LoopWatch(f"{self.connector}-{self.task}")
        return self._loop

    def confirm_paused(self) -> None:
        """The task thread acted on PAUSE (a source committed what was open, a sink stopped
        delivering): from now on the task reports PAUSED. Reported as soon as the directive
        arrived, PAUSED could be published while a commit of the task was still to become visible."""
        if self._directive is Directive.PAUSE:
            self._pause_confirmed = True

    def _set_directive(self, directive: Directive) -> None:
        if directive is not Directive.PAUSE:
            self._pause_confirmed = False
        if directive is not self._directive:
            with self._changed:
                self._directive = directive
                self._changed.notify_all()

    def wait_while_paused(self, timeout_s: float) -> None:
        """Return once the directive is no longer PAUSE (a resume or stop heard by the heartbeat
        thread, or the host's), or after `timeout_s`."""
        with self._changed:
            self._changed.wait_for(lambda: self._directive is not Directive.PAUSE, timeout_s)

    def reported_state(self) -> str:
        return "PAUSED" if self._directive is Directive.PAUSE and self._pause_confirmed else "RUNNING"

    def directive(self) -> Directive:
        """The worker's latest answer. The heartbeats that ask run on a thread of their own, every
        half second: done inline, a signed HTTP round trip held up the task thread for 0.5 s at a
        time on a loaded machine; and sent only when the task thread asks, they stopped while it
        waited in a commit for a dead broker, so the leader took a live task for a lost one. The
        thread ends with the task (`report_outcome`), or `BLOCKED_BEAT_S` after its last question."""
        self.loop_watch().asked()
        beat = self._beat
        if not self._ended and (beat is None or not beat.is_alive()):
            self._beat = threading.Thread(
                target=self._beat_loop, name=f"heartbeat-{self.connector}-{self.task}", daemon=True
            )
            self._beat.start()
        return self._directive

    def _beat_loop(self) -> None:
        while not self._ended:
            started = time.monotonic()
            self._heartbeat()
            self.loop_watch().check()
            if time.monotonic() - self.loop_watch().last_asked > BLOCKED_BEAT_S:
                return  # the task thread is stuck or gone: let the leader see it silent
            time.sleep(max(0.0, HEARTBEAT_INTERVAL_S - (time.monotonic() - started)))

    def _heartbeat(self) -> None:
        answer = self._report({"state": self.reported_state()})
        now = time.monotonic()
        if answer is not None:
            self._set_directive(answer)
            self._last_ok = now
        elif now - self._last_ok > ORPHAN_TIMEOUT_S:
            log.warning(
                "[%s-%s] no answer from worker for %.0fs; stopping: %s",
                self.connector,
                self.task,
                now - self._last_ok,
                unreachable_leader(self.worker_url, TimeoutError("no heartbeat answered")),
            )
            self._set_directive(Directive.STOP)

    def report_outcome(self, state: str, trace: str | None) -> None:
        """The task has ended (STOPPED, FAILED or SUPERSEDED): tell the worker, best effort, after
        any heartbeat still in flight (a late RUNNING must not overtake the final state)."""
        self._ended = True
        beat = self._beat
        if beat is not None:
            beat.join(15.0)
        self._report({"state": state, "trace": trace, "final": True})

    def superseded(self, wait_s: float = SUPERSEDED_WAIT_S) -> bool:
        """Asked by a task whose producer was fenced (or whose transaction the broker aborted):
        was it replaced by design? True once the leader answers this instance "stop" (a newer
        launch or Spark attempt of the task, a newer generation, a restart or stop asked for, or a
        worker that no longer leads). A newer attempt may not have reported yet when it fences this
        one, so a "run" is asked again for up to `wait_s`; still "run" means this instance is the
        task's current one and its failure is real."""
        return self._ask_leader(wait_s, lambda answer: answer is Directive.STOP) is Directive.STOP

    def confirmed_current(self, wait_s: float | None = None) -> bool:
        """Whether the leader answers that this instance is still the task's current one (it is
        told "run" or "pause", not "stop"). Asked before a task renews its transactional producer
        in place (`init_transactions()` again, which fences every other instance of the task): only
        a confirmed current instance may, since a replaced one would fence its successor. No answer
        is no confirmation, but it is asked again for up to `wait_s`: the renewals follow a broker's
        death, when the leader itself can be slow for a few seconds, and a task that gave up at the
        first timeout would fail and wait for a restart over REST.

        The question is marked (`confirm`): a leader in doubt does not answer it (409), since
        another worker may lead already and run this task's successor, which a renewal here would
        fence. So the default `wait_s` waits out the doubt too: `CONFIRM_WAIT_S` plus the doubt
        grace (`scheduled.rebalance.max.delay.ms`), after which the worker leads again or not."""
        wait = CONFIRM_WAIT_S + doubt_grace_s(self.worker_props) if wait_s is None else wait_s
        answer = self._ask_leader(wait, lambda answer: answer is not None, {"confirm": True})
        return answer in (Directive.RUN, Directive.PAUSE)

    def _ask_leader(
        self,
        wait_s: float,
        settled: Callable[[Directive | None], bool],
        question: Mapping[str, Any] | None = None,
    ) -> Directive | None:
        """Report RUNNING (with `question`'s fields) every heartbeat interval until the answer is
        `settled` or `wait_s` is over; the last answer (None: no answer). A "stop" is kept as the
        task's directive."""
        deadline = time.monotonic() + wait_s
        while True:
            answer = self._report({"state": "RUNNING", **(question or {})})
            if answer is Directive.STOP:
                self._set_directive(Directive.STOP)
            if settled(answer) or time.monotonic() >= deadline:
                return answer
            time.sleep(HEARTBEAT_INTERVAL_S)

    def report_body(self, report: dict[str, Any]) -> dict[str, Any]:
        """The heartbeat's body: the report with this instance's identity and latest metrics."""
        return {
            **report,
            "instance": self.instance,
            "generation": self.generation,
            "pid": os.getpid(),
            "attempt": _spark_attempt(),
            "metrics": self._metrics.snapshot() if self._metrics is not None else {},
        }

    def _report(self, report: dict[str, Any]) -> Directive | None:
        body = self.report_body(report)
        path = f"/connectors/{quote(self.connector, safe='')}/tasks/{self.task}/heartbeat"
        try:
            access = _ConfigTopicAccess(self.worker_props)  # the process's store for the group
            response = signed_request(access, "PUT", self.worker_url, path, body, 10.0)
            if response.status_code == 200:
                return Directive(response.json().get("directive", "run"))
            if response.status_code in (404, 410):
                return Directive.STOP
            if no_leader_now(response.status_code, response.text):  # asked again: said at DEBUG
                log.debug("[%s-%s] heartbeat answered %s", self.connector, self.task, response.text[:200])
                return None
            log.warning(
                "[%s-%s] heartbeat answered %s: %s",
                self.connector,
                self.task,
                response.status_code,
                response.text[:200],
            )
        except (httpx.HTTPError, FencingRequestError, ValueError) as exc:
            log.warning("[%s-%s] heartbeat to %s failed: %s", self.connector, self.task, self.worker_url, exc)
        return None
