"""What both mirror connectors (MirrorSink, MirrorSource) share: the settings that pick and name
topics, listing the source cluster's partitions, watching them change, and creating target topics.

Kafka-facing, unlike mirror_policy.py (the pure naming and spreading rules).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, ResourceType

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import TopicPartition
from eosconnect.api.sink import SINK_TOPICS_CONFIG_DEF, sink_topics
from eosconnect.api.validators import Range, Validator, ValidString
from eosconnect.connectors.mirror_policy import POLICIES, ReplicationPolicy
from eosconnect.storage.clients import ClientConfigError, ClientKind, prefixed_client_config
from eosconnect.storage.topics import ensure_topic

__all__ = [
    "MIRROR_NAMING_CONFIG_DEF",
    "MIRROR_TOPICS_CONFIG_DEF",
    "PartitionWatcher",
    "connection_settings",
    "ensure_mirror_topic",
    "list_source_partitions",
    "policy_of",
    "prefixed_client_errors",
    "source_topic_configs",
]

log = logging.getLogger(__name__)

SOURCE_ALIAS_CONFIG = "source.cluster.alias"
POLICY_CONFIG = "replication.policy.class"
SEPARATOR_CONFIG = "replication.policy.separator"
REPLICATION_FACTOR_CONFIG = "target.topic.replication.factor"
REFRESH_ENABLED_CONFIG = "refresh.topics.enabled"
REFRESH_INTERVAL_CONFIG = "refresh.topics.interval.seconds"
SYNC_CONFIGS_CONFIG = "sync.topic.configs.enabled"
CONFIG_EXCLUDE_CONFIG = "config.properties.exclude"
#: MirrorMaker 2's default exclusions: settings that belong to a cluster, not to the data.
DEFAULT_CONFIG_EXCLUDE = (
    r"follower\.replication\.throttled\.replicas,leader\.replication\.throttled\.replicas,"
    r"message\.timestamp\.difference\.max\.ms,message\.timestamp\.type,"
    r"unclean\.leader\.election\.enable,min\.insync\.replicas"
)


def _excluded_patterns(value: str | Iterable[str]) -> list[re.Pattern[str]]:
    """`config.properties.exclude` as written (comma-separated) or as parsed (a list)."""
    items = value.split(",") if isinstance(value, str) else value
    return [re.compile(p.strip()) for p in items if p.strip()]


def _all_compile(value: str | Iterable[str]) -> bool:
    try:
        _excluded_patterns(value)
    except re.error:
        return False
    return True


#: How the source cluster is named and how target topic names derive from it: the settings every
#: mirror connector (MirrorSource, Mirror, MirrorCheckpoint) shares, declared once here.
MIRROR_NAMING_CONFIG_DEF = (
    ConfigDef()
    .define(
        SOURCE_ALIAS_CONFIG,
        ConfigType.STRING,
        "source",
        Importance.MEDIUM,
        "The source cluster's alias: the prefix of target topic names under the default policy; it "
        "also names the offset-syncs and checkpoints topics.",
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
)

MIRROR_TOPICS_CONFIG_DEF = (
    ConfigDef(SINK_TOPICS_CONFIG_DEF)
    .merge(MIRROR_NAMING_CONFIG_DEF)
    .define(
        REFRESH_ENABLED_CONFIG,
        ConfigType.BOOLEAN,
        True,
        Importance.LOW,
        "Whether the connector watches the source cluster for new topics (topics.regex, or listed "
        "topics created later) and partitions, and starts a new generation of tasks when they change.",
    )
    .define(
        REFRESH_INTERVAL_CONFIG,
        ConfigType.LONG,
        600,
        Importance.LOW,
        "How often, in seconds, the connector lists the source cluster's partitions (MirrorMaker 2's "
        "setting of the same name).",
        Range.at_least(1),
    )
    .define(
        REPLICATION_FACTOR_CONFIG,
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of target topics the connector creates; -1 takes the target broker's default.",
    )
    .define(
        SYNC_CONFIGS_CONFIG,
        ConfigType.BOOLEAN,
        True,
        Importance.LOW,
        "Whether a target topic is created with the settings set on its source topic "
        "(cleanup.policy, retention.ms, ...: the topic's own, not the broker's defaults), minus "
        f"{CONFIG_EXCLUDE_CONFIG}. Only at creation: later changes on the source are not copied.",
    )
    .define(
        CONFIG_EXCLUDE_CONFIG,
        ConfigType.LIST,
        DEFAULT_CONFIG_EXCLUDE,
        Importance.LOW,
        "Regular expressions (comma-separated) of topic settings never copied to the target "
        "(MirrorMaker 2's setting and default).",
        Validator.of(_all_compile, "regular expressions that compile", r"retention\..*"),
    )
)

#: Client settings that say how to reach a cluster (an admin client needs no more).
_CONNECTION_KEYS = ("bootstrap.servers", "security.protocol")


def policy_of(config: Mapping[str, str]) -> ReplicationPolicy:
    return ReplicationPolicy.of(
        str(config.get(POLICY_CONFIG) or "default"),
        str(config.get(SOURCE_ALIAS_CONFIG) or "source"),
        str(config.get(SEPARATOR_CONFIG) or "."),
    )


def prefixed_client_errors(
    config: Mapping[str, str], prefix: str, kinds: Iterable[ClientKind], exclude: Collection[str] = ()
) -> dict[str, list[str]]:
    """librdkafka's verdict on the `<prefix>*` settings of the other cluster's clients, by the
    setting the user wrote (each problem once, though several client kinds see it)."""
    errors: dict[str, list[str]] = {}
    for kind in kinds:
        try:
            prefixed_client_config(kind, config, prefix, exclude=exclude).validate()
        except ClientConfigError as exc:
            for name, problems in (exc.errors or {}).items():
                for problem in problems:
                    if problem not in errors.get(name, []):
                        errors.setdefault(name, []).append(problem)
    return errors


def connection_settings(client: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a client's settings that reaches its cluster (for an admin client there)."""
    return {k: v for k, v in client.items() if k in _CONNECTION_KEYS or k.startswith(("sasl.", "ssl."))}


