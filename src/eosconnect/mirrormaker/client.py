"""What MM2's RemoteClusterUtils offers, for our checkpoints: translated offsets of a group.

`translate_offsets(target_client, source_alias, group)` reads `<source alias>.checkpoints.internal`
on the target cluster (read_committed, to its end) and returns the latest checkpoint of each
partition of `group`: target topic partitions and the offsets to resume from there. With our
mirrors' exact checkpoints that is where the group stopped, record for record.

`untranslatable(source_client, target_client, source_alias, group)` names the partitions whose
committed offset on the source no offset sync covers (MirrorCheckpoint writes no checkpoint for
them), with the reason: their checkpoints, if any, are from an earlier offset of the group.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient

from eosconnect.connectors.mirror_formats import Checkpoint, checkpoints_topic
from eosconnect.storage.topic_reader import read_to_end

__all__ = ["translate_offsets", "untranslatable"]


def translate_offsets(
    target_client: Mapping[str, Any], source_alias: str, group: str, timeout: float = 60.0
) -> dict[tuple[str, int], int]:
    """(target topic, partition) -> offset for `group`, from the latest checkpoints."""
    result: dict[tuple[str, int], int] = {}
    for record in read_to_end(dict(target_client), checkpoints_topic(source_alias), timeout=timeout):
        if record.key is None or record.value is None:
            continue
        checkpoint = Checkpoint.decode(record.key, record.value)
        if checkpoint.group == group:
            result[(checkpoint.topic, checkpoint.partition)] = checkpoint.downstream_offset
    return result


def untranslatable(
    source_client: Mapping[str, Any],
    target_client: Mapping[str, Any],
    source_alias: str,
    group: str,
    timeout: float = 60.0,
) -> dict[tuple[str, int], tuple[int, str]]:
    """(source topic, partition) -> (the group's committed offset there, why no offset sync covers
    it), for the mirrored partitions of `group` that get no checkpoint (see
    eosconnect.connectors.mirror_translation)."""
    from eosconnect.connectors.mirror_syncs import read_sync_index

    index = read_sync_index(target_client, source_alias, timeout)
    mirrored = index.partitions()
    admin = AdminClient(dict(source_client))
    request = [ConsumerGroupTopicPartitions(group)]
    committed = admin.list_consumer_group_offsets(request, request_timeout=timeout)[group].result()
    result: dict[tuple[str, int], tuple[int, str]] = {}
    for tp in committed.topic_partitions or []:
        if tp.offset < 0 or (tp.topic, tp.partition) not in mirrored:
            continue
        why = index.lookup(tp.topic, tp.partition, tp.offset).uncovered
        if why is not None:
            result[(tp.topic, tp.partition)] = (tp.offset, why)
    return result
