"""What a connector task's status says when the slot host it shared died (docs/architecture.md,
"Task groups").

Tasks packed in one slot host share one Python worker, so a task that eats memory takes its mates
down with it. A bare "no heartbeat" would leave each of them guessing, so the leader says, per task:
which host it ran in, which tasks died with it, whether the signs point at memory, and what changes
it. The signs are those the leader has: Spark's failure reason once it gives up on the host
(`MemoryError` under `spark.executor.pyspark.memory`, a container killed for exceeding its memory,
exit code 137), and the memory the host itself reported in its last heartbeat (`HostMemory`: its
resident size and the limit it runs under). A Python worker killed by the kernel's OOM killer only
shows as "Python worker exited unexpectedly (crashed)" in Spark; its last reported size near its
limit is then the sign.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eosconnect.cluster.packing import OWN_SLOT
from eosconnect.worker_config import TASKS_PER_SLOT

#: Spark's (and the cluster manager's) words for a Python worker or executor that ran out of memory.
OUT_OF_MEMORY = re.compile(
    r"MemoryError|OutOfMemoryError|exceeding (?:physical |virtual )?memory limits?|OOMKilled|"
    r"exit(?:ed with)? code 137|exit code: 137|Cannot allocate memory|out of memory",
    re.IGNORECASE,
)
#: A host last seen at this share of its memory limit most likely died of running out of it.
NEAR_LIMIT = 0.85
MEMORY_SETTINGS = "spark.executor.pyspark.memory, spark.executor.memoryOverhead"


@dataclass(frozen=True)
class HostMemory:
    """A slot host's Python worker as its last heartbeat described it."""

    pid: int | None = None
    rss_bytes: int = 0
    #: The address-space limit (`spark.executor.pyspark.memory`) or the cgroup's, if any.
    limit_bytes: int | None = None

    @classmethod
    def from_report(cls, report: Mapping[str, Any]) -> HostMemory | None:
        if not report.get("rss_bytes"):
            return None
        limit = report.get("memory_limit_bytes")
        pid = report.get("pid")
        return cls(int(pid) if pid else None, int(report["rss_bytes"]), int(limit) if limit else None)

    def near_limit(self) -> bool:
        return bool(self.limit_bytes) and self.rss_bytes >= NEAR_LIMIT * (self.limit_bytes or 0)

    def describe(self) -> str:
        size = f"{self.rss_bytes / 2**20:,.0f} MB resident"
        return f"{size} of its {self.limit_bytes / 2**20:,.0f} MB limit" if self.limit_bytes else size


def memory_sign(reason: str, memory: HostMemory | None) -> str | None:
    """Why the host most likely ran out of memory, in words for the trace; None if nothing says so."""
    found = OUT_OF_MEMORY.search(reason or "")
    if found:
        return f"Spark's reason says {found.group(0)!r}"
    if memory is not None and memory.near_limit():
        return f"it was last seen at {memory.describe()}"
    return None


def host_loss_detail(
    host_id: str,
    mates: Sequence[str],
    per_slot: int,
    reason: str = "",
    memory: HostMemory | None = None,
) -> str:
    """The sentences a task's trace gets when its slot host died: the host, the mates that died
    with it, the memory signs, and the settings that change it."""
    pid = f" (Python worker pid {memory.pid})" if memory is not None and memory.pid else ""
    with_ = (
        f"with {len(mates)} other task(s) sharing its Python worker: {', '.join(mates)}" if mates else "alone"
    )
    detail = f"It ran in slot host {host_id}{pid} {with_}. "
    sign = memory_sign(reason, memory)
    if sign is not None:
        return detail + (
            f"That Python worker most likely ran out of memory ({sign}). Give it more memory "
            f"({MEMORY_SETTINGS}), run fewer tasks per slot ({TASKS_PER_SLOT}, now {per_slot}), or give "
            f"the connector whose task needs the memory a slot of its own ({OWN_SLOT}=true). "
        )
    seen = f"It was last seen at {memory.describe()}. " if memory is not None else ""
    return (
        detail
        + seen
        + (
            "If a task in it kills its Python worker "
            f"(memory, a crash), give that task's connector a slot of its own ({OWN_SLOT}=true) or run fewer "
            f"tasks per slot ({TASKS_PER_SLOT}, now {per_slot}). "
        )
    )