def list_source_partitions(
    admin_config: Mapping[str, Any], config: Mapping[str, str], *, required: bool
) -> list[TopicPartition] | None:
    """Every partition of the configured `topics` / `topics.regex` on the source cluster.

    `required`: the caller cannot go on without them (static assignment), so an unreachable
    cluster or a missing listed topic raises; otherwise they are skipped (None if unreachable).
    """
    try:
        metadata = AdminClient(dict(admin_config)).list_topics(timeout=30)
    except KafkaException as exc:
        if not required:
            log.warning("could not list the source cluster's topics: %s", exc)
            return None
        raise ConnectException(
            f"could not list the source cluster's topics (bootstrap.servers="
            f"{admin_config.get('bootstrap.servers')}): {exc}"
        ) from exc
    topics, regex = sink_topics(config)
    if regex:
        pattern = re.compile(regex)
        chosen = sorted(t for t in metadata.topics if pattern.fullmatch(t) and not t.startswith("__"))
    else:
        missing = [t for t in topics if t not in metadata.topics]
        if missing and required:
            raise ConnectException(
                f"source topics {missing} do not exist; partitions are assigned when the task configs "
                "are made: create the topics (the connector finds them within "
                f"{REFRESH_INTERVAL_CONFIG}), or restart the connector"
            )
        chosen = [t for t in topics if t in metadata.topics]
    return [TopicPartition(t, p) for t in chosen for p in sorted(metadata.topics[t].partitions)]


