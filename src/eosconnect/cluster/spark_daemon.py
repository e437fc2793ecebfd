"""Spark's Python daemon, with the task runtime imported once before it forks Python workers.

PySpark starts Python workers by forking them from a daemon process, and each worker then imports
what its task needs. A connector generation starts all its tasks at once, so with 16 tasks the same
imports (confluent-kafka, httpx, the runtime; ~0.6 s of CPU each) ran 16 times, competing for the
same cores exactly when the tasks' start-up is being waited for. Importing them here, in the daemon,
makes every forked worker inherit them. Only modules that start no thread on import may be listed:
the daemon forks, and threads do not survive a fork.

Spark puts its own `python/lib/pyspark.zip` first on the workers' path. Python cannot keep byte code
for modules imported from a zip, so every daemon compiles pyspark's sources again (1.1 s of CPU here,
on every new executor: a first start, a replacement, a failover). When the environment has the same
pyspark installed (the worker's shipped environment does, with byte code), the zip is moved behind it.

Enabled by `spark.python.daemon.module=eosconnect.cluster.spark_daemon` (a default of
`create_spark_session`); it needs eosconnect installed on the executors, as tasks do anyway.
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path

ZIPPED_PYSPARK = "pyspark.zip"


def prefer_installed_pyspark(path: list[str]) -> bool:
    """Move Spark's `pyspark.zip` behind an installed pyspark of the very same version (the same
    `pyspark/version.py`), in place; return whether it moved. A different version keeps the zip
    first: it is the one that matches the executor's JVM."""
    zipped = [entry for entry in path if entry.endswith(ZIPPED_PYSPARK)]
    if not zipped:
        return False
    try:
        with zipfile.ZipFile(zipped[0]) as archive:
            zipped_version = archive.read("pyspark/version.py")
    except (OSError, KeyError, zipfile.BadZipFile):
        return False
    for entry in path:
        version_file = Path(entry or ".") / "pyspark" / "version.py"
        if entry in zipped or not version_file.is_file():
            continue
        if version_file.read_bytes() != zipped_version:
            return False
        for archive_path in zipped:
            path.remove(archive_path)
            path.append(archive_path)
        return True
    return False


prefer_installed_pyspark(sys.path)

import pyspark.worker  # noqa: E402, F401  (what every forked worker imports first)
from pyspark.daemon import manager  # noqa: E402

import eosconnect.cluster.task_channel  # noqa: E402
import eosconnect.connectors.file_stream  # noqa: E402
import eosconnect.connectors.mirror  # noqa: E402
import eosconnect.connectors.sequence  # noqa: E402
import eosconnect.runtime.at_least_once  # noqa: E402
import eosconnect.runtime.exactly_once  # noqa: E402
import eosconnect.runtime.executor  # noqa: E402
import eosconnect.runtime.sink_task  # noqa: E402, F401

if __name__ == "__main__":
    manager()
