"""The leader's side of held answers to slot hosts (cluster/host_channel.py, "held answers").

A steady host's heartbeat request is held while there is nothing new for it. One loop looks at
every held request together, in one hop to the server's thread pool per `HOLD_RECHECK_S`, and
answers each that has news or whose hold ran out. One loop rather than one per held request: with
15 slot hosts (400 idle tasks) a look of each request on its own would be 60 thread-pool hops and
event-loop wake-ups a second, about 0.03 s/s of an idle leader's 0.07 (docs/benchmarks.md), for the
same answers.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool

from eosconnect.cluster.herder_api import Herder
from eosconnect.cluster.host_channel import HOLD_RECHECK_S, answer_is_news, hold_of

Answer = dict[str, Any]


@dataclass(eq=False)
class _Held:
    host: str
    report: Mapping[str, Any]
    deadline: float
    answer: asyncio.Future[Answer] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class HeldAnswers:
    """Answers host heartbeats for one REST app, holding those with nothing new (module doc)."""

    def __init__(self, herder: Herder) -> None:
        self._herder = herder
        self._held: list[_Held] = []
        self._rechecks: asyncio.Task[None] | None = None

    async def answer(self, host: str, report: Mapping[str, Any]) -> Answer:
        """Record the host's beats and answer, at once if there is news or no hold was asked for,
        else when news comes or the hold runs out. The herder's errors propagate to the caller."""
        answer = await run_in_threadpool(self._herder.host_heartbeat, host, report)
        hold = hold_of(report)
        if hold <= 0 or answer_is_news(report, answer):
            return answer
        held = _Held(host, report, time.monotonic() + hold)
        self._held.append(held)
        if self._rechecks is None or self._rechecks.done():
            self._rechecks = asyncio.create_task(self._recheck_while_held())
        try:
            return await held.answer
        finally:
            self._held.remove(held)

    async def _recheck_while_held(self) -> None:
        while self._held:
            await asyncio.sleep(HOLD_RECHECK_S)
            waiting = [held for held in self._held if not held.answer.done()]
            if not waiting:
                continue
            answers = await run_in_threadpool(self._look_again, waiting)
            now = time.monotonic()
            for held, answer in zip(waiting, answers, strict=True):
                if not held.answer.done():  # else its request went away meanwhile
                    self._settle(held, answer, now)

    @staticmethod
    def _settle(held: _Held, answer: Answer | Exception, now: float) -> None:
        """Answer `held` if its look brought news, an error, or its hold ran out; an error in
        judging goes to that request alone, never to the loop the other held requests wait on."""
        if isinstance(answer, Exception):
            held.answer.set_exception(answer)
            return
        try:
            due = now >= held.deadline or answer_is_news(held.report, answer)
        except Exception as exc:  # that request answers with the error
            held.answer.set_exception(exc)
            return
        if due:
            held.answer.set_result(answer)

    def _look_again(self, waiting: list[_Held]) -> list[Answer | Exception]:
        """What the herder would answer each held report now (in the thread pool, one hop for all);
        a host whose answer fails gets the error, the others their answers."""
        answers: list[Answer | Exception] = []
        for held in waiting:
            try:
                answers.append(self._herder.host_answer(held.host, held.report))
            except Exception as exc:
                answers.append(exc)
        return answers
