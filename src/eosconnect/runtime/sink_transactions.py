"""A sink's records and its consumed positions in one Kafka transaction (KIP-656, docs/architecture.md).

A sink that writes into Kafka can deliver exactly once the way a Kafka Streams application does:
its records go through a transactional producer, and at the commit point the positions it has
consumed are sent *into the same transaction* for a consumer group on the cluster it writes to,
then the transaction commits. Either both become visible or neither does, so after any crash the
task resumes from the group's committed offsets there and writes nothing twice.

The group's metadata comes from a consumer built on that cluster with the group's id and never
subscribed: it only names the group (`consumer_group_metadata()`) and reads its committed offsets
back. The transactional id is the runtime's (`<group.id>-<connector>-<task>`): `init_transactions()`
fences a predecessor with the same id (a Spark retry), and the leader's fencing round fences the
ids of older generations. Errors are classified as the exactly-once source runtime does it.

Every transaction is bounded (docs/mirroring.md, "Bounded transactions and replaced instances"): the records'
delivery and the offsets must be in the transaction within `ABORT_AFTER_SHARE` of the producer's
`transaction.timeout.ms` after it began, and the commit must return before the broker would abort
it. A broker restart, a moving coordinator or a stalled producer that holds the transaction up
longer makes the task abort it itself, say so once at WARN, and raise `TransactionRetry` naming
the first source offset of every partition the transaction held: the task rewinds its consumer
there and writes the same records again in a new transaction. Nothing is lost (the aborted records
were never visible to read_committed readers) and nothing is doubled (the offsets of the aborted
transaction were not committed either). Before this, a flush, offsets call and commit each had 60 s
of their own, and one transaction outlived the broker's timeout through a broker restart.

The offsets and commit calls run on a helper thread and are waited for at most a little longer
than their own timeout: librdkafka's `send_offsets_to_transaction()` can block forever, past its
timeout, once the group coordinator's broker has died (librdkafka issues 5456 and 5511, open in
2.16). If the leader confirms the instance is still the task's current one, a new producer ends
the transaction and the task rewinds (`_renewed_in_place`); otherwise it fails saying so, instead
of looking RUNNING while it copies nothing.

A producer fenced although its instance is the task's current one (a replaced instance, thawed,
asked for a KIP-360 epoch bump while this one's transaction was open: the coordinator aborts the
open transaction and bumps the epoch before it checks the asker's epoch) is renewed the same way,
once the leader has had the time to say "stop" to a replaced instance (`_renewed_after_fence`).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.batch import ColumnOffsets, LandedRecords
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import OffsetAndMetadata, SourcePartition, TopicPartition, known_or_none
from eosconnect.api.transactions import TransactionParticipant
from eosconnect.runtime.sink_task import kafka_offsets
from eosconnect.runtime.transactions import (
    ABORT_AFTER_SHARE,
    CALL_TIMEOUT_S,
    FENCED_CODES,
    PURGED,
    Step,
    TaskFencedError,
    TransactionBudget,
    TransactionCallHung,
    TransactionTimedOutError,
    abort_in_time,
    classify_transaction_error,
    commit_in_time,
    failure_cause,
    fatal_cause,
    held_records,
    init_in_time,
    transactional_producer_config,
    warn_aborted,
)
from eosconnect.storage.client_login import LoginWatch
from eosconnect.storage.clients import forced
from eosconnect.storage.producing import produce_waiting
from eosconnect.storage.transient import retry_transient

__all__ = ["TransactionCallHung", "TransactionRetry", "TransactionalSinkProducer"]

log = logging.getLogger(__name__)

#: How much longer than its own timeout a transaction call is waited for before it counts as hung
#: (librdkafka keeps its timeouts to the millisecond when it keeps them at all; this covers a busy
#: interpreter).
HUNG_CALL_GRACE_S = 5.0
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


class TransactionRetry(ConnectException):
    """The task aborted its open transaction (it could not be committed in time, or a record of it
    failed): consume again from `rewind`, the first source offset of every partition it held.
    Nothing of it was committed, its records nor its offsets."""

    def __init__(self, message: str, rewind: dict[TopicPartition, int]) -> None:
        super().__init__(message)
        self.rewind = rewind


class TransactionalSinkProducer:
    """A transactional producer plus the consumer group its commits carry offsets for.

    Records are produced inside a lazily begun transaction; `commit(offsets)` adds the offsets and
    commits (it is an `OffsetCommitter`). Not thread-safe: one task thread uses it.
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
        confirmed_current: Callable[[], bool] | None = None,
        superseded: Callable[[], bool] | None = None,
    ) -> None:
        self._producer_config, self.transaction_timeout_ms = transactional_producer_config(
            dict(producer_config), transactional_id, origin=getattr(producer_config, "origin", {})
        )
        # A refused login fails `init_transactions()` at once, naming the principal and the
        # settings it came from (storage/client_login.py), instead of timing out.
        self._login = LoginWatch(
            self._producer_config,
            getattr(producer_config, "origin", {}),
            client="transactional producer",
            then=self._producer_config.get("error_cb"),
        )
        self._producer_config["error_cb"] = self._login
        #: The user's name for the producer's transaction.timeout.ms, for messages.
        self._timeout_setting = getattr(producer_config, "origin", {}).get(
            "transaction.timeout.ms", "transaction.timeout.ms"
        )
        consumer = forced(
            dict(consumer_config),
            "group.id",
            group_id,
            "offsets are committed for the connector's group",
            origin=getattr(consumer_config, "origin", {}),
        )
        consumer["enable.auto.commit"] = False
        consumer["isolation.level"] = "read_committed"
        self._consumer_config = consumer
        self.budget = TransactionBudget(self.transaction_timeout_ms)
        self.transactional_id = transactional_id
        self.group_id = group_id
        self.task_id = task_id
        self.timeout_remedies = timeout_remedies
        self.producer: Producer | None = None
        self.group_consumer: Consumer | None = None
        self._txn_started: float | None = None
        self._delivery_error: KafkaError | None = None
        self._last_committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.records_in_transaction = 0
        self._hung: str | None = None  # the call that never returned: the producer must not be used
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
        #: Asks the leader whether this instance is still the task's current one; only then may a
        #: producer that cannot end its transaction be renewed in place (None: never).
        self.confirmed_current = confirmed_current
        #: Asks the leader whether this instance was replaced, waiting a while for a newer one to
        #: report (`RestTaskControl.superseded`); a fenced instance asks before it renews (None: never).
        self.superseded = superseded
        #: The open transaction was already ended by a new producer (fenced while current): the next
        #: commit rewinds without an abort.
        self._ended_by_renewal = False
        #: Producers renewed in place while a call was blocked in them: kept, never destroyed.
        self._abandoned: list[Producer | None] = []

    # ----------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Create both clients; `init_transactions()` fences any predecessor with our id."""
        self.group_consumer = Consumer(self._consumer_config)  # never subscribed: it names the group
        self.producer = producer = Producer(self._producer_config)
        self._init_transactions(producer, Step.INIT)
        log.info("[%s] transactional producer %s ready", self.task_id, self.transactional_id)

    def close(self) -> None:
        """Abort what is open (best effort: a fenced producer cannot) and release the clients."""
        if self._hung is not None:
            # A call is still blocked inside librdkafka: any other call could block as well, and
            # destroying the client under it is unsafe. Leave it to the helper thread that holds it;
            # the next instance of the task fences its transactional id.
            log.warning("[%s] abandoning the producer: %s never returned", self.task_id, self._hung)
            self.producer = None
        if self.producer is not None:
            if self._txn_started is not None:
                with contextlib.suppress(KafkaException):
                    self.producer.abort_transaction(10)
                self._txn_started = None
                self._origins.clear()
                self._delivered.clear()
            with contextlib.suppress(KafkaException):
                self.producer.flush(0)
            self.producer = None
        if self.group_consumer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                self.group_consumer.close()
            self.group_consumer = None

    # ----------------------------------------------------------------------------- offsets
    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (only committed transactions count) for these partitions,
        with the leader epochs committed with them; partitions with none are left out."""
        assert self.group_consumer is not None
        wanted = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not wanted:
            return {}
        # read_committed makes librdkafka ask for stable offsets (KIP-447): an offset commit of a
        # transaction still completing is waited for, never read half done. A fresh cluster still
        # loading __consumer_offsets, or a moved coordinator, is waited for too.
        try:
            result = retry_transient(
                lambda: self.group_consumer.committed(wanted, timeout=10),
                timeout=CALL_TIMEOUT_S,
                doing=f"[{self.task_id}] reading committed offsets",
                logger=log,
                pause_s=0.5,
            )
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            from eosconnect.storage.acls import group_access_refusal

            # A missing Read on the group only shows as a time-out here (librdkafka retries the
            # coordinator lookup): ask once more in a way that tells.
            refusal = (
                group_access_refusal(self._consumer_config, self.group_id)
                if err.code() == KafkaError._TIMED_OUT
                else None
            )
            raise ConnectException(
                f"{self.task_id}: could not read the committed offsets of group {self.group_id!r} on the "
                f"cluster the task writes to: {refusal or f'{err.name()}: {err.str()}'}"
            ) from exc
        found = {
            TopicPartition(p.topic, p.partition): OffsetAndMetadata(
                p.offset,
                p.metadata or "",
                leader_epoch=known_or_none(p.leader_epoch),
            )
            for p in result
            if p.offset >= 0
        }
        self._last_committed.update(found)
        return found

    # ----------------------------------------------------------------------------- transactions
    def open_for_s(self) -> float:
        """How long the current transaction has been open (0 when none is)."""
        return 0.0 if self._txn_started is None else time.monotonic() - self._txn_started

    def must_commit(self, interval_s: float) -> bool:
        """Whether the task should ask for a commit now: its interval passed, or the transaction
        must be aborted (the commit does it, and rewinds)."""
        return self.open_for_s() >= interval_s or self._abort_reason is not None

    def _abort_after_s(self) -> float:
        return self.transaction_timeout_ms / 1000 * ABORT_AFTER_SHARE

    def _left_s(self, share: float) -> float:
        """Seconds left of the open transaction's budget up to `share` of its timeout."""
        return self.budget.left_s(self._txn_started, share)

    def _call_timeout_s(self, share: float) -> float:
        return self.budget.call_timeout_s(self._txn_started, share)

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
            producer = self.producer
            assert producer is not None
            self._note_delivery_error()
            if self._txn_started is None:
                self._call(Step.BEGIN, producer.begin_transaction)
                self._txn_started = time.monotonic()
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
                    raise self._surfaced(producer, exc, "serving delivery reports") from exc
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
                raise self._classified(exc, f"sending a record to {topic!r}") from exc
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
            if not self._renewed_after_fence(fenced):
                raise
            self._rewind_to_committed(f"its producer was fenced ({fenced})", offsets)

    def _commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        producer, consumer = self.producer, self.group_consumer
        assert producer is not None and consumer is not None
        offsets = dict(offsets)
        self._committing = offsets  # the partitions a renewal rewinds by (`_abort_and_rewind`)
        if self._txn_started is None:
            if all(self._last_committed.get(tp) == om for tp, om in offsets.items()):
                return
            self._call(Step.BEGIN, producer.begin_transaction)
            self._txn_started = time.monotonic()
        self._note_delivery_error()
        if self._abort_reason is not None:
            self._abort_and_rewind(self._abort_reason, renewed=self._ended_by_renewal)
        if self._left_s(ABORT_AFTER_SHARE) <= 0:
            self._abort_and_rewind("it could not be committed in time")
        if self._origins:
            self._write_participant_records(producer)
        if offsets:
            metadata = consumer.consumer_group_metadata()
            timeout = min(SEND_OFFSETS_TIMEOUT_S, self._call_timeout_s(ABORT_AFTER_SHARE))
            try:
                self._bounded_call(
                    Step.SEND_OFFSETS,
                    lambda: producer.send_offsets_to_transaction(kafka_offsets(offsets), metadata, timeout),
                    timeout,
                    raw=True,
                )
            except TransactionCallHung:
                if not self._renewed_in_place("sending its offsets hung"):
                    raise
                self._abort_and_rewind("sending its offsets hung (librdkafka 5456, 5511)", renewed=True)
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.fatal() or err.code() in REFUSED or not (err.retriable() or err.txn_requires_abort()):
                    raise self._classified(exc, Step.SEND_OFFSETS) from exc
                self._abort_and_rewind(f"sending its offsets failed: {err.str()}")
        self._commit_in_time(producer, offsets)
        if self._delivery_error is not None:  # commit_transaction normally raises first
            raise self._delivery_failure()
        self._txn_started = None
        self.records_in_transaction = 0
        self._first_offsets.clear()
        self._last_committed.update(offsets)

    def _commit_in_time(self, producer: Producer, offsets: Offsets) -> None:
        """`commit_transaction()` within the budget (`commit_in_time`); an abortable failure aborts
        and rewinds. A commit still not returned by the end of the budget cannot be aborted: if the
        leader confirms this instance current, a new producer ends it (`_resolve_commit`)."""

        def commit(timeout: float) -> None:
            self._bounded_call(Step.COMMIT, lambda: producer.commit_transaction(timeout), timeout, raw=True)

        def timed_out(err: KafkaError) -> None:
            log.info("[%s] the commit timed out (%s); trying it again", self.task_id, err.str())

        try:
            commit_in_time(commit, self.budget, self._txn_started, timed_out)
        except TransactionCallHung:
            self._resolve_commit("its commit hung (librdkafka 5456, 5511)", offsets)
            raise
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if not err.fatal() and err.txn_requires_abort():
                self._abort_and_rewind(f"its commit failed: {err.str()}")
            if not err.fatal() and err.retriable():
                self._resolve_commit(f"its commit did not return in time ({err.str()})", offsets)
            raise self._classified(exc, Step.COMMIT) from exc

    def _resolve_commit(self, why: str, offsets: Offsets) -> None:
        """The commit did not return within the budget: whether it committed is unknown. A new
        producer (`_renewed_in_place`, only for a confirmed current instance) settles it: its
        `init_transactions()` completes a commit the coordinator already began and aborts anything
        else. The group's committed offsets (read_committed: stable) then say where the task goes
        on; raises `TransactionRetry` to rewind there. Returns when the producer may not be renewed."""
        if not self._renewed_in_place(why):
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
        producer = self.producer
        assert producer is not None
        open_for = self.open_for_s()
        records = self.records_in_transaction

        def abort(timeout: float) -> None:
            self._bounded_call(Step.ABORT, lambda: producer.abort_transaction(timeout), timeout, raw=True)

        held = 0 if renewed else held_records(producer)
        try:
            if not renewed:
                abort_in_time(abort, self.budget, self._txn_started)
        except TransactionCallHung:
            if not self._renewed_in_place("aborting hung"):
                raise
            renewed = True
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal() and err.code() not in FENCED_CODES:
                self._renew_producer(err)
            elif err.fatal() or not self._renewed_in_place(f"the abort did not end in time ({err.str()})"):
                raise self._classified(exc, Step.ABORT) from exc
            renewed = True
        else:
            if held:  # the records written next could be lost as duplicates of purged ones
                log.info("[%s] the abort purged %d records it still held: a new producer", self.task_id, held)
                self._renew_producer(None)
        producer = self.producer
        producer.poll(0)  # serve the aborted records' delivery reports before the next transaction
        rewind = dict(self._first_offsets)
        if renewed:
            # A new producer fenced every other instance, on a leader's word that may be old (the
            # source side's `_ensure_not_overtaken`): one of them may have committed past this
            # transaction's first records meanwhile. The group's offsets, read now, win.
            rewind.update({tp: om.offset for tp, om in self.committed(self._committing).items()})
        self._forget_transaction()  # the abort purged any failed records with the others
        where = {str(tp): offset for tp, offset in sorted(rewind.items())}
        then = f"consuming again from {where} and writing them in a new transaction"
        warn_aborted(log, self.task_id, records, open_for, self.transaction_timeout_ms, why, then)
        raise TransactionRetry(f"{self.task_id}: transaction aborted ({why}); rewinding to {where}", rewind)

    def _forget_transaction(self) -> None:
        self._txn_started = None
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
        """Around a `produce()`: fenced while current (`_renewed_after_fence`), the open transaction
        was ended by the new producer. Its commit was not asked for, so nothing of it was committed:
        the next commit rewinds to its first records."""
        try:
            yield
        except (TaskFencedError, TransactionTimedOutError) as fenced:
            if not self._renewed_after_fence(fenced):
                raise
            self._delivery_error = None
            self._abort_reason = f"its producer was fenced ({fenced})"
            self._ended_by_renewal = True

    def _renewed_after_fence(self, fenced: Exception) -> bool:
        """`_renewed_in_place` for a producer that was fenced (or whose transaction the broker
        aborted): only once the leader, given the time a newer instance needs to report, did not
        say "stop" (`superseded`), and then confirms this instance current."""
        if self.superseded is None or self._hung is not None or self.superseded():
            return False
        return self._renewed_in_place(f"its producer was fenced ({fenced})")

    def _renewed_in_place(self, why: str) -> bool:
        """The producer cannot end its transaction in time (the abort ran out of the budget, or a
        call hung inside librdkafka): renew it in place, if the leader confirms that this instance
        is still the task's current one. A new producer's `init_transactions()` aborts the open
        transaction and fences the old producer's epoch, so whatever the old one still does is
        refused. A replaced instance must not (it would fence its successor): False, and the task
        ends as before (quietly, if it was replaced). The old producer is abandoned untouched: a
        call may still be blocked inside it."""
        if self.confirmed_current is None or not self.confirmed_current():
            return False
        log.info("[%s] %s; the leader confirms this instance current: a new producer", self.task_id, why)
        self._abandoned.append(self.producer)  # a hung call's thread may still use it
        self.producer = None
        self._hung = None
        self._renew_producer(None)
        return True

    def _renew_producer(self, err: KafkaError | None) -> None:
        """The abort failed fatally but not as a zombie (librdkafka 2.16 can end up so when the
        abort races a partition registration: the coordinator answers INVALID_TXN_STATE, which it
        only checks after our epoch): a new producer with the same transactional id aborts the
        open transaction in `init_transactions()`. A fenced producer never gets here: a successor's
        epoch is checked first, and re-initialising would fence the successor in turn. (The answer
        proves this instance held the current epoch a moment ago; a hung call proves nothing, so a
        hang never re-initialises: see `TransactionCallHung`.)"""
        if err is not None:
            log.info("[%s] the producer failed while aborting (%s); a new one aborts it", self.task_id, err)
        old, self.producer = self.producer, Producer(self._producer_config)
        if old is not None:
            with contextlib.suppress(KafkaException):
                old.flush(0)
        self._init_transactions(self.producer, "initialising the transactional producer again")

    def _init_transactions(self, producer: Producer, doing: str) -> None:
        """`init_transactions()` within `init_timeout_s` (`init_in_time`: it fences the previous
        epoch, and waits while the coordinator still ends that epoch's transaction), failing at once
        when the producer's login is refused."""
        self._call(
            doing,
            lambda: init_in_time(
                producer,
                self._login,
                transaction_timeout_ms=self.transaction_timeout_ms,
                setting=self._timeout_setting,
                transactional_id=self.transactional_id,
                doing=f"[{self.task_id}] {doing}",
                logger=log,
            ),
        )

    def _write_participant_records(self, producer: Producer) -> None:
        """Add the participant's records to the transaction, made from where its records landed
        (their target offsets are known once delivered; see `TransactionParticipant`)."""
        assert self.participant is not None
        try:
            remaining = producer.flush(max(0.0, self._left_s(ABORT_AFTER_SHARE)))
        except (KafkaException, SystemError) as exc:
            raise self._surfaced(producer, exc, "flushing the transaction's records") from exc
        self._note_delivery_error()
        if self._abort_reason is not None:
            self._abort_and_rewind(self._abort_reason)
        if remaining:
            self._abort_and_rewind(f"{remaining} of its records were still undelivered")
        landed = landed_runs(self._origins, self._delivered)
        for record in self.participant.transaction_records(landed):
            extra = {"headers": record.headers} if record.headers else {}
            try:
                producer.produce(record.topic, record.value, record.key, record.partition, **extra)
            except KafkaException as exc:
                raise self._classified(
                    exc, f"writing the task's transaction records to {record.topic!r}"
                ) from exc
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
        return self._classified(KafkaException(err), "delivering a record")

    def _call(self, doing: str, call: Any) -> Any:
        try:
            return call()
        except KafkaException as exc:
            raise self._classified(exc, doing) from exc

    def _bounded_call(
        self, doing: str, call: Callable[[], Any], timeout_s: float = CALL_TIMEOUT_S, raw: bool = False
    ) -> Any:
        """`_call` on the helper thread, failing the task if it outlives its own timeout
        (`timeout_s`, what librdkafka was given); `raw` leaves a KafkaException unclassified."""
        future: Future[Any] = Future()

        def run() -> None:
            try:
                future.set_result(call())
            except BaseException as exc:
                future.set_exception(exc)

        # A daemon thread, not an executor's: a hung call must not hold up the process's exit.
        threading.Thread(target=run, name=f"txn-{self.task_id}", daemon=True).start()
        limit = timeout_s + HUNG_CALL_GRACE_S
        try:
            if raw:
                return future.result(timeout=limit)
            return self._call(doing, lambda: future.result(timeout=limit))
        except FutureTimeoutError:
            self._hung = doing
            raise TransactionCallHung(
                f"{self.task_id}: {doing} did not return within {limit:.0f}s although librdkafka was "
                f"given {timeout_s:.0f}s: librdkafka can hang there after the broker coordinating "
                f"group {self.group_id!r} died (librdkafka issues 5456 and 5511). Its transaction commits "
                "with its offsets or not at all (a successor fences it); restart the task (POST "
                "/connectors/<name>/tasks/<id>/restart): it resumes from the group's committed offsets."
            ) from None

    def _surfaced(self, producer: Producer, exc: Exception, doing: str) -> Exception:
        """The task-failing error for a failure of `flush()`/`poll()`, which report a producer's
        fatal error (a zombie fenced by its successor) only indirectly, sometimes as a SystemError
        from confluent-kafka's callback machinery (`failure_cause`, as the source's commit does)."""
        cause = failure_cause(producer, exc)
        if cause is not None:
            return self._classified(cause, doing)
        return ConnectException(f"{self.task_id}: {doing} failed: {exc!r}")

    def _classified(self, exc: KafkaException, doing: str) -> Exception:
        return classify_transaction_error(
            fatal_cause(self.producer, exc),
            doing,
            task_id=self.task_id,
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            txn_started=self._txn_started,
            timeout_remedies=self.timeout_remedies,
        )


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
