"""The leader retires a connector (`Connector.retired`) when it is deleted or stopped and its tasks
have ended, and never for a restart, a reconfiguration or a new generation (cluster/retirements.py)."""

from __future__ import annotations

from eosconnect.cluster.retirements import Retirement, Retirements
from eosconnect.storage.config_state import ConfigSnapshot, TargetState


def snapshot(**connectors: TargetState) -> ConfigSnapshot:
    return ConfigSnapshot(
        connector_configs={name: {"name": name, "v": str(len(name))} for name in connectors},
        target_states=dict(connectors),
    )


def test_a_deleted_connector_is_retired_once_its_tasks_ended() -> None:
    retirements = Retirements()
    retirements.observe(snapshot(cdc=TargetState.STARTED, other=TargetState.STARTED))
    retirements.observe(snapshot(other=TargetState.STARTED))
    assert retirements.due(lambda name: name == "cdc") == [], "its task still runs"
    assert retirements.due(lambda name: False) == [Retirement("cdc", {"name": "cdc", "v": "3"}, deleted=True)]
    assert retirements.due(lambda name: False) == [], "once"


def test_a_stopped_connector_is_retired_and_deleted_later_retired_again_as_deleted() -> None:
    retirements = Retirements()
    retirements.observe(snapshot(cdc=TargetState.STARTED))
    retirements.observe(snapshot(cdc=TargetState.STOPPED))
    assert [r.deleted for r in retirements.due(lambda name: False)] == [False]
    retirements.observe(snapshot())
    assert [r.deleted for r in retirements.due(lambda name: False)] == [True]


def test_restarts_pauses_and_a_quick_resume_retire_nothing() -> None:
    retirements = Retirements()
    retirements.observe(snapshot(cdc=TargetState.STARTED))
    retirements.observe(snapshot(cdc=TargetState.PAUSED))
    retirements.observe(snapshot(cdc=TargetState.STARTED))
    assert retirements.due(lambda name: False) == []
    retirements.observe(snapshot(cdc=TargetState.STOPPED))
    retirements.observe(snapshot(cdc=TargetState.STARTED))  # resumed before its task had ended
    assert retirements.due(lambda name: False) == []


def test_a_new_leader_takes_its_first_snapshot_as_it_is() -> None:
    """Connectors already STOPPED when it starts leading were retired by the leader that saw them
    stop; one that loses the leadership forgets what it was waiting for."""
    retirements = Retirements()
    retirements.observe(snapshot(cdc=TargetState.STOPPED))
    assert retirements.due(lambda name: False) == []
    retirements.observe(snapshot())
    retirements.forget()
    assert retirements.due(lambda name: False) == []
