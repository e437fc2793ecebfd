"""The framework's own settings of every connector, source or sink, as Kafka Connect names them.

The worker's settings are in eosconnect/worker_config.py (the stores below this layer read them too).

They are defined with the same `ConfigDef` connector authors use, so validation errors look the same
everywhere (field name, problem, fix) and the REST validate endpoint can describe them. The parsed
values live in small frozen dataclasses; the original string maps are kept because client settings
(`producer.*`, `producer.override.*`, ...) are read from them by prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.api.sink import SINK_TOPICS_CONFIG_DEF, sink_topics, sink_topics_errors
from eosconnect.api.validators import NonEmptyString, Range, ValidString
from eosconnect.worker_config import WorkerConfig


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
