"""The Spark jars that read Delta and Iceberg tables, for the lake sinks' tests: `delta-spark` and
`iceberg-spark-runtime` of the installed PySpark's Spark line (the newest published version at or
below it), fetched once from Maven Central with the project's mvn fetcher (`make lake-jars`)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["LAKE_FORMATS", "lake_spark_jars"]

LAKE_FORMATS = ("delta", "iceberg")


def _spark_line() -> tuple[str, str]:
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return major, minor


def lake_spark_jars(fmt: str) -> list[Path]:
    """The jars for `spark.jars` that let this PySpark read `fmt` ("delta" or "iceberg") tables."""
    from eosconnect.devkafka.maven import fetch_artifacts, published_versions

    major, minor = _spark_line()
    if fmt == "delta":
        versions = published_versions("io.delta", "delta-spark_2.13", f"[{major}.0,{major}.{int(minor) + 1})")
        coordinate = f"io.delta:delta-spark_2.13:{versions[0]}"
    elif fmt == "iceberg":
        artifact, versions = _iceberg_runtime(major, int(minor))
        coordinate = f"org.apache.iceberg:{artifact}:{versions[0]}"
    else:
        raise ValueError(f"no Spark jars for {fmt!r}: one of {LAKE_FORMATS}")
    libs = fetch_artifacts(f"lake-spark-{coordinate.split(':', 1)[1].replace(':', '-')}", [coordinate])
    return sorted(p for p in libs.glob("*.jar") if not p.name.startswith(("spark-", "scala-")))


def _iceberg_runtime(major: str, minor: int) -> tuple[str, list[str]]:
    """`iceberg-spark-runtime-<major>.<minor>_2.13` for the newest Spark line at or below ours that
    Iceberg publishes one for."""
    from eosconnect.devkafka.maven import KafkaSetupError, published_versions

    for line in range(minor, -1, -1):
        artifact = f"iceberg-spark-runtime-{major}.{line}_2.13"
        try:
            versions = published_versions("org.apache.iceberg", artifact, "[1.0,)", pattern=r"1\.\d+\.\d+")
        except KafkaSetupError:
            continue
        if versions:
            return artifact, versions
    raise RuntimeError(f"Iceberg publishes no Spark runtime for Spark {major}.x up to {major}.{minor}")
