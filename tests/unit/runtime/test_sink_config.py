"""Sink connector settings: the topics rule, source-only settings, FileStreamSink's own settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosconnect.api import ConfigException, OffsetAndMetadata, SinkRecord, SinkTaskContext, TopicPartition
from eosconnect.cluster.connector_kinds import SINK, kind_of_config
from eosconnect.cluster.validation import config_errors, validate_connector_config
from eosconnect.connectors.file_stream import FileStreamSinkConnector, FileStreamSinkTask
from eosconnect.plugins import ConnectorType, connector_type
from eosconnect.runtime.config import SinkConnectorConfig
from eosconnect.worker_config import WorkerConfig

WORKER = WorkerConfig.parse({"bootstrap.servers": "127.0.0.1:9092", "exactly.once.source.support": "enabled"})
BASE = {"name": "out", "connector.class": "FileStreamSink", "file": "/tmp/out.txt"}


def errors_of(config: dict[str, str]) -> dict[str, list[str]]:
    return config_errors(validate_connector_config(config, WORKER))


def test_missing_topics_names_both_fields_and_the_fix() -> None:
    errors = errors_of(BASE)
    assert set(errors) == {"topics", "topics.regex"}
    assert "Set topics to a comma-separated list" in errors["topics"][0]
    with pytest.raises(ConfigException) as info:
        SinkConnectorConfig.parse(BASE)
    assert set(info.value.errors) == {"topics", "topics.regex"}


def test_topics_and_regex_together_are_rejected() -> None:
    errors = errors_of({**BASE, "topics": "a,b", "topics.regex": "a.*"})
    assert set(errors) == {"topics", "topics.regex"}
    assert "exactly one of them" in errors["topics"][0] and "Remove one" in errors["topics"][0]


def test_bad_regex_is_reported_on_topics_regex() -> None:
    errors = errors_of({**BASE, "topics.regex": "a("})
    assert set(errors) == {"topics.regex"}


def test_missing_file_names_the_field() -> None:
    config = {k: v for k, v in BASE.items() if k != "file"}
    assert set(errors_of({**config, "topics": "t"})) == {"file"}
    with pytest.raises(ConfigException) as info:
        FileStreamSinkConnector().start({"topics": "t"})
    assert set(info.value.errors) == {"file"}
    assert "Set file to" in info.value.errors["file"][0]


def test_exactly_once_settings_are_source_only() -> None:
    errors = errors_of(
        {**BASE, "topics": "t", "exactly.once.support": "required", "transaction.boundary": "poll"}
    )
    assert set(errors) == {"exactly.once.support", "transaction.boundary"}
    assert "Remove exactly.once.support" in errors["exactly.once.support"][0]


def test_a_valid_sink_config_parses() -> None:
    assert errors_of({**BASE, "topics": "t1, t2"}) == {}
    config = SinkConnectorConfig.parse({**BASE, "topics": "t1, t2"})
    assert config.topics == ("t1", "t2") and config.subscription() == ["t1", "t2"]
    assert config.consumer_group == "connect-out"
    regex = SinkConnectorConfig.parse({**BASE, "topics.regex": "orders-.*|payments"})
    assert regex.subscription() == ["^(orders-.*|payments)$"]


def test_kinds_and_types() -> None:
    assert connector_type(FileStreamSinkConnector) is ConnectorType.SINK
    assert (
        kind_of_config({"connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector"}) is SINK
    )
    assert not kind_of_config({"connector.class": "FileStreamSource"}).is_sink


def test_sink_record_and_context() -> None:
    record = SinkRecord("t", 2, 41, None, "v", leader_epoch=3)
    assert (record.kafka_partition, record.kafka_offset, record.topic_partition) == (
        2,
        41,
        TopicPartition("t", 2),
    )
    context = SinkTaskContext()
    context.pause(TopicPartition("t", 0))
    context.resume(TopicPartition("t", 0))
    assert context.paused == set() and context.resumed == {TopicPartition("t", 0)}


def test_file_sink_task_writes_lines_and_flushes(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    task = FileStreamSinkTask()
    task.initialize(SinkTaskContext())
    task.start({"file": str(path), "topics": "t"})
    task.put([SinkRecord("t", 0, i, None, v) for i, v in enumerate(["a", b"b\xc3\xa9", None, {"k": 1}])])
    offsets = {TopicPartition("t", 0): OffsetAndMetadata(4)}
    assert task.pre_commit(offsets) == offsets
    task.stop()
    assert path.read_text(encoding="utf-8") == "a\nbé\nnull\n{'k': 1}\n"
