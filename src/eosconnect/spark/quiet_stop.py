"""Stop a streaming query, and the session at exit, without Spark's noise.

`query.stop()` cancels the running micro-batch. Nothing is lost (each partition's transaction either
committed, and the replay skips it, or is aborted), but Spark's JVM logs the cancelled write at
ERROR: "Data source write support ... aborted", "Aborting task" with a `TaskKilledException` stack
trace, "Aborting commit for partition ...". `stop_query` sets Spark's log level to FATAL while the
query stops and its cancelled tasks end (bounded), then back, so a deliberate stop shows one INFO
line; a failing query keeps its errors.

When the JVM goes (`spark.stop()`, or the end of a script), PySpark's accumulator server may print
an `EOFError` traceback for the connection the JVM dropped (its handler reads on hang-up; a race in
PySpark). `stop_at_exit` (which `register()` calls) makes the server drop that one error silently,
and stops the session's queries quietly and the session itself when the interpreter exits.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import sys
import time
from collections.abc import Iterator
from typing import Any

log = logging.getLogger(__name__)

#: How long `stop_query` waits for the cancelled tasks to end before Spark may log again.
CANCEL_WAIT_S = 10.0


def stop_query(query: Any) -> None:
    """`query.stop()`, quietly: the cancelled batch is logged at INFO, not as Spark's errors."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None:
        query.stop()
        return
    run_id = str(query.runId)
    with _quiet(sc):
        query.stop()
        _await_cancelled_tasks(sc, run_id)
    log.info("streaming query %s stopped (a batch it cancelled is replayed on restart)", query.id)


def _await_cancelled_tasks(sc: Any, run_id: str) -> None:
    """Spark kills the running batch's tasks after `stop()` returns: wait (bounded) until no stage
    of the query's job group has active tasks, so that their ERROR lines fall in the quiet window."""
    tracker = sc.statusTracker()
    deadline = time.monotonic() + CANCEL_WAIT_S
    while time.monotonic() < deadline:
        stages = [
            stage
            for job in tracker.getJobIdsForGroup(run_id)
            if (info := tracker.getJobInfo(job)) is not None
            for stage in info.stageIds
        ]
        if not any((s := tracker.getStageInfo(stage)) is not None and s.numActiveTasks for stage in stages):
            return
        time.sleep(0.1)


@contextlib.contextmanager
def _quiet(sc: Any) -> Iterator[None]:
    """Spark's root log level at FATAL, then back to what it was (log4j 2, as Spark 4 ships).

    `setLogLevel` also drops the threshold a PySpark session applies at start ("Setting default
    log level to WARN" over a root logger at INFO): it is put back too."""
    jvm = sc._jvm
    try:
        before = str(jvm.org.apache.logging.log4j.LogManager.getRootLogger().getLevel().toString())
        logging_object = getattr(jvm.org.apache.spark.internal, "Logging$").__getattr__("MODULE$")
        threshold = logging_object.sparkShellThresholdLevel()
        sc.setLogLevel("FATAL")
    except Exception as exc:  # another logging backend: stop anyway, with Spark's lines
        log.debug("could not quiet Spark's log: %s", exc)
        before = None
    try:
        yield
    finally:
        if before is not None:
            with contextlib.suppress(Exception):
                sc.setLogLevel(before)
                getattr(logging_object, "sparkShellThresholdLevel_$eq")(threshold)


_STOPPED_AT_EXIT: set[int] = set()


def stop_at_exit(spark: Any) -> None:
    """At interpreter exit: `stop_query` every active query of `spark`, then `spark.stop()`.
    Once per session; harmless if the script stopped them itself."""
    if id(spark) in _STOPPED_AT_EXIT:
        return
    _STOPPED_AT_EXIT.add(id(spark))
    _quiet_accumulator_server(spark.sparkContext)

    def stop() -> None:
        with contextlib.suppress(Exception):
            for query in spark.streams.active:
                stop_query(query)
        with contextlib.suppress(Exception):
            spark.stop()

    atexit.register(stop)


def _quiet_accumulator_server(sc: Any) -> None:
    """PySpark's accumulator server: an EOFError (the JVM hung up) is not worth a traceback."""
    server = getattr(sc, "_accumulatorServer", None)
    if server is None:
        return
    original = server.handle_error

    def handle_error(request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], EOFError):
            log.debug("Spark's JVM closed its accumulator connection")
            return
        original(request, client_address)

    server.handle_error = handle_error
