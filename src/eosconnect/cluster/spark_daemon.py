"""Spark's Python daemon, with the task runtime imported once before it forks Python workers.

PySpark starts Python workers by forking them from a daemon process, and each worker then imports
what its task needs. A connector generation starts all its tasks at once, so with 16 tasks the same
imports (confluent-kafka, httpx, the runtime; ~0.6 s of CPU each) ran 16 times, competing for the
same cores exactly when the tasks' start-up is being waited for. Importing them here, in the daemon,
makes every forked worker inherit them. Only modules that start no thread on import may be listed:
the daemon forks, and threads do not survive a fork.

Enabled by `spark.python.daemon.module=eosconnect.cluster.spark_daemon` (a default of
`create_spark_session`); it needs eosconnect installed on the executors, as tasks do anyway.
"""

from __future__ import annotations

import pyspark.worker  # noqa: F401  (what every forked worker imports first)
from pyspark.daemon import manager

import eosconnect.cluster.task_channel
import eosconnect.connectors.file_stream
import eosconnect.connectors.mirror
import eosconnect.connectors.sequence
import eosconnect.runtime.at_least_once
import eosconnect.runtime.exactly_once
import eosconnect.runtime.executor
import eosconnect.runtime.sink_task  # noqa: F401

if __name__ == "__main__":
    manager()
