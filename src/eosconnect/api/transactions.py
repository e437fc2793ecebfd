"""What a task can do with the Kafka transactions the runtime writes it in.

`TransactionParticipant`: a task that adds records of its own to each of its transactions, derived
from where the transaction's records landed (the mirrors' offset syncs), supplies one: a source task
from `SourceTask.transaction_participant()`, a sink by passing it to its `TransactionalWriter`.

`TransactionalWriter` (KIP-656): a sink task that delivers exactly once into Kafka asks its context
for one (`SinkTaskContext.transactional_writer`), writes its records through it, and commits them
with its consumed positions in `pre_commit`; `TransactionRetry` says to consume again from where
the aborted transaction began.

Connector-defined transaction boundaries (KIP-618, `transaction.boundary=connector`): a task asks
for a commit or an abort; the runtime decides when to act on it. Requests are
recorded, not executed, because the task may call from any of its threads while the runtime is
in the middle of sending a batch. Asking for both a commit and an abort of the same thing is a
connector bug the runtime must fail the task for: the request methods only *flag* the conflict
(so a task cannot swallow it with a broad `except`), and the runtime's next query raises it.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from eosconnect.api.batch import LandedRecords
from eosconnect.api.errors import ConnectException, TransactionRequestConflict
from eosconnect.api.records import OffsetAndMetadata, SourceRecord, TopicPartition

__all__ = [
    "RequestedTransactionContext",
    "TransactionContext",
    "TransactionParticipant",
    "TransactionRecord",
    "TransactionRetry",
    "TransactionalWriter",
]


class TransactionRecord(NamedTuple):
    """A record a `TransactionParticipant` adds to a transaction, written as it is (bytes)."""

    topic: str
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes]] | None = None


class TransactionParticipant(Protocol):
    """Adds records to each transaction of a task, made from where the transaction's records landed.

    Just before the transaction commits (its offsets included), the runtime waits for the delivery
    of every record in it and calls `transaction_records` with, in send order, a `LandedRecords`
    per run of records from one source partition to one Kafka partition (a columnar `SourceBatch`
    comes as one, its source offsets a `ColumnOffsets`). The records returned are written into the
    same transaction, so they commit with the records they describe or not at all. A transaction
    the runtime aborts and sends again is described again (the same first records): the participant
    must give the same answer for it.
    """

    def transaction_records(self, landed: Sequence[LandedRecords]) -> Iterable[TransactionRecord]: ...


class TransactionRetry(ConnectException):
    """The writer aborted its open transaction (it could not be committed in time, a record of it
    failed, or a new producer ended it): consume again from `rewind`, per partition where the task
    goes on (the first source offset of the transaction's records, or the group's committed offset
    keyed by the partition written to). Nothing of it was committed, its records nor its offsets."""

    def __init__(self, message: str, rewind: dict[TopicPartition, int]) -> None:
        super().__init__(message)
        self.rewind = rewind


class TransactionalWriter(Protocol):
    """A sink task's writer into Kafka whose transactions carry the task's consumed positions for
    its consumer group on the cluster written to (KIP-656): either both become visible or neither,
    so after any crash the task resumes from the group's committed offsets there (`committed`) and
    writes nothing twice. The runtime makes it with the task's transactional id, fences zombies of
    it, bounds every transaction by the producer's `transaction.timeout.ms` and renews its producer
    when the leader allows. One task thread uses it."""

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets for these partitions (of the cluster written to), with the
        leader epochs committed with them; partitions with none are left out."""
        ...

    def produce(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        timestamp: int | None,
        origin: tuple[str, int, int] | None = None,
    ) -> None:
        """Write a record into the open transaction (begun if none is); `origin` (source topic,
        partition, offset) tells the writer's `TransactionParticipant` where it came from."""
        ...

    def must_commit(self, interval_s: float) -> bool:
        """Whether the task should ask for a commit now: the transaction has been open `interval_s`,
        or it must be aborted (the next `commit` does it and raises `TransactionRetry`)."""
        ...

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Send `offsets` (next offset to read, keyed by partitions of the cluster written to) into
        the open transaction and commit it; `TransactionRetry` when it was aborted instead."""
        ...

    def close(self) -> None:
        """Abort what is open (best effort) and release the writer's clients."""
        ...


