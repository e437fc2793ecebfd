"""Exactly-once accounting for sequence-numbered data: what is missing, what is duplicated.

The verifier is the referee of every exactly-once claim in this project, so it counts plainly:
for each key (one source partition), the sequence numbers seen against the numbers expected.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field


@dataclass
class SequenceReport:
    expected: int = 0
    seen: int = 0
    duplicates: int = 0
    missing: int = 0
    unexpected: int = 0
    anomalies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.duplicates == 0 and self.missing == 0 and self.unexpected == 0

    def summary_rows(self) -> list[tuple[str, str]]:
        return [
            ("expected", str(self.expected)),
            ("seen", str(self.seen)),
            ("duplicates", str(self.duplicates)),
            ("missing", str(self.missing)),
            ("unexpected", str(self.unexpected)),
            ("verdict", "OK: exactly once" if self.ok else "FAILED"),
        ]


def check_sequences(
    observed: Iterable[tuple[Hashable, int]],
    expected_counts: Mapping[Hashable, int],
    max_anomalies: int = 10,
) -> SequenceReport:
    """Compare observed (key, seq) pairs with `expected_counts[key]` = N meaning seqs 0..N-1.

    Keys not in `expected_counts` and sequence numbers outside 0..N-1 count as unexpected.
    """
    counts: dict[Hashable, Counter[int]] = {}
    report = SequenceReport(expected=sum(expected_counts.values()))

    def note(text: str) -> None:
        if len(report.anomalies) < max_anomalies:
            report.anomalies.append(text)

    for key, seq in observed:
        report.seen += 1
        counts.setdefault(key, Counter())[seq] += 1
    for key in sorted(set(counts) | set(expected_counts), key=str):
        n = expected_counts.get(key)
        seen = counts.get(key, Counter())
        if n is None:
            report.unexpected += sum(seen.values())
            note(f"key {key!r}: {sum(seen.values())} records for a key that was not expected")
            continue
        for seq, times in sorted(seen.items()):
            if not 0 <= seq < n:
                report.unexpected += times
                note(f"key {key!r}: sequence {seq} outside 0..{n - 1}")
            elif times > 1:
                report.duplicates += times - 1
                note(f"key {key!r}: sequence {seq} seen {times} times")
        gaps = [s for s in range(n) if s not in seen]
        report.missing += len(gaps)
        if gaps:
            note(f"key {key!r}: {len(gaps)} missing, first {gaps[:5]}")
    return report
