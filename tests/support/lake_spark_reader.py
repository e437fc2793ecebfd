"""Run by the Spark lake reader's Python (eosconnect.devkafka.lake_jars), not by the test process:
`python lake_spark_reader.py delta|iceberg <jars,comma,separated> <location>` prints every row of
the table as `ROW <json>` (Spark SQL over it as view `events`), then `END`. Delta is read by its
path; Iceberg by its current metadata file, so no catalog of Spark's has to understand the
sink's SQL catalog. It imports only pyspark: the reader's venv holds nothing else."""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main(fmt: str, jars: str, location: str) -> None:
    builder = (
        SparkSession.builder.master("local[1]")
        .appName(f"lake-read-{fmt}")
        .config("spark.jars", jars)
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
    )
    if fmt == "delta":
        builder = (
            builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
            .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
            .config("spark.databricks.delta.snapshotPartitions", "1")
        )  # a test table's log is small
    else:
        builder = builder.config(
            "spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
        )
    spark = builder.getOrCreate()
    try:
        spark.read.format(fmt).load(location).createOrReplaceTempView("events")
        for row in spark.sql("SELECT * FROM events").collect():
            print("ROW " + json.dumps(row.asDict(recursive=True), default=str))
        print("END", flush=True)
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
