"""FileStreamSource without Kafka or Spark: lines, byte offsets, resume, partial lines, config errors."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from eosconnect.api import (
    ConfigException,
    ConnectException,
    ExactlyOnceSupport,
    InMemoryOffsetStorageReader,
    SinkTaskContext,
    SourceTaskContext,
)
from eosconnect.api.data import STRING_SCHEMA
from eosconnect.connectors.file_stream import (
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from eosconnect.plugins import resolve_connector_class


def start_task(path: Path, position: int | None = None, **settings: str) -> FileStreamSourceTask:
    offsets = [({"filename": str(path)}, {"position": position})] if position is not None else []
    task = FileStreamSourceTask()
    task.initialize(SourceTaskContext(offset_storage_reader=InMemoryOffsetStorageReader(offsets)))
    task.start({"file": str(path), "topic": "lines", **settings})
    return task


def drain(task: FileStreamSourceTask) -> list[tuple[str, int]]:
    out = []
    while batch := task.poll():
        out.extend((r.value, r.source_offset["position"]) for r in batch)
    return out


def test_lines_with_kafka_partition_and_byte_offsets(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes("alpha\nbé\r\n\nlast".encode())
    task = start_task(path)
    batch = task.poll()
    assert batch is not None
    assert [(r.value, dict(r.source_offset)) for r in batch] == [
        ("alpha", {"position": 6}),
        ("bé", {"position": 11}),  # "bé\r\n" is 5 bytes
        ("", {"position": 12}),
    ]
    assert all(dict(r.source_partition) == {"filename": str(path)} for r in batch)
    assert all(r.topic == "lines" and r.key is None for r in batch)
    assert task.poll() is None, "a last line without its newline is not emitted yet"
    with path.open("ab") as f:
        f.write(b" line\nmore")
    assert drain(task) == [("last line", 22)]
    task.stop()


def test_records_carry_kafkas_string_schema_and_the_read_time(tmp_path: Path) -> None:
    """As Kafka's FileStreamSourceTask: Schema.STRING_SCHEMA values and a timestamp per record (what
    TimestampRouter needs), so schema'd converters write what Kafka's file source writes."""
    path = tmp_path / "in.txt"
    path.write_text("a\nb\n")
    before = int(time.time() * 1000)
    batch = start_task(path).poll()
    assert batch is not None
    records = list(batch)
    assert [r.value_schema for r in records] == [STRING_SCHEMA, STRING_SCHEMA]
    assert all(r.timestamp is not None and before <= r.timestamp <= time.time() * 1000 for r in records)


def test_resume_from_stored_position(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("one\ntwo\nthree\n")
    assert drain(start_task(path, position=4)) == [("two", 8), ("three", 14)]
    assert drain(start_task(path, position=14)) == []


def test_batch_size_limits_lines_per_poll(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("".join(f"line {i}\n" for i in range(25)))
    task = start_task(path, **{"batch.size": "10"})
    sizes = []
    while batch := task.poll():
        sizes.append(len(batch))
    assert sizes == [10, 10, 5]


def test_missing_file_is_waited_for(tmp_path: Path) -> None:
    path = tmp_path / "later.txt"
    task = start_task(path)
    assert task.poll() is None
    path.write_text("hello\n")
    assert drain(task) == [("hello", 6)]


def test_truncated_file_fails_with_explanation(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("one\ntwo\n")
    task = start_task(path, position=8)
    path.write_text("x\n")
    with pytest.raises(ConnectException, match="truncated or replaced"):
        task.poll()


def test_config_errors_name_each_setting() -> None:
    connector = FileStreamSourceConnector()
    with pytest.raises(ConfigException) as info:
        connector.start({"topic": "a,b", "batch.size": "0"})
    assert set(info.value.errors) == {"file", "topic", "batch.size"}
    assert "no commas" in info.value.errors["topic"][0]


def test_one_task_and_exactly_once_supported(tmp_path: Path) -> None:
    connector = FileStreamSourceConnector()
    config = {"file": str(tmp_path / "f"), "topic": "t"}
    connector.start(config)
    assert connector.task_configs(4) == [config]
    assert connector.exactly_once_support(config) is ExactlyOnceSupport.SUPPORTED


def test_kafka_class_name_resolves() -> None:
    cls = resolve_connector_class("org.apache.kafka.connect.file.FileStreamSourceConnector")
    assert cls is FileStreamSourceConnector
    assert resolve_connector_class("FileStreamSource") is FileStreamSourceConnector


# ------------------------------------------------------------------------------ file.allowed.dirs
def confined_source(path: Path, allowed: Path) -> FileStreamSourceTask:
    task = FileStreamSourceTask()
    task.initialize(SourceTaskContext(file_allowed_dirs=str(allowed)))
    task.start({"file": str(path), "topic": "lines"})
    return task


def test_source_inside_the_allowed_dirs_reads(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("one\n")
    assert drain(confined_source(path, tmp_path)) == [("one", 4)]


def test_source_fails_when_its_file_becomes_a_link_out_of_the_allowed_dirs(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "secret.txt"
    allowed.mkdir()
    outside.write_text("secret\n")
    path = allowed / "in.txt"  # does not exist yet: validation would have let it through
    task = confined_source(path, allowed)
    assert task.poll() is None
    path.symlink_to(outside)
    with pytest.raises(ConnectException) as failed:
        task.poll()
    message = str(failed.value)
    assert str(path) in message and str(outside) in message
    assert f"file.allowed.dirs={allowed}" in message and "add its directory" in message


def test_sink_refuses_a_file_outside_the_allowed_dirs_and_creates_nothing(tmp_path: Path) -> None:
    allowed, outside = tmp_path / "allowed", tmp_path / "out.txt"
    allowed.mkdir()
    task = FileStreamSinkTask()
    task.initialize(SinkTaskContext(file_allowed_dirs=f"{tmp_path / 'elsewhere'}, {allowed}"))
    with pytest.raises(ConnectException, match=r"file\.allowed\.dirs"):
        task.start({"file": str(allowed / ".." / "out.txt"), "topics": "t"})
    assert not outside.exists()
    task.start({"file": str(allowed / "out.txt"), "topics": "t"})
    task.stop()
    assert (allowed / "out.txt").exists()


def test_a_line_longer_than_line_max_bytes_fails_naming_the_setting(tmp_path: Path) -> None:
    """A file without newlines (the probe used a 2 GB sparse one) made the task buffer without bound;
    now the task fails once a line passes line.max.bytes, and reads no further."""
    path = tmp_path / "in.txt"
    with path.open("wb") as f:
        f.write(b"short\n")
        f.truncate(8 * 1024 * 1024)  # 8 MiB of NUL bytes, no newline: sparse, as in the probe
    task = start_task(path, **{"line.max.bytes": "65536"})
    with pytest.raises(ConnectException, match=r"line starting at byte 6 longer than line\.max\.bytes=65536"):
        drain(task)
    within = tmp_path / "ok.txt"
    within.write_bytes(b"a" * 1000 + b"\nb\n")
    assert [v for v, _ in drain(start_task(within, **{"line.max.bytes": "1000"}))] == ["a" * 1000, "b"]
    task = start_task(within, **{"line.max.bytes": "999"})
    with pytest.raises(ConnectException, match=r"line\.max\.bytes=999"):
        drain(task)


def test_sink_writes_text_lines_and_refuses_values_it_would_change(tmp_path: Path) -> None:
    """ByteArrayConverter values: UTF-8 text is written as is; bytes that are not UTF-8 (were
    replaced with U+FFFD) and a newline inside a value (read back as two records) fail the task
    naming the record, and nothing of that batch is written."""
    from eosconnect.api import SinkRecord

    out = tmp_path / "out.txt"
    task = FileStreamSinkTask()
    task.initialize(SinkTaskContext())
    task.start({"file": str(out), "topics": "t"})
    task.put([SinkRecord("t", 0, 0, None, "é".encode()), SinkRecord("t", 0, 1, None, None)])
    for bad, why in ((b"\xff\xfe", "not UTF-8"), (b"two\nlines", "newline")):
        with pytest.raises(ConnectException, match=f"record t-0@7 .*{why}"):
            task.put([SinkRecord("t", 0, 6, None, b"fine"), SinkRecord("t", 0, 7, None, bad)])
    task.stop()
    assert out.read_bytes() == "é\nnull\n".encode()


def test_a_long_line_is_read_over_several_polls_each_bounded(tmp_path: Path) -> None:
    """With line.max.bytes above a newline-less file, one poll() used to read the whole line (the
    probe's 2 GB, copied again at every 1 MiB chunk), so the runtime could neither heartbeat nor
    stop the task meanwhile. Each poll now reads at most READ_BUDGET_PER_POLL, and a stopped task
    reads nothing more."""
    from eosconnect.connectors.file_stream import READ_BUDGET_PER_POLL

    path = tmp_path / "long.txt"
    size = 3 * READ_BUDGET_PER_POLL + 5
    with path.open("wb") as f:
        f.truncate(size)  # sparse NUL bytes, no newline
    task = start_task(path, **{"line.max.bytes": str(4 * READ_BUDGET_PER_POLL)})
    for polls in range(1, 4):
        began = time.monotonic()
        assert task.poll() is None
        assert time.monotonic() - began < 2.0
        assert task._read_to == min(size, polls * READ_BUDGET_PER_POLL)
    assert task.poll() is None and task._read_to == size  # all read; waiting for the newline
    with path.open("ab") as f:
        f.write(b"\nnext\n")
    batch = task.poll()
    assert batch is not None
    assert [len(v) for v in batch.values] == [size, 4]
    assert list(batch.record_offsets)[-1] == {"position": size + 6}
    task.stop()
    assert task.poll() is None


class RecordingStop:
    """Stands for the task's stop event: records each idle wait instead of sleeping it."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def is_set(self) -> bool:
        return False

    def wait(self, timeout: float) -> bool:
        self.waits.append(timeout)
        return False


def test_idle_polls_wait_longer_up_to_a_second_and_new_lines_shorten_the_wait(tmp_path: Path) -> None:
    path = tmp_path / "tail.txt"
    path.write_text("a\n")
    task = start_task(path)
    stop = RecordingStop()
    task._stopping = stop  # type: ignore[assignment]
    assert drain(task) == [("a", 2)]
    for _ in range(4):
        assert task.poll() is None
    assert stop.waits == [0.2, 0.4, 0.8, 1.0, 1.0], "doubling from drain's last poll to Kafka's 1 s"
    with path.open("a") as f:
        f.write("b\n")
    assert drain(task) == [("b", 4)]
    assert stop.waits[-1] == 0.2, "the first empty poll after new lines waits the short time again"
