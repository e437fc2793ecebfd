"""`AirbyteSource` against a real program speaking the protocol (tests/support/hosted_sources.py):
validation from the source's spec and check, states closing transactions, a restart resuming from
the committed state, and each way a source can misbehave failing the task with what went wrong."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eosconnect.api import InMemoryOffsetStorageReader, SourceTaskContext
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import SourceRecord
from eosconnect.api.transactions import RequestedTransactionContext
from eosconnect.connectors.hosted.airbyte import AirbyteSourceConnector, AirbyteSourceTask
from support.hosted_sources import write_source


@pytest.fixture
def source(tmp_path: Path) -> str:
    return write_source(tmp_path)


def connector_config(source: str, **config: Any) -> dict[str, str]:
    streams = config.pop("streams", "events")
    return {
        "name": "ab",
        "connector.class": "AirbyteSource",
        "airbyte.source": source,
        "airbyte.config": json.dumps({"count": 25, "every": 10, **config}),
        "airbyte.streams": streams,
        "topic.prefix": "scripted",
        "airbyte.sync.interval.ms": "3600000",
    }


def errors_of(config: dict[str, str]) -> dict[str, list[str]]:
    return {v.name: v.errors for v in AirbyteSourceConnector().validate(config) if v.errors}


def test_validation_shows_the_sources_own_fields_and_check(source):
    assert errors_of(connector_config(source)) == {}
    config = connector_config(source)
    config["airbyte.config"] = json.dumps({"every": 0})
    assert errors_of(config) == {
        "airbyte.config.count": ["the source requires 'count' in airbyte.config"],
        "airbyte.config.every": ["0 is less than the minimum of 1"],
    }
    assert errors_of(connector_config(source, fail_check=True)) == {
        "airbyte.config": ["the source's check failed: cannot reach the events API"]
    }
    assert "no stream 'nope'" in errors_of(connector_config(source, streams="nope"))["airbyte.streams"][0]
    assert "not an executable" in errors_of(connector_config("/nonexistent/source-x"))["airbyte.source"][0]


def test_full_refresh_streams_are_refused_when_exactly_once_is_required(source):
    config = {**connector_config(source, streams="events,snapshot"), "exactly.once.support": "required"}
    (problem,) = errors_of(config)["airbyte.streams"]
    assert "snapshot support only full refresh" in problem and "cannot be delivered exactly once" in problem
    assert errors_of({**config, "airbyte.streams": "events"}) == {}


class Run:
    """A task of the connector, polled as the runtime would, committing where it asks."""

    def __init__(self, config: dict[str, str], offsets: dict[Any, Any]) -> None:
        connector = AirbyteSourceConnector()
        connector.start(config)
        (self.task_config,) = connector.task_configs(1)
        self.txn = RequestedTransactionContext()
        context = SourceTaskContext(
            configs=self.task_config, offset_storage_reader=InMemoryOffsetStorageReader(offsets)
        )
        context.transaction_context = self.txn
        self.task = AirbyteSourceTask()
        self.task.initialize(context)
        self.task.start(self.task_config)
        self.committed: list[SourceRecord] = []
        self.offsets = dict(offsets)
        self.open: list[SourceRecord] = []

    def poll_until(self, done: Any, polls: int = 100) -> None:
        for _ in range(polls):
            for record in self.task.poll() or []:
                self.open.append(record)
                if self.txn.should_commit_on(record):
                    self.committed += self.open
                    self.open = []
                    self.offsets.update(self.task.update_offsets({}) or {})
            if done(self):
                return
        raise AssertionError("the task did not get there")


@pytest.fixture
def runs() -> Iterator[list[Run]]:
    made: list[Run] = []
    yield made
    for run in made:
        run.task.stop()


def ids(records: list[SourceRecord]) -> list[int]:
    return [r.value.get("id") for r in records]


def test_each_state_closes_a_transaction_and_a_restart_resumes_after_it(source, runs):
    config = connector_config(source)
    first = Run(config, {})
    runs.append(first)
    first.poll_until(lambda r: len(r.committed) >= 20)
    assert ids(first.committed) == list(range(1, 21))
    record = first.committed[0]
    assert record.topic == "scripted.events" and record.key == 1 and record.timestamp == 1_700_000_000_001
    assert record.value.get("tags") == ["t1"] and json.loads(record.value.get("extra")) == {"n": 1}
    first.task.stop()  # as a crash would: nothing after the second state was committed

    second = Run(config, first.offsets)
    runs.append(second)
    second.poll_until(lambda r: len(r.committed) >= 5)
    assert ids(second.committed) == list(range(21, 26))
    assert second.task.syncs == 1


def test_schemaless_values_are_the_records_data(source, runs):
    run = Run({**connector_config(source), "airbyte.schemaless": "true"}, {})
    runs.append(run)
    run.poll_until(lambda r: len(r.committed) >= 10)
    assert run.committed[0].value == {
        "id": 1,
        "name": "event 1",
        "amount": 1.25,
        "tags": ["t1"],
        "extra": {"n": 1},
    }
    assert run.committed[0].value_schema is None


@pytest.mark.parametrize(
    ("misbehaviour", "says"),
    [
        ({"garbage_after": 12}, "stream events printed a line that is not JSON"),
        ({"unknown_after": 12}, "message of unknown type 'SURPRISE'"),
        (
            {"crash_after": 12},
            "exited with code 3; its last stderr lines:\nscripted source: the disk caught fire",
        ),
        ({"trace_after": 12}, "failed: the API refused the token"),
        (
            {"miscount": True},
            "the state of stream 'events' counts 11 record(s) since its previous state but 10",
        ),
    ],
)
def test_a_misbehaving_source_fails_the_task_saying_how(source, runs, misbehaviour, says):
    run = Run(connector_config(source, **misbehaviour), {})
    runs.append(run)
    with pytest.raises(ConnectException) as err:
        run.poll_until(lambda r: False)
    assert says in str(err.value)
    assert "connector ab, task 0" in str(err.value)
    if "garbage_after" in misbehaviour:
        assert "'Traceback? this is not a protocol message'" in str(err.value)


def test_stop_ends_the_source_by_its_pid(source, runs):
    run = Run(connector_config(source, count=100_000, sleep_ms=1), {})
    runs.append(run)
    run.poll_until(lambda r: len(r.open) + len(r.committed) > 0)
    process = run.task._process
    assert process is not None
    pid = process.pid
    run.task.stop()
    assert process.proc.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_a_task_whose_start_failed_stops_quietly():
    task = AirbyteSourceTask()
    task.initialize(SourceTaskContext())
    with pytest.raises(ConnectException):
        task.start({"airbyte.source": "/nonexistent/source", "topic.prefix": "p"})
    task.stop()
