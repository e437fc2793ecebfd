"""Connectors that break the control plane's rules on purpose (tests/integration/test_control_plane.py).
Importable by Spark executors: tests/conftest.py puts the tests directory on PYTHONPATH."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from eosconnect.api.config import ConfigDef
from eosconnect.api.records import SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask


class GreedySequenceConnector(SequenceSourceConnector):
    """Returns twice as many task configs as `tasks.max` allows (Kafka's tasks.max.enforce case)."""

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return super().task_configs(max_tasks) * 2


class NoConfigDefConnector(SequenceSourceConnector):
    """`config_def()` returns None (Kafka: "config() must return a ConfigDef that is not null")."""

    def config_def(self) -> ConfigDef:
        return None  # type: ignore[return-value]


class NonRecordPollTask(SequenceSourceTask):
    """`poll()` returns a string instead of a list of records."""

    def poll(self) -> Any:
        return "not records"


class NonRecordPollConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return NonRecordPollTask


class NonRecordItemTask(SequenceSourceTask):
    """`poll()` returns a list holding something that is not a SourceRecord."""

    def poll(self) -> list[SourceRecord] | None:
        return [{"value": 1}]  # type: ignore[list-item]


class NonRecordItemConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return NonRecordItemTask


class FailingOnceTask(SequenceSourceTask):
    """Raises in its first `poll()` while `fail.marker` does not exist (and creates it): the first
    run fails, a restarted one runs normally."""

    def poll(self) -> list[SourceRecord] | None:
        marker = Path(self._config_marker)
        if not marker.exists():
            marker.write_text("failed once")
            raise RuntimeError("failing once on purpose")
        return super().poll()

    def start(self, config: dict[str, str]) -> None:
        self._config_marker = config["fail.marker"]
        super().start(config)


class FailingOnceConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return FailingOnceTask
