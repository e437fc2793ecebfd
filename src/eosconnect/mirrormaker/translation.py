"""Exact offset translation from the offset syncs our exactly-once mirrors write.

A mirror writes, inside the very transaction that copies the records, one `OffsetSync` for the
first and the last record of every *run*: a stretch of records of one source partition whose
source offsets and target offsets both go up by one (`offset_syncs`). Between two syncs of one
run every offset on both sides is a copied record; between the end of one run and the start of
the next there are no copied records on either side (only transaction markers, aborted records
or offsets compaction removed). Since the syncs commit with the data, they describe exactly what
a read_committed consumer of the target sees.

So a group's committed source offset C (the next record it would read) translates exactly: the
target offset T such that the copies of every record before C lie below T and the copies of
every record from C on lie at or above it (`OffsetSyncIndex.translate`). MM2's own translation
only promises an offset "at or before" that point, so its groups reprocess a window on failover.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field

from eosconnect.mirrormaker.formats import OffsetSync

__all__ = ["OffsetSyncIndex", "offset_syncs"]


def offset_syncs(copies: Iterable[tuple[str, int, int, int]]) -> list[OffsetSync]:
    """The syncs describing `copies`: (source topic, source partition, source offset, target
    offset) of every record of one transaction, in the order they were written.

    One sync for the first and one for the last record of each run (a single-record run gives
    one), so a transaction of contiguous records costs two small records per partition."""
    syncs: list[OffsetSync] = []
    last: dict[tuple[str, int], tuple[int, int]] = {}  # partition -> (source, target) of its last copy
    emitted: dict[tuple[str, int], OffsetSync] = {}

    def emit(key: tuple[str, int], source: int, target: int) -> None:
        sync = OffsetSync(key[0], key[1], source, target)
        if emitted.get(key) != sync:
            syncs.append(sync)
            emitted[key] = sync

    for topic, partition, source, target in copies:
        key = (topic, partition)
        previous = last.get(key)
        if previous is None or source != previous[0] + 1 or target != previous[1] + 1:
            if previous is not None:
                emit(key, *previous)  # the end of the run before
            emit(key, source, target)  # the start of a new run
        last[key] = (source, target)
    for key, (source, target) in last.items():
        emit(key, source, target)
    return syncs


@dataclass
class _PartitionSyncs:
    sources: list[int] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)

    def add(self, source: int, target: int) -> None:
        i = bisect.bisect_left(self.sources, source)
        if i < len(self.sources) and self.sources[i] == source:
            self.targets[i] = target  # a re-copy after a reset: the newest wins
            return
        self.sources.insert(i, source)
        self.targets.insert(i, target)


class OffsetSyncIndex:
    """Every offset sync read so far, per source partition, for exact translation."""

    def __init__(self) -> None:
        self._partitions: dict[tuple[str, int], _PartitionSyncs] = {}

    def add(self, sync: OffsetSync) -> None:
        key = (sync.topic, sync.partition)
        syncs = self._partitions.get(key)
        if syncs is None:
            syncs = self._partitions[key] = _PartitionSyncs()
        syncs.add(sync.upstream_offset, sync.downstream_offset)

    def partitions(self) -> set[tuple[str, int]]:
        return set(self._partitions)

    def copied_through(self, topic: str, partition: int) -> int | None:
        """The highest source offset known to be copied, or None."""
        syncs = self._partitions.get((topic, partition))
        return syncs.sources[-1] if syncs and syncs.sources else None

    def translate(self, topic: str, partition: int, offset: int) -> int | None:
        """The target offset a consumer of the copy starts from to read exactly the records at and
        after source offset `offset`; None while that is not known yet (the mirror has not
        copied up to it, or nothing of the partition was copied)."""
        syncs = self._partitions.get((topic, partition))
        if syncs is None or not syncs.sources:
            return None
        sources, targets = syncs.sources, syncs.targets
        i = bisect.bisect_left(sources, offset)  # first sync at or after `offset`
        if i < len(sources) and sources[i] == offset:
            return targets[i]
        if i == 0:
            # Before the first copied record: nothing earlier was copied, start at the first copy.
            return targets[0]
        before_s, before_t = sources[i - 1], targets[i - 1]
        if i == len(sources):
            # Past the last copy: exact only when `offset` directly follows it; otherwise the
            # offsets between may still be uncopied records, so wait for the mirror.
            return before_t + 1 if offset == before_s + 1 else None
        # Inside a run the offsets map one to one; in a gap between runs every target offset
        # between the two copies holds no copied record, so the clamp to the next copy is exact.
        return min(before_t + (offset - before_s), targets[i])
