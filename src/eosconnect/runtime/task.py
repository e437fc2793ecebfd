"""What every task runner shares, source or sink: the spec a Spark task gets and how it ends."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, TypeVar

from eosconnect.api.connector import Task
from eosconnect.api.errors import ConnectException
from eosconnect.plugins.loading import import_class
from eosconnect.runtime.control import TaskControl
from eosconnect.runtime.startup import StartupCoordinator
from eosconnect.storage.offsets import FileOffsetStore

#: The task config entry naming the task class; the worker sets it from the connector's task_class().
TASK_CLASS_KEY = "task.class"

T = TypeVar("T", bound=Task)


class TaskState(StrEnum):
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    SUPERSEDED = "SUPERSEDED"


@dataclass
class TaskSpec:
    """Everything a Spark task needs to run one connector task; pickled to the executor.

    `coordinator` drives the exactly-once start-up protocol (KIP-618) of source tasks, and of sink
    tasks whose connector delivers exactly once (KIP-656); other sink tasks have none.
    `offset_store` is the standalone worker's offsets file (`offset.storage.file.filename`): its
    at-least-once source tasks read and commit their offsets there instead of in an offsets topic.
    It is only set for tasks run in the worker's own process, never pickled to an executor.
    """

    connector: str
    task: int
    task_config: dict[str, str]
    connector_config: dict[str, str]
    worker_config: dict[str, str]
    control: TaskControl
    coordinator: StartupCoordinator | None = None
    generation: int = 0
    offset_store: FileOffsetStore | None = None


@dataclass
class TaskOutcome:
    connector: str
    task: int
    state: TaskState
    trace: str | None = None
    metrics: dict[str, Any] = field(default_factory=dict)
    pid: int = field(default_factory=os.getpid)


class TaskLogAdapter(logging.LoggerAdapter):
    """Prefixes every line with the connector and task it concerns."""

    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        # `extra` is Optional for LoggerAdapter; every TaskLogAdapter is made with {"id": ...}
        return f"[{self.extra['id']}] {msg}", kwargs  # type: ignore[index]

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        # The prefix is data, not format: a connector named "50%off" must not break `msg % args`.
        if args and self.isEnabledFor(level):
            prefix = f"[{self.extra['id']}] ".replace("%", "%%")  # type: ignore[index]  # as in process()
            kwargs.setdefault("stacklevel", 2)
            self.logger.log(level, prefix + str(msg), *args, **kwargs)
            return
        super().log(level, msg, *args, **kwargs)


def task_class_of(spec: TaskSpec) -> type:
    """The class named by the spec's task config (imported on the executor)."""
    path = spec.task_config.get(TASK_CLASS_KEY)
    if not path:
        raise ConnectException(
            f"task config of {spec.connector}-{spec.task} has no {TASK_CLASS_KEY!r}; the worker must set it "
            "from the connector's task_class()"
        )
    return import_class(path)


def instantiate_task(spec: TaskSpec, base: type[T]) -> T:
    cls = task_class_of(spec)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        raise ConnectException(
            f"{TASK_CLASS_KEY}={spec.task_config[TASK_CLASS_KEY]!r} is not a {base.__name__} subclass"
        )
    return cls()
