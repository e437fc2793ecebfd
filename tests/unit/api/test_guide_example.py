"""The example in docs/connector-guide.md must keep working against the API."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import pytest

from eosconnect.api import (
    ConfigException,
    ExactlyOnceSupport,
    InMemoryOffsetStorageReader,
    OffsetAndMetadata,
    Schema,
    SinkConnector,
    SinkRecord,
    SinkTaskContext,
    SourceConnector,
    SourceTask,
    SourceTaskContext,
    TopicPartition,
)
from eosconnect.converters import converter_from_config

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "connector-guide.md"


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    match = re.search(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert match, "docs/connector-guide.md has no python code block"
    namespace: dict[str, Any] = {"__name__": "connector_guide_example"}
    exec(compile(match.group(1), str(GUIDE), "exec"), namespace)
    return namespace


def test_example_is_short(example: dict[str, Any]) -> None:
    match = re.search(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    assert match and len(match.group(1).strip().splitlines()) <= 50


def test_counter_connector_splits_work_and_resumes_from_committed_offsets(example: dict[str, Any]) -> None:
    connector_cls = example["CounterSourceConnector"]
    assert issubclass(connector_cls, SourceConnector)
    connector = connector_cls()
    config = {
        "name": "counter",
        "connector.class": "x",
        "tasks.max": "2",
        "topic": "counts",
        "batch.size": "3",
        "poll.interval.ms": "100",
    }
    connector.start(config)
    assert connector.exactly_once_support(config) is ExactlyOnceSupport.SUPPORTED
    task_configs = connector.task_configs(2)
    assert [c["counter"] for c in task_configs] == ["0", "1"]

    reader = InMemoryOffsetStorageReader([({"counter": "1"}, {"value": 41})])
    polled = {}
    for task_config in task_configs:
        task = connector.task_class()()
        assert isinstance(task, SourceTask)
        task.initialize(SourceTaskContext(configs=task_config, offset_storage_reader=reader))
        task.start(task_config)
        started = time.monotonic()
        first, second = task.poll() or [], task.poll() or []
        assert time.monotonic() - started >= 0.1, "poll() is not paced by poll.interval.ms"
        polled[task_config["counter"]] = [r.value["value"] for r in first + second]
        assert first[0].topic == "counts"
        assert first[0].source_partition == {"counter": task_config["counter"]}
        assert first[-1].source_offset == {"value": first[-1].value["value"]}
        task.stop()
    connector.stop()
    assert polled == {"0": [0, 1, 2, 3, 4, 5], "1": [42, 43, 44, 45, 46, 47]}


def test_counter_connector_rejects_bad_config(example: dict[str, Any]) -> None:
    with pytest.raises(ConfigException) as info:
        example["CounterSourceConnector"]().start({"batch.size": "0"})
    assert set(info.value.errors) == {"topic", "batch.size"}


@pytest.fixture(scope="module")
def sink_example() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    (code,) = [b for b in blocks if "class JsonLinesSinkConnector" in b]
    assert len(code.strip().splitlines()) <= 45
    namespace: dict[str, Any] = {"__name__": "connector_guide_sink_example"}
    exec(compile(code, str(GUIDE), "exec"), namespace)
    return namespace


def test_sink_example_appends_json_lines_and_flushes(sink_example: dict[str, Any], tmp_path) -> None:
    connector = sink_example["JsonLinesSinkConnector"]()
    assert isinstance(connector, SinkConnector)
    path = tmp_path / "out.jsonl"
    connector.start({"path": str(path), "topics": "orders"})
    (task_config,) = connector.task_configs(3)
    task = connector.task_class()()
    task.initialize(SinkTaskContext(configs=task_config))
    task.start(task_config)
    task.put([SinkRecord("orders", 0, 7, None, {"id": 1}), SinkRecord("orders", 0, 8, None, "x")])
    offsets = {TopicPartition("orders", 0): OffsetAndMetadata(9)}
    assert task.pre_commit(offsets) == offsets  # flushed, so everything may be committed
    task.stop()
    assert [json.loads(line) for line in path.read_text().splitlines()] == [
        {"topic": "orders", "offset": 7, "value": {"id": 1}},
        {"topic": "orders", "offset": 8, "value": "x"},
    ]
    with pytest.raises(ConfigException):
        connector.start({"topics": "orders"})


@pytest.fixture(scope="module")
def schema_example() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", GUIDE.read_text(), re.DOTALL)
    (code,) = [b for b in blocks if "class ReadingSourceTask" in b]
    assert len(code.strip().splitlines()) <= 35
    namespace: dict[str, Any] = {"__name__": "connector_guide_schema_example"}
    exec(compile(code, str(GUIDE), "exec"), namespace)
    return namespace


def test_schema_example_writes_kafkas_envelope(schema_example: dict[str, Any]) -> None:
    task = schema_example["ReadingSourceTask"]()
    task.start({"topic": "readings", "sensor": "s1"})
    (record,) = task.poll()
    assert record.value_schema is schema_example["READING"] and record.key_schema == Schema.STRING_SCHEMA
    record.value.validate()
    converter = converter_from_config(
        {
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
        },
        is_key=False,
    )
    wire = converter.from_connect_data("readings", record.value_schema, record.value)
    envelope = json.loads(wire)
    assert envelope["schema"]["name"] == "com.example.Reading"
    payload = '{"sensor":"s1","celsius":"ANc=","at":1704067260000,"note":null}'
    assert envelope["payload"] == json.loads(payload)
    assert payload in GUIDE.read_text()  # the guide shows what is really written
    assert converter.to_connect_data("readings", wire).value == record.value
