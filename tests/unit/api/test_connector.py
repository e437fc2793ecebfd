"""Connector and task base classes: defaults the runtime relies on, contexts."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from eosconnect.api import (
    ConfigDef,
    ConfigType,
    ConnectorContext,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    InMemoryOffsetStorageReader,
    OffsetAndMetadata,
    RequestedTransactionContext,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SinkTaskContext,
    SourceConnector,
    SourcePartition,
    SourceRecord,
    SourceTask,
    SourceTaskContext,
    TopicPartition,
)

__version__ = "1.2.3"


class MinimalTask(SourceTask):
    def start(self, config: dict[str, str]) -> None:
        self.config = config

    def poll(self) -> list[SourceRecord] | None:
        return None


class MinimalConnector(SourceConnector):
    def __init__(self) -> None:  # deliberately no super().__init__()
        self.started = False

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("topic", ConfigType.STRING)

    def start(self, config: dict[str, str]) -> None:
        self.started = True

    def task_class(self) -> type[SourceTask]:
        return MinimalTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}] * max_tasks


def test_source_connector_defaults() -> None:
    connector = MinimalConnector()
    assert connector.version() == "1.2.3"  # the module's __version__
    assert connector.exactly_once_support({}) is None
    assert connector.can_define_transaction_boundaries({}) is ConnectorTransactionBoundaries.UNSUPPORTED
    [result] = connector.validate({})
    assert result.name == "topic" and result.errors
    connector.stop()
    assert ExactlyOnceSupport("SUPPORTED") is ExactlyOnceSupport.SUPPORTED


def test_connector_context_is_settable_and_has_a_safe_default() -> None:
    connector = MinimalConnector()
    connector.context.request_task_reconfiguration()  # logs only
    connector.context.raise_error(RuntimeError("x"))
    calls: list[object] = []
    connector.context = ConnectorContext(
        request_task_reconfiguration=lambda: calls.append("reconfigure"), raise_error=calls.append
    )
    connector.context.request_task_reconfiguration()
    error = RuntimeError("boom")
    connector.context.raise_error(error)
    assert calls == ["reconfigure", error]


def test_source_task_defaults_and_context() -> None:
    task = MinimalTask()
    with pytest.raises(RuntimeError, match="initialize"):
        _ = task.context
    reader = InMemoryOffsetStorageReader([({"p": 1}, {"o": 2})])
    tx = RequestedTransactionContext()
    task.initialize(
        SourceTaskContext(configs={"a": "b"}, offset_storage_reader=reader, transaction_context=tx)
    )
    assert task.context.offset_storage_reader.offset({"p": 1}) == {"o": 2}
    assert task.context.transaction_context is tx and task.context.configs == {"a": "b"}
    assert SourceTaskContext().transaction_context is None
    record = SourceRecord({"p": 1}, {"o": 3}, "t", None)
    task.commit()
    task.commit_record(record, None)
    assert task.update_offsets({SourcePartition(p=1): record.source_offset}) is None  # type: ignore[dict-item]
    assert task.version() == "1.2.3"


class CollectingSinkTask(SinkTask):
    def start(self, config: dict[str, str]) -> None:
        self.seen: list[SinkRecord] = []
        self.flushed: list[object] = []

    def put(self, records: Sequence[SinkRecord]) -> None:
        self.seen.extend(records)

    def flush(self, offsets: object) -> None:  # type: ignore[override]
        self.flushed.append(offsets)


class CollectingSinkConnector(SinkConnector):
    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, config: dict[str, str]) -> None:
        pass

    def task_class(self) -> type[SinkTask]:
        return CollectingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]


def test_sink_task_defaults_and_context() -> None:
    assert CollectingSinkConnector().task_class() is CollectingSinkTask
    task = CollectingSinkTask()
    context = SinkTaskContext(assigned={TopicPartition("t", 0)})
    task.initialize(context)
    task.start({})
    task.open([TopicPartition("t", 0)])
    task.put([SinkRecord("t", 0, 5, None, b"x", leader_epoch=1)])
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(6, leader_epoch=1)}
    assert task.pre_commit(offsets) == offsets and task.flushed == [offsets]
    task.close([TopicPartition("t", 0)])
    task.context.offset({TopicPartition("t", 0): 3})
    task.context.request_commit()
    assert context.requested_offsets == {TopicPartition("t", 0): 3} and context.commit_requested
    assert context.assignment() == {TopicPartition("t", 0)}
