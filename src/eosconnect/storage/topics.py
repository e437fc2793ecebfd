"""Create the runtime's internal topics (offsets, config, status) when they are missing.

Several workers and tasks race to create the same topic, so "it already exists" is success. Any
other failure must say what to change: the settings that feed topic creation are worker settings
(`offset.storage.replication.factor`, ...) that the admin client never sees, so the caller names
them and this module puts them into the message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from eosconnect.api.errors import ConnectException

__all__ = ["TopicCreationError", "ensure_topic"]

log = logging.getLogger(__name__)


class TopicCreationError(ConnectException):
    """An internal topic could not be created, or exists in a shape that loses data."""


def ensure_topic(
    admin: AdminClient,
    name: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, str] | None = None,
    compacted: bool = True,
    *,
    partitions_setting: str | None = None,
    replication_setting: str | None = None,
    require_compaction: bool = False,
    timeout: float = 30.0,
) -> bool:
    """Create topic `name` unless it exists; True if this call created it.

    `partitions`/`replication_factor` of -1 take the broker defaults (KIP-464). `compacted` sets
    `cleanup.policy=compact`, which internal topics need: with `delete`, offsets older than the
    retention silently vanish. An existing topic that is not compacted is logged as a WARNING, or
    raises with `require_compaction` (what Kafka Connect does for its own internal topics).
    `partitions_setting`/`replication_setting` name the user settings the numbers came from, so an
    error can say which one to change. Returns once the topic is visible in metadata.
    """
    topic_config = {str(k): str(v) for k, v in (config or {}).items()}
    if compacted:
        topic_config["cleanup.policy"] = "compact"
    new = NewTopic(
        name, num_partitions=partitions, replication_factor=replication_factor, config=topic_config
    )
    future = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[name]
    try:
        future.result(timeout=timeout + 5)
    except KafkaException as exc:
        err: KafkaError = exc.args[0]
        # A principal without Create is refused even for a topic that exists (the authorizer
        # answers before the existence check): as Kafka Connect does, fall back to using the
        # topic if it is there, so least-privilege workers run on topics an administrator made.
        refused = err.code() in (
            KafkaError.TOPIC_AUTHORIZATION_FAILED,
            KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        )
        if err.code() != KafkaError.TOPIC_ALREADY_EXISTS and not (refused and _exists(admin, name, timeout)):
            raise TopicCreationError(
                _explain(name, err, partitions, replication_factor, partitions_setting, replication_setting)
            ) from exc
        log.debug("topic %r already exists", name)
        if compacted:
            _check_compacted(admin, name, require_compaction, timeout)
        _wait_visible(admin, name, timeout)
        return False
    log.info(
        "created topic %r (partitions=%s, replication.factor=%s, config=%s)",
        name,
        partitions,
        replication_factor,
        topic_config,
    )
    _wait_visible(admin, name, timeout)
    return True


def _explain(
    name: str,
    err: KafkaError,
    partitions: int,
    replication_factor: int,
    partitions_setting: str | None,
    replication_setting: str | None,
) -> str:
    code, text = err.code(), err.str()
    head = f"Could not create topic {name!r}: {text}."
    if code == KafkaError.INVALID_REPLICATION_FACTOR:
        setting = f"`{replication_setting}`" if replication_setting else "the replication factor"
        return (
            f"{head} The replication factor {replication_factor} is larger than the number of brokers "
            f"available. Lower {setting} to at most the number of brokers (or -1 for the broker's "
            "default.replication.factor), or create the topic yourself."
        )
    if code == KafkaError.INVALID_PARTITIONS:
        setting = f"`{partitions_setting}`" if partitions_setting else "the partition count"
        return f"{head} {partitions} partitions is not valid; set {setting} to a positive number or -1."
    if code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED):
        return (
            f"{head} The principal lacks the CREATE permission. Grant it (on the topic or the cluster), "
            "or have an administrator create the topic with cleanup.policy=compact."
        )
    if code == KafkaError.POLICY_VIOLATION:
        return f"{head} The brokers' create-topic policy refused it; create the topic yourself."
    if code == KafkaError.INVALID_CONFIG:
        return f"{head} Fix the topic settings passed for it."
    return f"{head} Check that the brokers are reachable and retry, or create the topic yourself."


def _check_compacted(admin: AdminClient, name: str, strict: bool, timeout: float) -> None:
    resource = ConfigResource(ResourceType.TOPIC, name)
    try:
        described = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    except KafkaException as exc:
        log.warning("could not check cleanup.policy of topic %r: %s", name, exc)
        return
    entry = described.get("cleanup.policy")
    policy = entry.value if entry is not None else None
    if policy is None or {p.strip() for p in policy.split(",")} == {"compact"}:
        return
    message = (
        f"Topic {name!r} has cleanup.policy={policy}, but it must be 'compact': with deletion, stored "
        "offsets older than the retention time disappear and tasks re-read old data. Run "
        f"`kafka-configs --alter --entity-type topics --entity-name {name} "
        "--add-config cleanup.policy=compact`."
    )
    if strict:
        raise TopicCreationError(message)
    log.warning(message)


def _exists(admin: AdminClient, name: str, timeout: float) -> bool:
    try:
        topic = admin.list_topics(name, timeout=timeout).topics.get(name)
    except KafkaException:
        return False
    return topic is not None and topic.error is None and bool(topic.partitions)


def _wait_visible(admin: AdminClient, name: str, timeout: float) -> None:
    """Wait until metadata lists the topic with leaders: a freshly created topic can lag behind."""
    deadline = time.monotonic() + timeout
    while True:
        md = admin.list_topics(name, timeout=timeout)
        topic = md.topics.get(name)
        admin.poll(0)  # hands librdkafka's queued log lines to Python logging (see clients.kafka_logger)
        if (
            topic is not None
            and topic.error is None
            and topic.partitions
            and all(p.leader >= 0 for p in topic.partitions.values())
        ):
            return
        if time.monotonic() > deadline:
            raise TopicCreationError(
                f"Topic {name!r} was created but is not visible with leaders after {timeout:.0f}s; "
                "check the brokers' health."
            )
        time.sleep(0.1)
