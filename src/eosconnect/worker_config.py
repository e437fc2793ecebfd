"""The worker's own settings (`worker.properties`): `WorkerConfig` and its definition.

Every layer reads them: the Kafka-backed stores (storage/: topic names, group id, exactly-once
support), the task loops (runtime/), the herder (cluster/) and the REST layer. So they live here, at
the package root next to `api/` (whose `ConfigDef` they use and nothing else), below all of those
layers, and any of them may import this module without importing upwards (DESIGN.md section 9,
docs/architecture.md). The connectors' own framework settings (`tasks.max`, `transaction.boundary`,
`errors.tolerance`, ...) are a runtime concern and stay in runtime/config.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.validators import NonEmptyString, Range, ValidString

__all__ = ["WORKER_CONFIG_DEF", "ExactlyOnceSourceSupport", "WorkerConfig"]


class ExactlyOnceSourceSupport(StrEnum):
    """Worker setting `exactly.once.source.support` (KIP-618's rolling-upgrade states)."""

    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"


WORKER_CONFIG_DEF = (
    ConfigDef()
    .define(
        "bootstrap.servers",
        ConfigType.LIST,
        importance=Importance.HIGH,
        documentation="Kafka cluster holding the worker's internal topics.",
    )
    .define(
        "group.id",
        ConfigType.STRING,
        "eosconnect",
        Importance.HIGH,
        "Names the cluster of workers; transactional ids start with it.",
        NonEmptyString(),
    )
    .define(
        "offset.storage.topic",
        ConfigType.STRING,
        "connect-offsets",
        Importance.HIGH,
        "The worker's global offsets topic.",
        NonEmptyString(),
    )
    .define(
        "offset.storage.partitions",
        ConfigType.INT,
        25,
        Importance.LOW,
        "Partitions of the offsets topic when the worker creates it.",
        Range.at_least(1),
    )
    .define(
        "offset.storage.replication.factor",
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of the offsets topic (-1: the broker default).",
        Range.at_least(-1),
    )
    .define(
        "config.storage.topic",
        ConfigType.STRING,
        "connect-configs",
        Importance.HIGH,
        "The config topic.",
        NonEmptyString(),
    )
    .define(
        "config.storage.replication.factor",
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of the config topic (-1: the broker default).",
        Range.at_least(-1),
    )
    .define(
        "status.storage.topic",
        ConfigType.STRING,
        "connect-status",
        Importance.HIGH,
        "The status topic.",
        NonEmptyString(),
    )
    .define(
        "status.storage.partitions",
        ConfigType.INT,
        5,
        Importance.LOW,
        "Partitions of the status topic when the worker creates it.",
        Range.at_least(1),
    )
    .define(
        "status.storage.replication.factor",
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of the status topic (-1: the broker default).",
        Range.at_least(-1),
    )
    .define(
        "exactly.once.source.support",
        ConfigType.STRING,
        "disabled",
        Importance.HIGH,
        "disabled, preparing (rolling upgrade step) or enabled.",
        ValidString.in_(*[s.value for s in ExactlyOnceSourceSupport], case_sensitive=False),
    )
    .define(
        "offset.flush.interval.ms",
        ConfigType.LONG,
        60_000,
        Importance.LOW,
        "How often at-least-once tasks commit offsets; default interval of interval boundaries.",
        Range.at_least(1),
    )
    .define(
        "task.shutdown.graceful.timeout.ms",
        ConfigType.LONG,
        5_000,
        Importance.LOW,
        "How long a task may take to stop before it is cancelled.",
        Range.at_least(0),
    )
    .define(
        "task.heartbeat.timeout.ms",
        ConfigType.LONG,
        5_000,
        Importance.LOW,
        "A task not heard from for this long is no longer shown RUNNING (its executor was lost, or it "
        "waits for a free Spark task slot or its next attempt); tasks report every 0.5 s.",
        Range.at_least(1000),
    )
    .define(
        "plugin.path",
        ConfigType.LIST,
        "",
        Importance.LOW,
        "Directories (each importable as a sys.path entry) and .zip/.whl/.egg files holding connector "
        "code. Classes load only from eosconnect's built-ins, installed packages' eosconnect entry "
        "points, these entries and PYTHONPATH; on a Spark cluster they are shipped to the executors.",
    )
)


@dataclass(frozen=True)
class WorkerConfig:
    bootstrap_servers: str
    group_id: str
    offset_storage_topic: str
    exactly_once_source_support: ExactlyOnceSourceSupport
    offset_flush_interval_ms: int
    task_shutdown_graceful_timeout_ms: int
    originals: Mapping[str, str] = field(repr=False)
    values: Mapping[str, Any] = field(repr=False)
    #: `plugin.path`: where connector code lives besides installed packages (shipped to executors).
    plugin_path: tuple[str, ...] = ()
    task_heartbeat_timeout_ms: int = 5_000

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> WorkerConfig:
        values = WORKER_CONFIG_DEF.parse(props)
        return cls(
            bootstrap_servers=",".join(values["bootstrap.servers"]),
            group_id=values["group.id"],
            offset_storage_topic=values["offset.storage.topic"],
            exactly_once_source_support=ExactlyOnceSourceSupport(
                values["exactly.once.source.support"].lower()
            ),
            offset_flush_interval_ms=values["offset.flush.interval.ms"],
            task_shutdown_graceful_timeout_ms=values["task.shutdown.graceful.timeout.ms"],
            originals={k: str(v) for k, v in props.items()},
            values=values,
            plugin_path=tuple(str(p) for p in values["plugin.path"] if str(p).strip()),
            task_heartbeat_timeout_ms=values["task.heartbeat.timeout.ms"],
        )

    @property
    def exactly_once_enabled(self) -> bool:
        return self.exactly_once_source_support is ExactlyOnceSourceSupport.ENABLED