class PartitionWatcher:
    """Lists the source partitions every `interval_s` and calls `on_change` when they differ from
    `known`, the partitions the current task configs were made from (the connector sets it)."""

    def __init__(
        self,
        name: str,
        list_partitions: Callable[[], list[TopicPartition] | None],
        interval_s: float,
        on_change: Callable[[], None],
    ) -> None:
        self.name = name
        self.known: frozenset[TopicPartition] | None = None
        self._list = list_partitions
        self._interval_s = interval_s
        self._on_change = on_change
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"mirror-watch-{name}", daemon=True)

    @classmethod
    def for_config(
        cls,
        config: Mapping[str, str],
        list_partitions: Callable[[], list[TopicPartition] | None],
        on_change: Callable[[], None],
    ) -> PartitionWatcher | None:
        """A started watcher, or None when `refresh.topics.enabled=false`."""
        values = MIRROR_TOPICS_CONFIG_DEF.parse(config)
        if not values[REFRESH_ENABLED_CONFIG]:
            return None
        watcher = cls(
            str(config.get("name", "mirror")),
            list_partitions,
            float(values[REFRESH_INTERVAL_CONFIG]),
            on_change,
        )
        watcher._thread.start()
        return watcher

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self._interval_s):
            try:
                partitions = self._list()
            except Exception as exc:  # the source cluster may be unreachable for a while
                log.warning("mirror %s: could not list the source partitions: %s", self.name, exc)
                continue
            known = self.known
            if partitions is None or known is None or frozenset(partitions) == known:
                continue
            added = sorted(str(tp) for tp in frozenset(partitions) - known)
            removed = sorted(str(tp) for tp in known - frozenset(partitions))
            log.info("mirror %s: source partitions changed (added %s, removed %s)", self.name, added, removed)
            self._on_change()


def source_topic_configs(
    admin_config: Mapping[str, Any], config: Mapping[str, str], topics: Iterable[str]
) -> dict[str, dict[str, str]]:
    """Per source topic, the settings its target copy is created with (`sync.topic.configs.enabled`).

    Only settings set on the topic itself count: a broker default of the source cluster is not the
    topic's choice, and the target's own defaults should apply there. A topic whose settings cannot
    be read is created with the target's defaults, with a warning: data is never held back for it.
    """
    wanted = sorted(set(topics))
    if not wanted or str(config.get(SYNC_CONFIGS_CONFIG, "true")).strip().lower() != "true":
        return {}
    excluded = _excluded_patterns(str(config.get(CONFIG_EXCLUDE_CONFIG, DEFAULT_CONFIG_EXCLUDE)))
    own = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    admin = AdminClient(dict(admin_config))  # kept referenced: a freed client fails its futures
    futures = admin.describe_configs(
        [ConfigResource(ResourceType.TOPIC, t) for t in wanted], request_timeout=30
    )
    result: dict[str, dict[str, str]] = {}
    for resource, future in futures.items():
        try:
            entries = future.result(30)
        except KafkaException as exc:
            log.warning(
                "could not read the settings of source topic %s (creating its copy with the "
                "target's defaults): %s",
                resource.name,
                exc,
            )
            continue
        result[resource.name] = {
            name: str(entry.value)
            for name, entry in entries.items()
            if int(getattr(entry.source, "value", entry.source)) == own
            and entry.value is not None
            and not any(p.fullmatch(name) for p in excluded)
        }
    return result


def ensure_mirror_topic(
    admin: AdminClient,
    topic: str,
    partitions: int,
    replication_factor: int,
    topic_config: Mapping[str, str] | None = None,
) -> int:
    """The target `topic` exists with at least `partitions` partitions (created or grown), created
    with `topic_config` (see `source_topic_configs`); returns how many partitions it has."""
    if (
        ensure_topic(
            admin,
            topic,
            partitions=partitions,
            replication_factor=replication_factor,
            config=topic_config,
            compacted=False,
            replication_setting=REPLICATION_FACTOR_CONFIG,
        )
        and topic_config
    ):
        log.info("created %s with the source topic's settings %s", topic, dict(topic_config))
    have = len(admin.list_topics(topic, timeout=30).topics[topic].partitions)
    if have >= partitions:
        return have
    log.info("adding partitions to %s: %d -> %d", topic, have, partitions)
    future = admin.create_partitions([NewPartitions(topic, partitions)])[topic]
    try:
        future.result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.INVALID_PARTITIONS:  # someone grew it already
            raise
    return partitions
