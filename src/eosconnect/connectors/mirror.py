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
which is therefore the source of truth: a task (re)starts from those offsets. After each target
commit the same positions go to the source cluster's group too, for lag monitoring only (KIP-656).
Partitions are assigned statically (listed on the source when the task configs are made), so a
partition is only ever written by one transactional id, and a new generation of tasks first fences
every id of the previous one. Consumers of the target topics must read with
`isolation.level=read_committed`.

Partitions or topics added on the source later are found by the connector itself: every
`refresh.topics.interval.seconds` it lists the source partitions again and, when they changed, asks
the runtime for new task configs (a new generation of tasks; with transactions, the old ones are
fenced first), as MirrorMaker 2's source connector does.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from eosconnect import __version__
from eosconnect.api.config import ConfigDef, ConfigType, ConfigValue, Importance
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.api.sink import (
    ASSIGNED_PARTITIONS_CONFIG,
    TOPICS_CONFIG,
    TOPICS_REGEX_CONFIG,
    TRANSACTION_PRODUCER_CONFIG,
    SinkConnector,
    SinkTask,
    encode_partitions,
)
from eosconnect.api.transactions import TransactionalWriter, TransactionRetry
from eosconnect.api.validators import Range
from eosconnect.connectors.mirror_formats import offset_syncs_topic
from eosconnect.connectors.mirror_policy import (
    encode_topic_partition_counts,
    parse_topic_partition_counts,
    spread_partitions,
    topic_partition_counts,
)
from eosconnect.connectors.mirror_syncs import (
    OffsetSyncs,
    define_offset_sync_settings,
    emits_offset_syncs,
    ensure_syncs_topic,
    last_copied,
    offset_syncs_errors,
)
from eosconnect.connectors.mirror_topics import (
    MIRROR_TOPICS_CONFIG_DEF,
    REPLICATION_FACTOR_CONFIG,
    PartitionWatcher,
    connection_settings,
    ensure_mirror_topic,
    list_source_partitions,
    policy_of,
    prefixed_client_errors,
    source_topic_configs,
)
from eosconnect.runtime.config import sink_consumer_group
from eosconnect.storage.clients import (
    KINDS,
    ClientConfig,
    ClientKind,
    forced,
    prefixed_client_config,
)
from eosconnect.storage.producing import produce_waiting
from eosconnect.storage.sink_offsets import alter_sink_offsets, reset_sink_offsets

__all__ = ["MirrorSinkConnector", "MirrorSinkTask"]

log = logging.getLogger(__name__)

VERSION = __version__
TARGET_PREFIX = "target.cluster."
TARGET_BOOTSTRAP_CONFIG = "target.cluster.bootstrap.servers"
COMMIT_INTERVAL_CONFIG = "transaction.commit.interval.ms"
#: Task config key (written by the connector): source partition count per topic, for topic creation.
PARTITION_COUNTS_KEY = "mirror.source.partition.counts"
#: Task config: JSON of source topic -> the settings its target copy is created with.
TOPIC_CONFIGS_KEY = "mirror.source.topic.configs"

MIRROR_CONFIG_DEF = (
    define_offset_sync_settings(ConfigDef(MIRROR_TOPICS_CONFIG_DEF))
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
        COMMIT_INTERVAL_CONFIG,
        ConfigType.LONG,
        5_000,
        Importance.MEDIUM,
        "With transaction.producer=true: the longest a transaction stays open before the task asks for "
        "a commit (the worker's offset.flush.interval.ms also commits). Keep it well below the target "
        "producer's transaction.timeout.ms (60 s by default), or the broker aborts the transaction.",
        Range.at_least(1),
    )
)


def is_transactional(config: Mapping[str, str]) -> bool:
    return str(config.get(TRANSACTION_PRODUCER_CONFIG, "false")).strip().lower() == "true"


def target_client_config(kind: ClientKind, config: Mapping[str, str]) -> ClientConfig:
    """The `kind` client on the target cluster: only `target.cluster.*` settings apply."""
    return prefixed_client_config(kind, config, TARGET_PREFIX)


