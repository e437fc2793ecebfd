"""Build the SparkSession that runs connector tasks.

Each connector task is a long-running Spark task, so the session needs one task slot per task plus
headroom, and the master `local[N,F]` form so that a task whose Python worker dies is retried
(plain `local[N]` ignores `spark.task.maxFailures`, see docs/architecture.md).

On a cluster master the executors' Python comes from `cluster/shipping.py` (the worker's packed
environment via `spark.archives`, plugin code via `addPyFile`) unless the user provides it. PySpark
takes the executors' interpreter from the environment variable `PYSPARK_PYTHON` only (it ignores
`spark.pyspark.python` when the driver is not started by spark-submit), so it is set here from the plan.

A standby worker holds no executors. On a cluster master every worker registers its Spark
application at start with dynamic allocation from zero executors (`CLUSTER_DEFAULTS`): executors are
requested only for pending tasks, and only the leader has tasks, so a standby's application holds none,
and a failover does not wait for the new leader's application to be created (tens of seconds on a busy
machine). In local mode executors are threads of the worker's JVM that hold nothing without tasks,
so the application is created at start there too. If the user turns dynamic allocation off on a
cluster, `SparkProvider` creates the session when the worker becomes the leader and stops it when it
no longer leads; only the JVM is started in advance.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from eosconnect.cluster.shipping import DAEMON_MODULE, ShippingPlan, is_local_master, plan_shipping
from eosconnect.runtime.host import cache_root

if TYPE_CHECKING:
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

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
    "spark.python.daemon.module": DAEMON_MODULE,
}


#: On a cluster master: executors only for pending tasks, none at start (user settings win).
CLUSTER_DEFAULTS: dict[str, str] = {
    "spark.dynamicAllocation.enabled": "true",
    # No external shuffle service is needed: tasks shuffle nothing, and tracking keeps any that do.
    "spark.dynamicAllocation.shuffleTracking.enabled": "true",
    "spark.dynamicAllocation.minExecutors": "0",
    "spark.dynamicAllocation.initialExecutors": "0",
    "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
    "spark.dynamicAllocation.sustainedSchedulerBacklogTimeout": "1s",
    "spark.dynamicAllocation.executorIdleTimeout": "30s",
    # The executors of this application only run connector tasks, whose work is in Python: their JVM
    # needs a quick start (a failover or a replacement waits for it), not peak JIT code. C1 only and
    # the serial collector cut the JVM's start-up CPU (measured in docs/spark-cluster.md).
    "spark.executor.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
}


def dynamic_allocation(settings: Mapping[str, str]) -> bool:
    return str(settings.get("spark.dynamicAllocation.enabled", "false")).lower() == "true"


def session_settings(master: str, conf: Mapping[str, str] | None, plan: ShippingPlan) -> dict[str, str]:
    """Lean defaults < cluster defaults < what shipping needs < the user's own `spark.*` settings."""
    cluster = {} if is_local_master(master) else CLUSTER_DEFAULTS
    return {**LEAN_DEFAULTS, **cluster, **plan.conf, **(conf or {}), "spark.master": master}


def create_spark_session(
    master: str | None = None,
    app_name: str = "eosconnect",
    conf: dict[str, str] | None = None,
    plugin_path: Sequence[str] = (),
    ship: bool = True,
) -> SparkSession:
    """Get or create the session, with what its executors need to import eosconnect and the plugins."""
    from pyspark.sql import SparkSession

    master = master or DEFAULT_MASTER
    conf = dict(conf or {})
    began = time.monotonic()
    plan = plan_shipping(master, conf, plugin_path, cache_root(), ship)
    planned = time.monotonic()
    os.environ["PYSPARK_PYTHON"] = plan.executor_python
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    for key, value in session_settings(master, conf, plan).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    created = time.monotonic()
    spark.sparkContext.setLogLevel("WARN")
    if not is_local_master(master):
        user_files = [p for p in conf.get("spark.submit.pyFiles", "").split(",") if p]
        for path in [*user_files, *map(str, plan.py_files)]:
            spark.sparkContext.addPyFile(path)
        log.info(
            "Spark master %s: %s (planned in %.1fs, application created in %.1fs, files added in %.1fs)",
            master,
            plan.describe(),
            planned - began,
            created - planned,
            time.monotonic() - created,
        )
    return spark


