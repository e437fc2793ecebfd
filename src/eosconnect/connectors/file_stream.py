"""`FileStreamSource` and `FileStreamSink`: lines of a file into a topic and back, as Kafka's file
connectors do. Each connector class describes itself (the generated docs show those texts).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from itertools import accumulate
from typing import IO, Any

from eosconnect.api.batch import SourceBatch
from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import STRING_SCHEMA
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.records import (
    OffsetAndMetadata,
    SinkRecord,
    SourceOffset,
    SourcePartition,
    TopicPartition,
)
from eosconnect.api.sink import SINK_TOPICS_CONFIG_DEF, SinkConnector, SinkTask, sink_topics_errors
from eosconnect.api.source import ExactlyOnceSupport, ReplaySupport, SourceConnector, SourceTask
from eosconnect.api.validators import NonEmptyString, Range, Validator
from eosconnect.policies.file_access import AllowedDirs

__all__ = [
    "CONFIG_DEF",
    "FILENAME_FIELD",
    "POSITION_FIELD",
    "SINK_CONFIG_DEF",
    "FileStreamSinkConnector",
    "FileStreamSinkTask",
    "FileStreamSourceConnector",
    "FileStreamSourceTask",
]

VERSION = "1.0.0"
FILENAME_FIELD = "filename"
POSITION_FIELD = "position"
#: How long an idle `poll()` waits for the file to grow before returning nothing: `IDLE_WAIT_S` after
#: lines came, doubling with every empty poll up to `MAX_IDLE_WAIT_S` (Kafka's task waits 1 s each
#: time). A tail that just went quiet answers new lines fast; an idle one wakes once a second, not
#: five times (a fleet of idle file sources spent most of its CPU waking up).
IDLE_WAIT_S = 0.2
MAX_IDLE_WAIT_S = 1.0
#: Bytes read from the file per system call: lines are split in bulk, a chunk at a time.
READ_CHUNK = 1024 * 1024
#: Bytes one `poll()` reads at most before it returns what it has (maybe nothing yet): a long line
#: (a large `line.max.bytes`, a file without newlines) is read over several polls, so the runtime
#: still heartbeats and sees a stop between them (a poll that read a whole 2 GB line outlived the
#: connector's deletion by a minute).
READ_BUDGET_PER_POLL = 32 * READ_CHUNK
LINE_MAX_BYTES = "line.max.bytes"

log = logging.getLogger(__name__)

CONFIG_DEF = (
    ConfigDef()
    .define(
        "file",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation=(
            "Path of the file to read, as seen by the Spark executors (use an absolute path). Lines "
            "appended later are picked up; the file may not exist yet when the task starts."
        ),
        validator=NonEmptyString(),
    )
    .define(
        "topic",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="The topic the lines are written to (one topic).",
        validator=Validator.of(
            lambda v: bool(v.strip()) and "," not in v, "a single topic name (no commas)", "lines"
        ),
    )
    .define(
        "batch.size",
        ConfigType.INT,
        2000,
        Importance.LOW,
        "The maximum number of lines returned by one poll().",
        Range.at_least(1),
    )
    .define(
        LINE_MAX_BYTES,
        ConfigType.INT,
        1024 * 1024,
        Importance.LOW,
        "eosconnect: the longest line (in bytes, without its newline) the task accepts; a longer one "
        "fails the task naming this setting instead of being buffered without bound (a file with no "
        "newline at all would otherwise fill the executor's memory). A line must also fit in one "
        "Kafka record.",
        Range.at_least(1),
    )
)


class FileStreamSourceConnector(SourceConnector):
    """Streams the lines of one file into one topic (Kafka's `FileStreamSourceConnector`).

    Same settings (`file`, `topic`, `batch.size`), same offsets: the source partition is
    `{"filename": <file>}` and each record's offset is `{"position": <byte offset just after its line>}`,
    so a restarted task seeks there and continues with the next line. Kafka's task counts characters
    but seeks in bytes; this one counts bytes throughout, so files with multi-byte UTF-8 characters
    resume at the right place too.

    A line ends with `\\n` (a `\\r\\n` ending is stripped as well). A last line without its newline
    is not emitted until the newline arrives: a writer may still be in the middle of it, and emitting
    it early would commit a position inside the line. The value is the line as a string (key null),
    with Kafka's STRING value schema and the time it was read as the record timestamp, as Kafka's
    task gives them; the default JSON converter writes it in the envelope Kafka's file source writes
    (`{"schema":{"type":"string","optional":false},"payload":"..."}`), as a bare JSON string with
    `value.converter.schemas.enable=false`, and
    `value.converter=org.apache.kafka.connect.storage.StringConverter` writes it as plain text.

    Re-reading a file from a committed byte position yields the same lines, so exactly-once delivery
    is SUPPORTED, provided the file is only appended to. A file that shrinks below the committed
    position (truncated, or replaced by a shorter one) fails the task with an explanation instead of
    silently skipping or repeating lines. There is one task: a file is one ordered stream.

    Unlike Kafka's connector, `file` is required: reading standard input makes no sense inside a
    Spark task and could not be replayed.
    """

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def start(self, config: dict[str, str]) -> None:
        CONFIG_DEF.parse(config)
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return FileStreamSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config)]  # one file, one ordered stream, one task

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def replay_support(self, config: Mapping[str, str]) -> ReplaySupport:
        """An append-only file re-read from a byte position yields the same lines."""
        return ReplaySupport.SUPPORTED

    def alter_offsets(
        self, config: Mapping[str, str], offsets: Mapping[SourcePartition, SourceOffset | None]
    ) -> bool:
        """Kafka's checks: every partition names its `filename`; every offset is null or holds a
        non-negative integer `position` (a task would fail seeking anywhere else)."""
        for partition, offset in offsets.items():
            if FILENAME_FIELD not in partition:
                raise ConfigException(
                    f"Partition objects should contain the key '{FILENAME_FIELD}' (got {dict(partition)})"
                )
            if offset is None:
                continue
            if POSITION_FIELD not in offset:
                raise ConfigException(
                    f"Offset objects should either be null or contain the key '{POSITION_FIELD}' "
                    f"(got {dict(offset)})"
                )
            position = offset[POSITION_FIELD]
            if isinstance(position, bool) or not isinstance(position, int):
                raise ConfigException(
                    f"The value for the '{POSITION_FIELD}' key in the offset is expected to be an integer "
                    f"byte position, got {position!r}"
                )
            if position < 0:
                raise ConfigException(
                    f"The value for the '{POSITION_FIELD}' key in the offset should be a non-negative "
                    f"value, got {position}"
                )
        return True


class FileStreamSourceTask(SourceTask):
    """Lines as Kafka's FileStreamSourceTask gives them: a STRING value schema (so schema'd converters
    write what Kafka's do, e.g. JsonConverter's `{"schema":{"type":"string",...}}` envelope) and the
    time read as each record's timestamp (what TimestampRouter and InsertField's timestamp use)."""

    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        values = CONFIG_DEF.parse(config)
        self.filename: str = values["file"]
        self.topic: str = values["topic"]
        self.batch_size: int = values["batch.size"]
        self.line_max_bytes: int = values[LINE_MAX_BYTES]
        self.partition = {FILENAME_FIELD: self.filename}
        self._allowed = _allowed_dirs(self)
        stored = self.context.offset_storage_reader.offset(self.partition)
        position = stored.get(POSITION_FIELD) if stored else None
        if position is not None and (isinstance(position, bool) or not isinstance(position, int)):
            raise ConnectException(
                f"the stored offset of file {self.filename!r} is {stored!r}; {POSITION_FIELD!r} must be a "
                "byte position (an integer). Reset the connector's offsets to re-read the file."
            )
        self.position: int = position or 0
        self._stream: IO[bytes] | None = None
        # Read ahead of `position`: complete lines not handed out yet (from index `_next` on), then
        # the start of an incomplete line; `_read_to` is the file position read up to.
        self._lines: list[bytes] = []
        self._next = 0
        self._partial = bytearray()  # grown in place: `bytes +=` copied it whole at every chunk
        self._read_to = self.position
        self._stopping = threading.Event()
        self._idle_wait_s = IDLE_WAIT_S
        self._warned_missing = False
        if self.position:
            log.info("file %s: resuming at byte %d", self.filename, self.position)

    def poll(self) -> SourceBatch | None:
        if self._stopping.is_set():
            return None
        stream = self._open()
        if stream is None:
            self._wait_idle()
            return None
        try:
            self._check_not_truncated(stream)
            budget, at_end = READ_BUDGET_PER_POLL, False
            while len(self._lines) - self._next < self.batch_size and budget > 0:
                if self._stopping.is_set():
                    return None
                chunk = stream.read(READ_CHUNK)
                if not chunk:
                    at_end = True
                    break
                budget -= len(chunk)
                self._add(chunk)
        except ValueError:
            if self._stopping.is_set():  # stop() closed the file under us
                return None
            raise
        lines = self._lines[self._next : self._next + self.batch_size]
        if not lines:
            if at_end:  # else the budget ran out inside a long line: read on at the next poll
                self._wait_idle()
            return None
        self._idle_wait_s = IDLE_WAIT_S
        self._next += len(lines)
        if self._next == len(self._lines):
            self._lines, self._next = [], 0
        start = self.position
        self.position += sum(map(len, lines)) + len(lines)  # each line's bytes and its newline
        return SourceBatch(
            source_partition=self.partition,
            source_offset={POSITION_FIELD: self.position},
            topic=self.topic,
            values=_decode_lines(lines),
            record_offsets=LineEndOffsets(start, lines),
            timestamps=[int(time.time() * 1000)] * len(lines),
            value_schema=STRING_SCHEMA,
        )

    def _wait_idle(self) -> None:
        self._stopping.wait(self._idle_wait_s)
        self._idle_wait_s = min(2 * self._idle_wait_s, MAX_IDLE_WAIT_S)

    def stop(self) -> None:
        self._stopping.set()
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()

    # ------------------------------------------------------------------------------------------

    def _open(self) -> IO[bytes] | None:
        if self._stream is not None:
            return self._stream
        if self._allowed is not None:  # checked at every open: the path may have become a link
            self._allowed.check(self.filename)
        try:
            stream = open(self.filename, "rb")  # noqa: SIM115 - kept open across polls, closed in stop()
        except FileNotFoundError:
            if not self._warned_missing:
                log.warning("file %s does not exist (yet); waiting for it", self.filename)
                self._warned_missing = True
            return None
        except OSError as exc:
            raise ConnectException(f"cannot open file {self.filename!r}: {exc}") from exc
        if self._allowed is not None:
            try:
                self._allowed.check_opened(self.filename, stream.fileno())
            except ConnectException:
                stream.close()
                raise
        size = os.fstat(stream.fileno()).st_size
        if size < self.position:
            stream.close()
            raise self._truncated(size)
        stream.seek(self.position)
        self._lines, self._next, self._partial, self._read_to = [], 0, bytearray(), self.position
        self._stream = stream
        log.info("file %s: reading from byte %d", self.filename, self.position)
        return stream

    def _check_not_truncated(self, stream: IO[bytes]) -> None:
        size = os.fstat(stream.fileno()).st_size
        if size < self._read_to:
            raise self._truncated(size)

    def _truncated(self, size: int) -> ConnectException:
        return ConnectException(
            f"file {self.filename!r} has {size} bytes, fewer than the committed position {self.position}: "
            "it was truncated or replaced. Its lines cannot be matched to the committed offsets any more, "
            "so the task stops rather than skip or repeat lines. Point `file` at a new path (or delete the "
            "connector's offsets) to read the new content from the start."
        )

    def _add(self, chunk: bytes) -> None:
        """Split a chunk read from the file into complete lines (bytes, newline dropped) in bulk;
        the bytes after the last newline wait in `_partial` for the rest of their line."""
        self._read_to += len(chunk)
        cut = chunk.rfind(b"\n")
        if cut < 0:
            self._partial += chunk
            self._check_line_length(len(self._partial))
            return
        if self._partial:
            self._partial += chunk[:cut]
            complete = bytes(self._partial)
        else:
            complete = chunk[:cut]
        self._partial = bytearray(chunk[cut + 1 :])
        lines = complete.split(b"\n")
        self._check_line_length(max(len(self._partial), max(map(len, lines))))
        if self._next:  # drop the lines already handed out before appending
            self._lines, self._next = self._lines[self._next :], 0
        self._lines.extend(lines)

    def _check_line_length(self, length: int) -> None:
        if length > self.line_max_bytes:
            line_start = self._read_to - len(self._partial) if length == len(self._partial) else None
            where = f" starting at byte {line_start}" if line_start is not None else ""
            raise ConnectException(
                f"file {self.filename!r} has a line{where} longer than {LINE_MAX_BYTES}="
                f"{self.line_max_bytes} bytes (is it a text file with newlines?). Raise {LINE_MAX_BYTES} "
                "if such lines are expected (each must also fit in one Kafka record), or fix the file."
            )


class LineEndOffsets(Sequence[Mapping[str, int]]):
    """Each line's offset, `{"position": <byte just after its newline>}`, computed only if asked
    for (transformations or `commit_record()` see records one by one; the fast path never does)."""

    def __init__(self, start: int, lines: list[bytes]) -> None:
        self._start, self._lines = start, lines
        self._ends: list[int] | None = None

    def __len__(self) -> int:
        return len(self._lines)

    def __getitem__(self, index: Any) -> Any:
        if self._ends is None:
            self._ends = list(accumulate((len(line) + 1 for line in self._lines), initial=self._start))[1:]
        if isinstance(index, slice):
            return [{POSITION_FIELD: end} for end in self._ends[index]]
        return {POSITION_FIELD: self._ends[index]}


def _allowed_dirs(task: SourceTask | SinkTask) -> AllowedDirs | None:
    """The worker's `file.allowed.dirs` as the runtime put it in the task's context (None outside
    a runtime, e.g. a task built directly in a unit test)."""
    context = getattr(task, "context", None)
    return AllowedDirs.parse(getattr(context, "file_allowed_dirs", None))


def _decode_lines(lines: list[bytes]) -> list[str]:
    """The lines as text, a `\r` before the newline stripped. Decoding the joined block and
    splitting it again is equivalent to decoding line by line (a newline byte is never part of a
    UTF-8 sequence, so invalid bytes are replaced the same way) and much faster."""
    block = b"\n".join(lines)
    if b"\r" in block:
        lines = [line[:-1] if line.endswith(b"\r") else line for line in lines]
        block = b"\n".join(lines)
    return block.decode("utf-8", errors="replace").split("\n")


# ============================================================================================ sink

SINK_CONFIG_DEF = (
    ConfigDef()
    .define(
        "file",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation=(
            "Path of the file the lines are appended to, as seen by the Spark executors (use an "
            "absolute path); created if missing."
        ),
        validator=NonEmptyString(),
    )
    .merge(SINK_TOPICS_CONFIG_DEF)
)


def parse_sink_config(config: Mapping[str, str]) -> dict[str, Any]:
    """Typed settings; one `ConfigException` naming every bad one, the topics rule included."""
    errors = {v.name: v.errors for v in SINK_CONFIG_DEF.validate(config) if v.errors}
    for name, problems in sink_topics_errors(config).items():
        errors.setdefault(name, []).extend(problems)
    if errors:
        raise ConfigException(errors=errors)
    return SINK_CONFIG_DEF.parse(config)


def line_of(record: SinkRecord) -> str:
    """The text of one record value, as Kafka's FileStreamSinkTask prints it; a value that cannot
    be one line without loss fails the task (Kafka's sink replaces undecodable bytes and splits a
    value with a newline into two lines, which a reader cannot tell from two records)."""
    value = record.value
    if value is None:
        return "null"
    if isinstance(value, bytes | bytearray | memoryview):
        try:
            text = bytes(value).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ConnectException(
                f"record {record.topic}-{record.kafka_partition}@{record.kafka_offset} has a binary value "
                f"that is not UTF-8 text ({exc.reason} at byte {exc.start}); FileStreamSink writes text "
                "lines, so it refuses it rather than replace bytes. Use a converter that yields text "
                "for this topic, or a sink made for binary data."
            ) from exc
    else:
        text = str(value)
    if "\n" in text:
        raise ConnectException(
            f"record {record.topic}-{record.kafka_partition}@{record.kafka_offset} has a value with a "
            "newline; FileStreamSink writes one record per line, and this one would read back as two. "
            "Use a converter or transformation that encodes the value on one line (JsonConverter does)."
        )
    return text


class FileStreamSinkConnector(SinkConnector):
    """Appends the values of records from `topics` to one file (Kafka's `FileStreamSinkConnector`).

    Each record's value becomes one line: a string as it is, bytes decoded as UTF-8, null as `null`
    (as Kafka's sink prints it), anything else as `str(value)`. A value that cannot be one line
    without loss (bytes that are not UTF-8, a newline inside) fails the task naming the record,
    before anything of its batch is written. Settings: `file` (required) and the
    topics to read, `topics` or `topics.regex`. Each `put` batch is written with one unbuffered
    write, and `flush` fsyncs the file before the runtime commits the consumer offsets, so every
    committed record is on disk. Delivery is at least once: after a crash (not a clean stop or
    restart) the lines written after the last commit are appended again. There is one task, so the
    lines of one partition keep their order; read a single-partition topic to keep a file's order.
    """

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return SINK_CONFIG_DEF

    def start(self, config: dict[str, str]) -> None:
        parse_sink_config(config)
        self._config = dict(config)

    def task_class(self) -> type[SinkTask]:
        return FileStreamSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config)]  # one file, one writer


class FileStreamSinkTask(SinkTask):
    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        self.filename: str = parse_sink_config(config)["file"]
        allowed = _allowed_dirs(self)
        if allowed is not None:
            allowed.check(self.filename)
        try:
            # Unbuffered: each put() is one write() of whole lines, so a killed process never
            # leaves half a line behind for the redelivered records to be appended to.
            self._file = open(self.filename, "ab", buffering=0)  # noqa: SIM115 - closed in stop()
        except OSError as exc:
            raise ConnectException(f"cannot open file {self.filename!r} for appending: {exc}") from exc
        if allowed is not None:
            try:
                allowed.check_opened(self.filename, self._file.fileno())
            except ConnectException:
                self._file.close()
                raise
        log.info("file %s: appending at byte %d", self.filename, os.fstat(self._file.fileno()).st_size)

    def put(self, records: list[SinkRecord]) -> None:
        if not records:
            return
        data = memoryview("".join(line_of(r) + "\n" for r in records).encode("utf-8"))
        while data:
            written = self._file.write(data)
            data = data[written or 0 :]

    def flush(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        os.fsync(self._file.fileno())

    def stop(self) -> None:
        file = getattr(self, "_file", None)
        if file is not None and not file.closed:
            file.close()
