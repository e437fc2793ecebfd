"""Which Python Spark's workers run for the `eosconnect` formats, checked before a query starts.

PySpark starts its Python workers with `SparkContext.pythonExec`, which it takes from the environment
variable `PYSPARK_PYTHON` when the context is created, else `python3` from the PATH. Run from a
virtualenv that is not activated (`.venv/bin/python job.py`), that is the system's Python, without
eosconnect: the query then dies inside a long JVM stack trace. `spark.pyspark.python` cannot help
once the session exists (Spark refuses to modify it: CANNOT_MODIFY_CONFIG), and outside
spark-submit PySpark ignores it anyway; `pythonExec` is read whenever a Python function or data
source is registered, so setting it before registering works.

So in local mode, when the user chose no interpreter, the workers run the driver's own
(`sys.executable`); a chosen one is checked to import eosconnect. On a cluster one small Spark job
checks that the executors can import eosconnect, and otherwise fails naming the fixes.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

from eosconnect.api.errors import ConfigException
from eosconnect.cluster.shipping import is_local_master

log = logging.getLogger(__name__)

CLUSTER_FIX = (
    "ship this environment to the executors: create the session with "
    "eosconnect.cluster.spark.create_spark_session(master) (it packs the driver's virtualenv and "
    "passes it as spark.archives), or give it your own archive "
    "(.config('spark.archives', 'env.tar.gz#env')) and set PYSPARK_PYTHON=./env/bin/python before "
    "the session is created; or install eosconnect into the executors' Python"
)


def use_driver_python(spark: Any) -> str:
    """Make the session's Python workers able to import eosconnect, or raise naming the fix.

    Returns the interpreter the workers use. Call it before registering the data sources: each
    registration records the interpreter of that moment."""
    sc = spark.sparkContext
    conf = sc.getConf()
    chosen = os.environ.get("PYSPARK_PYTHON") or conf.get("spark.pyspark.python")
    if chosen:
        sc.pythonExec = chosen  # spark.pyspark.python from the builder: PySpark alone would ignore it
    if is_local_master(str(conf.get("spark.master", ""))):
        if chosen:
            _check_local(chosen)
        else:
            sc.pythonExec = sys.executable
            log.info(
                "Spark's Python workers run the driver's interpreter %s (set PYSPARK_PYTHON before "
                "creating the session to choose another)",
                sys.executable,
            )
    else:
        _check_executors(spark)
    return str(sc.pythonExec)


def _check_local(python: str) -> None:
    """The interpreter the user chose (PYSPARK_PYTHON) must import eosconnect."""
    try:
        done = subprocess.run(
            [python, "-c", "import eosconnect"], capture_output=True, text=True, timeout=60, check=False
        )
        problem = done.stderr.strip().splitlines()[-1:] if done.returncode else None
    except OSError as exc:
        problem = [str(exc)]
    except subprocess.TimeoutExpired:
        return  # a slow machine, not a missing module: let Spark try
    if problem:
        raise ConfigException(
            f"Spark's Python workers would run {python!r} (PYSPARK_PYTHON), which cannot import eosconnect "
            f"({problem[0]}); unset PYSPARK_PYTHON to use the driver's interpreter {sys.executable}, or "
            "point it at a Python that has eosconnect installed"
        )


def _check_executors(spark: Any) -> None:
    """One task on an executor tries `import eosconnect` and reports its interpreter."""

    def probe(_: Any) -> tuple[str, str | None]:  # nested: cloudpickle ships it by value
        import sys as executor_sys

        try:
            __import__("eosconnect")
        except Exception as exc:
            return executor_sys.executable, f"{type(exc).__name__}: {exc}"
        return executor_sys.executable, None

    sc = spark.sparkContext
    sc.setJobDescription("eosconnect: can the executors import eosconnect?")
    try:
        ((python, problem),) = sc.parallelize([0], 1).map(probe).collect()
    finally:
        sc.setJobDescription(None)
    if problem is not None:
        raise ConfigException(
            f"Spark's executors cannot import eosconnect: their Python {python} (PYSPARK_PYTHON="
            f"{sc.pythonExec}) says {problem}; {CLUSTER_FIX}"
        )
