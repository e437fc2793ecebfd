"""Copies topics from one Kafka cluster to another through a sink task, optionally exactly once (KIP-656).

The tasks consume the `topics` (or `topics.regex`) of the source cluster (the worker's cluster, or
`consumer.override.bootstrap.servers`) and produce every record to the target cluster
(`target.cluster.bootstrap.servers`, plus any `target.cluster.<client setting>`): key, value,
headers and timestamp copied as bytes, to the same partition number of the target topic, named
by `replication.policy.class` (MirrorMaker 2's default: `<source.cluster.alias>.<topic>`). Target
topics are created if missing, with the source topic's partition count.

With `transaction.producer=false` (the default) delivery is at least once: an idempotent producer,
and the runtime commits the consumer group's offsets on the source cluster after every flush.

With `transaction.producer=true` delivery is exactly once (needs `exactly.once.source.support=enabled`
on the workers): each task writes with a transactional producer on the target cluster and sends its
consumed positions into the same transaction, for the group `connect-<connector>` *on the target*,
which is therefore the source of truth: a task (re)starts from those offsets, and nothing is
committed on the source cluster. Partitions are assigned statically (listed on the source when
the task configs are made), so a partition is only ever written by one transactional id, and a
new generation of tasks first fences every id of the previous one. Consumers of the target topics
must read with `isolation.level=read_committed`. Partitions or topics added on the source later are
picked up when the connector is reconfigured (its task configs are made again), not by themselves.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewPartitions

from eosconnect import __version__
from eosconnect.api.config import ConfigDef, ConfigType, ConfigValue, Importance
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.api.sink import (
    ASSIGNED_PARTITIONS_CONFIG,
    SINK_TOPICS_CONFIG_DEF,
    TRANSACTION_PRODUCER_CONFIG,
    SinkConnector,
    SinkTask,
    encode_partitions,
    sink_topics,
)
from eosconnect.api.validators import Range, Validator, ValidString
from eosconnect.connectors.mirror_policy import (
    POLICIES,
    ReplicationPolicy,
    encode_topic_partition_counts,
    parse_topic_partition_counts,
    spread_partitions,
)
from eosconnect.runtime.sink_transactions import TransactionalSinkProducer
from eosconnect.storage.clients import (
    KINDS,
    ClientConfig,
    ClientConfigError,
    ClientKind,
    forced,
    prefixed_client_config,
)
from eosconnect.storage.topics import ensure_topic

__all__ = ["MirrorSinkConnector", "MirrorSinkTask"]

log = logging.getLogger(__name__)

VERSION = __version__
TARGET_PREFIX = "target.cluster."
TARGET_BOOTSTRAP_CONFIG = "target.cluster.bootstrap.servers"
SOURCE_ALIAS_CONFIG = "source.cluster.alias"
POLICY_CONFIG = "replication.policy.class"
SEPARATOR_CONFIG = "replication.policy.separator"
REPLICATION_FACTOR_CONFIG = "target.topic.replication.factor"
COMMIT_INTERVAL_CONFIG = "transaction.commit.interval.ms"
#: Task config key (written by the connector): source partition count per topic, for topic creation.
PARTITION_COUNTS_KEY = "mirror.source.partition.counts"

MIRROR_CONFIG_DEF = (
    ConfigDef(SINK_TOPICS_CONFIG_DEF)
    .define(
        TARGET_BOOTSTRAP_CONFIG,
        ConfigType.STRING,
        importance=Importance.HIGH,
        documentation="The target cluster's bootstrap servers. Every other target.cluster.<setting> is "
        "a librdkafka client setting (security.protocol, sasl.*, ssl.*, linger.ms, ...) for the "
        "producer, consumer and admin client on the target cluster; the worker's own settings do not "
        "apply there.",
    )
    .define(
        TRANSACTION_PRODUCER_CONFIG,
        ConfigType.BOOLEAN,
        False,
        Importance.HIGH,
        "true: exactly once. Records and the consumed offsets are committed in one transaction on the "
        "target cluster (group connect-<connector> there), partitions are assigned statically and "
        "zombie tasks fenced; needs exactly.once.source.support=enabled on the workers. false: at "
        "least once, offsets committed on the source cluster.",
    )
    .define(
        SOURCE_ALIAS_CONFIG,
        ConfigType.STRING,
        "source",
        Importance.MEDIUM,
        "The source cluster's alias, the prefix of target topic names under the default policy.",
        Validator.of(
            lambda v: re.fullmatch(r"[A-Za-z0-9._-]+", v) is not None,
            "a topic-name prefix (letters, digits, . _ -)",
            "us-east",
        ),
    )
    .define(
        POLICY_CONFIG,
        ConfigType.STRING,
        "default",
        Importance.MEDIUM,
        "How target topics are named: default (MirrorMaker 2's DefaultReplicationPolicy, "
        "<source.cluster.alias><separator><topic>) or identity (the source topic's name). MM2's Java "
        "class names are accepted too.",
        ValidString.in_(*POLICIES),
    )
    .define(
        SEPARATOR_CONFIG,
        ConfigType.STRING,
        ".",
        Importance.LOW,
        "The separator between the alias and the topic name under the default policy.",
    )
    .define(
        COMMIT_INTERVAL_CONFIG,
        ConfigType.LONG,
        5_000,
        Importance.MEDIUM,
        "With transaction.producer=true: the longest a transaction stays open before the task asks for "
        "a commit (the worker's offset.flush.interval.ms also commits). Keep it well below the target "
        "producer's transaction.timeout.ms (60 s by default), or the broker aborts the transaction.",
        Range.at_least(1),
    )
    .define(
        REPLICATION_FACTOR_CONFIG,
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of target topics the connector creates; -1 takes the target broker's default.",
    )
)

#: Client settings the runtime sets itself on the target clients.
_CONNECTION_KEYS = ("bootstrap.servers", "security.protocol")


def policy_of(config: Mapping[str, str]) -> ReplicationPolicy:
    return ReplicationPolicy.of(
        str(config.get(POLICY_CONFIG) or "default"),
        str(config.get(SOURCE_ALIAS_CONFIG) or "source"),
        str(config.get(SEPARATOR_CONFIG) or "."),
    )


def is_transactional(config: Mapping[str, str]) -> bool:
    return str(config.get(TRANSACTION_PRODUCER_CONFIG, "false")).strip().lower() == "true"


def target_client_config(kind: ClientKind, config: Mapping[str, str]) -> ClientConfig:
    """The `kind` client on the target cluster: only `target.cluster.*` settings apply."""
    return prefixed_client_config(kind, config, TARGET_PREFIX)


def target_client_errors(config: Mapping[str, str]) -> dict[str, list[str]]:
    """librdkafka's verdict on the `target.cluster.*` settings, by the setting the user wrote."""
    errors: dict[str, list[str]] = {}
    for kind in KINDS:
        try:
            target_client_config(kind, config).validate()
        except ClientConfigError as exc:
            for name, problems in (exc.errors or {}).items():
                for problem in problems:
                    if problem not in errors.get(name, []):
                        errors.setdefault(name, []).append(problem)
    return errors


