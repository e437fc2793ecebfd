"""Sink connectors and tasks: consume records from Kafka and deliver them elsewhere.

Kept deliberately close to Kafka Connect's shape so existing sink designs carry over. The runtime
consumes the configured topics in the consumer group `connect-<connector>`, hands batches to
`put`, and commits the offsets `pre_commit` returns every `offset.flush.interval.ms`: delivery is
at least once, so a task must make what it got from `put` durable in `flush` (or report smaller
offsets from `pre_commit`) before those offsets are committed.

Which topics a sink reads is a framework setting, `topics` (a list) or `topics.regex`, exactly
one of them (Kafka Connect's rule); `sink_topics_errors` checks it and `SINK_TOPICS_CONFIG_DEF`
describes both, for connectors that want them in their own `config_def()` (and thus their docs).

Two opt-ins exist for sinks that deliver *exactly once* into Kafka itself (KIP-656's mirror sink):

- static assignment: a connector that puts `task.assigned.partitions` (`ASSIGNED_PARTITIONS_CONFIG`,
  written with `encode_partitions`) into a task config gets exactly those partitions for that task,
  assigned without a consumer group rebalance. A partition then only moves between tasks with a new
  generation of task configs, which the runtime fences; with group rebalancing a paused old owner
  could still commit after its partitions moved on.
- `SinkConnector.exactly_once_delivery(config)`: the tasks write inside Kafka transactions with the
  transactional id the runtime hands them (`SinkTaskContext.transactional_id`), so the runtime runs
  KIP-618's start-up protocol for them (zombie fencing by the leader, generation checks). It needs
  the worker's `exactly.once.source.support=enabled`.
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Iterable, Mapping
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.connector import Connector, Task
from eosconnect.api.context import SinkTaskContext
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.api.validators import ValidRegex

__all__ = [
    "ASSIGNED_PARTITIONS_CONFIG",
    "SINK_TOPICS_CONFIG_DEF",
    "TOPICS_CONFIG",
    "TOPICS_REGEX_CONFIG",
    "TRANSACTION_PRODUCER_CONFIG",
    "SinkConnector",
    "SinkTask",
    "decode_partitions",
    "encode_partitions",
    "sink_topics",
    "sink_topics_errors",
]

TOPICS_CONFIG = "topics"
TOPICS_REGEX_CONFIG = "topics.regex"
#: Task config key: the partitions this task consumes, assigned statically (see the module doc).
ASSIGNED_PARTITIONS_CONFIG = "task.assigned.partitions"
#: KIP-656's name for the setting a sink uses to ask for exactly-once (transactional) delivery.
TRANSACTION_PRODUCER_CONFIG = "transaction.producer"

SINK_TOPICS_CONFIG_DEF = (
    ConfigDef()
    .define(
        TOPICS_CONFIG,
        ConfigType.LIST,
        "",
        Importance.HIGH,
        "Comma-separated topics to consume. Set exactly one of topics and topics.regex.",
    )
    .define(
        TOPICS_REGEX_CONFIG,
        ConfigType.STRING,
        "",
        Importance.HIGH,
        "A regular expression; every topic whose whole name matches it is consumed, including topics "
        "created later. Set exactly one of topics and topics.regex.",
        ValidRegex(),
    )
)


def sink_topics(config: Mapping[str, str]) -> tuple[list[str], str]:
    """The configured topic list and regex (either may be empty), whitespace trimmed."""
    topics = [t.strip() for t in str(config.get(TOPICS_CONFIG) or "").split(",") if t.strip()]
    return topics, str(config.get(TOPICS_REGEX_CONFIG) or "").strip()


def sink_topics_errors(config: Mapping[str, str]) -> dict[str, list[str]]:
    """Kafka Connect's rule for sinks: exactly one of `topics` and `topics.regex`, by field.

    Both fields get the error, so a UI shows it next to whichever one the operator looks at.
    """
    topics, regex = sink_topics(config)
    if topics and regex:
        problem = (
            "topics and topics.regex are both set, but a sink connector takes exactly one of them. "
            "Remove one: list the topics in topics, or match them with topics.regex."
        )
        return {TOPICS_CONFIG: [problem], TOPICS_REGEX_CONFIG: [problem]}
    if not topics and not regex:
        problem = (
            "a sink connector needs the topics to consume, and neither topics nor topics.regex is set. "
            "Set topics to a comma-separated list (e.g. topics=orders,payments) or topics.regex to a "
            "regular expression (e.g. topics.regex=orders-.*)."
        )
        return {TOPICS_CONFIG: [problem], TOPICS_REGEX_CONFIG: [problem]}
    if regex:
        try:
            re.compile(regex)
        except re.error as exc:
            return {TOPICS_REGEX_CONFIG: [f"is not a valid regular expression ({exc}). Fix the pattern."]}
    return {}


def encode_partitions(partitions: Iterable[TopicPartition]) -> str:
    """`topic:partition,...` for `ASSIGNED_PARTITIONS_CONFIG` (Kafka topic names never hold `:`)."""
    return ",".join(f"{tp.topic}:{tp.partition}" for tp in sorted(set(partitions)))


def decode_partitions(text: str) -> list[TopicPartition]:
    """The partitions `encode_partitions` wrote; an empty string is no partition at all."""
    result = []
    for item in (part.strip() for part in text.split(",")):
        if item:
            topic, _, partition = item.rpartition(":")
            if not topic or not partition.isdigit():
                raise ValueError(f"{ASSIGNED_PARTITIONS_CONFIG}: {item!r} is not topic:partition")
            result.append(TopicPartition(topic, int(partition)))
    return result


class SinkConnector(Connector):
    """Base class for sink connectors; the topics come from the `topics`/`topics.regex` settings."""

    @abstractmethod
    def task_class(self) -> type[SinkTask]: ...

    def exactly_once_delivery(self, config: Mapping[str, str]) -> bool:
        """Whether tasks with this config write into Kafka inside transactions (default: no).

        If so, the runtime fences zombies before a new generation starts and gives each task its
        transactional id; the connector must then assign partitions statically
        (`ASSIGNED_PARTITIONS_CONFIG`) and report the setting that asked for it as
        `TRANSACTION_PRODUCER_CONFIG`, where validation tells the user when the worker cannot do it.
        """
        return False

    def transaction_target_config(
        self, config: Mapping[str, str], worker_props: Mapping[str, str]
    ) -> dict[str, Any] | None:
        """Client settings reaching the cluster the tasks' transactional producers write to, with
        their principal: zombie fencing runs with them. The default, None, means the connector's
        producer (worker settings plus `producer.override.*`, worked out by the runtime); a
        connector writing elsewhere returns that cluster's settings."""
        return None

    def required_acls(
        self, name: str, config: Mapping[str, str], worker_props: Mapping[str, str]
    ) -> list[Any] | None:
        """The Kafka ACLs (`eosconnect.storage.acls.Acl`) this connector's clients need: what
        `eosconnect connectors acls` lists and a task's authorization failure names. The default,
        None, means any sink's, worked out by the runtime: its consumer's Read on the topics and on
        the group `connect-<name>`. A connector with clients of its own (a mirror sink's target
        cluster) returns those rows plus theirs."""
        return None

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int] | None) -> bool:
        """KIP-875's hook: the user alters (`PATCH .../offsets`) or, with `offsets=None`, resets
        (`DELETE .../offsets`) the offsets of this stopped connector.

        Called before the runtime writes them to the consumer group `connect-<name>`; raising refuses
        the request and nothing is written. A connector that keeps its positions somewhere else as
        well (an exactly-once sink's target cluster, say) applies them there and returns True; the
        default returns False: the consumer group is all there is.
        """
        return False


