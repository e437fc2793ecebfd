"""`TransactionalSinkWriter`: a sink's records and its consumed positions in one Kafka transaction
(KIP-656, docs/architecture.md), the `TransactionalWriter` a sink task gets from its context.

A sink that writes into Kafka can deliver exactly once the way a Kafka Streams application does:
its records go through a transactional producer, and at the commit point the positions it has
consumed are sent *into the same transaction* for a consumer group on the cluster it writes to,
then the transaction commits. Either both become visible or neither does, so after any crash the
task resumes from the group's committed offsets there and writes nothing twice.

The positions go in through `GroupOffsetsInTransaction` (runtime/transactions/offsets.py), the
records through a `TransactionSession` (runtime/transactions/session.py). The transactional id is
the runtime's (`<group.id>-<connector>-<task>`): `init_transactions()` fences a predecessor with
the same id (a Spark retry), and the leader's fencing round fences the ids of older generations.
Errors are classified as for the exactly-once source runner (runtime/transactions/errors.py).

Every transaction is bounded (docs/mirroring.md, "Bounded transactions and replaced instances"): the records'
delivery and the offsets must be in the transaction within `ABORT_AFTER_SHARE` of the producer's
`transaction.timeout.ms` after it began, and the commit must return before the broker would abort
it. A broker restart, a moving coordinator or a stalled producer that holds the transaction up
longer makes the task abort it itself, say so once at WARN, and raise `TransactionRetry` naming
the first source offset of every partition the transaction held: the task rewinds its consumer
there and writes the same records again in a new transaction. Nothing is lost (the aborted records
were never visible to read_committed readers) and nothing is doubled (the offsets of the aborted
transaction were not committed either). A flush, offsets call and commit given 60 s each would let
one transaction outlive the broker's timeout through a broker restart.

The offsets and commit calls are bounded (`TransactionSession.bounded`): librdkafka's
`send_offsets_to_transaction()` can block forever, past its timeout, once the group coordinator's
broker has died. If the leader confirms the instance is still the task's current one, a new
producer ends the transaction and the task rewinds (`TransactionSession.renewed_in_place`);
otherwise it fails saying so, instead of looking RUNNING while it copies nothing.

A producer fenced although its instance is the task's current one (a replaced instance, thawed,
asked for a KIP-360 epoch bump while this one's transaction was open: the coordinator aborts the
open transaction and bumps the epoch before it checks the asker's epoch) is renewed the same way,
once the leader has had the time to say "stop" to a replaced instance
(`TransactionSession.renewed_after_fence`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from eosconnect.api.batch import ColumnOffsets, LandedRecords
from eosconnect.api.context import WriterFactory
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import OffsetAndMetadata, SourcePartition, TopicPartition
from eosconnect.api.transactions import TransactionalWriter, TransactionParticipant, TransactionRetry
from eosconnect.runtime.control import CurrentInstance
from eosconnect.runtime.task import TaskLogAdapter
from eosconnect.runtime.transactions.budget import (
    ABORT_AFTER_SHARE,
    abort_in_time,
    commit_in_time,
    held_records,
    warn_aborted,
)
from eosconnect.runtime.transactions.errors import (
    FENCED_CODES,
    PURGED,
    Step,
    TaskFencedError,
    TransactionCallHung,
    TransactionTimedOutError,
    failure_cause,
)
from eosconnect.runtime.transactions.offsets import GroupOffsetsInTransaction
from eosconnect.runtime.transactions.session import Transaction, TransactionSession
from eosconnect.storage.producing import produce_waiting

__all__ = ["TransactionalSinkWriter", "landed_runs", "sink_writer_factory"]

log = logging.getLogger(__name__)

#: The longest `send_offsets_to_transaction()` is given: it takes milliseconds, or seconds while a
#: restarted broker loads its coordinator partitions. Past it the transaction is aborted and written
#: again; a call that does not return (librdkafka 5456, 5511) renews the producer 15 s in rather than
#: at half the transaction timeout, a mirror's whole standstill after a broker restart.
SEND_OFFSETS_TIMEOUT_S = 10.0


#: A missing ACL: writing the transaction again cannot help, the task fails naming it.
REFUSED = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.GROUP_AUTHORIZATION_FAILED,
        KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    }
)


#: Consumed positions committed with a transaction, keyed by partitions of the cluster written to.
Offsets = Mapping[TopicPartition, OffsetAndMetadata]


class TransactionalSinkWriter:
    """A `TransactionalWriter` (api/transactions.py): a `TransactionSession` plus the consumer group
    its commits carry offsets for (`GroupOffsetsInTransaction`).

    Records are produced inside a lazily begun transaction; `commit(offsets)` adds the offsets and
    commits; a transaction that cannot be committed is aborted and rewound (`TransactionRetry`).
    Not thread-safe: one task thread uses it.
    """

    def __init__(
        self,
        producer_config: Mapping[str, Any],
        consumer_config: Mapping[str, Any],
        *,
        transactional_id: str,
        group_id: str,
        task_id: str,
        timeout_remedies: str,
        participant: TransactionParticipant | None = None,
        leader: CurrentInstance | None = None,
    ) -> None:
        self.task_id = task_id
        self.log = TaskLogAdapter(log, {"id": task_id})
        self.session: TransactionSession[Transaction] = TransactionSession(
            producer_config,
            transactional_id=transactional_id,
            task_id=task_id,
            make=Transaction,
            leader=leader,
            logger=self.log,
            timeout_setting=getattr(producer_config, "origin", {}).get(
                "transaction.timeout.ms", "transaction.timeout.ms"
            ),
            timeout_remedies=timeout_remedies,
            hang_cause=f"the broker coordinating group {group_id!r} died",
        )
        self.offsets = GroupOffsetsInTransaction(self.session, consumer_config, group_id, self.log)
        self.transaction_timeout_ms = self.session.timeout_ms
        self.records_in_transaction = 0
        self._delivery_error: KafkaError | None = None
        #: Adds records made from where the transaction's records landed (the mirror's offset
        #: syncs), in the same transaction; None: nothing is added.
        self.participant = participant
        #: With a participant, per record of the open transaction given an origin: (source topic,
        #: partition, offset, target topic, target partition), in produce order.
        self._origins: list[tuple[str, int, int, str, int]] = []
        #: Per target partition, the offsets of the open transaction's delivered records, in order
        #: (librdkafka reports one partition's deliveries in produce order).
        self._delivered: dict[tuple[str, int], list[int]] = {}
        #: Per source partition, the offset of the first record of the open transaction: where the
        #: task consumes again when the transaction is aborted.
        self._first_offsets: dict[TopicPartition, int] = {}
        #: The offsets `_commit` is committing: the partitions a renewal reads the group's offsets of.
        self._committing: dict[TopicPartition, OffsetAndMetadata] = {}
        #: Why the open transaction must be aborted (a record failed), if it must.
        self._abort_reason: str | None = None
        #: Transactions aborted and written again (a metric for tests and operators).
        self.retried_transactions = 0
        #: The open transaction was already ended by a new producer (fenced while current): the next
        #: commit rewinds without an abort.
        self._ended_by_renewal = False

    # ----------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """`init_transactions()` fences any predecessor with our id."""
        self.session.init()
        self.log.info("transactional producer %s ready", self.session.transactional_id)

    def close(self) -> None:
        """Abort what is open (best effort: a fenced producer cannot) and release the clients."""
        self.session.close()
        self._origins.clear()
        self._delivered.clear()
        self.offsets.close()

    # ----------------------------------------------------------------------------- offsets
    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (only committed transactions count) for these partitions,
        with the leader epochs committed with them; partitions with none are left out."""
        return self.offsets.committed(partitions)

    # ----------------------------------------------------------------------------- transactions
    def open_for_s(self) -> float:
        """How long the current transaction has been open (0 when none is)."""
        started = self.session.started
        return 0.0 if started is None else time.monotonic() - started

    def must_commit(self, interval_s: float) -> bool:
        """Whether the task should ask for a commit now: its interval passed, or the transaction
        must be aborted (the commit does it, and rewinds)."""
        return self.open_for_s() >= interval_s or self._abort_reason is not None

    def _abort_after_s(self) -> float:
        return self.transaction_timeout_ms / 1000 * ABORT_AFTER_SHARE

    def _left_s(self, share: float) -> float:
        """Seconds left of the open transaction's budget up to `share` of its timeout."""
        return self.session.budget.left_s(self.session.started, share)

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
        """Produce into the open transaction; `origin` (source topic, partition, offset) tells the
        participant, if any, where the record came from."""
        with self._fence_ends_transaction():
            session = self.session
            self._note_delivery_error()
            if session.current is None:
                session.begin()
            producer = session.producer
            if origin is not None:
                self._first_offsets.setdefault(TopicPartition(origin[0], origin[1]), origin[2])
            if self._abort_reason is not None:
                return  # the transaction is aborted at the commit the task asks for: rewound, not lost

            def while_full() -> bool:  # the local queue is full: serve deliveries, then try again
                if self.open_for_s() > self._abort_after_s():
                    self._abort_reason = "the producer's queue stayed full (the target accepts nothing)"
                    return False
                try:
                    producer.poll(0.1)
                except SystemError as exc:
                    raise self._surfaced(exc, "serving delivery reports") from exc
                return True

            try:
                sent = produce_waiting(
                    producer,
                    topic,
                    value,
                    key,
                    partition,
                    on_delivery=self._on_delivery,
                    timestamp=timestamp or 0,
                    headers=headers or None,
                    while_full=while_full,
                )
            except KafkaException as exc:
                if exc.args[0].txn_requires_abort():
                    self._abort_reason = f"sending a record failed: {exc.args[0].str()}"
                    return
                raise session.classify(exc, f"sending a record to {topic!r}") from exc
            if not sent:
                return
            self.records_in_transaction += 1
            if origin is not None and self.participant is not None:
                self._origins.append((*origin, topic, partition))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Send `offsets` (next offset to read, keyed by partitions of this cluster) into the open
        transaction and commit it; with no records open, offsets that moved commit on their own.

        Leader epochs are committed with the offsets (TxnOffsetCommit carries them): a mirror keeps
        the *source* partition's epoch there, so that its restart can check the position against
        the source log (KIP-320)."""
        try:
            self._commit(offsets)
        except (TaskFencedError, TransactionTimedOutError) as fenced:
            if not self.session.renewed_after_fence(f"its producer was fenced ({fenced})"):
                raise
            self._rewind_to_committed(f"its producer was fenced ({fenced})", offsets)

    def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        session = self.session
        offsets = dict(offsets)
        self._committing = offsets  # the partitions a renewal rewinds by (`_abort_and_rewind`)
        if session.current is None:
            if self.offsets.unchanged(offsets):
                return
            session.begin()
        self._note_delivery_error()
        if self._abort_reason is not None:
            self._abort_and_rewind(self._abort_reason, renewed=self._ended_by_renewal)
        if self._left_s(ABORT_AFTER_SHARE) <= 0:
            self._abort_and_rewind("it could not be committed in time")
        if self._origins:
            self._write_participant_records()
        if offsets:
            timeout = min(
                SEND_OFFSETS_TIMEOUT_S, session.budget.call_timeout_s(session.started, ABORT_AFTER_SHARE)
            )
            try:
                self.offsets.send(offsets, timeout)
            except TransactionCallHung:
                if not session.renewed_in_place("sending its offsets hung"):
                    raise
                self._abort_and_rewind("sending its offsets hung (librdkafka 5456, 5511)", renewed=True)
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.fatal() or err.code() in REFUSED or not (err.retriable() or err.txn_requires_abort()):
                    raise session.classify(exc, Step.SEND_OFFSETS) from exc
                self._abort_and_rewind(f"sending its offsets failed: {err.str()}")
        self._commit_in_time(offsets)
        if self._delivery_error is not None:  # commit_transaction normally raises first
            raise self._delivery_failure()
        session.ended()
        self.records_in_transaction = 0
        self._first_offsets.clear()
        self.offsets.committed_with_transaction(offsets)

    def _commit_in_time(self, offsets: Offsets) -> None:
        """`commit_transaction()` within the budget (`commit_in_time`); an abortable failure aborts
        and rewinds. A commit still not returned by the end of the budget cannot be aborted: if the
        leader confirms this instance current, a new producer ends it (`_resolve_commit`)."""
        session = self.session
        producer = session.producer

        def commit(timeout: float) -> None:
            session.bounded(Step.COMMIT, lambda: producer.commit_transaction(timeout), timeout)

        def timed_out(err: KafkaError) -> None:
            self.log.info("the commit timed out (%s); trying it again", err.str())

        try:
            commit_in_time(commit, session.budget, session.started, timed_out)
        except TransactionCallHung:
            self._resolve_commit("its commit hung (librdkafka 5456, 5511)", offsets)
            raise
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if not err.fatal() and err.txn_requires_abort():
                self._abort_and_rewind(f"its commit failed: {err.str()}")
            if not err.fatal() and err.retriable():
                self._resolve_commit(f"its commit did not return in time ({err.str()})", offsets)
            raise session.classify(exc, Step.COMMIT) from exc

    def _resolve_commit(self, why: str, offsets: Offsets) -> None:
        """The commit did not return within the budget: whether it committed is unknown. A new
        producer (`renewed_in_place`, only for a confirmed current instance) settles it: its
        `init_transactions()` completes a commit the coordinator already began and aborts anything
        else. The group's committed offsets (read_committed: stable) then say where the task goes
        on; raises `TransactionRetry` to rewind there. Returns when the producer may not be renewed."""
        if not self.session.renewed_in_place(why):
            return
        self._rewind_to_committed(why, offsets)

    def _rewind_to_committed(self, why: str, offsets: Offsets) -> None:
        """After a new producer ended the open transaction, committed or not: raise
        `TransactionRetry` to the group's committed offsets (stable, read_committed) of `offsets`'
        partitions, else to the transaction's first records."""
        open_for, records = self.open_for_s(), self.records_in_transaction
        rewind = dict(self._first_offsets)
        self._forget_transaction()
        committed = self.committed(offsets)
        rewind.update({tp: om.offset for tp, om in committed.items()})
        where = {str(tp): offset for tp, offset in sorted(rewind.items())}
        then = f"a new producer ended it, committed or not; consuming again from the group's offsets {where}"
        warn_aborted(log, self.task_id, records, open_for, self.transaction_timeout_ms, why, then)
        raise TransactionRetry(f"{self.task_id}: a new producer ended the transaction ({why})", rewind)

    def _abort_and_rewind(self, why: str, renewed: bool = False) -> None:
        """Abort the open transaction and raise `TransactionRetry` (the task rewinds and writes its
        records again); says so once, at WARN. A failed abort fails the task (classified), unless
        the leader confirms this instance current: then a new producer ends the transaction.
        `renewed`: a new producer already ended it."""
        session = self.session
        producer = session.producer
        open_for = self.open_for_s()
        records = self.records_in_transaction

        def abort(timeout: float) -> None:
            session.bounded(Step.ABORT, lambda: producer.abort_transaction(timeout), timeout)

        held = 0 if renewed else held_records(producer)
        try:
            if not renewed:
                abort_in_time(abort, session.budget, session.started)
        except TransactionCallHung:
            if not session.renewed_in_place("aborting hung"):
                raise
            renewed = True
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal() and err.code() not in FENCED_CODES:
                # the answer proves the epoch current (`TransactionSession.renew`)
                session.renew(f"the producer failed while aborting ({err}); a new one aborts it")
            elif err.fatal() or not session.renewed_in_place(f"the abort did not end in time ({err.str()})"):
                raise session.classify(exc, Step.ABORT) from exc
            renewed = True
        else:
            if held:  # the records written next could be lost as duplicates of purged ones
                session.renew(f"the abort purged {held} records it still held")
        session.producer.poll(0)  # serve the aborted records' delivery reports before the next transaction
        rewind = dict(self._first_offsets)
        if renewed:
            # A new producer fenced every other instance, on a leader's word that may be old (the
            # source side's `ReplayRecovery.ensure_not_overtaken`): one of them may have committed past
            # this transaction's first records meanwhile. The group's offsets, read now, win.
            rewind.update({tp: om.offset for tp, om in self.committed(self._committing).items()})
        self._forget_transaction()  # the abort purged any failed records with the others
        where = {str(tp): offset for tp, offset in sorted(rewind.items())}
        then = f"consuming again from {where} and writing them in a new transaction"
        warn_aborted(log, self.task_id, records, open_for, self.transaction_timeout_ms, why, then)
        raise TransactionRetry(f"{self.task_id}: transaction aborted ({why}); rewinding to {where}", rewind)

    def _forget_transaction(self) -> None:
        self.session.forget()
        self.records_in_transaction = 0
        self._first_offsets.clear()
        self._origins.clear()
        self._delivered.clear()
        self._abort_reason = None
        self._ended_by_renewal = False
        self._delivery_error = None
        self.retried_transactions += 1

    @contextlib.contextmanager
    def _fence_ends_transaction(self) -> Iterator[None]:
        """Around a `produce()`: fenced while current (`renewed_after_fence`), the open transaction
        was ended by the new producer. Its commit was not asked for, so nothing of it was committed:
        the next commit rewinds to its first records."""
        try:
            yield
        except (TaskFencedError, TransactionTimedOutError) as fenced:
            if not self.session.renewed_after_fence(f"its producer was fenced ({fenced})"):
                raise
            self._delivery_error = None
            self._abort_reason = f"its producer was fenced ({fenced})"
            self._ended_by_renewal = True

    def _write_participant_records(self) -> None:
        """Add the participant's records to the transaction, made from where its records landed
        (their target offsets are known once delivered; see `TransactionParticipant`)."""
        assert self.participant is not None
        producer = self.session.producer
        try:
            remaining = producer.flush(max(0.0, self._left_s(ABORT_AFTER_SHARE)))
        except (KafkaException, SystemError) as exc:
            raise self._surfaced(exc, "flushing the transaction's records") from exc
        self._note_delivery_error()
        if self._abort_reason is not None:
            self._abort_and_rewind(self._abort_reason)
        if remaining:
            self._abort_and_rewind(f"{remaining} of its records were still undelivered")
        landed = landed_runs(self._origins, self._delivered)
        self.session.write_records(self.participant.transaction_records(landed))
        self._origins.clear()
        self._delivered.clear()

    # ----------------------------------------------------------------------------- errors
    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None and err.code() in PURGED:
            return  # records of a transaction this task aborted itself
        if err is not None:
            if self._delivery_error is None:
                self._delivery_error = err
        elif self._origins:
            self._delivered.setdefault((msg.topic(), msg.partition()), []).append(msg.offset())

    def _note_delivery_error(self) -> None:
        """A record that failed to be delivered dooms the transaction: a fatal error fails the task,
        any other makes the next commit abort and rewind (see `TransactionRetry`)."""
        err = self._delivery_error
        if err is None or self._abort_reason is not None:
            return
        if err.fatal() or err.code() in FENCED_CODES or err.code() in REFUSED:
            raise self._delivery_failure()
        self._abort_reason = f"a record could not be delivered: {err.str()}"

    def _delivery_failure(self) -> Exception:
        err = self._delivery_error
        assert err is not None
        return self.session.classify(KafkaException(err), "delivering a record")

    def _surfaced(self, exc: Exception, doing: str) -> Exception:
        """The task-failing error for a failure of `flush()`/`poll()`, which report a producer's
        fatal error (a zombie fenced by its successor) only indirectly, sometimes as a SystemError
        from confluent-kafka's callback machinery (`failure_cause`, as the source's commit does)."""
        cause = failure_cause(self.session.producer, exc)
        if cause is not None:
            return self.session.classify(cause, doing)
        return ConnectException(f"{self.task_id}: {doing} failed: {exc!r}")


