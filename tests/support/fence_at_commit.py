"""A sequence source task that lets a test fence its producer at a chosen commit.

Its `TransactionParticipant` runs right before each commit, after every record of the
transaction was delivered. Once `FENCE_AT_NEXT_COMMIT` is set, it first writes a record into
`OFFSETS_TOPIC` under another connector's name (so that the partition the task's offsets go to is
already part of the transaction, and the fence then meets the offsets' produce request or the
commit itself, not a partition registration), gives it a moment to be delivered, announces
`AT_COMMIT` and waits for `FENCED` before it lets the commit go on. The runner and the test share
this module's globals (the task runs in the test's process, `run_source_task` on a thread)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence

from eosconnect.api.batch import LandedRecords
from eosconnect.api.records import SourceOffset, SourcePartition
from eosconnect.api.transactions import TransactionParticipant, TransactionRecord
from eosconnect.connectors.sequence import SequenceSourceTask
from eosconnect.storage.offsets import encode_offset_records

FENCE_AT_NEXT_COMMIT = threading.Event()
AT_COMMIT = threading.Event()
FENCED = threading.Event()
OFFSETS_TOPIC = {"name": ""}


class _HoldOneCommit:
    def transaction_records(self, landed: Sequence[LandedRecords]) -> Iterator[TransactionRecord]:
        if not FENCE_AT_NEXT_COMMIT.is_set() or AT_COMMIT.is_set():
            return
        offsets = {SourcePartition({"test": "fence-at-commit"}): SourceOffset({"n": 1})}
        for key, value in encode_offset_records("not-the-task-under-test", offsets):
            yield TransactionRecord(OFFSETS_TOPIC["name"], 0, key, value)
        time.sleep(1.5)  # the record (and the partition's registration) reach the broker meanwhile
        AT_COMMIT.set()
        FENCED.wait(60)


class FenceAtCommitTask(SequenceSourceTask):
    def transaction_participant(self) -> TransactionParticipant | None:
        return _HoldOneCommit()
