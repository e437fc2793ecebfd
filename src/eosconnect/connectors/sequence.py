"""`SequenceSource`: deterministic, sequence-numbered records, the referee's favourite input.

Each task owns one source partition `{"task": i}` and writes records whose key is `task-<i>` and
whose value carries the next sequence number and a payload of `payload.bytes`. The offset is the
last sequence number written, so a restarted task resumes at `seq + 1`: any gap or duplicate in the
output is the runtime's fault, which is what tests and the demo check with `eosconnect verify`.

With `transaction.boundary=connector` it commits every `transaction.commit.every` records and
aborts every `transaction.abort.every`-th of those transactions (for tests of abort semantics).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.records import SourceRecord
from eosconnect.api.source import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    ReplaySupport,
    SourceConnector,
    SourceTask,
)
from eosconnect.api.validators import NonEmptyString, Range
from eosconnect.connectors.stored_offsets import offset_int

VERSION = "1.0.0"

CONFIG_DEF = (
    ConfigDef()
    .define(
        "topic",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="Topic the records are written to.",
        validator=NonEmptyString(),
    )
    .define(
        "records.per.task",
        ConfigType.LONG,
        -1,
        Importance.MEDIUM,
        "Records each task writes in total (-1: no end).",
        Range.at_least(-1),
    )
    .define(
        "batch.size",
        ConfigType.INT,
        100,
        Importance.MEDIUM,
        "Records returned by one poll().",
        Range.between(1, 1_000_000),
    )
    .define(
        "rate.per.task",
        ConfigType.DOUBLE,
        0.0,
        Importance.MEDIUM,
        "Records per second per task (0: as fast as possible).",
        Range.at_least(0),
    )
    .define(
        "payload.bytes",
        ConfigType.INT,
        100,
        Importance.LOW,
        "Size of the payload string in each value.",
        Range.between(0, 100_000_000),
    )
    .define(
        "transaction.commit.every",
        ConfigType.INT,
        100,
        Importance.LOW,
        "With transaction.boundary=connector: records per transaction.",
        Range.at_least(1),
    )
    .define(
        "transaction.abort.every",
        ConfigType.INT,
        0,
        Importance.LOW,
        "With transaction.boundary=connector: abort every N-th transaction (0: never).",
        Range.at_least(0),
    )
)


def expected_sequences(total: int, commit_every: int, abort_every: int) -> list[int]:
    """The sequence numbers that survive connector-defined aborts, for verification."""
    if not abort_every:
        return list(range(total))
    return [s for s in range(total) if (s // commit_every + 1) % abort_every != 0]


def record_key(task: int) -> str:
    return f"task-{task}"


class SequenceSourceConnector(SourceConnector):
    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def start(self, config: dict[str, str]) -> None:
        CONFIG_DEF.parse(config)
        self._config = dict(config)

    def task_class(self) -> type[SourceTask]:
        return SequenceSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{**self._config, "task.index": str(i)} for i in range(max_tasks)]

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def replay_support(self, config: Mapping[str, str]) -> ReplaySupport:
        """Sequence numbers from a stored one are the same records every time."""
        return ReplaySupport.SUPPORTED

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.SUPPORTED


class SequenceSourceTask(SourceTask):
    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        values = CONFIG_DEF.parse(config)
        self.task_index = int(config["task.index"])
        self.topic: str = values["topic"]
        self.total: int = values["records.per.task"]
        self.batch_size: int = values["batch.size"]
        self.rate: float = values["rate.per.task"]
        self.commit_every: int = values["transaction.commit.every"]
        self.abort_every: int = values["transaction.abort.every"]
        self.payload = "x" * values["payload.bytes"]
        self.partition = {"task": self.task_index}
        self.key = record_key(self.task_index)
        stored = self.context.offset_storage_reader.offset(self.partition)
        self.next_seq = offset_int(stored, "seq", "SequenceSource") + 1 if stored else 0
        self._started = time.monotonic()
        self._first_seq = self.next_seq

    def poll(self) -> list[SourceRecord] | None:
        count = self.batch_size
        if self.total >= 0:
            count = min(count, self.total - self.next_seq)
            if count <= 0:
                time.sleep(0.05)
                return None
        if self.rate > 0:
            allowed = int((time.monotonic() - self._started) * self.rate) - (self.next_seq - self._first_seq)
            count = min(count, allowed)
            if count <= 0:
                time.sleep(min(0.05, 1 / self.rate))
                return None
        seqs = range(self.next_seq, self.next_seq + count)
        records = [self._record(seq) for seq in seqs]
        self.next_seq += count
        txn = self.context.transaction_context
        if txn is not None:
            for seq, record in zip(seqs, records, strict=True):
                if (seq + 1) % self.commit_every == 0:
                    number = seq // self.commit_every + 1
                    if self.abort_every and number % self.abort_every == 0:
                        txn.abort_transaction(record)
                    else:
                        txn.commit_transaction(record)
        return records

    def _record(self, seq: int) -> SourceRecord:
        value: dict[str, Any] = {"task": self.task_index, "seq": seq, "payload": self.payload}
        return SourceRecord(
            source_partition=self.partition,
            source_offset={"seq": seq},
            topic=self.topic,
            key=self.key,
            value=value,
        )

    def stop(self) -> None:
        pass


def parse_value(raw: bytes | None) -> tuple[int, int]:
    """(task, seq) of a record value written by this connector with the JSON converter: in the
    envelope of the default `schemas.enable=true` (`{"schema":null,"payload":{...}}`) or plain."""
    data = json.loads(raw or b"{}")
    if isinstance(data, dict) and data.keys() == {"schema", "payload"}:
        data = data["payload"]
    return int(data["task"]), int(data["seq"])
