"""Every Connect type the lake sinks map - Kafka's logical types, Debezium's semantic types, arrays,
maps and structs - written by DeltaSinkTask and IcebergSinkTask into real tables and read back
(deltalake, PyIceberg) equal cell by cell, for several keys."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable
from pyiceberg.catalog import load_catalog

from eosconnect.api.context import SinkTaskContext
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.connectors.delta.connector import DeltaSinkTask
from eosconnect.connectors.iceberg.connector import IcebergSinkTask
from eosconnect.connectors.lake.task import LakeSinkTask
from support.lake import MATRIX, cell_mismatches, matrix_expected, matrix_value

TP = TopicPartition("types", 0)
KEYS = [0, 1, 7, 42]


def write(task: LakeSinkTask, config: dict[str, str]) -> None:
    context = SinkTaskContext(configs=config)
    task.initialize(context)
    task.start(config)
    task.open([TP])
    task.put(
        [SinkRecord(TP.topic, 0, i, None, matrix_value(k), value_schema=MATRIX) for i, k in enumerate(KEYS)]
    )
    assert task.pre_commit({TP: OffsetAndMetadata(len(KEYS))}) == {TP: OffsetAndMetadata(len(KEYS))}
    task.stop()


def delta_rows(tmp_path: Path) -> list[dict[str, Any]]:
    path = str(tmp_path / "types")
    write(DeltaSinkTask(), {"name": "m", "topics": TP.topic, "delta.table.path": path})
    return pa.table(DeltaTable(path).to_pyarrow_table()).to_pylist()


def iceberg_rows(tmp_path: Path) -> list[dict[str, Any]]:
    (tmp_path / "wh").mkdir()
    catalog = {
        "type": "sql",
        "uri": f"sqlite:///{tmp_path / 'c.db'}",
        "warehouse": f"file://{tmp_path / 'wh'}",
    }
    config = {"name": "m", "topics": TP.topic, "iceberg.tables": "db.types"}
    config |= {"iceberg.tables.auto-create-enabled": "true"}
    config |= {f"iceberg.catalog.{k}": v for k, v in catalog.items()}
    write(IcebergSinkTask(), config)
    return load_catalog("iceberg", **catalog).load_table("db.types").scan().to_arrow().to_pylist()


@pytest.mark.parametrize(
    ("read", "time_as_text"), [(delta_rows, True), (iceberg_rows, False)], ids=["delta", "iceberg"]
)
def test_every_type_reads_back_equal_cell_by_cell(tmp_path: Path, read: Any, time_as_text: bool) -> None:
    rows = {row["k"]: row for row in read(tmp_path)}
    assert sorted(rows) == KEYS
    problems = {k: cell_mismatches(rows[k], matrix_expected(k, time_as_text=time_as_text)) for k in KEYS}
    assert problems == {k: [] for k in KEYS}