def launch_detached_gateway(conf: SparkConf) -> Any:
    """Start Spark's JVM deaf to the signals meant for the worker; None if a JVM runs already.

    A SIGTERM to the worker's process group (`timeout`, `kill -- -PGID`, a terminal) would otherwise
    reach the JVM at the same moment as the worker: the JVM's shutdown hook stops the SparkContext,
    which kills the tasks before they hear "stop" and commit (an at-least-once source task then
    repeats everything since its last periodic offset flush). So the JVM runs in a session of its
    own with SIGTERM ignored (the JVM leaves an inherited SIG_IGN alone; PySpark already ignores
    SIGINT there). (Spark's Python workers have process groups of their own too; a SIGTERM to the
    whole cgroup, systemd's default `KillMode=control-group`, still kills them: use
    `KillMode=mixed`.) It still ends with the worker:
    the worker stops it, or, if the worker dies, PySpark's gateway exits at end of input on its
    stdin pipe, so no JVM is left behind.
    """
    import pyspark.java_gateway as java_gateway
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        return None
    popen = java_gateway.Popen

    def deaf_popen(*args: Any, **kwargs: Any) -> Any:
        inner = kwargs.get("preexec_fn")

        def preexec() -> None:
            if inner is not None:
                inner()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        return popen(*args, **{**kwargs, "preexec_fn": preexec})

    # pyspark's module global, replaced for this one launch and restored (mypy sees a class there)
    java_gateway.Popen = deaf_popen  # type: ignore[misc, assignment]
    try:
        return java_gateway.launch_gateway(conf, popen_kwargs={"start_new_session": True})
    finally:
        java_gateway.Popen = popen  # type: ignore[misc]


def executor_slots(spark: SparkSession) -> int:
    """Task slots Spark has now: the executors' cores over `spark.task.cpus` (0 before any executor
    registered). `defaultParallelism` is no measure on a cluster: it says 2 with no executor at all."""
    sc = spark.sparkContext
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # an API change in Spark: fall back to what the scheduler advertises
        return int(sc.defaultParallelism)


STOP_TIMEOUT_S = 20.0


class SparkProvider:
    """The worker's SparkSession, made only while the worker leads (a standby holds no executors)."""

    def __init__(
        self,
        master: str,
        app_name: str,
        conf: Mapping[str, str],
        plugin_path: Sequence[str] = (),
        ship: bool = True,
    ) -> None:
        self.master = master
        self.app_name = app_name
        self.conf = dict(conf)
        self.plugin_path = tuple(plugin_path)
        self.ship = ship
        self._session: SparkSession | None = None
        self._lock = threading.Lock()

    def prepare(self) -> None:
        """Start the JVM (and pack what ships) ahead of time, without an application or executors."""
        from pyspark import SparkConf, SparkContext

        plan = plan_shipping(self.master, self.conf, self.plugin_path, cache_root(), self.ship)
        os.environ["PYSPARK_PYTHON"] = plan.executor_python
        settings = session_settings(self.master, self.conf, plan)
        conf = SparkConf(loadDefaults=False).setAll(list(settings.items()))
        SparkContext._ensure_initialized(gateway=launch_detached_gateway(conf), conf=conf)

    @property
    def active(self) -> bool:
        return self._session is not None

    @property
    def kept_by_standby(self) -> bool:
        """Whether a standby may hold the application (so that a failover need not create one): in
        local mode its executors are threads that run nothing without tasks; on a cluster only with
        executors on demand."""
        return is_local_master(self.master) or self.on_demand_executors

    @property
    def on_demand_executors(self) -> bool:
        """Whether the application gets executors only for pending tasks (dynamic allocation on a
        cluster): then a standby may keep it, and the leader launches without counting slots first."""
        if is_local_master(self.master):
            return False
        return dynamic_allocation({**CLUSTER_DEFAULTS, **self.conf})

    def get(self) -> SparkSession:
        with self._lock:
            if self._session is None:
                started = time.monotonic()
                self._session = create_spark_session(
                    self.master, self.app_name, self.conf, self.plugin_path, self.ship
                )
                log.info("Spark application %s started in %.1fs", self.app_name, time.monotonic() - started)
            return self._session

    def release_if_holding(self) -> None:
        """A worker that no longer leads gives its executors back: it stops its application, unless
        a standby may keep it (`kept_by_standby`)."""
        if not self.kept_by_standby:
            self.release()

    def release(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Stop the application: its executors go back to the cluster. Bounded: SparkContext.stop()
        can wait for good on a task that ignores cancellation, and a worker being stopped or losing
        the lead must go on regardless (its tasks are fenced by the next generation anyway)."""
        with self._lock:
            session, self._session = self._session, None
        if session is None:
            return
        log.info("stopping Spark application %s (this worker no longer leads)", self.app_name)
        stopper = threading.Thread(target=session.stop, name="spark-stop", daemon=True)
        stopper.start()
        stopper.join(timeout_s)
        if stopper.is_alive():
            log.warning(
                "Spark application %s did not stop within %.0fs; going on without waiting (its JVM ends "
                "with this process, its tasks are fenced by the next generation)",
                self.app_name,
                timeout_s,
            )
