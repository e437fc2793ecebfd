"""Connectors deleted or stopped for good, retired (`Connector.retired`) once their tasks ended.

`Connector.stop()` cannot tell a deletion from a restart, a reconfiguration or a rebalance, so
what outlives a connector's tasks outside Kafka (a PostgreSQL replication slot, which keeps WAL
until it is dropped) is left alone there. The leader watches the config topic instead: a
connector that disappeared from it, or whose target state became STOPPED, is retired once no task
of it runs any more (a slot cannot be dropped while a task still reads it). One that is started
again (or created anew under the same name) before then is not.

A leader knows only what changed while it led: its first snapshot is taken as it is (a connector
already STOPPED then was retired by the leader that saw it stop, if any).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from eosconnect.storage.config_state import ConfigSnapshot, TargetState

__all__ = ["Retirement", "Retirements"]


@dataclass(frozen=True)
class Retirement:
    name: str
    config: Mapping[str, str]
    deleted: bool  # else stopped (KIP-875)


class Retirements:
    """Only the herder's thread calls these."""

    def __init__(self) -> None:
        self._seen: dict[str, tuple[Mapping[str, str], bool]] | None = None  # name: (config, stopped)
        self._pending: dict[str, Retirement] = {}

    def observe(self, snapshot: ConfigSnapshot) -> None:
        """Note the connectors deleted or stopped since the last snapshot observed."""
        now: dict[str, tuple[Mapping[str, str], bool]] = {
            name: (
                dict(snapshot.connector_config(name) or {}),
                snapshot.target_state(name) == TargetState.STOPPED,
            )
            for name in snapshot.connectors()
        }
        for name, (config, stopped) in (self._seen or {}).items():
            if name not in now:
                self._pending[name] = Retirement(name, config, deleted=True)
            elif now[name][1] and not stopped:
                self._pending[name] = Retirement(name, now[name][0], deleted=False)
        for name, (_, stopped) in now.items():
            if not stopped:  # started again, or created anew under the name, before its tasks ended
                self._pending.pop(name, None)
        self._seen = now

    def due(self, still_running: Callable[[str], bool]) -> list[Retirement]:
        """The retirements whose connector has no task running any more (taken: each is due once)."""
        ready = [r for name, r in self._pending.items() if not still_running(name)]
        for retirement in ready:
            del self._pending[retirement.name]
        return ready

    def forget(self) -> None:
        """Called when this worker stops leading: the next leader watches from its own first
        snapshot, so nothing pending is kept here."""
        self._seen = None
        self._pending.clear()
