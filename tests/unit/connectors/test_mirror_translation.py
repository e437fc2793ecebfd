"""Exact offset translation from offset syncs, against a simulated source and target log.

The simulation is what the brokers do: the source log has transaction markers and aborted
records (offsets a read_committed consumer never sees), the mirror copies the committed records in
transactions of its own (each ending with a marker on the target), and sometimes aborts one (its
copies take target offsets too, then are copied again). For every possible committed offset C of
a group, the translated T must make a read_committed consumer of the target read exactly the
copies of the source records at and after C.

Mirrors that ran without exactly once (no syncs; at least once, so with duplicates after a crash)
between exactly-once runs leave stretches no sync covers: there every C must be refused, with a
reason, never translated to a T that skips or repeats a record.
"""

from __future__ import annotations

import random

import pytest

from eosconnect.connectors.mirror_formats import Checkpoint, Heartbeat, OffsetSync
from eosconnect.connectors.mirror_translation import (
    COVERED_FROM_HEADER,
    OffsetSyncIndex,
    OffsetSyncWriter,
    covered_from,
    offset_syncs,
)


def source_log(rng: random.Random, records: int) -> tuple[int, list[int]]:
    """The log start and the committed records' offsets of a source partition."""
    committed: list[int] = []
    offset = start = rng.randint(0, 5)  # a log start above zero
    while len(committed) < records:
        size = rng.randint(1, 12)
        aborted = rng.random() < 0.2
        for _ in range(size):
            if not aborted:
                committed.append(offset)
            offset += 1
        if rng.random() < 0.7:
            offset += 1  # a marker (non-transactional producers write none)
    return start, committed


