"""Copies topics from another Kafka cluster into the worker's, exactly once, as a source connector.

The KIP-618 way of exactly-once mirroring (what Apache Kafka's MirrorMaker 2 does since 3.5): the
tasks read the source cluster (`source.cluster.bootstrap.servers`, plus any
`source.cluster.<client setting>`) with `isolation.level=read_committed` and return the records as
source records; the runtime writes them and their source offsets in one transaction, so with
`exactly.once.source.support=enabled` every committed source record lands once. Key, value,
headers and timestamp are copied as bytes, to the same partition number of the target topic,
named by `replication.policy.class` (`<source.cluster.alias>.<topic>` by default). Target topics
are created by the connector with the source topic's partition count.

Source partitions and offsets are MirrorMaker 2's: `{"cluster": alias, "topic": t, "partition": p}`
-> `{"offset": n}`, n the last copied offset, plus the record's `leader.epoch` (KIP-320). A task
resumes at n + 1 *with that epoch*, on a consumer that never joins a group, so librdkafka checks
the position against the source log: if the source partition was truncated below it (an unclean
leader election), the task fails naming the partition (`source.cluster.auto.offset.reset=error`, the
default here) instead of silently skipping or repeating records. Partitions are assigned
statically (listed when task configs are made) and watched for changes every
`refresh.topics.interval.seconds`.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from eosconnect import __version__
from eosconnect.api.batch import ColumnOffsets, SourceBatch
from eosconnect.api.config import ConfigDef, ConfigType, ConfigValue, Importance
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import (
    SourcePartition,
    TopicPartition,
)
from eosconnect.api.sink import (
    ASSIGNED_PARTITIONS_CONFIG,
    decode_partitions,
    encode_partitions,
    sink_topics_errors,
)
from eosconnect.api.source import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceTask,
)
from eosconnect.api.validators import Range
from eosconnect.connectors.mirror_formats import offset_syncs_topic
from eosconnect.connectors.mirror_policy import spread_partitions, topic_partition_counts
from eosconnect.connectors.mirror_syncs import (
    OffsetSyncs,
    define_offset_sync_settings,
    emits_offset_syncs,
    ensure_syncs_topic,
)
from eosconnect.connectors.mirror_topics import (
    MIRROR_TOPICS_CONFIG_DEF,
    REPLICATION_FACTOR_CONFIG,
    SOURCE_ALIAS_CONFIG,
    PartitionWatcher,
    connection_settings,
    ensure_mirror_topic,
    list_source_partitions,
    policy_of,
    prefixed_client_errors,
    source_topic_configs,
)
from eosconnect.connectors.stored_offsets import offset_int
from eosconnect.storage.clients import ClientKind, forced, prefixed_client_config
from eosconnect.storage.topic_reader import assign_promptly

__all__ = ["MirrorSourceConnector", "MirrorSourceTask"]

log = logging.getLogger(__name__)

SOURCE_PREFIX = "source.cluster."
SOURCE_BOOTSTRAP_CONFIG = "source.cluster.bootstrap.servers"
BATCH_CONFIG = "max.poll.records"
POLL_TIMEOUT_CONFIG = "poll.timeout.ms"
#: The connector's own settings under the source client prefix.
NOT_CLIENT = frozenset({SOURCE_ALIAS_CONFIG})

#: How the connectors that read the source cluster themselves (MirrorSource, MirrorCheckpoint) reach it.
SOURCE_CLUSTER_CONFIG_DEF = ConfigDef().define(
    SOURCE_BOOTSTRAP_CONFIG,
    ConfigType.STRING,
    importance=Importance.HIGH,
    documentation="The source cluster's bootstrap servers. Every other source.cluster.<setting> is a "
    "librdkafka client setting (security.protocol, sasl.*, ssl.*, isolation.level, "
    "auto.offset.reset, ...) for the connector's clients there; the worker's settings do "
    "not apply to the source cluster.",
)

MIRROR_SOURCE_CONFIG_DEF = (
    define_offset_sync_settings(ConfigDef(MIRROR_TOPICS_CONFIG_DEF))
    .merge(SOURCE_CLUSTER_CONFIG_DEF)
    .define(
        BATCH_CONFIG,
        ConfigType.INT,
        2000,
        Importance.LOW,
        "The most records one poll() returns; with transaction.boundary=poll, one transaction each. "
        "The default is 2000, not the Kafka consumer's 500: a transaction costs a few broker round "
        "trips whatever its size, and 2000 records of a typical size amortise them.",
        Range.between(1, 100_000),
    )
    .define(
        POLL_TIMEOUT_CONFIG,
        ConfigType.INT,
        1_000,
        Importance.LOW,
        "How long one poll() waits for source records before returning none.",
        Range.at_least(0),
    )
)


def source_client_config(kind: str, config: Mapping[str, str]) -> dict[str, Any]:
    """The `kind` client on the source cluster: only `source.cluster.*` settings apply."""
    client = prefixed_client_config(kind, config, SOURCE_PREFIX, exclude=NOT_CLIENT)  # type: ignore[arg-type]
    return dict(client.validate())


def reads_committed_only(config: Mapping[str, str]) -> bool:
    return str(config.get(f"{SOURCE_PREFIX}isolation.level", "read_committed")) == "read_committed"


def consumer_group(config: Mapping[str, str]) -> str:
    """The group id the task's source consumer names (it never joins it): its own setting, else
    `eosconnect-mirror-source-<name>`."""
    return str(
        config.get(f"{SOURCE_PREFIX}group.id") or f"eosconnect-mirror-source-{config.get('name', 'mirror')}"
    )


def wrap_partition(alias: str, tp: TopicPartition) -> dict[str, str | int]:
    """MirrorMaker 2's source partition for a source topic partition."""
    return {"cluster": alias, "partition": tp.partition, "topic": tp.topic}


