"""The driver-kill test's checkpoint manipulation leaves only states Spark itself can leave."""

from __future__ import annotations

from pathlib import Path

from eosconnect.tools.demo_spark import replay_last_batch


def checkpoint(tmp_path: Path, planned: int, committed: int) -> Path:
    for log, last in (("offsets", planned), ("commits", committed)):
        (tmp_path / log).mkdir()
        for batch in range(last + 1):
            (tmp_path / log / str(batch)).write_text("v1\n")
            (tmp_path / log / f".{batch}.crc").write_bytes(b"crc")  # Hadoop's local checksum file
    return tmp_path


def ids(directory: Path) -> list[int]:
    return sorted(int(p.name) for p in directory.iterdir() if not p.name.startswith("."))


def checksums(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.startswith("."))


def test_a_committed_newest_batch_loses_its_commit_entry(tmp_path: Path) -> None:
    cp = checkpoint(tmp_path, planned=3, committed=3)
    assert "removed commit log entry 3" in replay_last_batch(cp)
    assert ids(cp / "commits") == [0, 1, 2] and ids(cp / "offsets") == [0, 1, 2, 3]
    # A stale .3.crc would make Spark's rewrite of entry 3 fail as a concurrent query.
    assert checksums(cp / "commits") == [".0.crc", ".1.crc", ".2.crc"]


def test_a_crash_inside_a_batch_is_left_as_it_is(tmp_path: Path) -> None:
    """Commits one behind the offsets: already the window; removing commit 2 would put the commit
    log two behind, a state in which Spark replays only batch 3 and skips batch 2's commit."""
    cp = checkpoint(tmp_path, planned=3, committed=2)
    assert "inside batch 3" in replay_last_batch(cp)
    assert ids(cp / "commits") == [0, 1, 2] and ids(cp / "offsets") == [0, 1, 2, 3]
