"""Spark SQL reading the lake sinks' tables, in the reader environment of
`eosconnect.devkafka.lake_jars` (a virtualenv with a PySpark whose Spark line Delta and Iceberg
publish jars for, and those jars; `make lake-jars`): a subprocess runs
support/lake_spark_reader.py there and prints every row as a JSON line. When that environment
cannot be built (no PyPI or Maven Central) the Spark read skips, naming why."""

from __future__ import annotations

import decimal
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

READER = Path(__file__).with_name("lake_spark_reader.py")


def spark_rows(fmt: str, location: str, timeout: float = 480) -> list[dict[str, Any]]:
    """Every row of the table at `location` (a Delta table's path, or an Iceberg table's metadata
    file), read by Spark SQL; decimals and timestamps arrive as their text."""
    from eosconnect.devkafka.lake_jars import lake_spark_jars, reader_python

    try:
        python = reader_python()
        jars = lake_spark_jars(fmt)
    except Exception as exc:  # no PyPI or no Maven Central: the reader cannot exist here
        pytest.skip(f"no Spark reader for {fmt} (`make lake-jars`): {exc}")
    done = subprocess.run(
        [str(python), str(READER), fmt, ",".join(str(j) for j in jars), location],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    rows = [json.loads(line[len("ROW ") :]) for line in done.stdout.splitlines() if line.startswith("ROW ")]
    finished = done.returncode == 0 and "END" in done.stdout.splitlines()
    assert finished, f"Spark failed:\n{done.stderr[-20000:]}"
    return rows


def assert_spark_reads_each_record_once(rows: list[dict[str, Any]], total: int) -> None:
    """Every k of 0..total-1 in exactly one row of support.jdbc_sink's values, every cell of it
    (`k`, `note`, `price` - a Decimal of k at scale 2) as produced."""
    counts = Counter(row["k"] for row in rows)
    twice = sorted(k for k, n in counts.items() if n > 1)
    missing = sorted(set(range(total)) - set(counts))
    assert not twice and not missing and len(counts) == total, (
        f"Spark SQL: {len(twice)} keys twice (first {twice[:5]}), "
        f"{len(missing)} missing (first {missing[:5]}), "
        f"{len(set(counts) - set(range(total)))} unexpected"
    )
    wrong = []
    for row in rows:
        k = row["k"]
        want = {"k": k, "note": "n", "price": decimal.Decimal(k).quantize(decimal.Decimal("0.01"))}
        got = {**row, "price": None if row.get("price") is None else decimal.Decimal(row["price"])}
        if got != want:
            wrong.append(f"{got} != {want}")
    assert not wrong, f"Spark SQL: {len(wrong)} rows differ from what was produced, e.g. {wrong[:3]}"
