"""The position a lake commit carries: its JSON form, claims, and where a task resumes."""

from __future__ import annotations

from eosconnect.api.records import OffsetAndMetadata, TopicPartition
from eosconnect.connectors.lake.positions import (
    Position,
    decode_positions,
    encode_positions,
    fenced,
    resume_offsets,
)


def test_positions_round_trip_and_claims_raise_the_generation() -> None:
    a = Position("t", 1, 42, 3, "c", 2)
    b = Position("t", 0, None, None, "c", 1)
    decoded = decode_positions(encode_positions([a, b]))
    assert decoded == {TopicPartition("t", 1): a, TopicPartition("t", 0): b}
    assert a.claimed().generation == 3 and a.claimed().offset == 42
    assert a.advanced(OffsetAndMetadata(50, leader_epoch=4)) == Position("t", 1, 50, 4, "c", 2)


def test_a_task_resumes_from_stored_offsets_with_their_epochs_only() -> None:
    claims = {
        TopicPartition("t", 0): Position("t", 0, None, None, "c", 1),
        TopicPartition("t", 1): Position("t", 1, 7, 2, "c", 4),
    }
    assert resume_offsets(claims) == {TopicPartition("t", 1): OffsetAndMetadata(7, leader_epoch=2)}


def test_a_newer_generation_fences_and_a_claim_before_the_table_existed_is_accepted_once_created() -> None:
    held = Position("t", 0, 5, None, "c", 2)
    assert not fenced(Position("t", 0, 5, None, "c", 2), held)
    assert fenced(Position("t", 0, 5, None, "c", 3), held)
    provisional = Position("t", 0, None, None, "c", 1)
    assert not fenced(None, provisional)  # another task created the table without this partition
    assert fenced(Position("t", 0, 9, None, "c", 2), provisional)