class MirrorSourceConnector(SourceConnector):
    """Mirrors topics of another cluster into the worker's cluster through exactly-once source tasks
    (KIP-618). See the module documentation."""

    def version(self) -> str:
        return __version__

    def config_def(self) -> ConfigDef:
        return MIRROR_SOURCE_CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        values = super().validate(config)
        for name, problems in sink_topics_errors(config).items():
            values.append(ConfigValue(name, config.get(name), errors=problems))
        kinds: tuple[ClientKind, ...] = ("consumer", "admin")
        for name, problems in prefixed_client_errors(config, SOURCE_PREFIX, kinds, NOT_CLIENT).items():
            values.append(ConfigValue(name, config.get(name), errors=problems))
        return values

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        # A read_uncommitted consumer would copy records of transactions that later abort.
        return (
            ExactlyOnceSupport.SUPPORTED if reads_committed_only(config) else ExactlyOnceSupport.UNSUPPORTED
        )

    def can_define_transaction_boundaries(self, config: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def required_acls(
        self, name: str, config: Mapping[str, str], worker_props: Mapping[str, str]
    ) -> list[Any]:
        """Any source's rows for the copies (KIP-618's under exactly-once), plus the admin
        principal's Create/Describe on the copies and the offset-syncs topic it makes, the
        producer's Write on the syncs (in each transaction) and, on the source cluster, the source
        principal's Read (and DescribeConfigs, to copy topic settings) on each topic and Describe on
        its consumer's group (librdkafka looks its coordinator up, though it never joins)."""
        from eosconnect.storage.acls import Acl, principal_of, source_acls
        from eosconnect.storage.clients import client_config

        policy = policy_of(config)
        topics = [t.strip() for t in str(config.get("topics") or "").split(",") if t.strip()]
        copies = [policy.target_topic(t) for t in topics] or ["<each target topic>"]
        rows = source_acls(worker_props, name, config, topics=copies)
        admin = principal_of(client_config("admin", worker_props, config))
        producer = principal_of(client_config("producer", worker_props, config))
        for copy in copies:
            for operation in ("Create", "Describe"):
                rows.append(Acl(admin, operation, "Topic", copy, role="target topics (created if missing)"))
        if emits_offset_syncs(config):
            syncs = offset_syncs_topic(policy.source_alias)
            if str(worker_props.get("exactly.once.source.support") or "").strip().lower() == "enabled":
                rows.append(Acl(producer, "Write", "Topic", syncs, role="offset syncs, in the transaction"))
            for operation in ("Create", "Describe"):
                rows.append(
                    Acl(admin, operation, "Topic", syncs, role="offset-syncs topic (created if missing)")
                )
        source = source_client_config("consumer", config)
        reader, cluster = principal_of(source), str(source.get("bootstrap.servers") or "")

        def there(operation: str, rtype: Any, resource: str, role: str) -> None:
            rows.append(Acl(reader, operation, rtype, resource, role=role, cluster=cluster))

        for topic in topics or ["<each source topic>"]:
            there("Read", "Topic", topic, "source consumer")
            if str(config.get("sync.topic.configs.enabled", "true")).strip().lower() == "true":
                there("DescribeConfigs", "Topic", topic, "source topic settings to copy")
        there("Describe", "Group", consumer_group(config), "source consumer's coordinator lookup")
        return rows

    def start(self, config: dict[str, str]) -> None:
        self.require_valid(config)
        self._config = dict(config)
        self._policy = policy_of(config)
        self._admin_config = connection_settings(source_client_config("admin", config))
        self._watcher = PartitionWatcher.for_config(
            config,
            lambda: list_source_partitions(self._admin_config, self._config, required=False),
            self.context.request_task_reconfiguration,
        )

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def task_class(self) -> type[SourceTask]:
        return MirrorSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        partitions = list_source_partitions(self._admin_config, self._config, required=True) or []
        if self._watcher is not None:
            self._watcher.known = frozenset(partitions)
        self._create_target_topics(partitions)
        return [
            {**self._config, ASSIGNED_PARTITIONS_CONFIG: encode_partitions(group)}
            for group in spread_partitions(partitions, max_tasks)
        ]

    def _create_target_topics(self, partitions: list[TopicPartition]) -> None:
        """Target topics on the worker's cluster, with the source topics' partition counts."""
        make_config = self.context.client_config
        if make_config is None:
            return  # outside a runtime (a unit test): nothing to create them on
        counts = topic_partition_counts(partitions)
        admin = AdminClient(connection_settings(make_config("admin")))
        replication_factor = int(self._config.get(REPLICATION_FACTOR_CONFIG) or -1)
        configs = source_topic_configs(self._admin_config, self._config, counts)
        for topic, count in counts.items():
            target = self._policy.target_topic(topic)
            ensure_mirror_topic(admin, target, count, replication_factor, configs.get(topic))
        if emits_offset_syncs(self._config):
            ensure_syncs_topic(admin, self._policy.source_alias, self._config)


class MirrorSourceTask(SourceTask):
    """Reads its statically assigned source partitions and returns their records as they are."""

    raw_bytes = True

    def __init__(self) -> None:
        #: The source cluster's consumer, from `start()` until `stop()`.
        self.consumer: Consumer | None = None

    def version(self) -> str:
        return __version__

    def start(self, config: dict[str, str]) -> None:
        self.policy = policy_of(config)
        self.alias = self.policy.source_alias
        self.batch = int(config.get(BATCH_CONFIG) or 2000)
        self.poll_timeout_s = int(config.get(POLL_TIMEOUT_CONFIG) or 1_000) / 1000
        consumer_config = source_client_config("consumer", config)
        consumer_config.setdefault("auto.offset.reset", "error")
        consumer_config.setdefault("isolation.level", "read_committed")
        # librdkafka prefetches up to 64 MiB per consumer by default; 16 MiB keeps a task process
        # well under 150 MB while still many polls ahead of the producer.
        consumer_config.setdefault("queued.max.messages.kbytes", 16384)
        why = "the task assigns its partitions and keeps its positions in the offsets topic"
        consumer_config = forced(consumer_config, "enable.auto.commit", False, why)
        consumer_config = forced(consumer_config, "enable.auto.offset.store", False, why)
        consumer_config.setdefault("group.id", consumer_group(config))
        self.reset = str(consumer_config["auto.offset.reset"])
        partitions = decode_partitions(config.get(ASSIGNED_PARTITIONS_CONFIG, ""))
        #: Per assigned (topic, partition): its frozen source partition and its target topic, made
        #: once here rather than for every record polled.
        self._routes: dict[tuple[str, int], tuple[SourcePartition, str]] = {
            (tp.topic, tp.partition): (
                SourcePartition.of(wrap_partition(self.alias, tp)),
                self.policy.target_topic(tp.topic),
            )
            for tp in partitions
        }
        self.offset_syncs = OffsetSyncs(self.alias)
        self._emits_syncs = emits_offset_syncs(config)
        stored = self.context.offset_storage_reader.offsets(route[0] for route in self._routes.values())
        assignment = []
        fresh_start = OFFSET_END if self.reset in ("latest", "largest", "end") else OFFSET_BEGINNING
        for tp in partitions:
            offset = stored.get(self._routes[(tp.topic, tp.partition)][0])
            if offset is None:  # nothing copied yet
                assignment.append(KafkaTopicPartition(tp.topic, tp.partition, fresh_start))
                if fresh_start == OFFSET_BEGINNING:
                    self.offset_syncs.resumes_at(tp.topic, tp.partition, 0)  # all there is, copied
            else:
                resume_at = offset_int(offset, "offset", "MirrorSource") + 1
                self.offset_syncs.resumes_at(tp.topic, tp.partition, resume_at)
                epoch = offset.get("leader.epoch")
                assignment.append(
                    KafkaTopicPartition(
                        tp.topic,
                        tp.partition,
                        resume_at,
                        leader_epoch=int(epoch) if isinstance(epoch, int) else None,
                    )
                )
        self.consumer = consumer = Consumer(consumer_config)
        assign_promptly(consumer, assignment)
        log.info(
            "mirror source task reads %s from %s",
            ", ".join(f"{p.topic}-{p.partition}@{p.offset}" for p in assignment) or "nothing",
            consumer_config.get("bootstrap.servers"),
        )

    def poll(self) -> list[SourceBatch] | None:
        """One `SourceBatch` (columns, no object per record) per run of messages from one source
        partition. A consume() mostly returns long runs from one partition, so each column is built
        by one comprehension over the run rather than by per-message appends."""
        if self.consumer is None:
            raise ConnectException("MirrorSourceTask.poll() before start() or after stop()")
        messages = self.consumer.consume(self.batch, self.poll_timeout_s)
        if any(m.error() is not None for m in messages):
            for message in messages:
                error = message.error()
                if error is not None:
                    self._raise(message, error)  # a retriable error is logged and skipped
            messages = [m for m in messages if m.error() is None]
        if not messages:
            return None
        topics = [m.topic() for m in messages]
        partitions = [m.partition() for m in messages]
        starts = [0]
        starts += [
            i
            for i in range(1, len(messages))
            if partitions[i] != partitions[i - 1] or topics[i] != topics[i - 1]
        ]
        starts.append(len(messages))
        return [
            self._batch(topics[start], partitions[start], messages[start:end])
            for start, end in pairwise(starts)
        ]

    def _batch(self, topic: str | None, partition: int | None, run: list[Message]) -> SourceBatch:
        if topic is None or partition is None:  # set on every fetched message
            raise ConnectException(
                f"the source consumer returned a message without its partition: {run[0]!r}"
            )
        source_partition, target_topic = self._routes[(topic, partition)]
        offsets = [m.offset() for m in run]
        epochs = [
            epoch if epoch is not None and epoch >= 0 else None for epoch in [m.leader_epoch() for m in run]
        ]
        stamps = [m.timestamp() for m in run]
        last = offsets[-1]
        if last is None:  # set on every fetched message
            raise ConnectException(
                f"the source consumer returned a message of {topic}-{partition} without an offset"
            )
        end: dict[str, int] = {"offset": last}
        if epochs[-1] is not None:
            end["leader.epoch"] = epochs[-1]
        return SourceBatch(
            source_partition=source_partition,
            source_offset=end,
            topic=target_topic,
            partition=partition,
            values=[m.value() for m in run],
            keys=[m.key() for m in run],
            timestamps=[stamp if kind and stamp >= 0 else None for kind, stamp in stamps],
            # confluent-kafka's stub also allows a dict: a consumed message's headers are a list of pairs.
            headers=[m.headers() for m in run],  # type: ignore[misc]
            record_offsets=ColumnOffsets({"offset": offsets, "leader.epoch": epochs}),
        )

    def transaction_participant(self) -> OffsetSyncs | None:
        """Offset syncs go into every transaction (exactly-once runtime only: it asks for them);
        turned off by `emit.offset-syncs.enabled=false`."""
        return self.offset_syncs if self._emits_syncs else None

    def _raise(self, message: Message, error: KafkaError) -> None:
        where = f"source partition {message.topic()}-{message.partition()}"
        if error.code() == KafkaError._AUTO_OFFSET_RESET:
            raise ConnectException(
                f"{where}: the position this task resumes from is not valid on the source cluster "
                f"({error.str()}). If the source log was truncated (an unclean leader election, KIP-320), "
                "records after the divergence point were lost there; decide how to go on: set "
                "source.cluster.auto.offset.reset=earliest or latest, or alter this connector's offsets "
                "(PATCH /connectors/<name>/offsets) to where copying should resume"
            )
        if error.fatal() or not error.retriable():
            raise ConnectException(f"{where}: {error.name()}: {error.str()}")
        log.warning("%s: %s (retrying)", where, error.str())

    def stop(self) -> None:
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            with contextlib.suppress(KafkaException):
                consumer.close()
