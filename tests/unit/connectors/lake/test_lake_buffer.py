"""When a lake commit is due: `flush.size` changes waiting, or the oldest waiting for the interval."""

from __future__ import annotations

import time

from eosconnect.api.records import TopicPartition
from eosconnect.connectors.lake.buffer import PartitionBuffers
from eosconnect.connectors.lake.changes import Change, Operation

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def change(tp: TopicPartition, offset: int) -> Change:
    return Change(tp, offset, Operation.APPEND, (), {})


def test_due_by_size_and_by_age_and_take_empties_the_partitions_taken() -> None:
    buffers = PartitionBuffers(flush_size=3, interval_s=0.2)
    assert not buffers.due()
    buffers.add(change(TP0, 0))
    buffers.add(change(TP1, 0))
    assert not buffers.due()
    buffers.add(change(TP0, 1))
    assert buffers.due()
    assert [c.offset for c in buffers.take([TP0])] == [0, 1]
    assert buffers.count == 1 and not buffers.due()
    time.sleep(0.25)
    assert buffers.due()  # the TP1 change waited the interval
    buffers.take([TP1])
    assert buffers.since is None and not buffers.due()


def test_consumed_records_without_changes_also_wait_for_a_commit_of_their_positions() -> None:
    buffers = PartitionBuffers(flush_size=10, interval_s=0.0)
    buffers.touch()
    assert buffers.due()
