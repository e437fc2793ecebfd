"""Pure runtime logic: KIP-910 merging, transaction-size metrics, task control."""

from __future__ import annotations

import logging
from pathlib import Path

from eosconnect.api.records import SourceOffset, SourcePartition
from eosconnect.runtime.control import Directive, FileTaskControl
from eosconnect.runtime.metrics import TaskMetrics
from eosconnect.runtime.source_task import apply_update_offsets
from eosconnect.runtime.task import TaskLogAdapter


class _Task:
    def __init__(self, result):
        self.result = result
        self.seen = None

    def update_offsets(self, offsets):
        self.seen = offsets
        return self.result


def _merge(result, offsets):
    task = _Task(result)
    task_log = TaskLogAdapter(logging.getLogger("eosconnect.runtime.source_task"), {"id": "c-0"})
    return apply_update_offsets(task, offsets, task_log), task.seen


P1, P2 = SourcePartition.of({"table": "busy"}), SourcePartition.of({"table": "idle"})


def test_update_offsets_none_or_empty_changes_nothing():
    offsets = {P1: SourceOffset.of({"id": 5})}
    assert _merge(None, offsets)[0] == offsets
    assert _merge({}, offsets)[0] == offsets


def test_update_offsets_adds_idle_partition_and_overrides_busy():
    offsets = {P1: SourceOffset.of({"id": 5})}
    merged, seen = _merge({P1: {"id": 6}, P2: {"ts": 99}}, offsets)
    assert seen == offsets
    assert merged == {P1: SourceOffset.of({"id": 6}), P2: SourceOffset.of({"ts": 99})}


def test_update_offsets_dropping_a_partition_keeps_it_and_warns(caplog):
    offsets = {P1: SourceOffset.of({"id": 5})}
    with caplog.at_level(logging.WARNING):
        merged, _ = _merge({P2: {"ts": 1}}, offsets)
    assert merged[P1] == SourceOffset.of({"id": 5}) and merged[P2] == SourceOffset.of({"ts": 1})
    assert "left out 1 source partition" in caplog.text and "[c-0]" in caplog.text


def test_transaction_size_metrics():
    metrics = TaskMetrics("c", 0)
    assert metrics.snapshot()["transaction-size-avg"] is None
    for size in (10, 30, 20):
        metrics.record_transaction(size)
    metrics.record_abort()
    snap = metrics.snapshot()
    assert (snap["transaction-size-min"], snap["transaction-size-max"], snap["transaction-size-avg"]) == (
        10,
        30,
        20,
    )
    assert snap["transactions-committed"] == 3 and snap["transactions-aborted"] == 1


def test_file_task_control(tmp_path: Path):
    control = FileTaskControl(str(tmp_path / "ctl"), check_interval_s=0)
    assert control.directive() is Directive.RUN
    control.set(Directive.PAUSE)
    assert control.directive() is Directive.PAUSE
    control.set(Directive.STOP)
    assert control.directive() is Directive.STOP