class SinkTask(Task):
    """Base class for sink tasks. The runtime calls `initialize`, `start`, `open` for assigned
    partitions, then `put` with batches, `pre_commit` before committing consumer offsets, `close`
    for partitions taken away (rebalance or shutdown) and finally `stop`."""

    #: True for a task that commits its consumed positions in its target's own transactions and
    #: rewinds to them in `open()` (JdbcSink with exactly.once=true): the consumer group's offsets
    #: are then information only (as KIP-656's), and failing to write them never fails the task.
    #: Read by the runtime after `start()`, so a task may set it from its config there.
    stores_offsets: bool = False

    @property
    def context(self) -> SinkTaskContext:
        ctx: SinkTaskContext | None = self.__dict__.get("_context")
        if ctx is None:
            raise RuntimeError(
                f"{type(self).__name__}.context is not set: the runtime calls initialize(context) first"
            )
        return ctx

    @context.setter
    def context(self, value: SinkTaskContext) -> None:
        self.__dict__["_context"] = value

    def initialize(self, context: SinkTaskContext) -> None:
        self.context = context

    @abstractmethod
    def put(self, records: list[SinkRecord]) -> None:
        """Deliver (or buffer) a batch; it may be empty (a chance for time-based flushing).

        Raise `RetriableException` to get the same batch again after a short back-off; anything
        else fails the task.
        """

    def flush(self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Make everything given to `put` up to these offsets durable. The default does nothing."""

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """Return the offsets that are safe to commit; the default flushes and returns them all.

        Override it to commit less (a task that writes asynchronously), or return {} to keep the
        consumer group's offsets untouched (a task that stores its positions itself).
        """
        self.flush(current_offsets)
        return current_offsets

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions were assigned to this task; set up per-partition writers here."""

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions were taken away; release their resources (`stop` is still called later)."""