class MirrorSinkConnector(SinkConnector):
    """Mirrors topics from the source cluster to a target cluster, exactly once with
    `transaction.producer=true` (KIP-656). See the module documentation."""

    def version(self) -> str:
        return VERSION

    def config_def(self) -> ConfigDef:
        return MIRROR_CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        values = super().validate(config)
        for name, problems in prefixed_client_errors(config, TARGET_PREFIX, KINDS).items():
            values.append(ConfigValue(name, config.get(name), errors=problems))
        fix = f"set {TRANSACTION_PRODUCER_CONFIG}=true"
        for name, problems in offset_syncs_errors(config, is_transactional(config), fix).items():
            values.append(ConfigValue(name, config.get(name), errors=problems))
        return values

    def exactly_once_delivery(self, config: Mapping[str, str]) -> bool:
        return is_transactional(config)

    def transaction_target_config(
        self, config: Mapping[str, str], worker_props: Mapping[str, str]
    ) -> dict[str, Any] | None:
        return dict(target_client_config("producer", config))

    def required_acls(
        self, name: str, config: Mapping[str, str], worker_props: Mapping[str, str]
    ) -> list[Any]:
        """Any sink's rows on the source cluster, then the target cluster's for the target principal
        (KIP-656): the copies, and exactly once the tasks' transactional ids (also what fencing
        initialises) and Read on the group `connect-<name>` *there*, which the transaction's offsets
        (KIP-447) and every restart's resume position need."""
        from eosconnect.storage.acls import Acl, principal_of, sink_acls
        from eosconnect.storage.transactional_ids import task_transactional_id

        rows = sink_acls(worker_props, name, config)
        consumer = rows[0].principal if rows else "User:ANONYMOUS"
        topics = [t.strip() for t in str(config.get(TOPICS_CONFIG) or "").split(",") if t.strip()]
        if str(config.get("sync.topic.configs.enabled", "true")).strip().lower() == "true":
            for topic in topics:
                rows.append(
                    Acl(consumer, "DescribeConfigs", "Topic", topic, role="source topic settings to copy")
                )
        target = target_client_config("producer", config)
        principal, cluster = principal_of(target), str(target.get("bootstrap.servers") or "")
        policy = policy_of(config)

        def on_target(operation: str, rtype: Any, resource: str, role: str) -> None:
            rows.append(Acl(principal, operation, rtype, resource, role=role, cluster=cluster))

        for topic in [policy.target_topic(t) for t in topics] or ["<each target topic>"]:
            on_target("Write", "Topic", topic, "target producer (copies)")
            on_target("Create", "Topic", topic, "only while the target topic is missing")
        if not is_transactional(config):
            return rows
        group = str(worker_props.get("group.id") or "connect-cluster")
        for task in range(max(1, int(str(config.get("tasks.max") or "1").strip() or 1))):
            for operation in ("Write", "Describe"):
                tid = task_transactional_id(group, name, task)
                on_target(operation, "TransactionalId", tid, "task's transactional producer, zombie fencing")
        on_target("Read", "Group", sink_consumer_group(name), "offsets in the target transaction")
        for topic in [policy.target_topic(t) for t in topics] or ["<each target topic>"]:
            # The offsets are kept by target partition; TxnOffsetCommit checks Read on each topic.
            on_target("Read", "Topic", topic, "offsets in the target transaction (by target topic)")
        if emits_offset_syncs(config):
            syncs = offset_syncs_topic(policy.source_alias)
            on_target("Write", "Topic", syncs, "offset syncs, in the target transaction")
            on_target("Read", "Topic", syncs, "offset syncs read at a first start")
            on_target("Create", "Topic", syncs, "only while the offset-syncs topic is missing")
        return rows

    def alter_offsets(self, config: Mapping[str, str], offsets: Mapping[TopicPartition, int] | None) -> bool:
        """Exactly once, the tasks resume from the target group's offsets: apply the user's there too
        (keyed by the target partitions), else altering the source group would change nothing."""
        if not is_transactional(config):
            return False
        admin = dict(target_client_config("admin", config).validate())
        group = sink_consumer_group(config["name"])
        if offsets is None:
            reset_sink_offsets(admin, group)
        else:
            policy = policy_of(config)
            targets = []
            for tp, offset in sorted(offsets.items()):
                target = policy.target_partition(tp)
                targets.append(KafkaTopicPartition(target.topic, target.partition, offset))
            alter_sink_offsets(admin, group, targets)
        log.info("offsets of %s on the target cluster %s", group, "reset" if offsets is None else "altered")
        return True

    def start(self, config: dict[str, str]) -> None:
        self.require_valid(config)
        self._config = dict(config)
        self._watcher: PartitionWatcher | None = None
        if self.context.client_config is not None:
            self._watcher = PartitionWatcher.for_config(
                config,
                lambda: self._source_partitions(required=False),
                self.context.request_task_reconfiguration,
            )

    def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()

    def task_class(self) -> type[SinkTask]:
        return MirrorSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        base = dict(self._config)
        partitions = self._source_partitions(required=is_transactional(base))
        if self._watcher is not None and partitions is not None:
            self._watcher.known = frozenset(partitions)
        if partitions is not None:
            counts = topic_partition_counts(partitions)
            base[PARTITION_COUNTS_KEY] = encode_topic_partition_counts(counts)
            base[TOPIC_CONFIGS_KEY] = json.dumps(
                source_topic_configs(self._source_admin_config(), self._config, counts), sort_keys=True
            )
        if not is_transactional(base):
            if partitions and base.get(TOPICS_REGEX_CONFIG):
                # The group subscribes to the topics the connector's own (Python) regex matched:
                # librdkafka's regex dialect lacks lookaheads (topics.exclude in dedicated mode).
                # New matching topics arrive through the partition watcher's reconfiguration.
                base.pop(TOPICS_REGEX_CONFIG)
                base[TOPICS_CONFIG] = ",".join(sorted({tp.topic for tp in partitions}))
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
        return list_source_partitions(self._source_admin_config(), self._config, required=required)

    def _source_admin_config(self) -> dict[str, Any]:
        """How an admin client reaches the source cluster (the tasks' consumers' cluster)."""
        assert self.context.client_config is not None
        return connection_settings(self.context.client_config("consumer"))


