"""What source and sink connectors and tasks have in common.

A *connector* runs once per configured instance (on the worker) and only splits the work:
`task_configs` decides what each task does. *Tasks* do the work inside Spark tasks. Both are
created by the runtime with no arguments, so keep `__init__` argument-free and cheap; get
settings in `start`.
"""

from __future__ import annotations

import sys
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from eosconnect.api.config import ConfigDef, ConfigValue
from eosconnect.api.context import ConnectorContext
from eosconnect.api.errors import ConfigException

__all__ = ["Connector", "Task"]


def _module_version(obj: object) -> str:
    module = sys.modules.get(type(obj).__module__)
    return str(getattr(module, "__version__", "unknown"))


class Connector(ABC):
    """Base of `SourceConnector` and `SinkConnector`."""

    @property
    def context(self) -> ConnectorContext:
        """Set by the runtime before `start`; a logging stand-in until then.

        A property, so subclasses that override `__init__` without calling `super()` still work.
        """
        ctx: ConnectorContext | None = self.__dict__.get("_context")
        if ctx is None:
            ctx = self.__dict__["_context"] = ConnectorContext()
        return ctx

    @context.setter
    def context(self, value: ConnectorContext) -> None:
        self.__dict__["_context"] = value

    def version(self) -> str:
        """The connector's version, shown by the REST API; defaults to its module's `__version__`."""
        return _module_version(self)

    @abstractmethod
    def config_def(self) -> ConfigDef:
        """The settings this connector accepts (Kafka's `config()`), used for validation and docs."""

    @abstractmethod
    def start(self, config: dict[str, str]) -> None:
        """Begin with this configuration; runs on the worker, once per connector (re)start."""

    def stop(self) -> None:  # noqa: B027 - an optional hook, deliberately not abstract
        """Release what `start` acquired. The default does nothing.

        Called whenever the connector stops: a restart, a reconfiguration, a worker shutting down or
        losing the leadership too, so nothing the connector will need again may be given up here
        (see `retired`)."""

    def retired(self, config: dict[str, str], deleted: bool) -> None:  # noqa: B027 - optional hook
        """The connector was deleted (`deleted`), or stopped (KIP-875 STOPPED), and none of its tasks
        runs any more: release what outlives its tasks outside Kafka, or say what is left behind (a
        replication slot, say). Never called for a restart, a reconfiguration or a rebalance.

        Runs on the leader, once, on a new instance that was not started (`config` has its config
        provider variables resolved), in a thread of its own. Best effort: a worker that dies in
        between does not call it. The default does nothing."""

    @abstractmethod
    def task_class(self) -> type[Task]:
        """The task class the runtime instantiates for each config from `task_configs`."""

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Split the work into at most `max_tasks` configs (string maps, stored in the config topic)."""

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        """Check a proposed config before it is stored; extend it for checks across settings.

        The default runs `config_def()` validation; the REST validate endpoint shows the result.
        """
        return self.config_def().validate(config)

    def require_valid(self, config: Mapping[str, str]) -> None:
        """`validate`, raising one `ConfigException` naming every setting with an error: for `start`,
        which may be given a config that was never validated (a file, an old config topic)."""
        errors = {v.name: v.errors for v in self.validate(config) if v.errors}
        if errors:
            raise ConfigException(errors=errors)


class Task(ABC):
    """Base of `SourceTask` and `SinkTask`."""

    #: True for a task that copies records as they are (a mirror): the runtime then uses
    #: ByteArrayConverter for keys and values whatever the connector's converter settings say.
    raw_bytes: ClassVar[bool] = False

    def version(self) -> str:
        return _module_version(self)

    @abstractmethod
    def start(self, config: dict[str, str]) -> None:
        """Begin with one of the configs the connector's `task_configs` returned."""

    def stop(self) -> None:  # noqa: B027 - an optional hook, deliberately not abstract
        """Ask the task to stop. May be called from another thread while `poll`/`put` runs, so only
        set a flag or close what blocks; the default does nothing."""
