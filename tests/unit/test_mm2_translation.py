"""Exact offset translation from offset syncs, against a simulated source and target log.

The simulation is what the brokers do: the source log has transaction markers and aborted
records (offsets a read_committed consumer never sees), the mirror copies the committed records in
transactions of its own (each ending with a marker on the target), and sometimes aborts one (its
copies take target offsets too, then are copied again). For every possible committed offset C of
a group, the translated T must make a read_committed consumer of the target read exactly the
copies of the source records at and after C.
"""

from __future__ import annotations

import random

import pytest

from eosconnect.mirrormaker.formats import Checkpoint, Heartbeat, OffsetSync
from eosconnect.mirrormaker.translation import OffsetSyncIndex, offset_syncs


def simulate(seed: int) -> tuple[list[int], dict[int, int], OffsetSyncIndex]:
    rng = random.Random(seed)
    # The source: committed records, aborted records, markers.
    committed: list[int] = []
    offset = rng.randint(0, 5)  # a log start above zero
    while len(committed) < 300:
        size = rng.randint(1, 12)
        aborted = rng.random() < 0.2
        for _ in range(size):
            if not aborted:
                committed.append(offset)
            offset += 1
        if rng.random() < 0.7:
            offset += 1  # a marker (non-transactional producers write none)
    # The mirror: transactions of random sizes; some abort and are retried.
    index = OffsetSyncIndex()
    copy_of: dict[int, int] = {}
    target = 0
    i = 0
    while i < len(committed):
        size = rng.randint(1, 20)
        batch = committed[i : i + size]
        if rng.random() < 0.15:
            target += len(batch) + 1  # an aborted mirror transaction: copies plus abort marker
            continue
        copies = [("orders", 0, s, target + n) for n, s in enumerate(batch)]
        for _, _, s, t in copies:
            copy_of[s] = t
        for sync in offset_syncs(copies):
            index.add(sync)
        target += len(batch) + 1  # the commit marker
        i += size
    return committed, copy_of, index


@pytest.mark.parametrize("seed", range(20))
def test_every_committed_offset_translates_exactly(seed: int) -> None:
    committed, copy_of, index = simulate(seed)
    last = committed[-1]
    for c in range(committed[0], last + 2):
        t = index.translate("orders", 0, c)
        assert t is not None, c
        wanted = {copy_of[s] for s in committed if s >= c}
        read = {copied for copied in copy_of.values() if copied >= t}
        assert read == wanted, (seed, c, t)


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
