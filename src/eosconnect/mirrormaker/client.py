"""What MM2's RemoteClusterUtils offers, for our checkpoints: translated offsets of a group.

`translate_offsets(target_client, source_alias, group)` reads `<source alias>.checkpoints.internal`
on the target cluster (read_committed, to its end) and returns the latest checkpoint of each
partition of `group`: target topic partitions and the offsets to resume from there. With our
mirrors' exact checkpoints that is where the group stopped, record for record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.mirrormaker.formats import Checkpoint, checkpoints_topic
from eosconnect.storage.topic_reader import read_to_end

__all__ = ["translate_offsets"]


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
