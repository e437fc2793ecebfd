"""The steps of an exactly-once task's start-up that need the cluster's leader (docs/architecture.md).

A task asks the leader to fence zombies of its connector (step 1) and checks that its generation is
still the latest, before and after creating its producer (steps 2 and 5). The distributed worker
answers over its signed internal REST endpoint; `LocalStartupCoordinator` is the single-process
implementation used when the runtime drives tasks directly (tests, benchmarks, one-shot jobs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from eosconnect.storage.transactional_ids import fence_transactional_ids, task_transactional_id


class GenerationSuperseded(Exception):
    """A newer generation of task configs exists: this task must quietly not start."""


class StartupCoordinator(Protocol):
    def fence_zombies(self, connector: str, generation: int | None = None) -> None:
        """Fence the previous generation's producers; raises on failure (the task then FAILS).

        `generation` is the asking task's, so that a round already done need not be repeated."""
        ...

    def ensure_latest_generation(self, connector: str, generation: int) -> None:
        """Raise `GenerationSuperseded` unless `generation` is still the connector's latest."""
        ...


@dataclass
class LocalStartupCoordinator:
    """One process owns the connector: fence the ids of a previous, larger generation if any.

    Ids `0..task_count-1` are fenced by the tasks' own `init_transactions()`; ids at or above the
    current task count belonged to a previous generation with more tasks and are fenced here.
    """

    group_id: str
    producer_config: Mapping[str, Any]
    task_count: int
    previous_task_count: int = 0
    generation: int = 0
    _fenced: bool = field(default=False, repr=False)

    def fence_zombies(self, connector: str, generation: int | None = None) -> None:
        stale = range(self.task_count, self.previous_task_count)
        if stale and not self._fenced:
            fence_transactional_ids(
                self.producer_config, [task_transactional_id(self.group_id, connector, t) for t in stale]
            )
        self._fenced = True

    def ensure_latest_generation(self, connector: str, generation: int) -> None:
        if generation != self.generation:
            raise GenerationSuperseded(
                f"connector {connector!r}: task generation {generation} is superseded by {self.generation}"
            )
