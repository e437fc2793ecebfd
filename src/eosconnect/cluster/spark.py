"""Build the SparkSession that runs connector tasks.

Each connector task is a long-running Spark task, so the session needs one task slot per task plus
headroom, and the master `local[N,F]` form so that a task whose Python worker dies is retried
(plain `local[N]` ignores `spark.task.maxFailures`, see DESIGN.md section 1).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[4,4]"

#: Settings that keep a local session small on a 2-core machine; user `spark.*` settings win.
LEAN_DEFAULTS: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
    "spark.python.worker.reuse": "true",
    # Long-running tasks must not be re-launched speculatively: two copies would fence each other.
    "spark.speculation": "false",
    "spark.locality.wait": "0s",
    # Python workers are forked from a daemon that already imported the task runtime (see there).
    "spark.python.daemon.module": "eosconnect.cluster.spark_daemon",
}


def create_spark_session(
    master: str | None = None, app_name: str = "eosconnect", conf: dict[str, str] | None = None
) -> SparkSession:
    """Get or create the session; executors use this interpreter so that eosconnect is importable."""
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name).master(master or DEFAULT_MASTER)
    for key, value in {**LEAN_DEFAULTS, **(conf or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    return spark