class Mirror:
    """The target partition and the offset syncs topic, as the mirrors leave them."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.target = 0
        self.copies: list[tuple[int, int]] = []  # every (source, target) copy, duplicates too
        self.syncs: list[tuple[object, list[tuple[str, bytes]]]] = []  # the syncs topic, in order

    def exactly_once(self, records: list[int], resumes_at: int | None) -> None:
        """A session of an exactly-once mirror: transactions of random sizes, some aborted and
        sent again, each with its syncs."""
        writer = OffsetSyncWriter()
        if resumes_at is not None:
            writer.resumes_at("orders", 0, resumes_at)
        i = 0
        while i < len(records):
            batch = records[i : i + self.rng.randint(1, 20)]
            copies = [("orders", 0, s, self.target + n) for n, s in enumerate(batch)]
            syncs = writer.records(copies)
            self.target += len(batch) + 1  # the records and the commit or abort marker
            if self.rng.random() < 0.15:
                continue  # aborted: neither the copies nor the syncs are read_committed
            self.copies += [(s, t) for _, _, s, t in copies]
            self.syncs += syncs
            i += len(batch)

    def at_least_once(self, records: list[int]) -> None:
        """A mirror without exactly once: no syncs, no markers, and a crash copies some again."""
        i = 0
        while i < len(records):
            batch = records[i : i + self.rng.randint(1, 30)]
            for s in batch:
                self.copies.append((s, self.target))
                self.target += 1
            i += len(batch) - (self.rng.randint(0, len(batch) - 1) if self.rng.random() < 0.2 else 0)

    def index(self) -> OffsetSyncIndex:
        index = OffsetSyncIndex()
        for sync, headers in self.syncs:
            index.add(sync, covered_from(headers))  # type: ignore[arg-type]
        return index

    def skipped_and_repeated(self, committed: list[int], c: int, t: int) -> tuple[int, int]:
        """A consumer of the copy starting at `t` for a group committed at `c` on the source: the
        records at or after `c` it never reads, and the reads of records before `c` or read twice."""
        read = [s for s, at in self.copies if at >= t]
        wanted = {s for s in committed if s >= c}
        return len(wanted - set(read)), len(read) - len(set(read) & wanted)


def simulate(seed: int) -> tuple[int, list[int], Mirror]:
    rng = random.Random(seed)
    start, committed = source_log(rng, 300)
    mirror = Mirror(rng)
    mirror.exactly_once(committed, resumes_at=start)
    return start, committed, mirror


@pytest.mark.parametrize("seed", range(20))
def test_every_committed_offset_translates_exactly(seed: int) -> None:
    start, committed, mirror = simulate(seed)
    index = mirror.index()
    for c in range(start, committed[-1] + 2):
        t = index.translate("orders", 0, c)
        assert t is not None, c
        assert mirror.skipped_and_repeated(committed, c, t) == (0, 0), (seed, c, t)


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("first_exactly_once", [False, True])
def test_stretches_copied_without_syncs_never_translate(seed: int, first_exactly_once: bool) -> None:
    """The finding: a mirror copied without exactly once (no syncs), then exactly once was enabled
    and it resumed where it was. Every group offset translates exactly or not at all, with a reason."""
    rng = random.Random(seed)
    start, committed = source_log(rng, 300)
    mirror = Mirror(rng)
    a, b = sorted(rng.sample(range(20, 280), 2))
    if first_exactly_once:
        mirror.exactly_once(committed[:a], resumes_at=start)
    else:
        mirror.at_least_once(committed[:a])
    mirror.at_least_once(committed[a:b])
    mirror.exactly_once(committed[b:], resumes_at=committed[b - 1] + 1)
    index = mirror.index()
    resumed = committed[b - 1] + 1
    for c in range(start, committed[-1] + 2):
        result = index.lookup("orders", 0, c)
        if c < resumed:
            # Before or in the stretch without syncs: its at-least-once copies (duplicates after a
            # crash) would be read again from anywhere before it, so nothing there translates.
            assert result.offset is None and result.uncovered is not None, c
            assert "orders-0" in result.uncovered and str(c) in result.uncovered
            continue
        assert result.offset is not None, c
        assert mirror.skipped_and_repeated(committed, c, result.offset) == (0, 0), (seed, c, result)


def test_late_enable_of_the_finding() -> None:
    """Records 40..149 copied without syncs; the first sync is at 150: offset 40 used to give 150."""
    index = OffsetSyncIndex()
    writer = OffsetSyncWriter()
    writer.resumes_at("orders", 0, 150)
    for sync, headers in writer.records([("orders", 0, s, 1000 + s) for s in range(150, 160)]):
        index.add(sync, covered_from(headers))
    result = index.lookup("orders", 0, 40)
    assert result.offset is None
    assert result.uncovered is not None and "below the partition's first offset sync" in result.uncovered
    assert index.translate("orders", 0, 150) == 1150
    assert index.translate("orders", 0, 155) == 1155
    assert index.translate("orders", 0, 160) == 1160  # right after the last copy


def test_coverage_headers() -> None:
    writer = OffsetSyncWriter()
    writer.resumes_at("t", 0, 5)
    first = writer.records([("t", 0, 7, 0), ("t", 0, 8, 1), ("t", 1, 3, 2)])
    assert [(s.upstream_offset, h) for s, h in first] == [
        (7, [(COVERED_FROM_HEADER, b"5")]),  # where the task resumed, not its first copy
        (3, [(COVERED_FROM_HEADER, b"3")]),  # unknown: from the first copy
        (8, []),
    ]
    # Sent again after an abort: the same header; the next transaction continues from the last copy.
    assert writer.records([("t", 0, 7, 10), ("t", 0, 8, 11)])[0][1] == [(COVERED_FROM_HEADER, b"5")]
    assert writer.records([("t", 0, 12, 13)])[0][1] == [(COVERED_FROM_HEADER, b"9")]
    assert covered_from([(COVERED_FROM_HEADER, b"x")]) is None
    assert covered_from(None) is None


def test_a_re_copy_voids_older_syncs() -> None:
    """The mirror's offsets were moved back to 50: copies below 50 are followed by second copies of
    50.., so no offset below 50 translates exactly any more; from 50 on the new copies count."""
    index = OffsetSyncIndex()
    for sync, headers in OffsetSyncWriter().records([("t", 0, s, s) for s in range(0, 100)]):
        index.add(sync, covered_from(headers))
    writer = OffsetSyncWriter()
    writer.resumes_at("t", 0, 50)
    for sync, headers in writer.records([("t", 0, s, 100 + s) for s in range(50, 120)]):
        index.add(sync, covered_from(headers))
    assert index.lookup("t", 0, 10).uncovered is not None
    assert index.translate("t", 0, 60) == 160


def test_past_the_mirror_is_unknown_until_copied() -> None:
    index = OffsetSyncIndex()
    for sync in offset_syncs([("t", 0, 10, 0), ("t", 0, 11, 1)]):
        index.add(sync)
    assert index.translate("t", 0, 12) == 2
    assert index.translate("t", 0, 13) is None  # 12 may be a record the mirror has not copied
    assert index.translate("t", 1, 0) is None


def test_syncs_mark_run_ends_only() -> None:
    copies = [("t", 0, s, t) for s, t in ((0, 0), (1, 1), (2, 2), (4, 3), (5, 4))] + [("t", 1, 7, 9)]
    assert offset_syncs(copies) == [
        OffsetSync("t", 0, 0, 0),
        OffsetSync("t", 0, 2, 2),
        OffsetSync("t", 0, 4, 3),
        OffsetSync("t", 1, 7, 9),
        OffsetSync("t", 0, 5, 4),
    ]


def test_mm2_byte_formats() -> None:
    # Bytes as Kafka's Schema.write produces them: int16-length strings, big-endian integers.
    sync = OffsetSync("ab", 3, 5, 7)
    assert sync.key() == b"\x00\x02ab\x00\x00\x00\x03"
    assert sync.value() == b"\x00" * 7 + b"\x05" + b"\x00" * 7 + b"\x07"
    assert OffsetSync.decode(sync.key(), sync.value()) == sync
    cp = Checkpoint("g", "A.t", 1, 10, 8, "m")
    assert cp.key() == b"\x00\x01g\x00\x03A.t\x00\x00\x00\x01"
    assert cp.value() == b"\x00\x00" + (10).to_bytes(8, "big") + (8).to_bytes(8, "big") + b"\x00\x01m"
    assert Checkpoint.decode(cp.key(), cp.value()) == cp
    hb = Heartbeat("A", "B", 1234)
    assert hb.key() == b"\x00\x01A\x00\x01B"
    assert hb.value() == b"\x00\x00" + (1234).to_bytes(8, "big")
    assert Heartbeat.decode(hb.key(), hb.value()) == hb
