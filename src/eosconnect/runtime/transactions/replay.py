"""Recovery by replay from memory: how an exactly-once source task writes an aborted transaction
again (the sink's counterpart rewinds its consumer: runtime/transactions/sink_writer.py).

A `SourceTask` cannot be rewound in process (it has no seek, only the offsets it is started from),
but it already handed its records over: a transaction keeps what it sent (`SourceTransaction.replay`)
until it committed, and `ReplayRecovery` sends exactly that again, with the same source offsets,
after the transaction was aborted or ended by a new producer. Nothing is lost or doubled: the
aborted records and offsets never became visible. Each way a transaction can fail that allows it
is one method the runner's `await_commit` (runtime/exactly_once.py) tries in turn; False or None
means it does not apply and the task fails.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

from confluent_kafka import KafkaError, KafkaException

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import SourceRecord
from eosconnect.runtime.metrics import TaskMetrics
from eosconnect.runtime.source_task import Offsets, RestartFromStoredOffsets
from eosconnect.runtime.transactions.budget import abort_in_time, held_records, warn_aborted
from eosconnect.runtime.transactions.errors import (
    FENCED_CODES,
    Step,
    TaskFencedError,
    TransactionCallHung,
    failure_cause,
)
from eosconnect.runtime.transactions.session import (
    DeliveryFailed,
    Transaction,
    TransactionSession,
    Undelivered,
)
from eosconnect.storage.offsets import ConnectorOffsetView

__all__ = ["REPLAY_LIMIT", "ReplayRecovery", "ReplayingRunner", "SourceTransaction"]

log = logging.getLogger(__name__)

#: The most records a transaction keeps to send again should it have to be aborted and retried (a
#: reference to each converted record, which the producer's queue holds anyway until delivered).
#: A larger one (a long `transaction.boundary.interval.ms` at a high rate) that stalls fails the
#: task: it restarts from its committed offsets.
REPLAY_LIMIT = 200_000

#: Delivery errors of the idempotent producer's sequence bookkeeping (a broker lost or refused its
#: state): the transaction is aborted and sent again (`resent_after_abortable`).
SEQUENCE_ERRORS = frozenset({KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError.UNKNOWN_PRODUCER_ID})

#: produce() refusing a record because the open transaction already failed: abortably (`_STATE`),
#: fatally (`_FATAL`), or fenced (`resent_after_refused_send`).
REFUSED_SEND_CODES = frozenset({KafkaError._STATE, KafkaError._FATAL, *FENCED_CODES})


@dataclass(eq=False)
class SourceTransaction(Transaction):
    """One open transaction of a source task: what went into it since it began.

    `offsets` are the source offsets of its records (per source partition, the latest), committed
    in it; `records` are kept only when something needs them after the commit (`commit_record()`,
    or a participant that derives records from where they landed), and `sequence` holds what the
    participant needs, in send order."""

    offsets: dict[Any, Any] = field(default_factory=dict)
    records: list[SourceRecord] = field(default_factory=list)
    sequence: list[Any] = field(default_factory=list)
    #: What was sent, in order, to send it again should the transaction be aborted to be retried:
    #: (record, outgoing record or None when filtered) or (SourceBatch, its converted columns).
    #: None once it outgrew `REPLAY_LIMIT` (a transaction that stalls then fails the task).
    replay: list[tuple[Any, Any]] | None = field(default_factory=list)

    def keep(self, item: Any, outgoing: Any) -> None:
        """Keep a sent record or batch for a retry of this transaction (see `replay`)."""
        if self.replay is not None:
            self.replay.append((item, outgoing))
            if self.sent > REPLAY_LIMIT:
                self.replay = None


class ReplayingRunner(Protocol):
    """What `ReplayRecovery` asks of the exactly-once source runner it serves."""

    task_id: str
    metrics: TaskMetrics
    offset_view: ConnectorOffsetView | None
    #: The stored offsets as this instance knows them (read at start-up, then its commits).
    stored_offsets: Offsets
    #: Transactions aborted because they could not be committed in time, and sent again.
    retried_transactions: int

    @property
    def log(self) -> logging.LoggerAdapter[Any]: ...

    def offsets_read_timeout_s(self) -> float: ...

    def open_transaction(self) -> SourceTransaction: ...

    def send_again(self, item: Any, outgoing: Any) -> None: ...

    def forget_metadata(self) -> None: ...


class ReplayRecovery:
    """The exactly-once source runner's ways of writing a failed transaction again from memory,
    renewing the producer (on the leader's word) where an abort cannot end it. One per runner."""

    def __init__(self, runner: ReplayingRunner, session: TransactionSession[SourceTransaction]) -> None:
        self.runner = runner
        self.session = session

    def recovered_commit(self, txn: SourceTransaction, offsets: Offsets, exc: Exception) -> bool:
        """The pipelined commit of `txn` (with `offsets`) failed with `exc`: write it again where that
        is safe. True: it committed after all (a new producer settled it); False: it was sent again
        into a new open transaction, whose commit the runner asks for next. Anything else raises the
        error that fails the task."""
        if isinstance(exc, Undelivered):
            self.retry(txn, str(exc))
            return False
        if isinstance(exc, DeliveryFailed):
            failed = exc.__cause__
            assert failed is not None
            cause = failure_cause(self.session.producer, failed)
            if cause is None:
                raise failed from None
            if self.resent_after_fatal_delivery(txn, cause) or self.resent_after_abortable(
                txn, cause, commit_asked=False
            ):
                return False
            raise self.session.classify(cause, Step.COMMIT, txn.started) from failed
        # flush() may report a producer's fatal error (a zombie fenced by its successor) through
        # confluent-kafka's callback machinery, as a SystemError: its cause counts.
        cause = failure_cause(self.session.producer, exc)
        if cause is None:
            raise exc
        if self.resent_after_abortable(txn, cause, commit_asked=True):
            return False
        committed = self.settled_after_fence_at_commit(txn, offsets, cause)
        if committed is None:
            committed = self.settled_after_commit_timeout(txn, offsets, cause)
        if committed is None:
            raise self.session.classify(cause, Step.COMMIT, txn.started) from exc
        return committed

    def retry(self, old: SourceTransaction, why: str) -> None:
        """Abort `old` (already closed in the session, not committed) before the broker would, say
        so once at WARN, and send what it held again in a new open transaction
        (`SourceTransaction.replay`), with the same source offsets and records for `commit_record()`.
        An abort that fails, or hangs inside librdkafka (a bounded call, as the sink's), renews the
        producer on the leader's word, else fails the task."""
        if old.replay is None:
            raise ConnectException(
                f"{self.runner.task_id}: a transaction of {old.sent} records could not be committed in time "
                f"({why}), and it holds more records than are kept to send again ({REPLAY_LIMIT}); the "
                "task restarts from its committed offsets. Lower transaction.boundary.interval.ms, or "
                "use transaction.boundary=poll"
            )
        session = self.session
        producer = session.producer
        held = held_records(producer)

        def abort(timeout: float) -> None:
            session.bounded(Step.ABORT, lambda: producer.abort_transaction(timeout), timeout)

        try:
            abort_in_time(abort, session.budget, old.started)
        except TransactionCallHung:
            if not session.renewed_in_place("aborting hung"):
                raise
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            why = f"the abort failed ({err.str()})"
            if err.code() in FENCED_CODES:
                # `old` was not committed; fenced while the leader says current: a zombie's epoch
                # bump (`resent_after_fatal_delivery`), which a new producer fences in turn
                if not self.session.renewed_after_fence(why):
                    raise self.session.classify(exc, Step.ABORT, old.started) from exc
            elif err.fatal():
                self.session.renew(why)  # the answer proves the epoch current (`TransactionSession.renew`)
            elif not self.session.renewed_in_place(why):
                raise self.session.classify(exc, Step.ABORT, old.started) from exc
        else:
            if held:
                self.renew_after_purge(why, held)
        self._resend(old, why)

    def renew_after_purge(self, why: str, held: int) -> None:
        """The abort purged records the producer still held, one of which may be in the log already
        (`held_records`): a new producer before anything is sent again, or the records sent next
        could be taken for duplicates of the aborted ones and lost."""
        self.session.renew(f"{why}; the abort purged {held} records its producer still held")

    def resent_after_fatal_delivery(self, old: SourceTransaction, cause: KafkaException) -> bool:
        """The producer failed fatally while delivering `old`'s records, before its commit was asked
        for (so nothing of `old` was committed): e.g. librdkafka's OUT_OF_ORDER_SEQUENCE_NUMBER after
        a broker died with a produce request in flight (seen in the chaos soak's broker kills), or
        fenced although this instance is the task's current one. The latter is a zombie's doing: a
        replaced instance whose producer woke up with a transaction to abort asks the coordinator
        for an epoch bump (KIP-360) with its producer id and old epoch, and while the current
        instance's transaction is open the coordinator aborts that transaction and bumps the epoch
        before it checks the zombie's epoch (which it then refuses; the chaos soak found a frozen
        and thawed source task doing this to its successor). A fatal producer cannot abort; if the
        leader confirms this instance current, a new producer aborts the transaction (its
        `init_transactions()`, which fences the zombie again) and its records are sent again from
        memory. A replaced instance gets no confirmation: False, and the task ends
        (quietly, as superseded)."""
        err: KafkaError = cause.args[0]
        if not err.fatal() or old.replay is None:
            return False
        why = f"its producer failed while delivering its records ({err.name()}: {err.str()})"
        renewed = (
            self.session.renewed_after_fence(why)
            if err.code() in FENCED_CODES
            else self.session.renewed_in_place(why)
        )
        if not renewed:
            return False
        self._resend(old, why)
        return True

    def settled_after_fence_at_commit(
        self, old: SourceTransaction, offsets: Offsets, cause: KafkaException
    ) -> bool | None:
        """`old` was fenced at its commit although this instance may be the task's current one: a
        zombie's epoch bump (`resent_after_fatal_delivery`) that arrived after the commit was
        asked for (it happens right after producers were renewed in a broker's death). The answer
        does not say whether the transaction committed: a commit the coordinator
        completed, whose answer was lost and whose retry met the fence, looks the same. Once the
        leader confirms this instance current, `_settled_by_new_producer` tells which. None when
        this does not apply (not fenced, too large to send again, or not confirmed current): the
        task fails, quietly if it was replaced."""
        err: KafkaError = cause.args[0]
        if err.code() not in FENCED_CODES or old.replay is None:
            return None
        why = f"fenced while committing ({err.str()})"
        if not self.session.renewed_after_fence(why):
            return None
        return self._settled_by_new_producer(old, offsets, why)

    def settled_after_commit_timeout(
        self, old: SourceTransaction, offsets: Offsets, cause: KafkaException
    ) -> bool | None:
        """`old`'s commit did not return within its time (librdkafka's `_TIMED_OUT`, "retry call to
        resume"): whether it committed is unknown. A commit's EndTxn can wait in librdkafka's queue
        for a connection to a dead coordinator that never comes up, while the coordinator moved to a
        live broker. A new producer looks the coordinator up afresh; once the leader confirms this
        instance current, `_settled_by_new_producer` tells whether `old` committed. None when this
        does not apply (another error, too large to send again, or not confirmed current): the task
        fails."""
        err: KafkaError = cause.args[0]
        if err.fatal() or err.code() != KafkaError._TIMED_OUT or old.replay is None:
            return None
        why = f"its commit did not return in time ({err.str()})"
        if not self.session.renewed_in_place(why):
            return None
        return self._settled_by_new_producer(old, offsets, why)

    def _settled_by_new_producer(self, old: SourceTransaction, offsets: Offsets, why: str) -> bool:
        """After a new producer ended whatever the coordinator began of `old` (its
        `init_transactions()` completes a prepared commit and aborts an open transaction), the
        connector's offsets, read to the end of their topic (read_committed), tell which: holding
        this transaction's offsets, it committed (True); else nothing of it is visible, and its
        records are sent again from memory into a new open transaction (False)."""
        view = self.runner.offset_view  # read at start-up (`start_task`), before any commit
        assert view is not None
        view.refresh(self.runner.offsets_read_timeout_s())
        found = view.offsets(offsets)
        self.session.renewed = False  # checked here, on the offsets just read
        if all(found.get(partition) == offset for partition, offset in offsets.items()):
            self.runner.log.info(
                "the transaction whose commit was in doubt (%s) had committed: its offsets are stored", why
            )
            return True
        self.ensure_not_overtaken(old, why, refresh=False)
        self._resend(old, f"{why}; its offsets are not stored, so it did not commit")
        return False

    def resent_after_abortable(
        self, old: SourceTransaction, cause: KafkaException, *, commit_asked: bool
    ) -> bool:
        """`old` failed with an abortable error: librdkafka marks the transaction as one to abort
        (`txn_requires_abort()`), e.g. OUT_OF_ORDER_SEQUENCE_NUMBER "requires epoch bump" after a
        broker restart with produce requests in flight (after a broker restart); it was not
        committed, and the abort bumps the producer's epoch. Abort it and send its records again
        (`retry`). Before the commit was asked for, a delivery error of the idempotent producer's
        sequence bookkeeping counts too. False for anything else (the task fails)."""
        err: KafkaError = cause.args[0]
        if err.fatal() or err.code() in FENCED_CODES or old.replay is None:
            return False
        resendable = err.txn_requires_abort() or (not commit_asked and err.code() in SEQUENCE_ERRORS)
        if not resendable:
            return False
        self.retry(old, f"its {'commit' if commit_asked else 'delivery'} failed ({err.name()}: {err.str()})")
        return True

    def resent_after_refused_send(self, exc: KafkaException) -> bool:
        """produce() refused a record (`REFUSED_SEND_CODES`): the open transaction had already failed (an
        abortable error, e.g. OUT_OF_ORDER_SEQUENCE_NUMBER "requires epoch bump" after a broker
        restart, reported by librdkafka between two sends of a long connector-defined transaction),
        or as fenced (a zombie's epoch bump, see `resent_after_fatal_delivery`; `retry` renews the
        producer if the leader confirms this instance current).
        If the leader confirms this instance current, abort that transaction and send what it held
        again (`retry`); the caller then sends the refused record into the new one. False when
        that cannot be done (the task fails)."""
        old = self.session.current
        if exc.args[0].code() not in REFUSED_SEND_CODES or old is None or old.replay is None:
            return False
        leader = self.session.leader
        if leader is None or not leader.confirmed_current():
            return False
        self.session.ended(now=False)
        self.retry(old, f"its producer refused a record ({exc.args[0].str()}): the transaction had failed")
        return True

    def _resend(self, old: SourceTransaction, why: str) -> None:
        """After `old` was aborted (or ended by a new producer): say so once at WARN and send what it
        held again in a new open transaction (after a renewal only if `ensure_not_overtaken`)."""
        assert old.replay is not None
        if self.session.renewed:
            self.session.renewed = False
            self.ensure_not_overtaken(old, why)
        open_for = time.monotonic() - old.started
        self.session.ended_at = time.monotonic()
        self.runner.retried_transactions += 1
        self.runner.metrics.record_abort()
        with contextlib.suppress(KafkaException):
            self.session.producer.poll(0)  # the purged records' delivery reports
        self.runner.forget_metadata()
        self.session.delivery_failures.clear()
        then = "sending them again from memory in a new transaction"
        warn_aborted(log, self.runner.task_id, old.sent, open_for, self.session.timeout_ms, why, then)
        txn = self.runner.open_transaction()
        for item, outgoing in old.replay:
            self.runner.send_again(item, outgoing)
        txn = self.session.current or txn
        txn.offsets = old.offsets
        txn.records = old.records  # filtered records too, for commit_record()

    def ensure_not_overtaken(self, old: SourceTransaction, why: str, refresh: bool = True) -> None:
        """Before a renewed producer sends `old` again: the stored offsets of its source partitions
        must still be those this instance last committed (or read at start-up). A new producer
        fences every other instance, but the leader's word that allowed it may be old: a slot host
        frozen while one of its tasks renews its producer, the task run elsewhere meanwhile, and on
        SIGCONT the frozen renewal completes, fences the new instance and would commit its
        transaction from memory again, records the new instance had committed already. Offsets moved
        past this instance's mean another instance committed. If the leader says this one was
        replaced: `TaskFencedError` (it ends quietly). Else the other was a zombie that renewed on
        an old word and committed before this instance fenced it in turn: what this instance holds
        follows offsets other than the stored ones, so its `SourceTask` starts again from
        them (`RestartFromStoredOffsets`), and nothing is lost or sent twice."""
        view = self.runner.offset_view
        assert view is not None
        if refresh:  # else just read by the caller
            view.refresh(self.runner.offsets_read_timeout_s())
        found = view.offsets(old.offsets)
        moved = [p for p in old.offsets if found.get(p) != self.runner.stored_offsets.get(p)]
        if moved:
            detail = "; ".join(
                f"{dict(p)}: stored {found.get(p)}, this instance's {self.runner.stored_offsets.get(p)}"
                for p in moved
            )
            found_why = (
                f"{self.runner.task_id}: after a new producer ({why}), the stored offsets are not this "
                f"instance's ({detail}): another instance of this task committed meanwhile"
            )
            leader = self.session.leader
            if leader is None or leader.superseded():
                raise TaskFencedError(f"{found_why}, so this one must not send its transaction again")
            raise RestartFromStoredOffsets(
                f"{found_why}, and the leader says this one is the task's current instance: the other "
                f"was a zombie; the {old.sent} records of this instance's transaction are dropped"
            )
