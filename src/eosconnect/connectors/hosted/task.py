"""`HostedSourceTask`: the task shared by hosted protocols (Airbyte, Singer), one sync after another.

A sync runs the source program from the task's last state. Its messages become records on
`<topic.prefix>.<stream>` and its states source offsets (`Checkpoints`). With
`transaction.boundary=connector` each transaction ends at a state that covers every record in it,
so the records and the state commit together or not at all, and a restart hands the source the
state of the last committed transaction.

A transaction has to end on a record (`commit_transaction(record)`) while a state arrives after
the records it covers, maybe in a later poll: so the task holds back the last record it read until
it knows what follows. When a state closes the transaction, the held record is returned as its
last record and `update_offsets` adds the offsets of the states since the previous close.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eosconnect.api.data import Schema, SchemaBuilder, Struct
from eosconnect.api.records import Primitive, SourcePartition, SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.connectors.hosted.airbyte_protocol import StateMessage
from eosconnect.connectors.hosted.checkpoints import Checkpoints
from eosconnect.connectors.hosted.json_schema import StreamSchema
from eosconnect.connectors.hosted.process import EndOfOutput, ProtocolProcess

__all__ = ["SYNC_HEADER", "HostedSourceTask", "LogLine", "RecordData"]

#: How long one poll waits for the source's next lines.
POLL_WAIT_S = 0.5
#: Header carrying the sync's identity on records of full-refresh streams (each sync re-reads them).
SYNC_HEADER = "eosconnect.sync.id"

_LEVELS = {
    "FATAL": logging.CRITICAL,
    "CRITICAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "WARNING": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": logging.DEBUG,
}

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RecordData:
    stream: str
    data: Mapping[str, Any]
    emitted_at: int | None


@dataclass(frozen=True)
class LogLine:
    level: str
    message: str


Event = RecordData | StateMessage | LogLine | None


class HostedSourceTask(SourceTask, ABC):
    """Runs syncs of a hosted source program; subclasses speak its protocol (`interpret`) and say
    how to run it (`sync_argv`)."""

    #: offsets are keyed `{"<prefix>.stream": ...}` / `{"<prefix>.state": ...}`
    offset_prefix = "hosted"
    commit_record_metadata = False

    # ------------------------------------------------------------------------ for subclasses

    @abstractmethod
    def setup(self, config: dict[str, str]) -> None:
        """Parse the config; set `executable`, `streams` (stream -> StreamSchema), `primary_keys`,
        `full_refresh`, `topic_prefix`, `schemaless`, `batch_size`, `sync_interval_s`."""

    @abstractmethod
    def sync_files(self, state: Any) -> dict[str, Any]:
        """The JSON files of a sync, by name (`config`, `catalog`, `state`...)."""

    @abstractmethod
    def sync_argv(self, paths: Mapping[str, str]) -> list[str]:
        """The command line of a sync, given the paths of its files."""

    @abstractmethod
    def interpret(self, line: str, where: str) -> Event:
        """The event of one stdout line (None: nothing for the task); raises for bad lines."""

    # ------------------------------------------------------------------------------ lifecycle

    def start(self, config: dict[str, str]) -> None:
        self.executable = ""
        self.streams: dict[str, StreamSchema] = {}
        self.primary_keys: dict[str, list[list[str]]] = {}
        self.full_refresh: set[str] = set()
        self.topic_prefix = ""
        self.schemaless = False
        self.batch_size = 500
        self.sync_interval_s = 60.0
        self.setup(config)
        name = config.get("name", "?")
        task = config.get(self.task_index_key, "0")
        self.label = f"{self.offset_prefix} source {self.executable} (connector {name}, task {task})"
        self.log = logging.LoggerAdapter(log, {"connector": name})
        self.checkpoints = Checkpoints(self.offset_prefix, self.streams, self.context.offset_storage_reader)
        self._key_schemas: dict[str, Schema | None] = {s: self._key_schema(s) for s in self.streams}
        self._process: ProtocolProcess | None = None
        self._files: Any = None
        self._held: SourceRecord | None = None
        self._closing: dict[SourcePartition, dict[str, Primitive]] = {}
        self._next_sync = 0.0
        self._stream = "before its first record"
        self._sync_id = ""
        self._stopping = threading.Event()
        self._warned_fields: set[str] = set()
        self.syncs = 0
        if self.checkpoints.latest:
            self.log.info(
                "%s: resuming from the committed state of %s",
                self.label,
                ", ".join(sorted(self.checkpoints.latest)),
            )

    task_index_key = "task.index"

    def stop(self) -> None:
        stopping = getattr(self, "_stopping", None)
        if stopping is None:  # start() failed before it ran anything
            return
        stopping.set()
        self._end_process()

    def _end_process(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            process.stop()
        files, self._files = self._files, None
        if files is not None:
            files.__exit__(None, None, None)

    # ---------------------------------------------------------------------------------- syncs

    def _start_sync(self) -> ProtocolProcess:
        from eosconnect.connectors.hosted.commands import private_files

        files = private_files(**self.sync_files(self.checkpoints.restart_state()))
        paths = files.__enter__()
        self._files = files
        self._sync_id = uuid.uuid4().hex
        self.syncs += 1
        self._process = ProtocolProcess(self.sync_argv(paths), self.label, self.log)
        self.log.info("%s: sync %s started (pid %d)", self.label, self._sync_id, self._process.pid)
        return self._process

    def where(self) -> str:
        return f"{self.label}, stream {self._stream}"

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.is_set():
            return None
        process = self._process
        if process is None:
            wait = self._next_sync - time.monotonic()
            if wait > 0:
                self._stopping.wait(min(wait, 1.0))
                return None
            process = self._start_sync()
        out: list[SourceRecord] = []
        deadline = time.monotonic() + POLL_WAIT_S
        while len(out) < self.batch_size and not self._stopping.is_set():
            line = process.next_line(max(0.0, deadline - time.monotonic()))
            if line is None:
                break
            if isinstance(line, EndOfOutput):
                self._sync_ended(out)
                break
            if not line.strip():
                continue
            event = self.interpret(line, self.where())
            if isinstance(event, RecordData):
                self._stream = event.stream
                self.checkpoints.record(event.stream, self.where())
                record = self._record(event)
                if self._held is not None:
                    out.append(self._held)
                self._held = record
            elif isinstance(event, StateMessage):
                self.checkpoints.state(event, self.where())
                if self.checkpoints.covered and self._held is not None:
                    self._close(out)
                    break
            elif isinstance(event, LogLine):
                self.log.log(
                    _LEVELS.get(event.level.upper(), logging.INFO), "%s: %s", self.label, event.message
                )
        return out or None

    def _close(self, out: list[SourceRecord]) -> None:
        """End the transaction at the held record with the states read so far."""
        held, self._held = self._held, None
        assert held is not None
        self._closing.update(self.checkpoints.close())
        out.append(held)
        txn = self.context.transaction_context
        if txn is not None:
            txn.commit_transaction(held)

    def _sync_ended(self, out: list[SourceRecord]) -> None:
        self._end_process()
        self._next_sync = time.monotonic() + self.sync_interval_s
        uncovered = self.checkpoints.uncovered
        if uncovered:
            self.log.warning(
                "%s: the sync ended without a state after the last records of %s; they are committed with "
                "the states before them, so a restart before the next state reads them again",
                self.label,
                ", ".join(sorted(uncovered)),
            )
            self.checkpoints.forget_uncovered()
        if self._held is not None:
            self._close(out)
        self.log.info(
            "%s: sync %s ended; the next in %.0f s", self.label, self._sync_id, self.sync_interval_s
        )

    def update_offsets(
        self, offsets: dict[SourcePartition, Any]
    ) -> Mapping[SourcePartition, Mapping[str, Primitive]] | None:
        """The states of the transaction being committed (KIP-910 adds them to its offsets)."""
        closing, self._closing = self._closing, {}
        return closing or None

    # -------------------------------------------------------------------------------- records

    def _record(self, event: RecordData) -> SourceRecord:
        stream = event.stream
        schema = self.streams[stream]
        unknown = schema.unknown_fields(event.data) if not self.schemaless else []
        if unknown and stream not in self._warned_fields:
            self._warned_fields.add(stream)
            self.log.warning(
                "%s: records of stream %s have properties its schema lacks (%s); they are left out of the "
                "Struct (set schemaless to keep them)",
                self.label,
                stream,
                ", ".join(unknown[:10]),
            )
        partition, offset = self.checkpoints.record_offset(stream)
        if self.schemaless:
            value: Any = dict(event.data)
            value_schema = None
        else:
            value, value_schema = schema.value(event.data), schema.schema
        key, key_schema = self._key(stream, event.data, value)
        headers = self.headers(stream)
        return SourceRecord(
            source_partition=partition,
            source_offset=offset,
            topic=f"{self.topic_prefix}.{stream}",
            value=value,
            key=key,
            headers=headers,
            timestamp=event.emitted_at,
            key_schema=key_schema,
            value_schema=value_schema,
        )

    def headers(self, stream: str) -> list[tuple[str, str]] | None:
        """A record's headers: the sync's id on a full-refresh stream's (each sync re-reads it)."""
        return [(SYNC_HEADER, self._sync_id)] if stream in self.full_refresh else None

    def _key_schema(self, stream: str) -> Schema | None:
        keys = self.primary_keys.get(stream) or []
        schema = self.streams[stream].schema
        if not keys or self.schemaless or not self.streams[stream].structured:
            return None
        fields = []
        for path in keys:
            field = schema.field(path[0]) if len(path) == 1 else None
            if field is None:
                return None  # a nested key: written schemaless
            fields.append(field)
        if len(fields) == 1:
            return fields[0].schema
        builder = SchemaBuilder.struct().name(f"{schema.name}_key")
        for field in fields:
            builder.field(field.name, field.schema)
        return builder.build()

    def _key(self, stream: str, data: Mapping[str, Any], value: Any) -> tuple[Any, Schema | None]:
        keys = self.primary_keys.get(stream) or []
        if not keys:
            return None, None
        key_schema = self._key_schemas.get(stream)
        if key_schema is not None and isinstance(value, Struct):
            if len(keys) == 1:
                return value.get(keys[0][0]), key_schema
            struct = Struct(key_schema)
            for path in keys:
                struct.put(path[0], value.get(path[0]))
            return struct, key_schema
        parts = {".".join(path): _dig(data, path) for path in keys}
        if len(parts) == 1:
            return next(iter(parts.values())), None
        return parts, None


def _dig(data: Mapping[str, Any], path: list[str]) -> Any:
    value: Any = data
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value
