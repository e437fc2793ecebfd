"""Connectors that misbehave on purpose, for runtime tests. Importable by Spark executors because
tests/conftest.py puts the tests directory on PYTHONPATH before Spark starts."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from eosconnect.api.config import ConfigDef
from eosconnect.api.errors import ConnectException, DataException, RetriableException
from eosconnect.api.records import (
    OffsetAndMetadata,
    RecordMetadata,
    SinkRecord,
    SourceOffset,
    SourcePartition,
    SourceRecord,
)
from eosconnect.api.sink import SinkConnector, SinkTask
from eosconnect.api.source import SourceTask
from eosconnect.api.transforms import Transformation
from eosconnect.connectors.file_stream import FileStreamSinkConnector, FileStreamSinkTask
from eosconnect.connectors.mirror import MirrorSinkConnector, MirrorSinkTask
from eosconnect.connectors.mirror_source import MirrorSourceConnector, MirrorSourceTask
from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask
from eosconnect.storage.transactional_ids import fence_transactional_ids


class CrashingSequenceTask(SequenceSourceTask):
    """SIGKILLs its own Python worker in `poll()` once, after `crash.after.polls` polls.

    The marker file makes only the first attempt crash: the retried Spark task runs normally.
    """

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._polls = 0
        self._crash_after = int(config["crash.after.polls"])
        self._marker = Path(config["crash.marker.dir"]) / f"crashed-{self.task_index}"

    def poll(self) -> list[SourceRecord] | None:
        self._polls += 1
        if self._polls > self._crash_after and not self._marker.exists():
            self._marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return super().poll()


class CrashingSequenceConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return CrashingSequenceTask


class FailingSequenceTask(SequenceSourceTask):
    """Raises in `poll()` after `fail.after.polls` polls: the task fails (no Spark retry)."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._polls = 0
        self._fail_after = int(config["fail.after.polls"])

    def poll(self) -> list[SourceRecord] | None:
        self._polls += 1
        if self._polls > self._fail_after:
            raise ConnectException("the source went away")
        return super().poll()


class FailingSequenceConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return FailingSequenceTask


class FlakySequenceTask(SequenceSourceTask):
    """`poll()` raises RetriableException on polls `flaky.from.poll` to `flaky.to.poll` (counted
    from 1), then polls on as SequenceSource: a source whose system is away for a moment."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._polls = 0
        self._flaky = range(int(config["flaky.from.poll"]), int(config["flaky.to.poll"]) + 1)

    def poll(self) -> list[SourceRecord] | None:
        self._polls += 1
        if self._polls in self._flaky:
            raise RetriableException(f"the source is away for a moment (poll {self._polls})")
        return super().poll()


class FlakySequenceConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return FlakySequenceTask


class ConflictingBoundaryTask(SequenceSourceTask):
    """Asks for both a commit and an abort after the same record: the runtime must fail the task."""

    def poll(self) -> list[SourceRecord] | None:
        records = super().poll()
        if records and self.context.transaction_context is not None:
            self.context.transaction_context.commit_transaction(records[0])
            self.context.transaction_context.abort_transaction(records[0])
        return records


class ConflictingBoundaryConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return ConflictingBoundaryTask


class HeartbeatTask(SequenceSourceTask):
    """One busy source partition (the sequence) plus an idle one whose offset only moves through
    `update_offsets` (KIP-910), like a CDC source's heartbeat for a quiet table. With
    `heartbeat.constant=true` the idle partition's offset is always `{"heartbeat": 0}`, as
    MirrorHeartbeat's offset is."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self.idle_partition = {"table": f"idle-{self.task_index}"}
        self.drop_busy = config.get("heartbeat.drop.busy", "false") == "true"
        self.constant = config.get("heartbeat.constant", "false") == "true"

    def update_offsets(
        self, offsets: dict[SourcePartition, SourceOffset]
    ) -> dict[SourcePartition, SourceOffset]:
        beat = 0 if self.constant else time.time_ns()
        heartbeat = {SourcePartition.of(self.idle_partition): SourceOffset.of({"heartbeat": beat})}
        if not self.drop_busy:
            heartbeat.update(offsets)
        return heartbeat


class HeartbeatConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return HeartbeatTask


