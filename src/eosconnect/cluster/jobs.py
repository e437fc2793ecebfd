"""One connector generation's tasks as one Spark job (docs/architecture.md).

The driver instantiates the connector, asks it for task configs, and launches a job with one Spark
task per connector task, in its own job group so that it can be cancelled as a unit. Tasks are told
to stop through their `TaskControl`; only those that do not stop within the graceful timeout are
cancelled (a cancelled task cannot commit, and its open transaction lingers until fenced).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eosconnect.api.connector import Connector
from eosconnect.api.context import ConnectorContext
from eosconnect.api.sink import SinkConnector
from eosconnect.plugins.config_providers import resolve_config
from eosconnect.plugins.loading import connector_class_of
from eosconnect.policies.database_hosts import check_database_host
from eosconnect.runtime.control import Directive, FileTaskControl
from eosconnect.runtime.executor import spark_task_entry
from eosconnect.runtime.startup import LocalStartupCoordinator, StartupCoordinator
from eosconnect.runtime.task import TASK_CLASS_KEY, TaskSpec
from eosconnect.storage.clients import client_config
from eosconnect.storage.topics import ensure_topic
from eosconnect.worker_config import WorkerConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)


class NotEnoughSlotsError(RuntimeError):
    """The connector's tasks do not fit into Spark's free task slots."""


def retire_connector(
    connector_props: Mapping[str, str], worker_props: Mapping[str, str], deleted: bool
) -> None:
    """Tell a deleted or stopped connector, all of whose tasks ended, that it is retired
    (`Connector.retired`), on a new instance, in a thread of its own: the hook may wait for a
    database, and the herder's loop must not."""
    name = str(connector_props.get("name", "?"))

    def run() -> None:
        try:
            cls = connector_class_of(connector_props)
            cls().retired(resolve_config(connector_props, worker_props), deleted)
        except Exception:
            log.exception("connector %s: retired() raised", name)

    threading.Thread(target=run, name=f"retire-{name}", daemon=True).start()


def start_connector(
    connector_props: Mapping[str, str],
    worker_props: Mapping[str, str] | None = None,
    context: ConnectorContext | None = None,
) -> Connector:
    """Instantiate and start the connector on the driver.

    With `worker_props`, the connector's context can build the clients its tasks would get; a
    `context` given also carries the runtime's callbacks (see cluster/live_connectors.py)."""
    from eosconnect.cluster.connector_kinds import kind_of

    cls = connector_class_of(connector_props)
    kind_of(cls).parse(connector_props)
    connector = cls()
    context = context or ConnectorContext()
    if worker_props is not None:
        worker, props = dict(worker_props), dict(connector_props)
        # `kind` is a ClientKind string the connector passes; client_config validates it at run time
        context.client_config = lambda kind: dict(client_config(kind, worker, props))  # type: ignore[arg-type]
    connector.context = context
    # ${provider:path:key} variables are resolved for the connector (KIP-297); the task configs it
    # derives get the placeholders back (connector_task_configs), so nothing resolved is stored.
    resolved = resolve_config(connector_props, worker_props or {})
    if worker_props is not None:  # a stored config is checked against the worker's setting of now
        check_database_host(connector_props, worker_props)
    # the runtime's own attribute on the connector object, read back by connector_task_configs
    connector._eosconnect_placeholders = {  # type: ignore[attr-defined]
        k: (resolved[k], v) for k, v in connector_props.items() if isinstance(v, str) and "${" in v
    }
    connector.start(resolved)
    return connector


def connector_task_configs(connector: Connector, connector_props: Mapping[str, str]) -> list[dict[str, str]]:
    """The started connector's task configs for its `tasks.max`, each naming its task class."""
    from eosconnect.cluster.connector_kinds import kind_of

    tasks_max = kind_of(type(connector)).parse(connector_props).tasks_max
    task_class = connector.task_class()
    path = f"{task_class.__module__}.{task_class.__qualname__}"
    placeholders: dict[str, tuple[str, str]] = getattr(connector, "_eosconnect_placeholders", {})
    configs = []
    for tc in connector.task_configs(tasks_max):
        # Kafka's reverse transform: a task setting equal to a resolved variable stores the variable.
        restored = {
            k: placeholders[k][1] if k in placeholders and v == placeholders[k][0] else v
            for k, v in tc.items()
        }
        configs.append({**restored, TASK_CLASS_KEY: path})
    return configs


