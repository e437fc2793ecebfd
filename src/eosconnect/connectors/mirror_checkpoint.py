"""MirrorCheckpoint: consumer-group offsets of the source cluster, translated exactly for the target.

MirrorMaker 2's MirrorCheckpointConnector, on our exactly-once mirrors' offset syncs. Every
`emit.checkpoints.interval.seconds` the task reads the committed offsets of the source cluster's
groups (`groups` minus `groups.exclude`, relisted every `refresh.groups.interval.seconds`) for the
partitions the mirror copies, translates each with the offset syncs written in the mirror's data
transactions (eosconnect.connectors.mirror_translation: exact, where MM2's own translation is only "at or
before") and emits MM2-format checkpoints to `<source alias>.checkpoints.internal` on the worker's
cluster (the target), so `RemoteClusterUtils.translateOffsets` and
`eosconnect mirror translate-offsets` read them. With `sync.group.offsets.enabled=true` it also
commits the translated offsets, every `sync.group.offsets.interval.seconds`, to the groups of the
same name on the target that have no active member there, never moving a group backwards.

A group offset beyond what the mirror has copied is not translated yet (its checkpoint follows
once the mirror gets there), so every checkpoint is exact when written. A group offset no offset
sync covers (below the partition's first sync, or in a stretch copied while the mirror wrote no
syncs) is never translated: that partition of that group gets no checkpoint and is not synced to the
target, and a WARN says why, once, until the group's offset translates again.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    KafkaError,
    KafkaException,
)
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from eosconnect import __version__
from eosconnect.api.config import ConfigDef, ConfigType, ConfigValue, Importance
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import SourceRecord
from eosconnect.api.source import ExactlyOnceSupport, SourceConnector, SourceTask
from eosconnect.api.validators import Range
from eosconnect.connectors.mirror_formats import Checkpoint, OffsetSync, checkpoints_topic, offset_syncs_topic
from eosconnect.connectors.mirror_source import (
    NOT_CLIENT,
    SOURCE_CLUSTER_CONFIG_DEF,
    SOURCE_PREFIX,
    source_client_config,
)
from eosconnect.connectors.mirror_topics import (
    MIRROR_NAMING_CONFIG_DEF,
    SOURCE_ALIAS_CONFIG,
    connection_settings,
    policy_of,
    prefixed_client_errors,
)
from eosconnect.connectors.mirror_translation import OffsetSyncIndex, covered_from
from eosconnect.storage.topic_reader import assign_promptly, end_offsets
from eosconnect.storage.topics import ensure_topic

__all__ = ["MirrorCheckpointConnector", "MirrorCheckpointTask"]

log = logging.getLogger(__name__)

TARGET_ALIAS_CONFIG = "target.cluster.alias"
GROUPS_CONFIG = "groups"
GROUPS_EXCLUDE_CONFIG = "groups.exclude"
EMIT_ENABLED_CONFIG = "emit.checkpoints.enabled"
EMIT_INTERVAL_CONFIG = "emit.checkpoints.interval.seconds"
SYNC_ENABLED_CONFIG = "sync.group.offsets.enabled"
SYNC_INTERVAL_CONFIG = "sync.group.offsets.interval.seconds"
REFRESH_GROUPS_ENABLED_CONFIG = "refresh.groups.enabled"
REFRESH_GROUPS_INTERVAL_CONFIG = "refresh.groups.interval.seconds"
CHECKPOINTS_RF_CONFIG = "checkpoints.topic.replication.factor"
#: Task config key: how the task reaches the worker's (target) cluster, JSON.
TARGET_CLIENT_KEY = "mirror.checkpoint.target.client"
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*,connect-.*,__.*"


def _patterns(value: str) -> list[re.Pattern[str]]:
    return [re.compile(p.strip()) for p in value.split(",") if p.strip()]


def _compiles(value: Any) -> bool:
    try:
        _patterns(value if isinstance(value, str) else ",".join(value))
    except re.error:
        return False
    return True


CHECKPOINT_CONFIG_DEF = (
    ConfigDef(SOURCE_CLUSTER_CONFIG_DEF)
    .merge(MIRROR_NAMING_CONFIG_DEF)
    .define(
        TARGET_ALIAS_CONFIG,
        ConfigType.STRING,
        "target",
        Importance.LOW,
        "The target cluster's alias (MM2's setting; informational here).",
    )
    .define(
        GROUPS_CONFIG,
        ConfigType.STRING,
        ".*",
        Importance.HIGH,
        "Regular expressions (comma-separated) of the consumer groups to checkpoint.",
    )
    .define(
        GROUPS_EXCLUDE_CONFIG,
        ConfigType.STRING,
        DEFAULT_GROUPS_EXCLUDE,
        Importance.LOW,
        "Regular expressions (comma-separated) of groups never checkpointed (MM2's default).",
    )
    .define(
        EMIT_ENABLED_CONFIG,
        ConfigType.BOOLEAN,
        True,
        Importance.LOW,
        "Whether checkpoints are written to <source alias>.checkpoints.internal.",
    )
    .define(
        EMIT_INTERVAL_CONFIG,
        ConfigType.LONG,
        60,
        Importance.LOW,
        "How often, in seconds, group offsets are read and translated.",
        Range.at_least(1),
    )
    .define(
        SYNC_ENABLED_CONFIG,
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Whether translated offsets are committed to the target's groups of the same name that "
        "have no active member there (never moving a group backwards).",
    )
    .define(
        SYNC_INTERVAL_CONFIG,
        ConfigType.LONG,
        60,
        Importance.LOW,
        "How often, in seconds, translated offsets are committed to the target's groups.",
        Range.at_least(1),
    )
    .define(
        REFRESH_GROUPS_ENABLED_CONFIG,
        ConfigType.BOOLEAN,
        True,
        Importance.LOW,
        "Whether new groups on the source are looked for after the start.",
    )
    .define(
        REFRESH_GROUPS_INTERVAL_CONFIG,
        ConfigType.LONG,
        600,
        Importance.LOW,
        "How often, in seconds, the source cluster's groups are listed again.",
        Range.at_least(1),
    )
    .define(
        CHECKPOINTS_RF_CONFIG,
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of the checkpoints topic; -1 takes the broker's default.",
    )
)


class MirrorCheckpointConnector(SourceConnector):
    """Emits MM2-format checkpoints of the source cluster's groups, translated exactly; see the module."""

    def version(self) -> str:
        return __version__

    def config_def(self) -> ConfigDef:
        return CHECKPOINT_CONFIG_DEF

    def validate(self, config: Mapping[str, str]) -> list[ConfigValue]:
        values = super().validate(config)
        for name in (GROUPS_CONFIG, GROUPS_EXCLUDE_CONFIG):
            if name in config and not _compiles(config[name]):
                values.append(ConfigValue(name, config[name], errors=["not valid regular expressions"]))
        for name, problems in prefixed_client_errors(config, SOURCE_PREFIX, ("admin",), NOT_CLIENT).items():
            values.append(ConfigValue(name, config.get(name), errors=problems))
        return values

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def start(self, config: dict[str, str]) -> None:
        self.require_valid(config)
        self._config = dict(config)

    def stop(self) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        return MirrorCheckpointTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """One task: it lists the groups itself (they come and go) and each check is cheap."""
        make_config = self.context.client_config
        target: dict[str, Any] = {}
        if make_config is not None:
            target = connection_settings(make_config("admin"))
            alias = str(self._config.get(SOURCE_ALIAS_CONFIG) or "source")
            if str(self._config.get(EMIT_ENABLED_CONFIG, "true")).lower() == "true":
                ensure_topic(
                    AdminClient(dict(target)),
                    checkpoints_topic(alias),
                    partitions=1,
                    replication_factor=int(self._config.get(CHECKPOINTS_RF_CONFIG) or -1),
                    compacted=True,
                    replication_setting=CHECKPOINTS_RF_CONFIG,
                )
        return [{**self._config, TARGET_CLIENT_KEY: json.dumps(target, sort_keys=True)}]