class MirrorSinkConnector(SinkConnector):
    """Mirrors topics from the source cluster to a target cluster, exactly once with
    `transaction.producer=true` (KIP-656). See the module documentation."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return MIRROR_CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        values = super().validate(config)
        for name, problems in target_client_errors(config).items():
            values.append(ConfigValue(name, config.get(name), errors=problems))
        return values

    def exactly_once_delivery(self, config: Mapping[str, str]) -> bool:
        return is_transactional(config)

    def transactional_producer_config(
        self, config: Mapping[str, str], worker_props: Mapping[str, str]
    ) -> dict[str, Any]:
        return dict(target_client_config("producer", config))

    def start(self, config: dict[str, str]) -> None:
        errors = {v.name: v.errors for v in self.validate(config) if v.errors}
        if errors:
            raise ConfigException(errors=errors)
        self._config = dict(config)

    def task_class(self) -> type[SinkTask]:
        return MirrorSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        base = dict(self._config)
        partitions = self._source_partitions(required=is_transactional(base))
        if partitions is not None:
            counts: dict[str, int] = {}
            for tp in partitions:
                counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
            base[PARTITION_COUNTS_KEY] = encode_topic_partition_counts(counts)
        if not is_transactional(base):
            return [dict(base) for _ in range(max_tasks)]  # the consumer group spreads partitions
        assert partitions is not None
        return [
            {**base, ASSIGNED_PARTITIONS_CONFIG: encode_partitions(group)}
            for group in spread_partitions(partitions, max_tasks)
        ]

    def _source_partitions(self, required: bool) -> list[TopicPartition] | None:
        """Every partition of the configured topics on the source cluster (the consumer's)."""
        make_config = self.context.client_config
        if make_config is None:
            if required:
                raise ConnectException(
                    "MirrorSinkConnector with transaction.producer=true lists the source partitions "
                    "when it makes task configs, but it runs outside a runtime that can tell it the "
                    "source cluster's settings"
                )
            return None
        consumer = make_config("consumer")
        admin_config = {
            k: v for k, v in consumer.items() if k in _CONNECTION_KEYS or k.startswith(("sasl.", "ssl."))
        }
        try:
            metadata = AdminClient(admin_config).list_topics(timeout=30)
        except KafkaException as exc:
            if not required:
                log.warning("could not list the source cluster's topics: %s", exc)
                return None
            raise ConnectException(
                f"could not list the source cluster's topics (bootstrap.servers="
                f"{admin_config.get('bootstrap.servers')}): {exc}"
            ) from exc
        topics, regex = sink_topics(self._config)
        if regex:
            pattern = re.compile(regex)
            chosen = sorted(t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__"))
        else:
            missing = [t for t in topics if t not in metadata.topics]
            if missing and required:
                raise ConnectException(
                    f"source topics {missing} do not exist; with transaction.producer=true the "
                    "partitions are assigned when the task configs are made: create the topics, then "
                    "restart the connector"
                )
            chosen = [t for t in topics if t in metadata.topics]
        return [TopicPartition(t, p) for t in chosen for p in sorted(metadata.topics[t].partitions)]


class MirrorSinkTask(SinkTask):
    """Copies records as bytes; transactional when the connector says so (see the module doc)."""

    raw_bytes = True

    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        self.policy = policy_of(config)
        self.transactional = is_transactional(config)
        self.partition_counts = parse_topic_partition_counts(config.get(PARTITION_COUNTS_KEY, ""))
        self.replication_factor = int(config.get(REPLICATION_FACTOR_CONFIG) or -1)
        self.task_id = str(config.get("name", "mirror"))
        self.commit_interval_s = int(config.get(COMMIT_INTERVAL_CONFIG) or 5_000) / 1000
        self.admin = AdminClient(dict(target_client_config("admin", config).validate()))
        #: Target topic -> partitions known to exist there.
        self._target_partitions: dict[str, int] = {}
        self.writer: TransactionalSinkProducer | None = None
        self.producer: Producer | None = None
        if self.transactional:
            transactional_id = self.context.transactional_id
            if transactional_id is None:
                raise ConnectException(
                    "transaction.producer=true needs exactly-once support on the worker "
                    "(exactly.once.source.support=enabled), which fences zombie tasks and gives each task "
                    "its transactional id; enable it on every worker, or set transaction.producer=false"
                )
            self.task_id = transactional_id
            self.writer = TransactionalSinkProducer(
                target_client_config("producer", config).validate(),
                target_client_config("consumer", config).validate(),
                transactional_id=transactional_id,
                group_id=self.context.consumer_group,
                task_id=transactional_id,
                timeout_remedies=(
                    "tune the target producer for throughput (target.cluster.linger.ms, batch.size), "
                    "raise target.cluster.transaction.timeout.ms (up to the broker's "
                    "transaction.max.timeout.ms), or lower transaction.commit.interval.ms"
                ),
            )
            self.writer.start()
        else:
            producer_config = target_client_config("producer", config).validate()
            forced(producer_config, "enable.idempotence", True, "the mirror never reorders or duplicates")
            self.producer = Producer(producer_config)
            self._delivery_error: KafkaError | None = None

    # ----------------------------------------------------------------------------- partitions
    def open(self, partitions: Any) -> None:
        partitions = list(partitions)
        for tp in partitions:
            self._ensure_target(self.policy.target_topic(tp.topic), tp.partition)
        if self.writer is None:
            return
        # The target's committed offsets are the source of truth: rewind to them.
        targets = {self.policy.target_partition(tp): tp for tp in partitions}
        committed = self.writer.committed(targets)
        if committed:
            # With the source leader epochs committed alongside, the runtime checks these positions
            # against the source partitions' logs (KIP-320) before reading from them.
            self.context.offset({targets[t]: position for t, position in committed.items()})
        log.info(
            "[%s] resuming %d partitions from the target's committed offsets %s (others: auto.offset.reset)",
            self.task_id,
            len(committed),
            {str(t): om.offset for t, om in sorted(committed.items())},
        )

    def _ensure_target(self, topic: str, partition: int) -> None:
        """The target topic exists with more than `partition` partitions (created or grown)."""
        if self._target_partitions.get(topic, 0) > partition:
            return
        source_topic = next((s for s in self.partition_counts if self.policy.target_topic(s) == topic), None)
        wanted = max(partition + 1, self.partition_counts.get(source_topic or "", 0))
        ensure_topic(
            self.admin,
            topic,
            partitions=wanted,
            replication_factor=self.replication_factor,
            compacted=False,
            replication_setting=REPLICATION_FACTOR_CONFIG,
        )
        metadata = self.admin.list_topics(topic, timeout=30).topics[topic]
        have = len(metadata.partitions)
        if have < wanted:
            log.info("[%s] adding partitions to %s: %d -> %d", self.task_id, topic, have, wanted)
            future = self.admin.create_partitions([NewPartitions(topic, wanted)])[topic]
            try:
                future.result(30)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.INVALID_PARTITIONS:  # someone grew it already
                    raise
            have = wanted
        self._target_partitions[topic] = have

    # ----------------------------------------------------------------------------- records
    def put(self, records: list[SinkRecord]) -> None:
        for record in records:
            topic = self.policy.target_topic(record.topic)
            self._ensure_target(topic, record.partition)
            headers = [
                (k, v if v is None or isinstance(v, bytes) else str(v).encode()) for k, v in record.headers
            ]
            if self.writer is not None:
                self.writer.produce(
                    topic, record.partition, record.key, record.value, headers, record.timestamp
                )
            else:
                self._produce(topic, record, headers)
        if self.writer is not None and self.writer.open_for_s() >= self.commit_interval_s:
            # The worker's flush interval (60 s by default) may be as long as the transaction
            # timeout: ask for the commit ourselves, well before the broker would abort.
            self.context.request_commit()

    def _produce(self, topic: str, record: SinkRecord, headers: list[tuple[str, bytes | None]]) -> None:
        assert self.producer is not None
        extra: dict[str, Any] = {"headers": headers} if headers else {}
        if record.timestamp is not None:
            extra["timestamp"] = record.timestamp
        while True:
            try:
                self.producer.produce(
                    topic, record.value, record.key, record.partition, on_delivery=self._on_delivery, **extra
                )
                return
            except BufferError:
                self.producer.poll(0.1)

    def _on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None and self._delivery_error is None:
            self._delivery_error = err

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """Exactly once: commit the target transaction with the offsets and return {} (the source
        group is not the source of truth). At least once: flush, then let the runtime commit."""
        if self.writer is not None:
            self.writer.commit(
                {  # the source leader epoch goes along: see TransactionalSinkProducer.commit
                    self.policy.target_partition(tp): OffsetAndMetadata(
                        om.offset, leader_epoch=om.leader_epoch
                    )
                    for tp, om in current_offsets.items()
                }
            )
            return {}
        assert self.producer is not None
        remaining = self.producer.flush(60)
        if self._delivery_error is not None or remaining:
            why = (
                self._delivery_error.str() if self._delivery_error else f"{remaining} still queued after 60s"
            )
            raise ConnectException(
                f"{self.task_id}: records could not be delivered to the target cluster: {why}"
            )
        return current_offsets

    def stop(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.producer is not None:
            self.producer.flush(10)
            self.producer = None
