"""Where a task loop's wall time goes: seconds per named phase, summed with `time.perf_counter`.

A throughput gap that is not CPU (a sink as busy per row as another but slower by the clock) is
wall time spent waiting: on the consumer's fetch, on the database's commit, on nothing. The sink
loop charges each of its phases here and logs the breakdown when the task stops (and every
`REPORT_EVERY_S` at DEBUG), so a bench run shows where the time went without a profiler. The cost
is two `perf_counter` calls per phase per batch, not per record.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

__all__ = ["WallTime"]

#: How often the running breakdown is logged at DEBUG.
REPORT_EVERY_S = 10.0


@dataclass
class WallTime:
    """Seconds per phase since `started`; what no phase claimed is reported as `other`."""

    started: float = field(default_factory=time.perf_counter)
    seconds: dict[str, float] = field(default_factory=dict)
    last_report: float = field(default_factory=time.perf_counter)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        begun = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - begun)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def due(self) -> bool:
        """Whether a running report is due (at most every `REPORT_EVERY_S`)."""
        now = time.perf_counter()
        if now - self.last_report < REPORT_EVERY_S:
            return False
        self.last_report = now
        return True

    def summary(self) -> str:
        """`total 12.3s: poll 4.1s (33%), put 2.0s (16%), ..., other 0.2s (2%)`, largest first."""
        total = max(time.perf_counter() - self.started, 1e-9)
        parts = sorted(self.seconds.items(), key=lambda kv: -kv[1])
        parts.append(("other", max(total - sum(self.seconds.values()), 0.0)))
        return f"total {total:.1f}s: " + ", ".join(
            f"{name} {secs:.2f}s ({100 * secs / total:.0f}%)" for name, secs in parts
        )