def task_configs_for(
    connector_props: Mapping[str, str], worker_props: Mapping[str, str] | None = None
) -> tuple[Connector, list[dict[str, str]]]:
    """Start the connector on the driver and collect its task configs, each naming its task class."""
    connector = start_connector(connector_props, worker_props)
    return connector, connector_task_configs(connector, connector_props)


class SparkTaskJob:
    """A set of task specs run as one Spark job, in its own job group, on a driver thread."""

    def __init__(
        self,
        spark: SparkSession,
        job_group: str,
        specs: list[Any],
        description: str,
        entry: Callable[[list[Any]], Any] = spark_task_entry,
    ) -> None:
        self.spark = spark
        self.job_group = job_group
        #: One per Spark task: `TaskSpec`s, or `SlotHostSpec`s with `entry=spark_host_entry`.
        self.specs = specs
        self.description = description
        self.entry = entry
        self.outcomes: list[dict[str, Any]] = []
        self.error: BaseException | None = None
        self._cancelled = False  # by `cancel()`: the job's end is then no error of its own
        self._thread = threading.Thread(target=self._run, name=job_group, daemon=True)
        #: When the job was started and when it ended (monotonic; None until then): how long
        #: Spark's attempts of its tasks lived, on average, when it gave up (cluster/task_health.py).
        self.started_at: float | None = None
        self.ended_at: float | None = None

    def start(self) -> SparkTaskJob:
        self.started_at = time.monotonic()
        self._thread.start()
        return self

    def lived_s(self) -> float:
        """Seconds from start to end (to now while it runs); 0 if it never started."""
        if self.started_at is None:
            return 0.0
        return (self.ended_at or time.monotonic()) - self.started_at

    def _run(self) -> None:
        sc = self.spark.sparkContext
        sc.setJobGroup(self.job_group, self.description, interruptOnCancel=True)
        try:
            rdd = sc.parallelize(range(len(self.specs)), len(self.specs))
            self.outcomes = rdd.mapPartitionsWithIndex(self.entry(self.specs)).collect()
        except BaseException as exc:
            self.error = exc
            if self._cancelled:
                log.info("Spark job group %s ended: cancelled (%s)", self.job_group, self.failure_reason())
            else:
                log.error("Spark job group %s ended with an error: %s", self.job_group, self.failure_reason())
        finally:
            self.ended_at = time.monotonic()

    def failure_reason(self) -> str:
        """Why the job failed, in Spark's words: the "Job aborted ..." line rather than py4j's
        "An error occurred while calling ..." header; "" if it did not fail."""
        if self.error is None:
            return ""
        lines = [line.strip() for line in str(self.error).splitlines() if line.strip()]
        for line in lines:
            if "Job aborted" in line or "Job cancelled" in line:
                return line.removeprefix(": ")
        useful = [line for line in lines if not line.startswith("An error occurred while calling")]
        return (useful or lines or [repr(self.error)])[0].removeprefix(": ")

    def running(self) -> bool:
        return self._thread.is_alive()

    def wait(self, timeout: float | None = None) -> list[dict[str, Any]]:
        self._thread.join(timeout)
        return self.outcomes

    def cancel(self) -> None:
        log.warning("cancelling Spark job group %s", self.job_group)
        self._cancelled = True
        self.spark.sparkContext.cancelJobGroup(self.job_group)
        self.wait(30)


