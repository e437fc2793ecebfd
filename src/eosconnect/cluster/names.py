"""Connector names every part of the project can address, and how many tasks a connector may ask for.

A connector's name is a path segment of the REST API (`/connectors/<name>/...`), part of Spark job
groups, transactional ids and log lines. Kafka Connect only refuses empty names and ISO control
characters; a name with `/` (or `.`/`..`, which HTTP clients collapse) could never be addressed
again over REST, so such a connector could not even be deleted. eosconnect refuses those names at
creation with a 400 that says why, instead of storing a connector nobody can reach.

`tasks.max` is bounded by what the worker can place and write: a connector asking for 100,000 tasks
would write 100,000 task-config records (filling the config topic producer's queue every tick, which
stalled every other connector) for tasks Spark could never run.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from eosconnect.worker_config import TASKS_PER_SLOT

__all__ = [
    "DEFAULT_TASKS_MAX_LIMIT",
    "TASKS_MAX_LIMIT_SETTING",
    "connector_name_errors",
    "max_placeable_tasks",
    "tasks_max_errors",
]

#: Worker setting: the most tasks one connector may ask for, whatever Spark could place.
TASKS_MAX_LIMIT_SETTING = "eosconnect.tasks.max.limit"
DEFAULT_TASKS_MAX_LIMIT = 1000


def connector_name_errors(name: str) -> list[str]:
    """Why `name` cannot be a connector's name (empty list: it can)."""
    if not name:
        return ["String may not be empty"]
    problems: list[str] = []
    if any(unicodedata.category(ch) == "Cc" for ch in name):
        problems.append("String contains ISO control characters")
    if "/" in name or "\\" in name:
        problems.append(
            "must not contain '/' or '\\': the name is a path segment of the REST API "
            "(/connectors/<name>/...), and such a connector could not be addressed or deleted"
        )
    if name in (".", ".."):
        problems.append(
            f"must not be {name!r}: HTTP clients resolve it as a relative path, so the connector could "
            "not be addressed or deleted"
        )
    return problems


def max_placeable_tasks(spark_conf: Mapping[str, str], default_parallelism: int) -> int | None:
    """The most tasks Spark can ever run at once for this worker, or None if it cannot be told
    (a cluster whose executors may grow without a known bound)."""
    master = spark_conf.get("spark.master", "")
    if master.startswith("local"):
        return default_parallelism
    cores = int(spark_conf.get("spark.executor.cores", "1") or 1)
    if spark_conf.get("spark.dynamicAllocation.enabled", "false").lower() == "true":
        most = spark_conf.get("spark.dynamicAllocation.maxExecutors")
        if most is None or int(most) >= 2**31 - 1:
            return None
        return max(int(most) * cores, default_parallelism)
    instances = spark_conf.get("spark.executor.instances")
    if instances is None:
        return None
    return max(int(instances) * cores, default_parallelism)


def tasks_max_errors(
    config: Mapping[str, Any], worker_props: Mapping[str, str], slots: int | None, per_slot: int = 1
) -> list[str]:
    """Why the config's `tasks.max` is too large for this worker (empty list: it is fine): more
    than `tasks.max.limit`, or than the `slots` Spark can ever provide times the `per_slot` tasks
    that share one (`eosconnect.tasks.per.slot` for a connector whose tasks share slots, else 1).
    Malformed values are left to the config definition's own check."""
    raw = str(config.get("tasks.max", "1")).strip()
    try:
        wanted = int(raw)
    except ValueError:
        return []
    limit = int(worker_props.get(TASKS_MAX_LIMIT_SETTING, DEFAULT_TASKS_MAX_LIMIT))
    if wanted > limit:
        return [
            f"tasks.max={wanted} is more than this worker allows ({TASKS_MAX_LIMIT_SETTING}={limit}); "
            "lower tasks.max, or raise the worker's limit if Spark really has that many task slots"
        ]
    if slots is not None and wanted > slots * per_slot:
        if per_slot == 1:
            held = (
                f"the {slots} Spark task slots this worker can ever place (every task holds one slot "
                "while it runs)"
            )
            packing = ""
        else:
            held = (
                f"the {slots * per_slot} tasks this worker can ever place ({slots} Spark task slots, "
                f"{per_slot} tasks per slot)"
            )
            packing = f", raise {TASKS_PER_SLOT},"
        return [
            f"tasks.max={wanted} is more than {held}; lower tasks.max{packing} or give Spark more "
            "cores/executors (spark.master local[N], spark.executor.instances, "
            "spark.dynamicAllocation.maxExecutors)"
        ]
    return []
