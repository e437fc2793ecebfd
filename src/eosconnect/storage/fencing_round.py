"""A round of zombie fencing for one connector (KIP-618 "Zombie fencing by the leader").

Before tasks of a new generation of task configs start, every producer that tasks of earlier
generations may still hold must be fenced, else a zombie task could commit records and offsets
next to its replacement. The config topic says what to do: a connector needs a round when its
latest `commit-<c>` is not followed by a `tasks-fencing-<c>` record, and that record's previous value
N says which ids earlier generations can have used: `<group.id>-<c>-0 … N-1`.

`fencing_plan` is the pure decision (unit-tested); `perform_fencing_round` carries it out for the
leader's fencing endpoint: fence in parallel with the connector's principal, write the new task-count
record through the leader's transactional writer only if no newer task configs appeared meanwhile,
and read it back. A newer generation at either check ends the round with `FencingConflict` (409).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eosconnect.api.errors import ConnectException
from eosconnect.storage.clients import client_config
from eosconnect.storage.config_state import ConfigSnapshot
from eosconnect.storage.config_store import ConfigStore
from eosconnect.storage.config_writers import ConfigWriteError, FencingConflict
from eosconnect.storage.transactional_ids import fence_transactional_ids, task_transactional_id

__all__ = [
    "ConnectorNotFoundError",
    "FencingConflict",
    "FencingPlan",
    "fencing_plan",
    "perform_fencing_round",
]

log = logging.getLogger(__name__)


class ConnectorNotFoundError(ConnectException, LookupError):
    """The connector to fence does not exist (HTTP 404)."""


@dataclass(frozen=True)
class FencingPlan:
    """What a fencing round for `connector` must do, decided from one snapshot."""

    connector: str
    #: False: a task-count record already follows the latest task configs (answer 200 at once).
    needed: bool
    #: Transactional ids to fence before writing the record (may be empty even when `needed`).
    ids_to_fence: tuple[str, ...]
    #: The value of the task-count record to write: the task count of the latest commit.
    new_task_count: int
    #: The latest task-count record before this round, if any.
    previous_task_count: int | None
    #: The generation of task configs the round is for.
    generation: int | None


def fencing_plan(snapshot: ConfigSnapshot, connector: str, group_id: str) -> FencingPlan:
    """Decide the round (docs/architecture.md, KIP-618 steps 5-6).

    - no task-count record after the latest commit → nothing to do;
    - no previous task-count record → no producer of this connector has ever been allowed to
      start, so just write the record;
    - previous and new counts both at most 1 → the single new task's own `init_transactions()`
      fences its single predecessor (same transactional id), so just write the record;
    - else fence `<group.id>-<c>-0 … N-1`, N the previous record's value, then write.
    Raises `ConnectorNotFoundError` for an unknown connector.
    """
    if not snapshot.contains(connector):
        raise ConnectorNotFoundError(f"connector {connector!r} not found")
    new_count = snapshot.task_count(connector)
    previous = snapshot.task_count_record(connector)
    generation = snapshot.generation(connector)
    if not snapshot.pending_fencing(connector):
        return FencingPlan(
            connector, False, (), previous if previous is not None else new_count, previous, generation
        )
    if previous is None or (previous <= 1 and new_count <= 1):
        ids: tuple[str, ...] = ()
    else:
        ids = tuple(task_transactional_id(group_id, connector, t) for t in range(previous))
    return FencingPlan(connector, True, ids, new_count, previous, generation)


def perform_fencing_round(
    store: ConfigStore,
    snapshot: ConfigSnapshot,
    connector: str,
    producer_config: Mapping[str, Any] | None = None,
    expected_generation: int | None = None,
    *,
    timeout_s: float = 30.0,
    on_stage: Callable[[str], None] | None = None,
    fence: Callable[[Mapping[str, Any], Sequence[str], float], None] = fence_transactional_ids,
) -> ConfigSnapshot:
    """Run one round for `connector` as the leader (who holds the store's write privileges).

    `snapshot` is the leader's fresh read of the config topic; `expected_generation` (default: the
    snapshot's) is the generation the requesting task belongs to. `producer_config` is the
    connector's producer settings, so fencing runs with the connector's principal (default: built
    from the worker's and connector's configs). `on_stage("fenced")` / `on_stage("written")` are
    called after fencing and after writing the record (hooks for tests and metrics).

    Returns the snapshot read back after the write (or `snapshot` if nothing was needed). Raises
    `FencingConflict` if another generation is, or becomes, the latest during the round;
    `FencingError` if ids could not be fenced; `LeaderFencedError` if this worker is no longer leader.
    """
    expected = snapshot.generation(connector) if expected_generation is None else expected_generation
    plan = fencing_plan(snapshot, connector, store.worker.group_id)
    if plan.generation != expected:
        raise FencingConflict(connector, expected, plan.generation)
    if not plan.needed:
        log.debug("connector %r generation %s needs no fencing", connector, expected)
        return snapshot
    if plan.ids_to_fence:
        config = producer_config
        if config is None:
            config = client_config("producer", store.worker.originals, snapshot.connector_config(connector))
        log.info(
            "fencing %d producers of connector %r before generation %s starts",
            len(plan.ids_to_fence),
            connector,
            expected,
        )
        fence(config, plan.ids_to_fence, timeout_s)
    if on_stage is not None:
        on_stage("fenced")
    store.put_task_count_record(connector, plan.new_task_count, expected_generation=expected)
    if on_stage is not None:
        on_stage("written")
    after = store.read_to_end()
    if after.generation(connector) != expected:
        raise FencingConflict(connector, expected, after.generation(connector))
    if after.pending_fencing(connector) or after.task_count_record(connector) != plan.new_task_count:
        raise ConfigWriteError(
            f"the task-count record for connector {connector!r} was written but is not visible when reading "
            "the config topic back; retry the fencing request"
        )
    log.info(
        "connector %r generation %s: task-count record %d written", connector, expected, plan.new_task_count
    )
    return after
