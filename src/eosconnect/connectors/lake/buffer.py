"""Changes waiting for the next table commit, per partition, and when that commit is due."""

from __future__ import annotations

import time
from collections.abc import Iterable

from eosconnect.api.records import TopicPartition
from eosconnect.connectors.lake.changes import Change

__all__ = ["PartitionBuffers"]


class PartitionBuffers:
    """Per-partition lists of changes in consumption order.

    A commit is due once `flush_size` changes wait in all, or once the oldest waiting change (or
    position moved without one) is `interval_s` old: small batches wait at most that long, which is
    what bounds the latency from a record produced to it being readable in the table."""

    def __init__(self, flush_size: int, interval_s: float) -> None:
        self.flush_size = flush_size
        self.interval_s = interval_s
        self.changes: dict[TopicPartition, list[Change]] = {}
        self.count = 0
        #: monotonic time the oldest uncommitted change or consumed record came (None: nothing waits)
        self.since: float | None = None

    def add(self, change: Change) -> None:
        self.changes.setdefault(change.topic_partition, []).append(change)
        self.count += 1
        self.touch()

    def touch(self) -> None:
        """Records were consumed (with or without changes): their positions wait for a commit."""
        if self.since is None:
            self.since = time.monotonic()

    def due(self) -> bool:
        if self.count >= self.flush_size:
            return True
        return self.since is not None and time.monotonic() - self.since >= self.interval_s

    def take(self, partitions: Iterable[TopicPartition]) -> list[Change]:
        """Remove and return the changes of these partitions, in consumption order per partition."""
        taken: list[Change] = []
        for tp in partitions:
            part = self.changes.pop(tp, None)
            if part:
                taken.extend(part)
                self.count -= len(part)
        if not self.changes:
            self.since = None
        return taken

    def drop(self, partitions: Iterable[TopicPartition]) -> None:
        self.take(partitions)
