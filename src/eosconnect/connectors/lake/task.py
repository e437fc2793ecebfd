"""The lake sink task: changes buffered in `put`, one table commit with the positions in `pre_commit`.

A subclass names its table (`make_table`) and how records become changes (`make_changes`); the
table (`LakeTable`) does the format's claim and commit (see `positions` for the protocol). The
runtime calls `pre_commit` once a commit is due (the task asks for it with `request_commit` when
`flush.size` rows wait or `commit.interval.ms` has passed) and on every revocation and stop.
"""

from __future__ import annotations

import logging
from abc import abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from eosconnect.api.errors import DataException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.api.sink import SinkTask
from eosconnect.connectors.lake.buffer import PartitionBuffers
from eosconnect.connectors.lake.changes import Change, ChangeMaker
from eosconnect.connectors.lake.config import COMMIT_INTERVAL_MS, FLUSH_SIZE, LAKE_CONFIG_DEF
from eosconnect.connectors.lake.positions import Position, resume_offsets

__all__ = ["CommitResult", "LakeSinkTask", "LakeTable"]

log = logging.getLogger(__name__)


@dataclass
class CommitResult:
    """What a commit wrote, and the partitions it left out because a newer task claimed them."""

    rows: int = 0
    committed: dict[TopicPartition, OffsetAndMetadata] = field(default_factory=dict)
    fenced: dict[TopicPartition, int] = field(default_factory=dict)


class LakeTable(Protocol):
    """One table format's side of the protocol in `positions`."""

    def claim(self, partitions: list[TopicPartition]) -> dict[TopicPartition, Position]:
        """Raise these partitions' generations in one commit; their positions after it."""
        ...

    def commit(self, changes: list[Change], positions: Mapping[TopicPartition, Position]) -> CommitResult:
        """Write the changes and the positions in one commit, for the partitions whose stored
        generation is still the one in `positions` (the others are fenced, their changes dropped)."""
        ...

    def close(self) -> None: ...


class LakeSinkTask(SinkTask):
    """Buffers changes per partition and commits them with their positions (see the module doc)."""

    stores_offsets = True

    @abstractmethod
    def make_table(self, config: Mapping[str, str], connector: str) -> LakeTable: ...

    @abstractmethod
    def make_changes(self, config: Mapping[str, str]) -> ChangeMaker: ...

    def start(self, config: dict[str, str]) -> None:
        values = LAKE_CONFIG_DEF.parse({k: v for k, v in config.items() if k in LAKE_CONFIG_DEF})
        self.name = str(config.get("name", type(self).__name__))
        self.buffers = PartitionBuffers(int(values[FLUSH_SIZE]), int(values[COMMIT_INTERVAL_MS]) / 1000)
        self.changes = self.make_changes(config)
        self.table = self.make_table(config, self.name)
        #: The positions this task holds its partitions at (generation and last committed offset).
        self.held: dict[TopicPartition, Position] = {}
        self.written = 0
        self.commits = 0

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = sorted(set(partitions))
        if not partitions:
            return
        claims = self.table.claim(partitions)
        self.held.update(claims)
        fenced_before = [tp for tp in partitions if tp in self.context.paused]
        if fenced_before:
            self.context.resume(*fenced_before)
        offsets = resume_offsets(claims)
        if offsets:
            self.context.offset(offsets)  # with leader epochs: checked against the log (KIP-320)
        log.info(
            "[%s] claimed %s; resuming from the table's offsets %s",
            self.name,
            {str(tp): p.generation for tp, p in sorted(claims.items())},
            {str(tp): om.offset for tp, om in sorted(offsets.items())},
        )

    def put(self, records: list[SinkRecord]) -> None:
        make, add = self.changes.change, self.buffers.add
        for record in records:
            try:
                change = make(record)
            except DataException as exc:
                reporter = self.context.errant_record_reporter()
                if reporter is None:
                    raise
                reporter.report(record, exc)
                continue
            if change is not None:
                add(change)
        if records:
            self.buffers.touch()
        if self.buffers.due():
            self.context.request_commit()

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        wanted = {
            tp: om
            for tp, om in current_offsets.items()
            if tp in self.held and self.held[tp].offset != om.offset
        }
        if not wanted:
            self.buffers.take(current_offsets)  # nothing new consumed: nothing buffered either
            return {}
        changes = self.buffers.take(wanted)
        targets = {tp: self.held[tp].advanced(om) for tp, om in wanted.items()}
        result = self.table.commit(changes, targets)
        self.commits += 1
        self.written += result.rows
        for tp in result.committed:
            self.held[tp] = targets[tp]
        for tp, generation in result.fenced.items():
            self.held.pop(tp, None)
            log.warning(
                "[%s] %s was claimed by a newer task (generation %s in the table): this task's "
                "uncommitted rows of it are dropped (the new holder writes them) and it stops reading it",
                self.name,
                tp,
                generation,
            )
            self.context.pause(tp)
        return result.committed

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        partitions = list(partitions)
        self.buffers.drop(partitions)
        for tp in partitions:
            self.held.pop(tp, None)

    def stop(self) -> None:
        table = getattr(self, "table", None)
        if table is not None:
            log.info("[%s] wrote %d rows in %d commits", self.name, self.written, self.commits)
            table.close()