class WatchingSequenceConnector(SequenceSourceConnector):
    """Watches `watch.file` from a thread of its own, as a connector watching its source would:
    `tasks=N` asks the runtime for N task configs (new generation), `fail` fails the connector."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._path = Path(config["watch.file"])
        self._seen = self._path.read_text().strip()
        self._tasks = int(self._seen.removeprefix("tasks="))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.2):
            content = self._path.read_text().strip()
            if content == self._seen:
                continue
            self._seen = content
            if content == "fail":
                self.context.raise_error(RuntimeError("the watched source is gone"))
            else:
                self._tasks = int(content.removeprefix("tasks="))
                self.context.request_task_reconfiguration()

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return super().task_configs(min(self._tasks, max_tasks))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


class RecordingSinkTask(SinkTask):
    """Appends every call the runtime makes to `record.file` (one JSON object a line), because it
    runs in a Spark Python worker: the test reads the file to see the calls in order.

    `pre_commit` holds back the last `record.hold.back` records of each partition (default 1: it
    commits the last record's offset, not the one after it), so a test can tell "what pre_commit
    returned" from "what was consumed". With `record.warnings=true` the runtime's WARNING and ERROR
    log lines of the task's lifetime are recorded too (`{"call": "log", ...}`).
    """

    def start(self, config: dict[str, str]) -> None:
        self._log = self._log_path(config).open("a", encoding="utf-8")
        self._hold_back = int(config.get("record.hold.back", "1"))
        self._log_handler: logging.Handler | None = None
        if config.get("record.warnings") == "true":
            self._log_handler = _EventLogHandler(self._event)
            logging.getLogger("eosconnect.runtime").addHandler(self._log_handler)
        self._event("start")

    def _log_path(self, config: dict[str, str]) -> Path:
        return Path(config["record.file"])

    def _event(self, call: str, **data: object) -> None:
        self._log.write(json.dumps({"call": call, "pid": os.getpid(), **data}) + "\n")
        self._log.flush()

    def open(self, partitions):
        self._event("open", partitions=sorted(str(tp) for tp in partitions))

    def close(self, partitions):
        self._event("close", partitions=sorted(str(tp) for tp in partitions))

    def put(self, records: list[SinkRecord]) -> None:
        if records:
            self._event(
                "put", records=[[r.topic, r.kafka_partition, r.kafka_offset, r.value] for r in records]
            )

    def flush(self, current_offsets):
        self._event("flush", offsets={str(tp): om.offset for tp, om in current_offsets.items()})

    def pre_commit(self, current_offsets):
        self.flush(current_offsets)
        returned = {
            tp: OffsetAndMetadata(om.offset - self._hold_back, leader_epoch=om.leader_epoch)
            if self._hold_back == 0
            else OffsetAndMetadata(om.offset - self._hold_back)
            for tp, om in current_offsets.items()
        }
        self._event("pre_commit", returned={str(tp): om.offset for tp, om in returned.items()})
        return returned

    def stop(self) -> None:
        self._event("stop")
        if self._log_handler is not None:  # Spark reuses the Python worker for other tasks
            logging.getLogger("eosconnect.runtime").removeHandler(self._log_handler)
        self._log.close()


class _EventLogHandler(logging.Handler):
    """Hands WARNING and ERROR log records to a `RecordingSinkTask`'s call log."""

    def __init__(self, event: Callable[..., None]) -> None:
        super().__init__(logging.WARNING)
        self._record_event = event

    def emit(self, record: logging.LogRecord) -> None:
        self._record_event("log", level=record.levelname, logger=record.name, message=record.getMessage())


class RecordingSinkConnector(SinkConnector):
    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, config: dict[str, str]) -> None:
        self._config = dict(config)

    def task_class(self) -> type[SinkTask]:
        return RecordingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._config)]


class KillingFileStreamSinkTask(FileStreamSinkTask):
    """SIGKILLs its own Python worker in `put()` once, after `crash.after.records` records were
    written; the marker file makes only the first attempt crash."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._written = 0
        self._crash_after = int(config["crash.after.records"])
        self._marker = Path(config["crash.marker.dir"]) / "crashed-sink"

    def put(self, records: list[SinkRecord]) -> None:
        super().put(records)
        self._written += len(records)
        if self._written > self._crash_after and not self._marker.exists():
            self._marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)


class KillingFileStreamSinkConnector(FileStreamSinkConnector):
    def task_class(self) -> type[SinkTask]:
        return KillingFileStreamSinkTask


class FencingSequenceTask(SequenceSourceTask):
    """Logs what it polled and was told was committed; optionally fences its own transactional id.

    `fence.at=update_offsets` fences at the boundary of that poll's batch, after its records were
    sent and before its offsets are written: the pipelined commit of that batch then fails while the
    next `poll()` runs. `fence.at=poll` fences inside the next `poll()`, racing the commit in flight.
    Without `fence.at` it never fences. Every poll's sequence numbers go to `polled-<task>.jsonl`
    and every `commit_record()` call to `committed-<task>.jsonl` in `log.dir`, for the test to
    compare with what Kafka holds.
    """

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._polls = 0
        self._fence_after = int(config.get("fence.after.polls", "-1"))
        self._fence_at = config.get("fence.at", "never")
        self._fence_config = {
            "bootstrap.servers": config.get("fence.bootstrap.servers", ""),
            "transactional.id": config.get("fence.transactional.id", ""),
        }
        log_dir = Path(config["log.dir"])
        self._polled_log = log_dir / f"polled-{self.task_index}.jsonl"
        self._committed_log = log_dir / f"committed-{self.task_index}.jsonl"

    def poll(self) -> list[SourceRecord] | None:
        self._polls += 1
        if self._fence_at == "poll" and self._polls == self._fence_after + 1:
            self._fence()
        records = super().poll()
        if records:
            seqs = [r.source_offset["seq"] for r in records if r.source_offset is not None]
            self._append(self._polled_log, {"poll": self._polls, "seqs": seqs})
        return records

    def update_offsets(self, offsets: dict[SourcePartition, SourceOffset]) -> None:
        if self._fence_at == "update_offsets" and self._polls == self._fence_after:
            self._fence()

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        entry = {"seq": record.source_offset["seq"] if record.source_offset else None, "offset": None}
        if metadata is not None:
            entry.update(topic=metadata.topic, partition=metadata.partition, offset=metadata.offset)
        self._append(self._committed_log, entry)

    def _fence(self) -> None:
        """Take over the task's transactional id, as a second instance of the task would."""
        fence_transactional_ids(self._fence_config, [self._fence_config["transactional.id"]])
        self._fence_at = "done"

    @staticmethod
    def _append(path: Path, entry: dict[str, object]) -> None:
        with path.open("a") as out:
            out.write(json.dumps(entry) + "\n")


class FencingSequenceConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return FencingSequenceTask


class CollectingSinkTask(RecordingSinkTask):
    """Appends what it is given to `<collect.dir>/task-<task.index>.jsonl` (one file per task), in
    `RecordingSinkTask`'s format. The default `pre_commit` (commit everything put) applies, so a
    graceful stop or rebalance commits exactly what was put."""

    def _log_path(self, config: dict[str, str]) -> Path:
        return Path(config["collect.dir"]) / f"task-{config['task.index']}.jsonl"

    def pre_commit(self, current_offsets):
        return SinkTask.pre_commit(self, current_offsets)

    def stop(self) -> None:
        log = getattr(self, "_log", None)
        if log is not None and not log.closed:
            super().stop()


class CollectingSinkConnector(SinkConnector):
    """`tasks.max` tasks, each told its index (`task.index`) so it writes a file of its own."""

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, config: dict[str, str]) -> None:
        self._config = dict(config)

    def task_class(self) -> type[SinkTask]:
        return CollectingSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self._config, "task.index": str(i)} for i in range(max_tasks)]


class CrashingMirrorSinkTask(MirrorSinkTask):
    """A mirror task that puts slowly (`put.delay.ms`) and, once per task (marker files in
    `crash.marker.dir`), SIGKILLs its own Python worker in the first non-empty put after its
    `crash.after.commits`-th commit, right after producing, i.e. with records in an open
    transaction. The Spark retry runs normally."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._commits = 0
        self._delay_s = int(config.get("put.delay.ms", "0")) / 1000
        self._crash_after = int(config.get("crash.after.commits", "1"))
        marker_dir = config.get("crash.marker.dir")
        task = (self.context.transactional_id or "x-0").rsplit("-", 1)[1]
        self._marker = Path(marker_dir) / f"crashed-{task}" if marker_dir else None

    def put(self, records: list[SinkRecord]) -> None:
        super().put(records)
        if not records:
            return
        time.sleep(self._delay_s)
        if self._marker is not None and self._commits >= self._crash_after and not self._marker.exists():
            self._marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)

    def pre_commit(self, current_offsets):  # type: ignore[no-untyped-def]
        result = super().pre_commit(current_offsets)
        self._commits += 1
        return result


class CrashingMirrorSinkConnector(MirrorSinkConnector):
    def task_class(self) -> type[SinkTask]:
        return CrashingMirrorSinkTask


class CrashingMirrorSourceTask(MirrorSourceTask):
    """Once per task (marker files in `crash.marker.dir`), SIGKILLs its own Python worker in the
    poll after its `crash.after.polls`-th non-empty one, so a transaction with records in it is left
    open; the Spark retry runs normally."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._polls = 0
        self._crash_after = int(config.get("crash.after.polls", "3"))
        marker_dir = config.get("crash.marker.dir")
        first = config.get("task.assigned.partitions", "").split(",")[0].replace(":", "-")
        self._marker = Path(marker_dir) / f"crashed-{first}" if marker_dir else None

    def poll(self) -> list[SourceRecord] | None:
        records = super().poll()
        if records:
            self._polls += 1
            time.sleep(0.05)
        if self._marker is not None and self._polls > self._crash_after and not self._marker.exists():
            self._marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return records


class CrashingMirrorSourceConnector(MirrorSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return CrashingMirrorSourceTask


class RejectingTransform(Transformation):
    """Raises DataException for records whose value contains `bad` (errors.tolerance tests)."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.config = dict(config)

    def apply(self, record: Any) -> Any:
        if "bad" in str(record.value):
            raise DataException(f"refusing {record.value!r}")
        return record


class UnavailableUntilTransform(Transformation):
    """Raises RetriableException until the wall-clock time `until.ms` (epoch ms), as a converter
    whose schema registry is down would: for errors.retry.timeout tests."""

    def configure(self, config: Mapping[str, Any]) -> None:
        self.until_s = int(config["until.ms"]) / 1000

    def apply(self, record: Any) -> Any:
        if time.time() < self.until_s:
            raise RetriableException("the registry is unavailable (a test transformation)")
        return record
