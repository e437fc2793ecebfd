"""IcebergSinkTask against real Iceberg tables (PyIceberg's SQL catalog on a SQLite file, a local
warehouse): rows and positions in one snapshot, a restart resuming from the snapshot summary, a
zombie fenced by a newer claim, upserts and deletes by id columns, schema evolution, and the
settings refused with the field named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyiceberg.catalog import load_catalog

from eosconnect.api.context import SinkTaskContext
from eosconnect.api.data import SchemaBuilder, Struct
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.connectors.iceberg.connector import IcebergSinkConnector, IcebergSinkTask
from eosconnect.connectors.iceberg.table import positions_property
from eosconnect.connectors.lake.positions import decode_positions

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def config(tmp_path: Path, **extra: str) -> dict[str, str]:
    (tmp_path / "warehouse").mkdir(exist_ok=True)
    return {
        "name": "lake",
        "topics": "t",
        "iceberg.tables": "db.events",
        "iceberg.catalog.type": "sql",
        "iceberg.catalog.uri": f"sqlite:///{tmp_path / 'catalog.db'}",
        "iceberg.catalog.warehouse": f"file://{tmp_path / 'warehouse'}",
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.evolve-schema-enabled": "true",
        **extra,
    }


def started(cfg: dict[str, str], partitions: list[TopicPartition]) -> tuple[IcebergSinkTask, SinkTaskContext]:
    context = SinkTaskContext(configs=cfg)
    task = IcebergSinkTask()
    task.initialize(context)
    task.start(cfg)
    context.assigned.update(partitions)
    task.open(partitions)
    return task, context


def records(tp: TopicPartition, start: int, count: int) -> list[SinkRecord]:
    return [
        SinkRecord(tp.topic, tp.partition, o, None, {"k": o * 10 + tp.partition, "v": "x"}, leader_epoch=4)
        for o in range(start, start + count)
    ]


def catalog_of(cfg: dict[str, str]) -> Any:
    prefix = "iceberg.catalog."
    return load_catalog("iceberg", **{k[len(prefix) :]: v for k, v in cfg.items() if k.startswith(prefix)})


def rows(cfg: dict[str, str], name: str = "db.events") -> list[dict[str, Any]]:
    return sorted(catalog_of(cfg).load_table(name).scan().to_arrow().to_pylist(), key=lambda r: r["k"])


def summary_positions(cfg: dict[str, str]) -> dict[TopicPartition, Any]:
    snapshot = catalog_of(cfg).load_table("db.events").current_snapshot()
    assert snapshot is not None and snapshot.summary is not None
    return decode_positions(snapshot.summary[positions_property("lake")])


def test_rows_and_positions_commit_in_one_snapshot_and_a_restart_resumes_from_it(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    task, context = started(cfg, [TP0, TP1])
    assert context.requested_offsets == {}
    task.put(records(TP0, 0, 4) + records(TP1, 0, 2))
    committed = task.pre_commit({TP0: OffsetAndMetadata(4, leader_epoch=4), TP1: OffsetAndMetadata(2)})
    assert committed == {TP0: OffsetAndMetadata(4, leader_epoch=4), TP1: OffsetAndMetadata(2)}
    assert [r["k"] for r in rows(cfg)] == [0, 1, 10, 11, 20, 30]
    stored = summary_positions(cfg)
    assert (stored[TP0].offset, stored[TP0].leader_epoch, stored[TP0].generation) == (4, 4, 1)
    task.put(records(TP0, 4, 3))  # never committed: read again after the restart
    task.stop()

    again, context = started(cfg, [TP0, TP1])
    assert context.requested_offsets == {TP0: 4, TP1: 2}
    assert context.requested_epochs == {TP0: 4}
    again.put(records(TP0, 4, 3))
    again.pre_commit({TP0: OffsetAndMetadata(7), TP1: OffsetAndMetadata(2)})
    assert [r["k"] for r in rows(cfg)] == [0, 1, 10, 11, 20, 30, 40, 50, 60]
    assert summary_positions(cfg)[TP1].generation == 2
    again.stop()


def test_a_zombie_cannot_commit_after_a_newer_task_claimed_its_partition(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    old, _ = started(cfg, [TP0])
    old.put(records(TP0, 0, 2))
    old.pre_commit({TP0: OffsetAndMetadata(2)})
    old.put(records(TP0, 2, 2))
    new, new_context = started(cfg, [TP0])
    assert new_context.requested_offsets == {TP0: 2}
    assert old.pre_commit({TP0: OffsetAndMetadata(4)}) == {}
    assert TP0 in old.context.paused
    new.put(records(TP0, 2, 2))
    assert new.pre_commit({TP0: OffsetAndMetadata(4)}) == {TP0: OffsetAndMetadata(4)}
    assert [r["k"] for r in rows(cfg)] == [0, 10, 20, 30]


def test_upsert_mode_applies_upserts_and_deletes_by_the_id_columns(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        **{"iceberg.tables.upsert-mode-enabled": "true", "iceberg.tables.default-id-columns": "k"},
    )
    task, _ = started(cfg, [TP0])
    task.put(
        [
            SinkRecord("t", 0, o, None, {"k": k, "v": v})
            for o, (k, v) in enumerate([(1, "a"), (2, "b"), (3, "c")])
        ]
    )
    task.pre_commit({TP0: OffsetAndMetadata(3)})
    task.put(
        [
            SinkRecord("t", 0, 3, None, {"op": "u", "before": None, "after": {"k": 1, "v": "a2"}}),
            SinkRecord("t", 0, 4, {"k": 2}, None),
            SinkRecord("t", 0, 5, None, {"k": 4, "v": "d", "__op": "c"}),
        ]
    )
    task.pre_commit({TP0: OffsetAndMetadata(6)})
    assert [(r["k"], r["v"]) for r in rows(cfg)] == [(1, "a2"), (3, "c"), (4, "d")]


def test_a_new_field_adds_a_column(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    task, _ = started(cfg, [TP0])
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
    assert rows(cfg) == [{"k": 1, "extra": None}, {"k": 2, "extra": "x"}]


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"iceberg.catalog.type": "hive"}, "iceberg.catalog.type"),
        ({"iceberg.tables": "events"}, "iceberg.tables"),
        ({"iceberg.tables.upsert-mode-enabled": "true"}, "iceberg.tables.default-id-columns"),
        ({"iceberg.tables.dynamic-enabled": "true"}, "iceberg.tables.dynamic-enabled"),
    ],
)
def test_bad_settings_are_refused_naming_the_field(tmp_path: Path, extra: dict[str, str], field: str) -> None:
    with pytest.raises(ConfigException) as info:
        IcebergSinkConnector().start(config(tmp_path, **extra))
    assert field in info.value.errors


def test_routed_tables_each_skip_what_they_have_after_a_crash_between_their_commits(tmp_path: Path) -> None:
    cfg = config(tmp_path, **{"iceberg.tables": "db.a,db.b", "iceberg.tables.route-field": "dest"})
    task, _ = started(cfg, [TP0])

    def batch(start: int, count: int) -> list[SinkRecord]:
        return [
            SinkRecord("t", 0, o, None, {"k": o, "dest": "db.a" if o % 2 else "db.b"})
            for o in range(start, start + count)
        ]

    task.put(batch(0, 4))
    task.pre_commit({TP0: OffsetAndMetadata(4)})
    # the next commit reaches db.a only: the task dies before db.b's
    changes = [c for r in batch(4, 4) if (c := task.changes.change(r)) is not None]
    target = {TP0: task.held[TP0].advanced(OffsetAndMetadata(8))}
    task.table._commit_to("db.a", [c for c in changes if c.values["dest"] == "db.a"], target)

    again, context = started(cfg, [TP0])
    assert context.requested_offsets == {TP0: 4}  # the table behind
    again.put(batch(4, 4))
    again.pre_commit({TP0: OffsetAndMetadata(8)})
    assert [r["k"] for r in rows(cfg, "db.a")] == [1, 3, 5, 7]
    assert [r["k"] for r in rows(cfg, "db.b")] == [0, 2, 4, 6]


def test_a_created_table_is_partitioned_by_the_default_partition_columns(tmp_path: Path) -> None:
    cfg = config(tmp_path, **{"iceberg.tables.default-partition-by": "region"})
    task, _ = started(cfg, [TP0])
    task.put([SinkRecord("t", 0, o, None, {"k": o, "region": f"r{o % 2}"}) for o in range(4)])
    task.pre_commit({TP0: OffsetAndMetadata(4)})
    table = catalog_of(cfg).load_table("db.events")
    assert [f.name for f in table.spec().fields] == ["region"]
    assert [r["k"] for r in rows(cfg)] == [0, 1, 2, 3]
