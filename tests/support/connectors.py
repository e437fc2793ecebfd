"""Connectors that misbehave on purpose, for runtime tests. Importable by Spark executors because
tests/conftest.py puts the tests directory on PYTHONPATH before Spark starts."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from eosconnect.api.records import SourceOffset, SourcePartition, SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask


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
    `update_offsets` (KIP-910), like a CDC source's heartbeat for a quiet table."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self.idle_partition = {"table": f"idle-{self.task_index}"}
        self.drop_busy = config.get("heartbeat.drop.busy", "false") == "true"

    def update_offsets(
        self, offsets: dict[SourcePartition, SourceOffset]
    ) -> dict[SourcePartition, SourceOffset]:
        heartbeat = {SourcePartition.of(self.idle_partition): SourceOffset.of({"heartbeat": time.time_ns()})}
        if not self.drop_busy:
            heartbeat.update(offsets)
        return heartbeat


class HeartbeatConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return HeartbeatTask
