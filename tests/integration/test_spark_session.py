"""The SparkSession the worker builds: Python workers come from eosconnect's preloading daemon."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.spark


def test_python_workers_are_forked_from_the_preloading_daemon(spark: Any) -> None:
    def worker_view(_: Any) -> tuple[str | None, bool]:  # nested: pickled by value for the executor
        import sys

        spec = getattr(sys.modules["__main__"], "__spec__", None)
        return (spec.name if spec else None, "eosconnect.runtime.exactly_once" in sys.modules)

    # A forked worker's __main__ is the daemon module it was forked from; the runtime modules are
    # already imported when the task function starts (the point of the daemon: no per-task import).
    seen = spark.sparkContext.parallelize([0, 1], 2).map(worker_view).collect()
    assert seen == [("eosconnect.cluster.spark_daemon", True)] * 2
