"""The consumed position a lake table commit carries, and where a task resumes from.

Each commit a lake sink makes carries, for every partition whose records it adds, a `Position`:
the next offset to read, the leader epoch of the record before it (KIP-320), the connector's name
and the *generation* the writing task claimed the partition with. A task given a partition claims
it first: one commit (with no rows) raising the partition's generation. Every later commit of that
task checks, against the table version it commits on, that the generation is still its own; the
table's optimistic concurrency makes a claim landing in between fail the commit, and the retry sees
the new generation. So a zombie (a SIGSTOPped task whose partitions moved, a retried Spark task's
predecessor) can never commit rows or positions after its successor's claim. The consumer group's
offsets are written after each commit as information only.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from eosconnect.api.records import OffsetAndMetadata, TopicPartition

__all__ = ["Position", "decode_positions", "encode_positions", "fenced", "resume_offsets"]


@dataclass(frozen=True)
class Position:
    """One partition's state as a table commit records it; `offset` None: claimed, nothing written."""

    topic: str
    partition: int
    offset: int | None
    leader_epoch: int | None
    connector: str
    generation: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def advanced(self, to: OffsetAndMetadata) -> Position:
        """This position moved to `to` by a commit of the same holder."""
        return Position(
            self.topic, self.partition, to.offset, to.leader_epoch, self.connector, self.generation
        )

    def claimed(self) -> Position:
        """This position with the generation a new holder raises it to."""
        return Position(
            self.topic, self.partition, self.offset, self.leader_epoch, self.connector, self.generation + 1
        )


def fenced(stored: Position | None, held: Position) -> bool:
    """Whether a newer task claimed the partition than the one holding it at `held`.

    A claim made while the table did not exist yet (generation 1, nothing stored) is accepted by a
    table that another task created meanwhile without the partition: until a partition's first
    commit into a new table, only the consumer group keeps two holders apart."""
    generation = 0 if stored is None else stored.generation
    return generation != held.generation and not (generation == 0 and held.generation == 1)


def encode_positions(positions: Iterable[Position]) -> str:
    """JSON text for a table property: a list of objects, sorted by topic and partition."""
    return json.dumps(
        [
            {
                "topic": p.topic,
                "partition": p.partition,
                "offset": p.offset,
                "leader_epoch": p.leader_epoch,
                "connector": p.connector,
                "generation": p.generation,
            }
            for p in sorted(positions, key=lambda p: (p.topic, p.partition))
        ],
        separators=(",", ":"),
    )


def decode_positions(text: str) -> dict[TopicPartition, Position]:
    """The positions `encode_positions` wrote."""
    result = {}
    for item in json.loads(text):
        p = Position(
            str(item["topic"]),
            int(item["partition"]),
            None if item.get("offset") is None else int(item["offset"]),
            None if item.get("leader_epoch") is None else int(item["leader_epoch"]),
            str(item["connector"]),
            int(item["generation"]),
        )
        result[p.topic_partition] = p
    return result


def resume_offsets(claims: Mapping[TopicPartition, Position]) -> dict[TopicPartition, OffsetAndMetadata]:
    """Where claimed partitions resume: the table's positions (with their leader epochs, so the
    runtime checks them against the log); a partition the table has no offset for is absent (it
    starts per `auto.offset.reset`)."""
    return {
        tp: OffsetAndMetadata(p.offset, leader_epoch=p.leader_epoch)
        for tp, p in claims.items()
        if p.offset is not None
    }