@dataclass
class ConnectorJob:
    """Run a connector's tasks on Spark until told to stop.

    For a source, and a sink that delivers exactly once on an exactly-once worker, `coordinator`
    defaults to a `LocalStartupCoordinator` (single process owns the connector); other sink tasks
    have no start-up protocol and get none.
    """

    spark: SparkSession
    connector_config: dict[str, str]
    worker_config: dict[str, str]
    control_dir: Path
    generation: int = 0
    previous_task_count: int = 0
    coordinator: StartupCoordinator | None = None
    outcomes: list[dict[str, Any]] = field(default_factory=list)
    error: BaseException | None = None
    _job: SparkTaskJob | None = None
    _connector: Connector | None = None

    @property
    def name(self) -> str:
        return self.connector_config["name"]

    @property
    def job_group(self) -> str:
        return f"eosconnect-{self.name}-gen{self.generation}"

    @property
    def control(self) -> FileTaskControl:
        return FileTaskControl(str(self.control_dir / f"{self.name}-gen{self.generation}.control"))

    def start(self) -> ConnectorJob:
        worker = WorkerConfig.parse(self.worker_config)
        self._connector, task_configs = task_configs_for(self.connector_config, self.worker_config)
        slots = self.spark.sparkContext.defaultParallelism
        if len(task_configs) > slots:
            raise NotEnoughSlotsError(
                f"connector {self.name!r} needs {len(task_configs)} task slots but Spark has {slots}; "
                "lower tasks.max or give Spark more cores (spark.master local[N] or more executors)"
            )
        self._ensure_global_offsets_topic(worker)
        self.control_dir.mkdir(parents=True, exist_ok=True)
        self.control.set(Directive.RUN)
        from eosconnect.cluster.connector_kinds import uses_exactly_once_startup

        fenced = worker.exactly_once_enabled and uses_exactly_once_startup(self.connector_config)
        sink = isinstance(self._connector, SinkConnector)
        coordinator = self._coordinator(worker, len(task_configs)) if fenced or not sink else None
        specs = [
            TaskSpec(
                connector=self.name,
                task=i,
                task_config=tc,
                connector_config=dict(self.connector_config),
                worker_config=dict(self.worker_config),
                control=self.control,
                coordinator=coordinator,
                generation=self.generation,
            )
            for i, tc in enumerate(task_configs)
        ]
        self._job = SparkTaskJob(
            self.spark, self.job_group, specs, f"eosconnect connector {self.name}"
        ).start()
        log.info(
            "connector %s: launched %d tasks as Spark job group %s", self.name, len(specs), self.job_group
        )
        return self

    def _coordinator(self, worker: WorkerConfig, task_count: int) -> StartupCoordinator:
        from eosconnect.cluster.connector_kinds import fencing_producer_config

        return self.coordinator or LocalStartupCoordinator(
            group_id=worker.group_id,
            producer_config=fencing_producer_config(worker.originals, self.connector_config),
            task_count=task_count,
            previous_task_count=self.previous_task_count,
            generation=self.generation,
        )

    @staticmethod
    def _ensure_global_offsets_topic(worker: WorkerConfig) -> None:
        """Normally the worker creates its internal topics; a job run on its own does it here."""
        from confluent_kafka.admin import AdminClient

        ensure_topic(
            AdminClient(client_config("admin", worker.originals)),
            worker.offset_storage_topic,
            partitions=int(worker.values["offset.storage.partitions"]),
            replication_factor=int(worker.values["offset.storage.replication.factor"]),
        )

    def set(self, directive: Directive) -> None:
        self.control.set(directive)

    def running(self) -> bool:
        return self._job is not None and self._job.running()

    def wait(self, timeout: float | None = None) -> list[dict[str, Any]]:
        if self._job is not None:
            self._job.wait(timeout)
            self.outcomes, self.error = self._job.outcomes, self._job.error
        return self.outcomes

    def stop(self, graceful_timeout_s: float = 30.0) -> list[dict[str, Any]]:
        """Ask the tasks to stop, wait, and cancel the job group if they do not stop in time."""
        self.set(Directive.STOP)
        deadline = time.monotonic() + graceful_timeout_s
        while self.running() and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.running():
            log.warning(
                "connector %s: tasks did not stop in %.0fs; cancelling %s",
                self.name,
                graceful_timeout_s,
                self.job_group,
            )
            assert self._job is not None
            self._job.cancel()
        self.wait(1)
        if self._connector is not None:
            self._connector.stop()
        return self.outcomes
