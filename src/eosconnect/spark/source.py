"""`eosconnect`: a replayable source connector as a Spark streaming source.

`spark.readStream.format("eosconnect").option("connector.class", "JdbcSource").option(...)` runs
the connector's tasks twice over, for two jobs:

* on the driver, one *planner* task per task config polls ahead (at most
  `max.records.per.batch` records per task per micro-batch) only to learn how far each source
  partition has got: that position is the micro-batch's end offset, and Spark writes it into the
  query's checkpoint (nothing goes to Kafka's offsets topic);
* on the executors, each Spark partition (one task config) starts a fresh task at the batch's
  start offsets and returns exactly the records up to the end offsets.

This works for connectors whose `replay_support()` is SUPPORTED (api/source.py): re-reading from
an offset yields the same records with the same offsets, so a replayed micro-batch has the same
rows and the `eosconnect-kafka` sink can skip what it already committed.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import time
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from eosconnect.api.batch import expand
from eosconnect.api.context import SourceTaskContext
from eosconnect.api.data import Struct
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.offsets import InMemoryOffsetStorageReader
from eosconnect.api.records import SourceOffset, SourceRecord
from eosconnect.api.source import ReplaySupport, SourceConnector, SourceTask
from eosconnect.plugins.loading import resolve_connector_class

__all__ = ["SCHEMA", "ConnectorSource"]

FORMAT_NAME = "eosconnect"
SCHEMA = "key string, value string, topic string, source_partition string, source_offset string"
OWN_OPTIONS = ("connector.class", "tasks.max", "max.records.per.batch", "replay.timeout.ms")
#: How long the planner polls per task and micro-batch before it settles for what it has.
PLAN_BUDGET_S = 2.0

#: Offsets as Spark stores them: {task index: {partition JSON: offset}}.
Offsets = dict[str, dict[str, Any]]


def _canonical(data: Mapping[str, Any]) -> str:
    return json.dumps(dict(data), sort_keys=True, separators=(",", ":"))


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, Struct):
        value = value.to_dict()
    return json.dumps(value, separators=(",", ":"), default=_json_friendly)


def _json_friendly(value: Any) -> Any:
    """What Spark's from_json reads best for a schema'd value: decimals as numbers, dates and times
    as ISO-8601 text, bytes as base64."""
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    return str(value)


def _source_connector_class(name: str) -> type[SourceConnector]:
    cls = resolve_connector_class(name)
    if not issubclass(cls, SourceConnector):
        raise ConfigException.for_field("connector.class", f"{name} is not a source connector")
    return cls


def _offset(record: SourceRecord) -> SourceOffset:
    """The record's source offset: a replayable source's records each carry one (a tombstone would
    leave Spark's checkpoint no position to replay from)."""
    if record.source_offset is None:
        raise ConnectException(
            f"a record for {dict(record.source_partition)} has source_offset=None: a Spark streaming source "
            "needs an offset on every record to replay from"
        )
    return record.source_offset


def _connector_settings(
    options: Mapping[str, str],
) -> tuple[type[SourceConnector], dict[str, str], int, int, int]:
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    name = opts.get("connector.class")
    if not name:
        raise ConfigException.for_field(
            "connector.class", "is required, e.g. .option('connector.class', 'JdbcSource')"
        )
    cls = _source_connector_class(name)
    numbers = {}
    for key, default in (("tasks.max", 1), ("max.records.per.batch", 10_000), ("replay.timeout.ms", 120_000)):
        try:
            numbers[key] = int(opts.get(key, default))
            if numbers[key] < 1:
                raise ValueError
        except ValueError:
            raise ConfigException.for_field(
                key, f"must be a positive integer, got {opts.get(key)!r}"
            ) from None
    config = {k: v for k, v in opts.items() if k not in OWN_OPTIONS[1:]}
    return cls, config, numbers["tasks.max"], numbers["max.records.per.batch"], numbers["replay.timeout.ms"]


def _start_task(
    cls: type[SourceConnector], task_config: dict[str, str], offsets: Mapping[str, Any]
) -> SourceTask:
    connector = cls()
    task = connector.task_class()()
    stored = [(json.loads(p), o) for p, o in offsets.items()]
    task.initialize(
        SourceTaskContext(configs=task_config, offset_storage_reader=InMemoryOffsetStorageReader(stored))
    )
    task.start(dict(task_config))
    return task


class _Planner:
    """A task on the driver that polls ahead from a known position to find the next end offsets."""

    def __init__(self, cls: type[SourceConnector], config: dict[str, str], position: dict[str, Any]) -> None:
        self.task = _start_task(cls, config, position)
        self.position = dict(position)

    def advance(self, limit: int) -> dict[str, Any]:
        polled, deadline = 0, time.monotonic() + PLAN_BUDGET_S
        while polled < limit and time.monotonic() < deadline:
            records = expand(self.task.poll() or [])
            if not records:
                break
            for record in records:
                self.position[_canonical(record.source_partition)] = _offset(record).to_dict()
            polled += len(records)
        return dict(self.position)

    def stop(self) -> None:
        self.task.stop()


class _Reader(DataSourceStreamReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        cls, config, tasks_max, self.limit, self.timeout_ms = _connector_settings(options)
        connector = cls()
        if connector.replay_support(config) is not ReplaySupport.SUPPORTED:
            raise ConfigException.for_field(
                "connector.class",
                f"{cls.__name__} does not declare replay support (SourceConnector.replay_support), so it "
                "cannot be a Spark streaming source: Spark re-reads offset ranges after failures. Use "
                "JdbcSource, FileStreamSource, SequenceSource, or a connector that can replay.",
            )
        connector.start(dict(config))
        self.cls_path = f"{cls.__module__}.{cls.__qualname__}"
        self.cls = cls
        self.task_configs = connector.task_configs(tasks_max)
        connector.stop()
        self.planners: dict[str, _Planner] = {}

    def initialOffset(self) -> Offsets:
        return {str(i): {} for i in range(len(self.task_configs))}

    def latestOffset(self, start: Offsets | None = None, limit: Any = None) -> Offsets:
        start = start or self.initialOffset()
        end: Offsets = {}
        for i, config in enumerate(self.task_configs):
            index = str(i)
            position = start.get(index, {})
            planner = self.planners.get(index)
            if planner is None or any(planner.position.get(p) != o for p, o in position.items()):
                if planner is not None:  # Spark asks from another position (a restart): start over
                    planner.stop()
                planner = self.planners[index] = _Planner(self.cls, config, position)
            end[index] = planner.advance(self.limit)
        return end

    def partitions(self, start: Offsets, end: Offsets) -> list[InputPartition]:
        return [
            InputPartition(
                (self.cls_path, self.task_configs[int(i)], start.get(i, {}), offsets, self.timeout_ms)
            )
            for i, offsets in sorted(end.items())
            if offsets != start.get(i, {})
        ]

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        cls_path, config, start, end, timeout_ms = partition.value
        return read_range(_source_connector_class(cls_path), config, start, end, timeout_ms / 1000)

    def commit(self, end: Offsets) -> None:
        """Nothing to do: the offsets are in Spark's checkpoint, and nothing is acknowledged upstream."""

    def stop(self) -> None:
        for planner in self.planners.values():
            planner.stop()
        self.planners.clear()


def read_range(
    cls: type[SourceConnector],
    config: dict[str, str],
    start: Mapping[str, Any],
    end: Mapping[str, Any],
    timeout_s: float,
) -> Iterator[tuple[Any, ...]]:
    """The records of one task config after `start` up to and including `end`, per source partition.

    Records of a partition sharing its end offset all come from one poll (the replay contract), so
    the partition is done after the poll that reached it; what that poll returns past the end offset
    belongs to the next micro-batch and is left out (rows inserted between planning and reading)."""
    wanted = {p: _canonical(o) for p, o in end.items() if _canonical(start.get(p) or {}) != _canonical(o)}
    task = _start_task(cls, config, start)
    try:
        last_progress = time.monotonic()
        while wanted:
            records = expand(task.poll() or [])
            if not records:
                if time.monotonic() - last_progress > timeout_s:
                    raise ConnectException(
                        f"{cls.__name__} did not return the records up to {dict(end)} within "
                        f"{timeout_s:.0f}s (still missing {sorted(wanted)}): the source cannot replay this "
                        "offset range (data deleted or changed?)"
                    )
                continue
            last_progress = time.monotonic()
            reached = set()
            for record in records:
                part = _canonical(record.source_partition)
                if part not in wanted:
                    continue
                offset = _canonical(_offset(record))
                if part in reached and offset != wanted[part]:
                    continue  # past the end offset in the same poll: the next micro-batch's records
                yield (_text(record.key), _text(record.value), record.topic, part, offset)
                if offset == wanted[part]:
                    reached.add(part)
            for part in reached:
                wanted.pop(part, None)
    finally:
        task.stop()


class ConnectorSource(DataSource):
    """The `eosconnect` streaming source format."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        return SCHEMA

    def streamReader(self, schema: Any) -> _Reader:
        return _Reader(dict(self.options))
