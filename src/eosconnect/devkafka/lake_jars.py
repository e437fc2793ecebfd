"""The environment in which Spark SQL reads the lake sinks' Delta and Iceberg tables (`make lake-jars`):
a virtualenv holding only `pyspark` of a Spark line that Delta and Iceberg publish Spark jars for,
plus those jars from Maven Central (the project's mvn fetcher), both cached once under the
eosconnect cache dir.

The reader runs apart from the project's PySpark because the jars lag Spark's releases: the
newest `delta-spark` and `iceberg-spark-runtime` are built against an older Spark line than the one
the project's PySpark brings, and a JVM rejects them there (NoSuchMethodError, IncompatibleClassChangeError).
The three pins below are one tested combination: delta-spark 4.3.1's POM names spark-sql 4.1.0, and
`iceberg-spark-runtime-4.1` is Iceberg's runtime for that line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

from eosconnect.devkafka.maven import KafkaSetupError, cache_lock, fetch_artifacts
from eosconnect.runtime.host import cache_root

__all__ = [
    "LAKE_FORMATS",
    "READER_JARS",
    "READER_PYSPARK",
    "LakeReaderSetupError",
    "lake_spark_jars",
    "reader_python",
]

LAKE_FORMATS = ("delta", "iceberg")
READER_PYSPARK = "4.1.4"
READER_JARS = {
    "delta": "io.delta:delta-spark_2.13:4.3.1",
    "iceberg": "org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0",
}
_READY = ".complete"


class LakeReaderSetupError(RuntimeError):
    """The Spark reader's virtualenv or jars could not be built (no PyPI or Maven Central)."""


def lake_spark_jars(fmt: str) -> list[Path]:
    """The jars for `spark.jars` that let the reader's PySpark read `fmt` ("delta" or "iceberg") tables,
    less what that PySpark already ships (so build the reader first: `reader_python()`)."""
    if fmt not in READER_JARS:
        raise ValueError(f"no Spark jars for {fmt!r}: one of {LAKE_FORMATS}")
    coordinate = READER_JARS[fmt]
    try:
        libs = fetch_artifacts(f"lake-spark-{coordinate.split(':', 1)[1].replace(':', '-')}", [coordinate])
    except KafkaSetupError as exc:
        raise LakeReaderSetupError(str(exc)) from exc
    # What the reader's pyspark ships (Spark, Scala, Hadoop, Jackson, Parquet ...) stays its own: a
    # second, older copy on spark.jars would only shadow or clash with it.
    shipped = {_artifact(p) for p in _reader_root().glob("venv/lib/python*/site-packages/pyspark/jars/*.jar")}
    return sorted(
        p
        for p in libs.glob("*.jar")
        if _artifact(p) not in shipped and not p.name.startswith(("spark-", "scala-"))
    )


def _artifact(jar: Path) -> str:
    """A jar's artifact name without its version: `jackson-core` for `jackson-core-2.13.5.jar`."""
    return re.sub(r"-\d+(\.\d+)+(-\d+)?$", "", jar.stem)


def _reader_root() -> Path:
    return cache_root() / f"lake-spark-reader-pyspark-{READER_PYSPARK}"


def reader_python() -> Path:
    """The Python of the reader's virtualenv (pyspark only), built on first use; one builder at a
    time across processes (pytest-xdist workers), and a half-built venv is never handed out."""
    root = _reader_root()
    name = root.name
    python = root / "venv" / "bin" / "python"
    if (root / _READY).exists():
        return python
    with cache_lock(name):
        if (root / _READY).exists():
            return python
        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        print(f"Building the Spark lake reader (pyspark=={READER_PYSPARK}) in {root} ...", flush=True)
        for step in (
            [sys.executable, "-m", "venv", str(root / "venv")],
            [
                str(python),
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                f"pyspark=={READER_PYSPARK}",
            ],
        ):
            done = subprocess.run(step, capture_output=True, text=True, timeout=1800, check=False)
            if done.returncode != 0:
                shutil.rmtree(root, ignore_errors=True)
                raise LakeReaderSetupError(
                    f"Could not build the Spark lake reader venv ({' '.join(step[-2:])}): "
                    f"{(done.stderr or done.stdout).strip()[-2000:]}. Check that pip can reach PyPI."
                )
        (root / _READY).write_text(f"pyspark=={READER_PYSPARK}\n")
        return python