class MirrorCheckpointTask(SourceTask):
    """Reads offset syncs and source group offsets; emits checkpoints, syncs idle target groups."""

    raw_bytes = True

    def __init__(self) -> None:
        #: The target cluster's reader of the offset-syncs topic, from `start()` until `stop()`.
        self.syncs_consumer: Consumer | None = None

    def version(self) -> str:
        return __version__

    def start(self, config: dict[str, str]) -> None:
        self.alias = str(config.get(SOURCE_ALIAS_CONFIG) or "source")
        self.policy = policy_of(config)
        self.topic = checkpoints_topic(self.alias)
        self.emit = str(config.get(EMIT_ENABLED_CONFIG, "true")).lower() == "true"
        self.sync = str(config.get(SYNC_ENABLED_CONFIG, "false")).lower() == "true"
        self.emit_every = float(config.get(EMIT_INTERVAL_CONFIG) or 60)
        self.sync_every = float(config.get(SYNC_INTERVAL_CONFIG) or 60)
        self.refresh = str(config.get(REFRESH_GROUPS_ENABLED_CONFIG, "true")).lower() == "true"
        self.refresh_every = float(config.get(REFRESH_GROUPS_INTERVAL_CONFIG) or 600)
        self.include = _patterns(str(config.get(GROUPS_CONFIG) or ".*"))
        self.exclude = _patterns(str(config.get(GROUPS_EXCLUDE_CONFIG, DEFAULT_GROUPS_EXCLUDE)))
        self.source_admin = AdminClient(source_client_config("admin", config))
        target = json.loads(config.get(TARGET_CLIENT_KEY) or "{}")
        self.target_admin = AdminClient(dict(target))
        self.syncs_consumer = syncs_consumer = Consumer(
            {
                **target,
                "group.id": f"eosconnect-mirror-checkpoint-{self.alias}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
            }
        )
        assign_promptly(
            syncs_consumer, [KafkaTopicPartition(offset_syncs_topic(self.alias), 0, OFFSET_BEGINNING)]
        )
        self.index = OffsetSyncIndex()
        self.groups: list[str] = []
        self._groups_listed = float("-inf")
        self._next_emit = 0.0
        self._next_sync = time.monotonic() + self.sync_every
        #: (group, target topic, partition) -> the last checkpoint emitted, to emit only changes.
        self.emitted: dict[tuple[str, str, int], Checkpoint] = {}
        #: group -> {target partition: translated offset}, from the latest round.
        self.translated: dict[str, dict[tuple[str, int], int]] = {}
        #: (group, source topic, partition) -> the offset last warned about as untranslatable.
        self.uncovered: dict[tuple[str, str, int], int] = {}
        #: Source partitions said to be copied without offset syncs.
        self.unsynced: set[tuple[str, int]] = set()
        #: Source partitions without syncs whose copy held committed records at an earlier round.
        self._copied_before: set[tuple[str, int]] = set()
        self._target_topics: set[str] | None = None

    # ----------------------------------------------------------------------------- the loop
    def poll(self) -> list[SourceRecord] | None:
        now = time.monotonic()
        due = min(self._next_emit, self._next_sync if self.sync else float("inf"))
        if now < due:
            time.sleep(min(1.0, due - now))
            return None
        self._read_syncs()
        records: list[SourceRecord] = []
        if now >= self._next_emit:
            self._next_emit = now + self.emit_every
            records = self._checkpoints()
        if self.sync and now >= self._next_sync:
            self._next_sync = now + self.sync_every
            self._sync_groups()
        return records or None

    def _read_syncs(self) -> None:
        """Everything committed to the offset-syncs topic so far."""
        if self.syncs_consumer is None:
            raise ConnectException("MirrorCheckpointTask.poll() before start() or after stop()")
        while True:
            messages = self.syncs_consumer.consume(10_000, 0.5)
            for message in messages:
                error = message.error()
                if error is not None:
                    if error.code() not in (KafkaError._PARTITION_EOF, KafkaError.UNKNOWN_TOPIC_OR_PART):
                        log.warning("reading offset syncs: %s", error.str())
                    continue
                key, value = message.key(), message.value()
                if key is None or value is None:
                    raise ConnectException(
                        f"offset sync at {offset_syncs_topic(self.alias)}@{message.offset()} "
                        "has no key or value"
                    )
                # confluent-kafka's stub also allows a dict and str values: a consumed message's
                # headers are a list of (str, bytes) pairs.
                headers = message.headers()
                self.index.add(OffsetSync.decode(key, value), covered_from(headers))  # type: ignore[arg-type]
            if not messages:
                return

    def _list_groups(self) -> list[str]:
        now = time.monotonic()
        if self._groups_listed == float("-inf") or (
            self.refresh and now - self._groups_listed >= self.refresh_every
        ):
            listed = self.source_admin.list_consumer_groups(request_timeout=30).result()
            self.groups = sorted(
                g.group_id
                for g in listed.valid
                if any(p.fullmatch(g.group_id) for p in self.include)
                and not any(p.fullmatch(g.group_id) for p in self.exclude)
            )
            self._groups_listed = now
        return self.groups

    def _checkpoints(self) -> list[SourceRecord]:
        try:
            groups = self._list_groups()
        except KafkaException as exc:
            log.warning("could not list the source cluster's groups: %s", exc)
            return []
        mirrored = self.index.partitions()
        self._target_topics = None  # listed at most once per round, if needed
        records = []
        for group in groups:
            try:
                offsets = self.source_admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)], request_timeout=30
                )[group].result()
            except KafkaException as exc:
                log.warning("could not read the offsets of group %s on the source: %s", group, exc)
                continue
            translated = self.translated.setdefault(group, {})
            for tp in offsets.topic_partitions or []:
                if tp.offset < 0:
                    continue
                if (tp.topic, tp.partition) not in mirrored:
                    self._copied_without_syncs(group, tp.topic, tp.partition)
                    continue
                target_topic = self.policy.target_topic(tp.topic)
                translation = self.index.lookup(tp.topic, tp.partition, tp.offset)
                downstream = translation.offset
                if translation.uncovered is not None:
                    self._not_translated(group, tp.topic, tp.partition, tp.offset, translation.uncovered)
                    translated.pop((target_topic, tp.partition), None)  # nor synced to the target
                    continue
                self.uncovered.pop((group, tp.topic, tp.partition), None)
                if downstream is None:
                    continue  # the mirror has not copied up to it yet
                translated[(target_topic, tp.partition)] = downstream
                checkpoint = Checkpoint(
                    group, target_topic, tp.partition, tp.offset, downstream, tp.metadata or ""
                )
                key = (group, target_topic, tp.partition)
                if self.emitted.get(key) == checkpoint or not self.emit:
                    continue
                self.emitted[key] = checkpoint
                records.append(
                    SourceRecord(
                        source_partition={"group": group, "partition": tp.partition, "topic": target_topic},
                        source_offset={"offset": 0},
                        topic=self.topic,
                        partition=0,
                        key=checkpoint.key(),
                        value=checkpoint.value(),
                    )
                )
        return records

    def _copied_without_syncs(self, group: str, topic: str, partition: int) -> None:
        """A group partition without any offset sync whose copy on the target held committed
        records already at an earlier round (an exactly-once mirror commits syncs with its records,
        and this round read the syncs after that): they were copied without exactly once. Said
        once per partition."""
        key = (topic, partition)
        if key in self.unsynced:
            return
        if key in self._copied_before:
            self.unsynced.add(key)
            log.warning(
                "no checkpoint for group %s on %s-%d: its copy on the target has records but %s holds no "
                "offset sync for the partition: they were copied by a mirror without exactly once, which "
                "writes none. Offset syncs are written only by an exactly-once mirror: MirrorSource on "
                "workers with exactly.once.source.support=enabled, or MirrorSink with "
                "transaction.producer=true",
                group,
                topic,
                partition,
                offset_syncs_topic(self.alias),
            )
            return
        target_topic = self.policy.target_topic(topic)
        if self._target_topics is None:
            try:
                self._target_topics = set(self.target_admin.list_topics(timeout=30).topics)
            except KafkaException:
                self._target_topics = set()
        if target_topic not in self._target_topics:
            return  # not mirrored (yet): nothing to say
        try:
            ends = end_offsets(
                self.target_admin, [KafkaTopicPartition(target_topic, partition)], committed=True, timeout=10
            )
        except (KafkaException, TimeoutError):
            return
        if ends.get((target_topic, partition), 0) > 0:
            self._copied_before.add(key)  # said at the next round if no sync came with them

    def _not_translated(self, group: str, topic: str, partition: int, offset: int, why: str) -> None:
        """Say once (per group, partition and offset) why the partition gets no checkpoint."""
        key = (group, topic, partition)
        if self.uncovered.get(key) == offset:
            return
        self.uncovered[key] = offset
        log.warning(
            "no checkpoint for group %s on %s-%d: its committed offset %d cannot be translated exactly "
            "(%s). A consumer failing over would skip or repeat records, so the group gets no offset "
            "for this partition on the target until it commits an offset the syncs cover",
            group,
            topic,
            partition,
            offset,
            why,
        )

    def _sync_groups(self) -> None:
        """Commit translated offsets to target groups that nobody consumes with right now."""
        for group, offsets in self.translated.items():
            if not offsets:
                continue
            try:
                state = (
                    self.target_admin.describe_consumer_groups([group], request_timeout=30)[group]
                    .result()
                    .state
                )
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.GROUP_ID_NOT_FOUND:
                    log.warning("could not describe group %s on the target: %s", group, exc)
                    continue
                state = ConsumerGroupState.DEAD
            if state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN):
                continue  # in use on the target: its own commits win
            try:
                current = self.target_admin.list_consumer_group_offsets(
                    [ConsumerGroupTopicPartitions(group)], request_timeout=30
                )[group].result()
                have = {(tp.topic, tp.partition): tp.offset for tp in current.topic_partitions or []}
                forward = [
                    KafkaTopicPartition(topic, partition, offset)
                    for (topic, partition), offset in sorted(offsets.items())
                    if have.get((topic, partition), -1) < offset
                ]
                if forward:
                    self.target_admin.alter_consumer_group_offsets(
                        [ConsumerGroupTopicPartitions(group, forward)], request_timeout=30
                    )[group].result()
                    log.info(
                        "synced group %s on the target: %s",
                        group,
                        {f"{t.topic}-{t.partition}": t.offset for t in forward},
                    )
            except KafkaException as exc:
                # A member joined meanwhile (UNKNOWN_MEMBER_ID / rebalance): its commits win.
                log.info("did not sync group %s on the target: %s", group, exc)

    def stop(self) -> None:
        consumer, self.syncs_consumer = self.syncs_consumer, None
        if consumer is not None:
            consumer.close()
