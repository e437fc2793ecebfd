"""The entry point a Spark task calls: run one connector task (source or sink) to its end and report
how it ended."""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Iterator
from typing import Any

from eosconnect.plugins.loading import ConnectorType, connector_type
from eosconnect.runtime.host import give_back_memory
from eosconnect.runtime.loop_watch import dump_stacks_on_sigusr1
from eosconnect.runtime.source_task import parse_configs
from eosconnect.runtime.task import TaskOutcome, TaskSpec, TaskState, task_class_of

log = logging.getLogger(__name__)


def run_task(spec: TaskSpec) -> TaskOutcome:
    """Run a source or sink task, by the type of its task class; never raises."""
    from eosconnect.runtime.sink_task import run_sink_task

    try:
        spec = resolved_spec(spec)
    except Exception:
        log.exception("[%s-%s] could not resolve its config provider variables", spec.connector, spec.task)
        return TaskOutcome(spec.connector, spec.task, TaskState.FAILED, traceback.format_exc())
    try:
        kind = connector_type(task_class_of(spec))
    except ModuleNotFoundError as exc:
        log.exception("[%s-%s] could not be created", spec.connector, spec.task)
        return TaskOutcome(
            spec.connector, spec.task, TaskState.FAILED, f"{missing_module(exc)}\n\n{traceback.format_exc()}"
        )
    except Exception:
        log.exception("[%s-%s] could not be created", spec.connector, spec.task)
        return TaskOutcome(spec.connector, spec.task, TaskState.FAILED, traceback.format_exc())
    return run_sink_task(spec) if kind is ConnectorType.SINK else run_source_task(spec)


def resolved_spec(spec: TaskSpec) -> TaskSpec:
    """The spec with `${provider:path:key}` variables of its task and connector configs resolved,
    here on the executor (KIP-297): the config topic and the REST API keep the placeholders."""
    import dataclasses

    from eosconnect.plugins.config_providers import resolve_config

    return dataclasses.replace(
        spec,
        task_config=resolve_config(spec.task_config, spec.worker_config),
        connector_config=resolve_config(spec.connector_config, spec.worker_config),
    )


def missing_module(exc: ModuleNotFoundError) -> str:
    """What to fix when a task cannot import its code: where it ran and which settings ship code."""
    return (
        f"the task cannot import module {exc.name!r} in the executor's Python {sys.executable} "
        f"(Python {sys.version.split()[0]}). Put the connector's code on the worker's plugin.path "
        "(shipped to "
        "the executors), or install it into the executors' environment (spark.archives, "
        "spark.pyspark.python or the container image); changed plugin code needs a worker restart."
    )


def run_source_task(spec: TaskSpec) -> TaskOutcome:
    """Pick the runner for the worker's mode and run the task; never raises."""
    from eosconnect.runtime.at_least_once import AtLeastOnceSourceTaskRunner
    from eosconnect.runtime.exactly_once import ExactlyOnceSourceTaskRunner

    try:
        worker, connector = parse_configs(spec)
        runner_cls = (
            ExactlyOnceSourceTaskRunner if worker.exactly_once_enabled else AtLeastOnceSourceTaskRunner
        )
        runner = runner_cls(spec, worker, connector)
    except Exception:
        log.exception("[%s-%s] could not be created", spec.connector, spec.task)
        return TaskOutcome(spec.connector, spec.task, TaskState.FAILED, traceback.format_exc())
    return runner.run()


def spark_task_entry(specs: list[TaskSpec]) -> Any:
    """Returns the function `mapPartitionsWithIndex` runs: partition i runs `specs[i]`."""

    def run_partition(index: int, _rows: Iterator[Any]) -> Iterator[dict[str, Any]]:
        configure_executor_logging()
        spec = specs[index]
        outcome = run_task(spec)
        spec.control.report_outcome(outcome.state.value, outcome.trace)
        give_back_memory()  # the worker goes back to Spark's pool (runtime/host.py)
        yield {**outcome.__dict__, "state": outcome.state.value, "pid": os.getpid()}

    return run_partition


def configure_executor_logging() -> None:
    """Python workers start with no logging config; give our loggers a handler once per process
    (and SIGUSR1 its stack dump: `dump_stacks_on_sigusr1`)."""
    root = logging.getLogger("eosconnect")
    if not root.handlers:
        dump_stacks_on_sigusr1()
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
        root.addHandler(handler)
        from eosconnect.runtime.log_repeats import RepeatFilter

        handler.addFilter(RepeatFilter())
        root.setLevel(os.environ.get("EOSCONNECT_LOG_LEVEL", "INFO"))
