"""A sink connector's offsets are its consumer group's committed offsets (`connect-<connector>`).

Kafka Connect shows and edits them through the same REST endpoints as source offsets, in this
shape: `{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 42}}`.
Reading and altering go through the Admin API with the connector's admin settings; a reset deletes
the group (its members are gone: the connector must be STOPPED). Removing a single partition's
offset (`"offset": null`) needs Kafka's DeleteConsumerGroupOffsets, which librdkafka's Python
client does not expose, so it is refused with that explanation.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from eosconnect.api.errors import ConfigException

__all__ = ["alter_sink_offsets", "parse_sink_offsets", "read_sink_offsets", "reset_sink_offsets"]

TIMEOUT_S = 30.0


def read_sink_offsets(admin_config: Mapping[str, Any], group: str) -> list[dict[str, Any]]:
    """The group's committed offsets in Kafka Connect's format, sorted by topic and partition."""
    admin = AdminClient(dict(admin_config))
    future = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group]
    committed = future.result(TIMEOUT_S).topic_partitions or []
    return [
        {
            "partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
            "offset": {"kafka_offset": tp.offset},
        }
        for tp in sorted(committed, key=lambda tp: (tp.topic, tp.partition))
        if tp.offset >= 0
    ]


def parse_sink_offsets(entries: Sequence[Mapping[str, Any]]) -> list[TopicPartition]:
    """Validate an alter request's entries; raises `ConfigException` naming the bad entry."""
    parsed = []
    for i, entry in enumerate(entries):
        partition, offset = entry.get("partition") or {}, entry.get("offset")
        topic, number = partition.get("kafka_topic"), partition.get("kafka_partition")
        if not isinstance(topic, str) or not topic or isinstance(number, bool) or not isinstance(number, int):
            raise ConfigException.for_field(
                f"offsets[{i}].partition",
                'must be {"kafka_topic": "<topic>", "kafka_partition": <int>} for a sink connector',
            )
        if offset is None:
            raise ConfigException.for_field(
                f"offsets[{i}].offset",
                "null (removing one partition's offset) is not supported for sink connectors here; "
                "reset all offsets (DELETE /connectors/<name>/offsets) or give the offset to resume from",
            )
        value = offset.get("kafka_offset") if isinstance(offset, Mapping) else None
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ConfigException.for_field(f"offsets[{i}].offset", 'must be {"kafka_offset": <int >= 0>}')
        parsed.append(TopicPartition(topic, number, value))
    return parsed


def alter_sink_offsets(admin_config: Mapping[str, Any], group: str, offsets: list[TopicPartition]) -> None:
    admin = AdminClient(dict(admin_config))
    request = [ConsumerGroupTopicPartitions(group, offsets)]
    result = admin.alter_consumer_group_offsets(request)[group].result(TIMEOUT_S)
    failed = [f"{tp.topic}-{tp.partition}: {tp.error}" for tp in result.topic_partitions or [] if tp.error]
    if failed:
        raise KafkaException(f"could not alter offsets of consumer group {group}: {'; '.join(failed)}")


def reset_sink_offsets(admin_config: Mapping[str, Any], group: str) -> None:
    """Delete the consumer group; a group that does not exist has nothing to reset."""
    admin = AdminClient(dict(admin_config))
    try:
        admin.delete_consumer_groups([group], request_timeout=TIMEOUT_S)[group].result(TIMEOUT_S)
    except KafkaException as exc:
        if "GROUP_ID_NOT_FOUND" not in str(exc):
            raise
