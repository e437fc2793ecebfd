"""PostgresCdcSource variants for fault tests."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from eosconnect.api.records import SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.connectors.postgres_cdc import PostgresCdcSourceConnector, PostgresCdcTask


class CrashingPostgresCdcTask(PostgresCdcTask):
    """SIGKILLs its own Python worker once (marker file in `crash.marker.dir`), in the poll after
    `crash.after.batches` batches of `crash.phase` (`stream`, the default, or `snapshot`) were returned."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._batches = 0
        self._crash_after = int(config["crash.after.batches"])
        self._marker = Path(config["crash.marker.dir"]) / "crashed"
        self._phase = config.get("crash.phase", "stream")

    def poll(self) -> list[SourceRecord] | None:
        if self._batches >= self._crash_after and not self._marker.exists():
            self._marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        records = super().poll()
        snapshot = bool(records) and records[0].source_offset.get("snapshot") is not None  # type: ignore[index]
        if records and snapshot == (self._phase == "snapshot"):
            self._batches += 1
        return records


class CrashingPostgresCdcConnector(PostgresCdcSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return CrashingPostgresCdcTask


class PidRecordingPostgresCdcTask(PostgresCdcTask):
    """Writes its Python worker's pid to `pid.file` at start (a test freezes it with SIGSTOP)."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        Path(config["pid.file"]).write_text(str(os.getpid()))


class PidRecordingPostgresCdcConnector(PostgresCdcSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return PidRecordingPostgresCdcTask


class ChunkCrashingPostgresCdcTask(PostgresCdcTask):
    """SIGKILLs its own Python worker once (marker file in `crash.marker.dir`) in the poll after
    `crash.after.chunks` polls returned incremental snapshot rows: mid-snapshot, with the chunk
    after the last one handed out read but not yet in Kafka."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._chunks = 0
        self._crash_after = int(config["crash.after.chunks"])
        self._marker = Path(config["crash.marker.dir"]) / "crashed"

    def poll(self) -> list[SourceRecord] | None:
        if self._chunks >= self._crash_after and not self._marker.exists():
            self._marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        records = super().poll()
        if records and any(_snapshot_read(r) for r in records):
            self._chunks += 1
        return records


class ChunkCrashingPostgresCdcConnector(PostgresCdcSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return ChunkCrashingPostgresCdcTask


class ThrottledPostgresCdcTask(PostgresCdcTask):
    """Sleeps `chunk.pause.ms` after each poll that returned incremental snapshot rows, so that the
    snapshot of a small table lasts long enough for a signal or a fault to land in its middle."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._pause_s = int(config["chunk.pause.ms"]) / 1000

    def poll(self) -> list[SourceRecord] | None:
        records = super().poll()
        if records and any(_snapshot_read(r) for r in records):
            time.sleep(self._pause_s)
        return records


class ThrottledPostgresCdcConnector(PostgresCdcSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return ThrottledPostgresCdcTask


def _snapshot_read(record: SourceRecord) -> bool:
    """Whether a record is a change event (not a heartbeat) of a snapshot read (op r)."""
    schema, value = record.value_schema, record.value
    return schema is not None and schema.field("op") is not None and value.get("op") == "r"  # type: ignore[union-attr]
