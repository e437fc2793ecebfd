"""The settings both lake sinks have: when a commit is due."""

from __future__ import annotations

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.sink import SINK_TOPICS_CONFIG_DEF
from eosconnect.api.validators import Range

__all__ = ["COMMIT_INTERVAL_MS", "COMMIT_INTERVAL_MS_DEFAULT", "FLUSH_SIZE", "LAKE_CONFIG_DEF"]

COMMIT_INTERVAL_MS = "commit.interval.ms"
#: Seconds, not Iceberg's five minutes: a commit every few seconds keeps rows readable soon after
#: they are produced; compaction (docs/lakehouse.md) keeps the many small files fast to read.
COMMIT_INTERVAL_MS_DEFAULT = 5_000
FLUSH_SIZE = "flush.size"

LAKE_CONFIG_DEF = (
    ConfigDef()
    .define(
        COMMIT_INTERVAL_MS,
        ConfigType.LONG,
        COMMIT_INTERVAL_MS_DEFAULT,
        Importance.HIGH,
        "How long a consumed record waits at most before the table commit that makes it readable "
        "(one commit carries the rows and the consumed positions of every partition of the task).",
        Range.at_least(100),
        group="Commits",
    )
    .define(
        FLUSH_SIZE,
        ConfigType.INT,
        50_000,
        Importance.MEDIUM,
        "Commit as soon as this many rows wait, before commit.interval.ms is up (bounds the memory "
        "a task holds and sizes the Parquet files).",
        Range.at_least(1),
        group="Commits",
    )
    .merge(SINK_TOPICS_CONFIG_DEF)
)
