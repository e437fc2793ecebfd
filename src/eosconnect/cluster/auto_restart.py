"""Automatic restart of failed tasks, with exponential back-off, opt-in per connector.

Kafka Connect leaves a FAILED task failed until someone calls `POST .../restart?onlyFailed=true`
(operators write cron jobs for it). A connector that sets `errors.restart.enable=true` gets that
from the leader instead: a failed task is restarted after `errors.restart.backoff.initial.ms`,
doubling up to `errors.restart.backoff.max.ms`, at most `errors.restart.max.attempts` times in a
row (-1: no limit). A task that stays up for `errors.restart.backoff.max.ms` starts from the first
attempt again. The pending restart shows in the task's status trace, and restarts are counted in
`/metrics` (`eosconnect_task_auto_restarts_total`).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.validators import Range

__all__ = ["AUTO_RESTART_CONFIG_DEF", "AutoRestarts", "RestartPolicy"]

AUTO_RESTART_CONFIG_DEF = (
    ConfigDef()
    .define(
        "errors.restart.enable",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Restart failed tasks automatically, with exponential back-off (eosconnect).",
    )
    .define(
        "errors.restart.backoff.initial.ms",
        ConfigType.LONG,
        1_000,
        Importance.LOW,
        "Delay before the first automatic restart of a failed task.",
        Range.at_least(0),
    )
    .define(
        "errors.restart.backoff.max.ms",
        ConfigType.LONG,
        60_000,
        Importance.LOW,
        "Longest delay between automatic restarts; a task up this long counts its attempts afresh.",
        Range.at_least(0),
    )
    .define(
        "errors.restart.max.attempts",
        ConfigType.INT,
        10,
        Importance.LOW,
        "Automatic restarts in a row before the task is left FAILED (-1: no limit).",
        Range.at_least(-1),
    )
)


@dataclass(frozen=True)
class RestartPolicy:
    initial_s: float
    max_s: float
    max_attempts: int

    @classmethod
    def of(cls, config: Mapping[str, str]) -> RestartPolicy | None:
        """The connector's policy, or None when it has not opted in (or its settings are invalid).
        Asked for every connector on every leader tick: parsed once per distinct setting (parsing
        was a sixth of an idle leader's CPU with 400 connectors)."""
        return _policy(tuple((name, config[name]) for name in _POLICY_SETTINGS if name in config))

    def delay(self, attempt: int) -> float:
        """Seconds to wait before restart number `attempt` (1-based)."""
        return min(self.initial_s * 2 ** (attempt - 1), self.max_s)


_POLICY_SETTINGS = tuple(AUTO_RESTART_CONFIG_DEF.names())


@functools.lru_cache(maxsize=1024)
def _policy(settings: tuple[tuple[str, str], ...]) -> RestartPolicy | None:
    try:
        values = AUTO_RESTART_CONFIG_DEF.parse(dict(settings))
    except Exception:
        return None
    if not values["errors.restart.enable"]:
        return None
    return RestartPolicy(
        values["errors.restart.backoff.initial.ms"] / 1000,
        values["errors.restart.backoff.max.ms"] / 1000,
        values["errors.restart.max.attempts"],
    )


@dataclass
class _TaskRestarts:
    attempts: int = 0
    due_at: float | None = None
    running_since: float | None = None


@dataclass
class AutoRestarts:
    """The leader's bookkeeping: which failed tasks to restart when. Pure logic; the herder acts."""

    tasks: dict[tuple[str, int], _TaskRestarts] = field(default_factory=dict)
    total: dict[tuple[str, int], int] = field(default_factory=dict)

    def observe(
        self, connector: str, task: int, state: str, policy: RestartPolicy | None, now: float
    ) -> tuple[str, float | None] | None:
        """Feed a task's current state. Returns ("schedule", delay) when a restart was just
        scheduled, ("restart", None) when one is due now, ("exhausted", None) once when the
        attempts ran out, else None."""
        key = (connector, task)
        if policy is None:
            self.tasks.pop(key, None)
            return None
        entry = self.tasks.setdefault(key, _TaskRestarts())
        if state != "FAILED":
            if state == "RUNNING":
                entry.running_since = entry.running_since or now
                if entry.attempts and now - entry.running_since >= policy.max_s:
                    entry.attempts = 0  # up long enough: the next failure starts afresh
            else:
                entry.running_since = None
            entry.due_at = None
            return None
        entry.running_since = None
        if entry.due_at is None:
            if policy.max_attempts >= 0 and entry.attempts >= policy.max_attempts:
                if entry.attempts == policy.max_attempts:
                    entry.attempts += 1  # report once
                    return ("exhausted", None)
                return None
            entry.attempts += 1
            delay = policy.delay(entry.attempts)
            entry.due_at = now + delay
            return ("schedule", delay)
        if now >= entry.due_at:
            entry.due_at = None
            self.total[key] = self.total.get(key, 0) + 1
            return ("restart", None)
        return None

    def attempts(self, connector: str, task: int) -> int:
        entry = self.tasks.get((connector, task))
        return entry.attempts if entry else 0

    def forget(self, connector: str) -> None:
        for key in [k for k in self.tasks if k[0] == connector]:
            del self.tasks[key]
