"""The Spark lake reader's pins hang together: both jars are built for the reader's PySpark line."""

from __future__ import annotations

import pytest

from eosconnect.devkafka.lake_jars import LAKE_FORMATS, READER_JARS, READER_PYSPARK, lake_spark_jars


def test_the_iceberg_runtime_is_the_one_for_the_readers_spark_line():
    line = ".".join(READER_PYSPARK.split(".")[:2])
    assert READER_JARS["iceberg"].split(":")[1] == f"iceberg-spark-runtime-{line}_2.13"


def test_every_lake_format_has_jars_and_no_other_does():
    assert sorted(READER_JARS) == sorted(LAKE_FORMATS)
    with pytest.raises(ValueError, match="one of"):
        lake_spark_jars("hudi")
