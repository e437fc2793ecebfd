"""The pure parts of the mirror sink: target topic names and which task copies which partition.

Kept apart from the connector so they are trivially unit-tested and reusable (a mirror source would
name topics the same way).

Topic names follow MirrorMaker 2's `DefaultReplicationPolicy`: `<source.cluster.alias><sep><topic>`,
so topics of several source clusters can land on one target without clashing, and a topic that
already carries the alias is not prefixed twice (no ping-pong in cyclic set-ups). The `identity`
policy (MM2's `IdentityReplicationPolicy`) keeps names, for one-way migrations.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eosconnect.api.records import TopicPartition

__all__ = [
    "POLICIES",
    "ReplicationPolicy",
    "encode_topic_partition_counts",
    "parse_topic_partition_counts",
    "spread_partitions",
]

#: Accepted `replication.policy.class` values (short names and MM2's Java classes) -> short name.
POLICIES: dict[str, str] = {
    "default": "default",
    "DefaultReplicationPolicy": "default",
    "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": "default",
    "identity": "identity",
    "IdentityReplicationPolicy": "identity",
    "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": "identity",
}


@dataclass(frozen=True)
class ReplicationPolicy:
    """How a source topic is named on the target cluster."""

    kind: str = "default"
    source_alias: str = "source"
    separator: str = "."

    @classmethod
    def of(cls, policy: str, source_alias: str, separator: str = ".") -> ReplicationPolicy:
        try:
            kind = POLICIES[policy.strip()]
        except KeyError:
            raise ValueError(
                f"unknown replication policy {policy!r}; use one of {', '.join(sorted(POLICIES))}"
            ) from None
        return cls(kind, source_alias, separator)

    def target_topic(self, source_topic: str) -> str:
        if self.kind == "identity":
            return source_topic
        prefix = f"{self.source_alias}{self.separator}"
        return source_topic if source_topic.startswith(prefix) else f"{prefix}{source_topic}"

    def target_partition(self, tp: TopicPartition) -> TopicPartition:
        """Each record goes to the same partition number of the target topic."""
        return TopicPartition(self.target_topic(tp.topic), tp.partition)


def spread_partitions(partitions: Iterable[TopicPartition], tasks: int) -> list[list[TopicPartition]]:
    """Deal the partitions over at most `tasks` tasks, round robin in (topic, partition) order.

    Deterministic (the same input gives the same task configs, so no needless new generation)
    and balanced to within one partition; never returns a task without partitions.
    """
    ordered = sorted(set(partitions))
    count = max(1, min(tasks, len(ordered)))
    groups: list[list[TopicPartition]] = [[] for _ in range(count)]
    for i, tp in enumerate(ordered):
        groups[i % count].append(tp)
    return [g for g in groups if g] or [[]]


def topic_partition_counts(partitions: Iterable[TopicPartition]) -> dict[str, int]:
    """Per topic, how many partitions a copy needs to hold these (the highest number + 1)."""
    counts: dict[str, int] = {}
    for tp in partitions:
        counts[tp.topic] = max(counts.get(tp.topic, 0), tp.partition + 1)
    return counts


def encode_topic_partition_counts(counts: Mapping[str, int]) -> str:
    return ",".join(f"{topic}:{n}" for topic, n in sorted(counts.items()))


def parse_topic_partition_counts(text: str) -> dict[str, int]:
    """`topic:count,...` as written by `encode_topic_partition_counts`."""
    counts: dict[str, int] = {}
    for item in (part.strip() for part in text.split(",")):
        if item:
            topic, _, n = item.rpartition(":")
            counts[topic] = int(n)
    return counts