class MirrorSinkTask(SinkTask):
    """Copies records as bytes; transactional when the connector says so (see the module doc)."""

    raw_bytes = True

    def version(self) -> str:
        return VERSION

    def start(self, config: dict[str, str]) -> None:
        self.policy = policy_of(config)
        self.transactional = is_transactional(config)
        self.partition_counts = parse_topic_partition_counts(config.get(PARTITION_COUNTS_KEY, ""))
        #: Source topic -> the settings its target copy is created with.
        self.topic_configs: dict[str, dict[str, str]] = json.loads(config.get(TOPIC_CONFIGS_KEY) or "{}")
        self.replication_factor = int(config.get(REPLICATION_FACTOR_CONFIG) or -1)
        self.task_id = str(config.get("name", "mirror"))
        self.commit_interval_s = int(config.get(COMMIT_INTERVAL_CONFIG) or 5_000) / 1000
        self.admin = AdminClient(dict(target_client_config("admin", config).validate()))
        #: Target topic -> partitions known to exist there.
        self._target_partitions: dict[str, int] = {}
        self.writer: TransactionalWriter | None = None
        self.producer: Producer | None = None
        #: The offset syncs written into every transaction (None: none).
        self.offset_syncs: OffsetSyncs | None = None
        self.target_consumer_config = dict(target_client_config("consumer", config).validate())
        if self.transactional:
            transactional_id = self.context.transactional_id
            if transactional_id is None:
                raise ConnectException(
                    "transaction.producer=true needs exactly-once support on the worker "
                    "(exactly.once.source.support=enabled), which fences zombie tasks and gives each task "
                    "its transactional id; enable it on every worker, or set transaction.producer=false"
                )
            self.task_id = transactional_id
            if emits_offset_syncs(config):
                ensure_syncs_topic(self.admin, self.policy.source_alias, config)
                self.offset_syncs = OffsetSyncs(self.policy.source_alias)
            self.writer = self.context.transactional_writer(
                target_client_config("producer", config).validate(),
                target_client_config("consumer", config).validate(),
                timeout_remedies=(
                    "tune the target producer for throughput (target.cluster.linger.ms, batch.size), "
                    "raise target.cluster.transaction.timeout.ms (up to the broker's "
                    "transaction.max.timeout.ms), or lower transaction.commit.interval.ms"
                ),
                participant=self.offset_syncs,
            )
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
        fresh = [targets[t] for t in targets if t not in committed]
        if fresh:
            self._resume_from_offset_syncs(fresh)
        if committed:
            # With the source leader epochs committed alongside, the runtime checks these positions
            # against the source partitions' logs (KIP-320) before reading from them.
            self.context.offset({targets[t]: position for t, position in committed.items()})
            if self.offset_syncs is not None:
                for t, position in committed.items():
                    self.offset_syncs.resumes_at(targets[t].topic, targets[t].partition, position.offset)
        log.info(
            "[%s] resuming %d partitions from the target's committed offsets %s (others: auto.offset.reset)",
            self.task_id,
            len(committed),
            {str(t): om.offset for t, om in sorted(committed.items())},
        )

    def _resume_from_offset_syncs(self, partitions: list[TopicPartition]) -> None:
        """Partitions this connector never committed on the target resume after the last record any
        exactly-once mirror of the flow copied there (its offset syncs): switching from
        connector.type=source to sink neither skips nor repeats a record (KIP-656's migration)."""
        if self.offset_syncs is None:
            return
        copied = last_copied(self.target_consumer_config, self.policy.source_alias)
        found = {
            tp: OffsetAndMetadata(copied[(tp.topic, tp.partition)] + 1)
            for tp in partitions
            if (tp.topic, tp.partition) in copied
        }
        if found:
            log.info(
                "[%s] resuming %s after the records earlier mirrors copied (offset syncs)",
                self.task_id,
                {str(tp): om.offset for tp, om in sorted(found.items())},
            )
            self.context.offset(found)
            for tp, om in found.items():
                self.offset_syncs.resumes_at(tp.topic, tp.partition, om.offset)

    def _ensure_target(self, topic: str, partition: int) -> None:
        """The target topic exists with more than `partition` partitions (created or grown)."""
        if self._target_partitions.get(topic, 0) > partition:
            return
        source_topic = next((s for s in self.partition_counts if self.policy.target_topic(s) == topic), None)
        wanted = max(partition + 1, self.partition_counts.get(source_topic or "", 0))
        self._target_partitions[topic] = ensure_mirror_topic(
            self.admin, topic, wanted, self.replication_factor, self.topic_configs.get(source_topic or "")
        )

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
                    topic,
                    record.partition,
                    record.key,
                    record.value,
                    headers,
                    record.timestamp,
                    origin=(record.original_topic, record.original_partition, record.offset),
                )
            else:
                self._produce(topic, record, headers)
        if self.writer is not None and self.writer.must_commit(self.commit_interval_s):
            # The worker's flush interval (60 s by default) may be as long as the transaction
            # timeout: ask for the commit ourselves, well before the broker would abort (or at
            # once when a record failed and the transaction must be aborted and written again).
            self.context.request_commit()

    def _produce(self, topic: str, record: SinkRecord, headers: list[tuple[str, bytes | None]]) -> None:
        assert self.producer is not None
        produce_waiting(
            self.producer,
            topic,
            record.value,
            record.key,
            record.partition,
            on_delivery=self._on_delivery,
            timestamp=record.timestamp or 0,
            headers=headers or None,
            poll_s=0.1,
        )

    def _on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None and self._delivery_error is None:
            self._delivery_error = err

    def pre_commit(
        self, current_offsets: Mapping[TopicPartition, OffsetAndMetadata]
    ) -> Mapping[TopicPartition, OffsetAndMetadata]:
        """Exactly once: commit the target transaction with the offsets, then let the runtime copy
        them to the source group, where they only show the lag (KIP-656). At least once: flush, then
        let the runtime commit them to the source group, the truth in that mode.

        A transaction the writer had to abort (it could not commit in time, or a record failed;
        `TransactionRetry`) commits nothing: the task rewinds to the first record of every
        partition it held, and the runtime consumes them again before anything else."""
        if self.writer is not None:
            try:
                self.writer.commit(
                    {  # the source leader epoch goes along: see TransactionalWriter.commit
                        self.policy.target_partition(tp): OffsetAndMetadata(
                            om.offset, leader_epoch=om.leader_epoch
                        )
                        for tp, om in current_offsets.items()
                    }
                )
            except TransactionRetry as retry:
                # The rewind names source partitions (the transaction's first records) and, when a
                # new producer ended a transaction committed or not, the group's committed offsets
                # under the names they are committed by, the target's: those come last and win.
                sources = {self.policy.target_partition(tp): tp for tp in current_offsets}
                self.context.offset({sources.get(tp, tp): offset for tp, offset in retry.rewind.items()})
                return {}
            return current_offsets
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
