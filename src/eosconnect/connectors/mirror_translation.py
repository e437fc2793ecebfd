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

That holds only where syncs cover the source offsets. A mirror without exactly once writes no
syncs, so after exactly once is switched on (or after a reset of the mirror's offsets) there are
stretches of the source that were copied, or skipped, with no sync describing where their copies
went: a translation through them could skip records or repeat them. So the first sync of every
partition in each transaction carries the header `eosconnect.covered.from`: the source offset from
which the writing task read that partition without a break up to this sync (where its session
resumed, or where its previous transaction for the partition ended). The gap before such a sync is
covered only if that offset does not lie beyond the sync before it; below a partition's first sync
only from that offset on. An offset no sync covers is never translated (`Translation.uncovered`
says why), as MM2 never translates below its oldest sync. A sync whose `covered.from` lies at or
below syncs already read (a re-copy) makes the older syncs of its partition void, as in MM2.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from eosconnect.connectors.mirror_formats import OffsetSync

__all__ = [
    "COVERED_FROM_HEADER",
    "OffsetSyncIndex",
    "OffsetSyncWriter",
    "Translation",
    "covered_from",
    "offset_syncs",
]

#: Record header of an offset sync: the source offset from which the stretch up to this sync was
#: read without a break by the task that wrote it (decimal ASCII). MM2's readers ignore headers.
COVERED_FROM_HEADER = "eosconnect.covered.from"
Headers = list[tuple[str, bytes]]


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


def covered_from(headers: Sequence[tuple[str, bytes | None]] | None) -> int | None:
    """The `eosconnect.covered.from` of a sync record's headers; None if it has none (a sync that
    continues the one before it in its transaction, or one written before the header existed)."""
    for name, value in headers or ():
        if name == COVERED_FROM_HEADER and value is not None:
            try:
                return int(value.decode("ascii"))
            except (UnicodeDecodeError, ValueError):
                return None
    return None


class OffsetSyncWriter:
    """The offset syncs of one task's transactions, each partition's first sync with the offset
    from which the task read that partition without a break (`COVERED_FROM_HEADER`).

    A task tells where it resumes a partition (`resumes_at`) when it knows; otherwise coverage
    starts at its first copy. A transaction sent again after an abort (same first record) gets the
    same header as its first attempt."""

    def __init__(self) -> None:
        #: Source partition -> the offset after its last copy (or where the task resumed it).
        self._next: dict[tuple[str, int], int] = {}
        #: Source partition -> (first copied offset, covered from) of the latest transaction.
        self._latest: dict[tuple[str, int], tuple[int, int]] = {}

    def resumes_at(self, topic: str, partition: int, offset: int) -> None:
        """The task's consumer starts reading `topic`-`partition` at source offset `offset`."""
        self._next[(topic, partition)] = offset
        self._latest.pop((topic, partition), None)

    def records(self, copies: Sequence[tuple[str, int, int, int]]) -> list[tuple[OffsetSync, Headers]]:
        """The syncs of one transaction's `copies` (as for `offset_syncs`), with their headers."""
        syncs = offset_syncs(copies)
        # Each partition's first sync is its first copy, its last sync its last copy.
        first: dict[tuple[str, int], int] = {}
        last: dict[tuple[str, int], int] = {}
        for sync in syncs:
            first.setdefault((sync.topic, sync.partition), sync.upstream_offset)
            last[(sync.topic, sync.partition)] = sync.upstream_offset
        starts: dict[tuple[str, int], int] = {}
        for key, offset in first.items():
            latest = self._latest.get(key)
            if latest is not None and latest[0] == offset:
                starts[key] = latest[1]  # the same transaction again, after an abort
            else:
                resumed = self._next.get(key, offset)
                starts[key] = resumed if resumed <= offset else offset
            self._latest[key] = (offset, starts[key])
            self._next[key] = last[key] + 1
        result: list[tuple[OffsetSync, Headers]] = []
        for sync in syncs:
            key = (sync.topic, sync.partition)
            start = starts.pop(key, None)
            headers = [] if start is None else [(COVERED_FROM_HEADER, str(start).encode("ascii"))]
            result.append((sync, headers))
        return result


@dataclass(frozen=True)
class Translation:
    """A group offset's exact target offset, or why there is none: `uncovered` when no offset sync
    covers it (it never translates), neither when the mirror has not copied up to it yet."""

    offset: int | None
    uncovered: str | None = None


@dataclass
class _PartitionSyncs:
    sources: list[int] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    #: Per sync, its `covered.from` (None: it continues the sync before it).
    froms: list[int | None] = field(default_factory=list)
    #: The index of the sync after the latest stretch no sync covers (0: none but the start).
    breaks_at: int = 0

    def add(self, source: int, target: int, start: int | None) -> None:
        if start is not None and self.sources and self.sources[-1] >= start:
            # A re-copy from `start` (the mirror's offsets were moved back): offsets below it now
            # have two copies on the target, and the older syncs no longer describe the last ones.
            self.sources.clear()
            self.targets.clear()
            self.froms.clear()
        i = bisect.bisect_left(self.sources, source)
        if i < len(self.sources) and self.sources[i] == source:
            self.targets[i] = target
            self.froms[i] = start
        else:
            self.sources.insert(i, source)
            self.targets.insert(i, target)
            self.froms.insert(i, start)
        if i == len(self.sources) - 1:  # appended, as syncs mostly are
            if i > 0 and self._breaks(i):
                self.breaks_at = i
            elif i == 0:
                self.breaks_at = 0
        else:
            self.breaks_at = max((j for j in range(1, len(self.sources)) if self._breaks(j)), default=0)

    def _breaks(self, i: int) -> bool:
        """Whether no sync covers the stretch between sync i - 1 and sync i."""
        start = self.froms[i]
        return start is not None and start > self.sources[i - 1] + 1

    def floor(self) -> int:
        """The lowest source offset that translates exactly: where the reading that wrote the
        syncs after the latest uncovered stretch began (at the first sync when unknown)."""
        start = self.froms[self.breaks_at]
        return start if start is not None else self.sources[self.breaks_at]


class OffsetSyncIndex:
    """Every offset sync read so far, per source partition, for exact translation."""

    def __init__(self) -> None:
        self._partitions: dict[tuple[str, int], _PartitionSyncs] = {}

    def add(self, sync: OffsetSync, covered_from: int | None = None) -> None:
        """Index `sync`, read in the order of the syncs topic, with its `covered.from` header."""
        key = (sync.topic, sync.partition)
        syncs = self._partitions.get(key)
        if syncs is None:
            syncs = self._partitions[key] = _PartitionSyncs()
        syncs.add(sync.upstream_offset, sync.downstream_offset, covered_from)

    def partitions(self) -> set[tuple[str, int]]:
        return set(self._partitions)

    def copied_through(self, topic: str, partition: int) -> int | None:
        """The highest source offset known to be copied, or None."""
        syncs = self._partitions.get((topic, partition))
        return syncs.sources[-1] if syncs and syncs.sources else None

    def translate(self, topic: str, partition: int, offset: int) -> int | None:
        """The exact target offset for source offset `offset`, or None (see `lookup`)."""
        return self.lookup(topic, partition, offset).offset

    def lookup(self, topic: str, partition: int, offset: int) -> Translation:
        """The target offset a consumer of the copy starts from to read exactly the records at and
        after source offset `offset`. None while the mirror has not copied up to it (or nothing of
        the partition), and for good (`uncovered`) where no sync covers it."""
        syncs = self._partitions.get((topic, partition))
        if syncs is None or not syncs.sources:
            return Translation(None)
        sources, targets = syncs.sources, syncs.targets
        where = f"{topic}-{partition}"
        floor = syncs.floor()
        if offset < floor:
            g = syncs.breaks_at
            if g == 0:
                why = (
                    f"source offset {offset} of {where} lies below the partition's first offset sync "
                    f"(source offset {sources[0]}, covering from {floor}): records before it were "
                    "copied without offset syncs (exactly once was off), or not copied at all"
                )
            else:
                why = (
                    f"source offset {offset} of {where} lies before a stretch no offset sync covers: "
                    f"the syncs stop at source offset {sources[g - 1]} and resume at {sources[g]} "
                    f"(covering from {floor}); what was copied in between, without offset syncs "
                    "(exactly once was off), may be missing or copied twice"
                )
            return Translation(None, why)
        i = bisect.bisect_left(sources, offset)  # first sync at or after `offset`
        if i < len(sources) and sources[i] == offset:
            return Translation(targets[i])
        if i == 0:
            # Read without a break from `floor`: nothing before the first copy was copied.
            return Translation(targets[0])
        before_s, before_t = sources[i - 1], targets[i - 1]
        if i == len(sources):
            # Past the last copy: exact only when `offset` directly follows it; otherwise the
            # offsets between may still be uncopied records, so wait for the mirror.
            return Translation(before_t + 1 if offset == before_s + 1 else None)
        # Inside a run the offsets map one to one; in a gap between runs every target offset
        # between the two copies holds no copied record, so the clamp to the next copy is exact.
        return Translation(min(before_t + (offset - before_s), targets[i]))
