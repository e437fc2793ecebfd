"""Spark SQL reading the lake sinks' tables, in a Python process of its own: its JVM starts with
the Delta or Iceberg jars (`eosconnect.devkafka.lake_jars`), which a JVM already running in the test
process (the `spark` fixture's) could not load. Only with EOSCONNECT_LAKE_SPARK=1: the newest
published jars fail against PySpark 4.3's Spark (delta-spark 4.4.0: NoSuchMethodError on
LogicalRDD.<init>; iceberg-spark-runtime-4.1_2.13 1.12.0, no 4.2/4.3 runtime published:
IncompatibleClassChangeError on CatalogManager), so by default the lake tests read with deltalake
and PyIceberg alone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

SCRIPT = r"""
import json, sys
from pyspark.sql import SparkSession
fmt, jars, location, query = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
builder = (SparkSession.builder.master("local[1]").appName("lake-read").config("spark.jars", jars)
           .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2"))
if fmt == "delta":
    builder = (builder.config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
               .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog"))
    spark = builder.getOrCreate()
    spark.read.format("delta").load(location).createOrReplaceTempView("events")
else:
    builder = builder.config("spark.sql.extensions",
                             "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions")
    spark = builder.getOrCreate()
    spark.read.format("iceberg").load(location).createOrReplaceTempView("events")
rows = [r.asDict() for r in spark.sql(query).collect()]
print("RESULT " + json.dumps(rows, default=str))
spark.stop()
"""


def lake_spark_enabled() -> bool:
    return os.environ.get("EOSCONNECT_LAKE_SPARK") == "1"


def spark_sql(fmt: str, location: str, query: str, timeout: float = 240) -> list[dict[str, Any]]:
    """`query` over the table at `location` (a Delta path, or an Iceberg metadata file) as view
    `events`, by Spark SQL."""
    from eosconnect.devkafka.lake_jars import lake_spark_jars

    try:
        jars = lake_spark_jars(fmt)
    except Exception as exc:  # no Maven Central, or no runtime published for this Spark line
        pytest.skip(f"no Spark jars for {fmt}: {exc}")
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, fmt, ",".join(str(j) for j in jars), location, query],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, f"Spark failed:\n{done.stderr[-20000:]}"
    return list(json.loads(lines[-1][len("RESULT ") :]))