class TransactionContext(ABC):
    """What a source task uses to define its own transaction boundaries.

    Reached through `self.context.transaction_context`, which is None unless the connector runs
    with `transaction.boundary=connector` (and its connector said it supports that).
    """

    @abstractmethod
    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit after `record` (it becomes the last record of the transaction), or, with no record,
        after the next batch returned by `poll()` has been processed."""

    @abstractmethod
    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort after `record` (or after the next batch): the transaction's records are discarded.

        Their source offsets are still committed, so the aborted records are not polled again.
        """


class RequestedTransactionContext(TransactionContext):
    """The runtime's `TransactionContext`: it remembers requests until the runtime asks about them.

    How the runtime uses it, per batch returned by `poll()`:

    * after dispatching each record (the object `poll()` returned, *before* transformations: the
      requests are matched by identity), ask `should_abort_on(record)` then
      `should_commit_on(record)`, and end the transaction right there if either is true;
    * after dispatching the whole batch, ask `should_abort_batch()` then `should_commit_batch()`.

    Each `should_*` answer consumes the request it reports, so a request acts once. Any of them
    raises `TransactionRequestConflict` once conflicting requests were made; fail the task then.
    Thread-safe; `clear()` forgets everything (e.g. when the task is restarted).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._commit_batch = False
        self._abort_batch = False
        # Keyed by id(); the values keep the records alive so an id cannot be reused meanwhile.
        self._commit_records: dict[int, SourceRecord] = {}
        self._abort_records: dict[int, SourceRecord] = {}
        self._conflict: str | None = None

    # -- called by the task ---------------------------------------------------------------------

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        with self._lock:
            if record is None:
                self._commit_batch = True
            else:
                self._commit_records[id(record)] = record
            self._note_conflict(record)

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        with self._lock:
            if record is None:
                self._abort_batch = True
            else:
                self._abort_records[id(record)] = record
            self._note_conflict(record)

    def _note_conflict(self, record: SourceRecord | None) -> None:
        if self._conflict is not None:
            return
        if record is None and self._commit_batch and self._abort_batch:
            self._conflict = (
                "the task requested both a commit and an abort of the transaction for the same batch; "
                "a connector must ask for one or the other (TransactionContext)"
            )
        elif record is not None and id(record) in self._commit_records and id(record) in self._abort_records:
            self._conflict = (
                "the task requested both a commit and an abort of the transaction after the same record "
                f"(topic {record.topic!r}, source partition {dict(record.source_partition)!r}, "
                f"source offset {record.source_offset!r}); a connector must ask for one or the other"
            )

    # -- called by the runtime ------------------------------------------------------------------

    @property
    def conflict(self) -> str | None:
        """Why the task must fail, once it made conflicting requests; None otherwise."""
        with self._lock:
            return self._conflict

    def check(self) -> None:
        """Raise `TransactionRequestConflict` if the task made conflicting requests."""
        with self._lock:
            self._raise_if_conflict()

    def should_commit_batch(self) -> bool:
        with self._lock:
            self._raise_if_conflict()
            requested, self._commit_batch = self._commit_batch, False
            return requested

    def should_abort_batch(self) -> bool:
        with self._lock:
            self._raise_if_conflict()
            requested, self._abort_batch = self._abort_batch, False
            return requested

    def should_commit_on(self, record: SourceRecord) -> bool:
        with self._lock:
            self._raise_if_conflict()
            return self._commit_records.pop(id(record), None) is not None

    def should_abort_on(self, record: SourceRecord) -> bool:
        with self._lock:
            self._raise_if_conflict()
            return self._abort_records.pop(id(record), None) is not None

    def has_pending_requests(self) -> bool:
        """Whether any request is waiting (useful to decide on the final commit at stop)."""
        with self._lock:
            return bool(
                self._commit_batch or self._abort_batch or self._commit_records or self._abort_records
            )

    def clear(self) -> None:
        with self._lock:
            self._commit_batch = self._abort_batch = False
            self._commit_records.clear()
            self._abort_records.clear()
            self._conflict = None

    def _raise_if_conflict(self) -> None:
        if self._conflict is not None:
            raise TransactionRequestConflict(self._conflict)
