"""Sequence source tasks that let a test hold (and fence) their producer at a chosen commit.

Their `TransactionParticipant` runs right before each commit, after every record of the transaction
was delivered. Once the task's `CommitHold` is armed, it first writes a record into `OFFSETS_TOPIC`
under another connector's name (so that the partition the task's offsets go to is already part of
the transaction, and a fence then meets the offsets' produce request or the commit itself, not a
partition registration), gives it a moment to be delivered, announces `at_commit` and waits for
`released` before it lets the commit go on. The runner and the test share this module's globals
(the tasks run in the test's process, `run_source_task` on a thread). `FenceAtCommitTask` answers
to `HOLD`, `SecondHoldTask` to `SECOND_HOLD`, so that two instances of one task can be held apart.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from eosconnect.api.batch import LandedRecords
from eosconnect.api.records import SourceOffset, SourcePartition
from eosconnect.api.transactions import TransactionParticipant, TransactionRecord
from eosconnect.connectors.sequence import SequenceSourceTask
from eosconnect.storage.offsets import encode_offset_records

OFFSETS_TOPIC = {"name": ""}


@dataclass
class CommitHold:
    """One held commit: `arm` it, wait for `at_commit`, fence or freeze what the test needs, then
    set `released`."""

    arm: threading.Event = field(default_factory=threading.Event)
    at_commit: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def reset(self) -> None:
        for event in (self.arm, self.at_commit, self.released):
            event.clear()


HOLD = CommitHold()
SECOND_HOLD = CommitHold()


class _HoldOneCommit:
    def __init__(self, hold: CommitHold) -> None:
        self.hold = hold

    def transaction_records(self, landed: Sequence[LandedRecords]) -> Iterator[TransactionRecord]:
        hold = self.hold
        if not hold.arm.is_set() or hold.at_commit.is_set():
            return
        offsets = {SourcePartition({"test": "fence-at-commit"}): SourceOffset({"n": 1})}
        for key, value in encode_offset_records("not-the-task-under-test", offsets):
            yield TransactionRecord(OFFSETS_TOPIC["name"], 0, key, value)
        time.sleep(1.5)  # the record (and the partition's registration) reach the broker meanwhile
        hold.at_commit.set()
        hold.released.wait(60)


class FenceAtCommitTask(SequenceSourceTask):
    def transaction_participant(self) -> TransactionParticipant | None:
        return _HoldOneCommit(HOLD)


class SecondHoldTask(SequenceSourceTask):
    def transaction_participant(self) -> TransactionParticipant | None:
        return _HoldOneCommit(SECOND_HOLD)
