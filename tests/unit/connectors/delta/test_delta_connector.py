"""DeltaSinkTask against real Delta tables (delta-rs on a temporary directory): rows and positions
in one commit, a restart resuming from the table's `txn` actions, a zombie fenced by a newer claim,
merge mode applying upserts and deletes in order, and a column added by a later schema."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from deltalake.exceptions import CommitFailedError

from eosconnect.api.context import SinkTaskContext
from eosconnect.api.data import SchemaBuilder, Struct
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.connectors.delta.config import parse_settings
from eosconnect.connectors.delta.connector import DeltaSinkConnector, DeltaSinkTask
from eosconnect.connectors.delta.table import DeltaLakeTable, app_id
from eosconnect.connectors.lake.arrow_schema import Mapper
from eosconnect.connectors.lake.changes import ChangeMaker

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def config(path: Path, **extra: str) -> dict[str, str]:
    return {"name": "lake", "topics": "t", "delta.table.path": str(path), **extra}


def started(cfg: dict[str, str], partitions: list[TopicPartition]) -> tuple[DeltaSinkTask, SinkTaskContext]:
    context = SinkTaskContext(configs=cfg)
    task = DeltaSinkTask()
    task.initialize(context)
    task.start(cfg)
    context.assigned.update(partitions)
    task.open(partitions)
    return task, context


def records(tp: TopicPartition, start: int, count: int, **fields: Any) -> list[SinkRecord]:
    return [
        SinkRecord(tp.topic, tp.partition, o, None, {"k": o * 10 + tp.partition, **fields}, leader_epoch=3)
        for o in range(start, start + count)
    ]


def rows(path: Path) -> list[dict[str, Any]]:
    table = pa.table(DeltaTable(str(path)).to_pyarrow_table())
    return sorted(table.to_pylist(), key=lambda r: r["k"])


def test_rows_and_positions_commit_together_and_a_restart_resumes_from_the_table(tmp_path: Path) -> None:
    path = tmp_path / "events"
    task, context = started(config(path), [TP0, TP1])
    assert context.requested_offsets == {}  # a new table: nothing to resume from
    task.put(records(TP0, 0, 5) + records(TP1, 0, 3))
    committed = task.pre_commit({TP0: OffsetAndMetadata(5, leader_epoch=3), TP1: OffsetAndMetadata(3)})
    assert committed == {TP0: OffsetAndMetadata(5, leader_epoch=3), TP1: OffsetAndMetadata(3)}
    assert [r["k"] for r in rows(path)] == sorted([o * 10 for o in range(5)] + [o * 10 + 1 for o in range(3)])
    table = DeltaTable(str(path))
    assert table.transaction_version(app_id("lake", TP0)) == 5
    assert table.transaction_version(app_id("lake", TP0) + ".leader-epoch") == 3
    task.put(records(TP0, 5, 2))  # buffered, never committed: lost with the task, read again
    task.stop()

    again, context = started(config(path), [TP0, TP1])
    assert context.requested_offsets == {TP0: 5, TP1: 3}
    assert context.requested_epochs == {TP0: 3}
    again.put(records(TP0, 5, 2))
    again.pre_commit({TP0: OffsetAndMetadata(7), TP1: OffsetAndMetadata(3)})
    assert len(rows(path)) == 10  # each record once
    assert DeltaTable(str(path)).transaction_version(app_id("lake", TP0) + ".generation") == 2
    again.stop()


def test_a_zombie_cannot_commit_after_a_newer_task_claimed_its_partition(tmp_path: Path) -> None:
    path = tmp_path / "events"
    old, _ = started(config(path), [TP0])
    old.put(records(TP0, 0, 2))
    old.pre_commit({TP0: OffsetAndMetadata(2)})
    old.put(records(TP0, 2, 3))  # the old task freezes here
    new, new_context = started(config(path), [TP0])  # the partition moved: claimed again
    assert new_context.requested_offsets == {TP0: 2}
    assert old.pre_commit({TP0: OffsetAndMetadata(5)}) == {}  # woken up: fenced
    assert TP0 in old.context.paused
    new.put(records(TP0, 2, 3))
    assert new.pre_commit({TP0: OffsetAndMetadata(5)}) == {TP0: OffsetAndMetadata(5)}
    assert [r["k"] for r in rows(path)] == [0, 10, 20, 30, 40]


def test_merge_mode_applies_upserts_and_deletes_in_order_per_key(tmp_path: Path) -> None:
    path = tmp_path / "state"
    cfg = config(path, **{"delta.mode": "merge", "delta.merge.keys": "k"})
    task, _ = started(cfg, [TP0])
    batch = [
        SinkRecord("t", 0, 0, None, {"k": 1, "v": "a"}),
        SinkRecord("t", 0, 1, None, {"k": 2, "v": "b"}),
        SinkRecord("t", 0, 2, None, {"k": 3, "v": "c"}),
    ]
    task.put(batch)
    task.pre_commit({TP0: OffsetAndMetadata(3)})
    envelope = {"op": "u", "before": {"k": 1, "v": "a"}, "after": {"k": 1, "v": "a2"}}
    task.put(
        [
            SinkRecord("t", 0, 3, None, envelope),
            SinkRecord("t", 0, 4, {"k": 2}, None),  # a tombstone: delete by key
            SinkRecord("t", 0, 5, None, {"k": 3, "v": "c", "__op": "d"}),
            SinkRecord("t", 0, 6, None, {"k": 3, "v": "c3", "__op": "c"}),  # re-created after the delete
            SinkRecord("t", 0, 7, None, {"k": 4, "v": "d", "__op": "c"}),
            SinkRecord("t", 0, 8, None, {"op": "d", "before": {"k": 4, "v": "d"}, "after": None}),
        ]
    )
    task.pre_commit({TP0: OffsetAndMetadata(9)})
    assert [(r["k"], r["v"]) for r in rows(path)] == [(1, "a2"), (3, "c3")]


def test_a_later_schema_with_a_new_field_adds_the_column(tmp_path: Path) -> None:
    path = tmp_path / "events"
    task, _ = started(config(path), [TP0])
    v1 = SchemaBuilder.struct().field("k", SchemaBuilder.int64().build()).build()
    v2 = (
        SchemaBuilder.struct()
        .field("k", SchemaBuilder.int64().build())
        .field("extra", SchemaBuilder.string().optional().build())
        .build()
    )
    task.put([SinkRecord("t", 0, 0, None, Struct(v1).put("k", 1), value_schema=v1)])
    task.pre_commit({TP0: OffsetAndMetadata(1)})
    task.put([SinkRecord("t", 0, 1, None, Struct(v2).put("k", 2).put("extra", "x"), value_schema=v2)])
    task.pre_commit({TP0: OffsetAndMetadata(2)})
    assert rows(path) == [{"k": 1, "extra": None}, {"k": 2, "extra": "x"}]


def test_merge_mode_without_keys_is_refused_naming_the_setting(tmp_path: Path) -> None:
    with pytest.raises(ConfigException, match=r"delta\.merge\.keys"):
        DeltaSinkConnector().start(config(tmp_path / "x", **{"delta.mode": "merge"}))


def test_a_claim_landing_during_a_commit_makes_that_commit_conflict(tmp_path: Path) -> None:
    """What the fencing rests on: delta-rs counts the `txn` app ids a commit carries as read by it,
    so a commit built on a table version before a claim of its partition fails, while a commit of
    another partition is rebased."""
    path = tmp_path / "events"
    task, _ = started(config(path), [TP0, TP1])
    task.put(records(TP0, 0, 1))
    task.pre_commit({TP0: OffsetAndMetadata(1)})
    holder = DeltaLakeTable(parse_settings(config(path)), "lake")
    held = holder.positions([TP0, TP1])
    stale = DeltaTable(str(path))  # the holder's view while it builds a commit
    started(config(path), [TP0])  # a newer task claims TP0 meanwhile
    maker = ChangeMaker(Mapper(), merge=False)
    change = maker.change(records(TP0, 1, 1)[0])
    assert change is not None
    with pytest.raises(CommitFailedError):
        holder._write(stale, [change], {TP0: held[TP0].advanced(OffsetAndMetadata(2))})
    other = maker.change(records(TP1, 0, 1)[0])
    assert other is not None
    holder._write(DeltaTable(str(path)), [other], {TP1: held[TP1].advanced(OffsetAndMetadata(1))})


def test_records_that_make_no_row_still_move_the_positions(tmp_path: Path) -> None:
    path = tmp_path / "events"
    task, _ = started(config(path), [TP0])
    task.put(records(TP0, 0, 2))
    task.pre_commit({TP0: OffsetAndMetadata(2)})
    task.put([SinkRecord("t", 0, 2, {"k": 1}, None)])  # a tombstone: no row when appending
    assert task.pre_commit({TP0: OffsetAndMetadata(3)}) == {TP0: OffsetAndMetadata(3)}
    assert DeltaTable(str(path)).transaction_version(app_id("lake", TP0)) == 3
    assert len(rows(path)) == 2


def test_a_created_table_is_partitioned_by_delta_partition_by(tmp_path: Path) -> None:
    path = tmp_path / "events"
    task, _ = started(config(path, **{"delta.partition.by": "region"}), [TP0])
    task.put([SinkRecord("t", 0, o, None, {"k": o, "region": f"r{o % 2}"}) for o in range(4)])
    task.pre_commit({TP0: OffsetAndMetadata(4)})
    assert DeltaTable(str(path)).metadata().partition_columns == ["region"]
    assert [r["k"] for r in rows(path)] == [0, 1, 2, 3]