def sink_writer_factory(
    transactional_id: str, group_id: str, leader: CurrentInstance | None
) -> WriterFactory:
    """What the sink runtime sets as `SinkTaskContext.writer_factory` for a KIP-656 task: a started
    `TransactionalSinkWriter` with the runtime's transactional id, for the connector's group,
    renewing its producer only on the word of the task's leader (`TaskControl.leader`)."""

    def make(
        producer_config: Mapping[str, Any],
        consumer_config: Mapping[str, Any],
        *,
        timeout_remedies: str,
        participant: TransactionParticipant | None,
    ) -> TransactionalWriter:
        writer = TransactionalSinkWriter(
            producer_config,
            consumer_config,
            transactional_id=transactional_id,
            group_id=group_id,
            task_id=transactional_id,
            timeout_remedies=timeout_remedies,
            participant=participant,
            leader=leader,
        )
        writer.start()
        return writer

    return make


def landed_runs(
    origins: list[tuple[str, int, int, str, int]], delivered: Mapping[tuple[str, int], list[int]]
) -> list[LandedRecords]:
    """The transaction's records as `LandedRecords`, one per run from one source partition to one
    target partition, in produce order: `origins` holds (source topic, partition, offset, target
    topic, target partition) per record, `delivered` the target offsets per target partition in
    delivery order (which is produce order within a partition)."""
    taken: dict[tuple[str, int], int] = {}
    runs: list[tuple[tuple[str, int, str, int], list[int], list[int]]] = []
    for topic, partition, offset, target_topic, target_partition in origins:
        target = (target_topic, target_partition)
        n = taken.get(target, 0)
        taken[target] = n + 1
        key = (topic, partition, target_topic, target_partition)
        if not runs or runs[-1][0] != key:
            runs.append((key, [], []))
        runs[-1][1].append(offset)
        runs[-1][2].append(delivered[target][n])
    return [
        LandedRecords(
            SourcePartition.of({"topic": topic, "partition": partition}),
            ColumnOffsets({"offset": sources}),
            target_topic,
            target_partition,
            targets,
        )
        for (topic, partition, target_topic, target_partition), sources, targets in runs
    ]
