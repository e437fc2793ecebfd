"""The framework's own settings: the worker's and every connector's, as Kafka Connect names them.

They are defined with the same `ConfigDef` connector authors use, so validation errors look the same
everywhere (field name, problem, fix) and the REST validate endpoint can describe them. The parsed
values live in small frozen dataclasses; the original string maps are kept because client settings
(`producer.*`, `producer.override.*`, ...) are read from them by prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.api.sink import SINK_TOPICS_CONFIG_DEF, sink_topics, sink_topics_errors
from eosconnect.api.validators import NonEmptyString, Range, ValidString


class ExactlyOnceSourceSupport(StrEnum):
    """Worker setting `exactly.once.source.support` (KIP-618's rolling-upgrade states)."""

    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"


class TransactionBoundary(StrEnum):
    """Connector setting `transaction.boundary`."""

    POLL = "poll"
    INTERVAL = "interval"
    CONNECTOR = "connector"


class ErrorsTolerance(StrEnum):
    """Connector setting `errors.tolerance`: fail on a bad record, or skip it with a warning."""

    NONE = "none"
    ALL = "all"


class LogTruncationPolicy(StrEnum):
    """Sink connector setting `log.truncation.policy`: what a task does when the partition log it
    reads lost records it had already consumed (an unclean leader election truncated it, KIP-320)."""

    FAIL = "fail"
    CONTINUE_FROM_DIVERGENCE = "continue-from-divergence"


class ExactlyOnceRequirement(StrEnum):
    """Connector setting `exactly.once.support`."""

    REQUESTED = "requested"
    REQUIRED = "required"


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

#: Settings every connector has, source or sink.
CONNECTOR_CONFIG_DEF = (
    ConfigDef()
    .define(
        "name",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="Unique name of the connector.",
        validator=NonEmptyString(),
    )
    .define(
        "connector.class",
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="Short name of a registered connector or a dotted Python path (package.module.Class).",
        validator=NonEmptyString(),
    )
    .define("tasks.max", ConfigType.INT, 1, Importance.HIGH, "Maximum number of tasks.", Range.at_least(1))
    .define(
        "key.converter",
        ConfigType.STRING,
        "org.apache.kafka.connect.json.JsonConverter",
        Importance.LOW,
        "Converter for record keys.",
    )
    .define(
        "value.converter",
        ConfigType.STRING,
        "org.apache.kafka.connect.json.JsonConverter",
        Importance.LOW,
        "Converter for record values.",
    )
)

SOURCE_CONNECTOR_CONFIG_DEF = (
    ConfigDef(CONNECTOR_CONFIG_DEF)
    .define(
        "exactly.once.support",
        ConfigType.STRING,
        "requested",
        Importance.MEDIUM,
        "required: fail validation unless exactly-once is possible; requested: best effort.",
        ValidString.in_(*[s.value for s in ExactlyOnceRequirement], case_sensitive=False),
    )
    .define(
        "transaction.boundary",
        ConfigType.STRING,
        "poll",
        Importance.MEDIUM,
        "When exactly-once tasks commit: after every poll, every interval, or when the connector asks.",
        ValidString.in_(*[b.value for b in TransactionBoundary], case_sensitive=False),
    )
    .define(
        "transaction.boundary.interval.ms",
        ConfigType.LONG,
        None,
        Importance.LOW,
        "Interval of `interval` boundaries (default: the worker's offset.flush.interval.ms).",
        Range.at_least(0),
    )
    .define(
        "offsets.storage.topic",
        ConfigType.STRING,
        None,
        Importance.LOW,
        "A separate offsets topic for this connector, on the cluster it produces to.",
    )
)


#: The settings exactly-once source support adds; a sink connector must not set them.
SOURCE_ONLY_SETTINGS = (
    "exactly.once.support",
    "transaction.boundary",
    "transaction.boundary.interval.ms",
    "offsets.storage.topic",
)

SINK_CONNECTOR_CONFIG_DEF = (
    ConfigDef(CONNECTOR_CONFIG_DEF)
    .merge(SINK_TOPICS_CONFIG_DEF)
    .define(
        "errors.tolerance",
        ConfigType.STRING,
        "none",
        Importance.MEDIUM,
        "none: a record that cannot be converted or transformed fails the task; all: it is skipped "
        "with a logged warning (its offset is committed).",
        ValidString.in_(*[t.value for t in ErrorsTolerance], case_sensitive=False),
    )
    .define(
        "log.truncation.policy",
        ConfigType.STRING,
        "fail",
        Importance.MEDIUM,
        "What a task does when a partition's log was truncated below its committed offset (an unclean "
        "leader election lost records it had consumed, KIP-320). fail: the task fails naming the "
        "partition, the committed offset and the divergence offset, until an operator resets the "
        "connector's offsets; continue-from-divergence: it logs a warning, counts it in "
        "sink-log-truncations-total and continues from the divergence offset (the new leader's "
        "records from there on are delivered; the lost ones stay delivered downstream).",
        ValidString.in_(*[p.value for p in LogTruncationPolicy], case_sensitive=False),
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


@dataclass(frozen=True)
class SourceConnectorConfig:
    name: str
    connector_class: str
    tasks_max: int
    exactly_once_support: ExactlyOnceRequirement
    transaction_boundary: TransactionBoundary
    transaction_boundary_interval_ms: int | None
    offsets_storage_topic: str | None
    originals: Mapping[str, str] = field(repr=False)

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> SourceConnectorConfig:
        values = SOURCE_CONNECTOR_CONFIG_DEF.parse(props)
        return cls(
            name=values["name"],
            connector_class=values["connector.class"],
            tasks_max=values["tasks.max"],
            exactly_once_support=ExactlyOnceRequirement(values["exactly.once.support"].lower()),
            transaction_boundary=TransactionBoundary(values["transaction.boundary"].lower()),
            transaction_boundary_interval_ms=values["transaction.boundary.interval.ms"],
            offsets_storage_topic=values["offsets.storage.topic"],
            originals={k: str(v) for k, v in props.items()},
        )

    def interval_ms(self, worker: WorkerConfig) -> int:
        if self.transaction_boundary_interval_ms is not None:
            return self.transaction_boundary_interval_ms
        return worker.offset_flush_interval_ms


def sink_consumer_group(connector: str) -> str:
    """Kafka Connect's group for a sink connector: every task of it consumes in this group."""
    return f"connect-{connector}"


@dataclass(frozen=True)
class SinkConnectorConfig:
    name: str
    connector_class: str
    tasks_max: int
    topics: tuple[str, ...]
    topics_regex: str | None
    errors_tolerance: ErrorsTolerance
    log_truncation_policy: LogTruncationPolicy
    originals: Mapping[str, str] = field(repr=False)

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> SinkConnectorConfig:
        """Raises one `ConfigException` naming every bad setting, the topics rule included."""
        errors = {v.name: v.errors for v in SINK_CONNECTOR_CONFIG_DEF.validate(props) if v.errors}
        for name, problems in sink_topics_errors(props).items():
            errors.setdefault(name, []).extend(p for p in problems if p not in errors.get(name, []))
        if errors:
            raise ConfigException(errors=errors)
        values = SINK_CONNECTOR_CONFIG_DEF.parse(props)
        topics, regex = sink_topics(props)
        return cls(
            name=values["name"],
            connector_class=values["connector.class"],
            tasks_max=values["tasks.max"],
            topics=tuple(topics),
            topics_regex=regex or None,
            errors_tolerance=ErrorsTolerance(values["errors.tolerance"].lower()),
            log_truncation_policy=LogTruncationPolicy(values["log.truncation.policy"].lower()),
            originals={k: str(v) for k, v in props.items()},
        )

    @property
    def consumer_group(self) -> str:
        return sink_consumer_group(self.name)

    def subscription(self) -> list[str]:
        """What to subscribe to; librdkafka takes a regex as a name starting with `^`, and Kafka
        Connect matches `topics.regex` against whole topic names, hence the anchors."""
        if self.topics_regex:
            return [f"^({self.topics_regex.removeprefix('^').removesuffix('$')})$"]
        return list(self.topics)
