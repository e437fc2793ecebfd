"""The Delta table and the Iceberg table the lake sinks' worker tests write: for each format the
connector's config (JSON values with schemas, a 1 s commit interval), a row count that reads 0
while the table does not exist, the table as Arrow, and where Spark SQL reads it from. One place so
that every fault test drives both sinks the same way."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.jdbc_sink import JSON

__all__ = ["LakeTarget", "lake_target"]


@dataclass(frozen=True)
class LakeTarget:
    """One table of `fmt` (`delta` or `iceberg`) under a test's own directory."""

    fmt: str
    root: Path

    @property
    def _catalog(self) -> dict[str, str]:
        return {
            "type": "sql",
            "uri": f"sqlite:///{self.root / 'catalog.db'}",
            "warehouse": f"file://{self.root / 'warehouse'}",
        }

    def config(self, topic: str, tasks: int = 2, **extra: str) -> dict[str, str]:
        common = {
            "tasks.max": str(tasks),
            "topics": topic,
            "value.converter": JSON,
            "value.converter.schemas.enable": "true",
            "consumer.override.session.timeout.ms": "6000",
        }
        if self.fmt == "delta":
            specific = {
                "connector.class": "DeltaSink",
                "delta.table.path": str(self.root / "events"),
                "commit.interval.ms": "1000",
            }
        else:
            (self.root / "warehouse").mkdir(parents=True, exist_ok=True)
            specific = {
                "connector.class": "org.apache.iceberg.connect.IcebergSinkConnector",
                "iceberg.tables": "db.events",
                "iceberg.tables.auto-create-enabled": "true",
                "iceberg.control.commit.interval-ms": "1000",
                **{f"iceberg.catalog.{k}": v for k, v in self._catalog.items()},
            }
        return {**common, **specific, **extra}

    def arrow(self) -> Any:
        """The table's current rows as an Arrow table."""
        if self.fmt == "delta":
            import pyarrow as pa
            from deltalake import DeltaTable

            return pa.table(DeltaTable(str(self.root / "events")).to_pyarrow_table())
        return self._iceberg().scan().to_arrow()

    def rows(self) -> int:
        try:
            return len(self.arrow())
        except Exception:  # not created yet
            return 0

    def spark_location(self) -> str:
        """What support.lake_spark.spark_rows reads: the Delta path or the Iceberg metadata file."""
        if self.fmt == "delta":
            return str(self.root / "events")
        return str(self._iceberg().metadata_location)

    def _iceberg(self) -> Any:
        from pyiceberg.catalog import load_catalog

        return load_catalog("iceberg", **self._catalog).load_table("db.events")


def lake_target(fmt: str, root: Path) -> LakeTarget:
    root.mkdir(parents=True, exist_ok=True)
    return LakeTarget(fmt, root)
