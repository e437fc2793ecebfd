"""Kafka transactions as every transactional writer of the runtime uses them.

- The primitives shared by the exactly-once source runner (runtime/exactly_once.py), the KIP-656
  sink transactions (runtime/sink_transactions.py) and the Spark sink (spark/sink.py): the forced
  producer settings, and the classification of a producer's failure into the error that fails the
  task (a zombie, a transaction that outlived its timeout, anything else), named by the `Step`
  that failed.
- `Transaction`: one open transaction of a source task, owning what went into it (its records'
  count, source offsets, records kept for callbacks) from `begin()` until it commits or aborts.
- `TransactionalProducer`: a task's producer and its one open transaction; every transactional
  call goes through it, so the step that failed names itself and the end of a transaction is
  recorded in one place.
- Bounded transactions (`TransactionBudget`, `commit_in_time`, `abort_in_time`, `warn_aborted`): the
  one mechanism by which a source task and a KIP-656 sink task abort a transaction that cannot be
  committed in time, before the broker's `transaction.timeout.ms` would, and write it again.
- `TransactionBoundary` strategies (KIP-618's `transaction.boundary`): when a source task's
  transaction ends (after every poll, on an interval, when the connector asks), each a small object
  the runner consults at the same five points (`boundary_for`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import SourceRecord
from eosconnect.api.transactions import RequestedTransactionContext
from eosconnect.runtime.config import TransactionBoundary
from eosconnect.storage.client_login import LoginWatch, init_transactions
from eosconnect.storage.clients import C, forced

__all__ = [
    "ABORT_AFTER_SHARE",
    "COMMIT_BY_SHARE",
    "FENCED_CODES",
    "INIT_WARN_AFTER_S",
    "PURGED",
    "Boundary",
    "ProducerInitTimedOut",
    "Step",
    "TaskFencedError",
    "Transaction",
    "TransactionBudget",
    "TransactionCallHung",
    "TransactionTimedOutError",
    "TransactionalProducer",
    "abort_in_time",
    "boundary_for",
    "classify_transaction_error",
    "commit_in_time",
    "failure_cause",
    "fatal_cause",
    "held_records",
    "init_in_time",
    "init_timeout_s",
    "transactional_producer_config",
    "warn_aborted",
]

LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
#: Delivery errors of records an abort purged: expected, never a reason to abort again.
PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})

T = TypeVar("T")

#: How long init/commit/abort and the offsets call may take at most, whatever the budget.
CALL_TIMEOUT_S = 60.0
#: The share of `transaction.timeout.ms` after a transaction began by which its records must be
#: delivered (and a sink's offsets added); past it the task aborts the transaction and writes it
#: again.
ABORT_AFTER_SHARE = 0.5
#: The share of `transaction.timeout.ms` by which its commit must have returned (the broker aborts
#: the transaction at 1.0; the rest is the margin for the abort's own round trip).
COMMIT_BY_SHARE = 0.85
#: The shortest timeout a transaction call is given, however little of the budget is left.
MIN_CALL_TIMEOUT_S = 1.0


class Step(StrEnum):
    """A transactional call, as error messages name it ("... while <step>")."""

    INIT = "initialising the transactional producer"
    BEGIN = "beginning a transaction"
    SEND_OFFSETS = "sending offsets to the transaction"
    COMMIT = "committing the transaction"
    ABORT = "aborting the transaction"


class TaskFencedError(ConnectException):
    """A newer instance of this task took over its transactional id: this one is a zombie."""


class TransactionTimedOutError(ConnectException):
    """The transaction outlived `transaction.timeout.ms`; the message lists the remedies."""


class TransactionCallHung(ConnectException):
    """A transaction call never returned (librdkafka issues 5456 and 5511). The producer is
    re-initialised in place only when the leader confirms the instance current (a replaced instance
    doing that would fence its own successor); otherwise the task ends, quietly if a newer instance
    already replaced it (runtime/supersession.py)."""


def transactional_producer_config(
    config: C, transactional_id: str, origin: Mapping[str, str] | None = None
) -> tuple[C, int]:
    """The runtime's settings forced onto a task's transactional producer (a user value is ignored
    with a warning, as KIP-618 asks), and its transaction timeout in ms for classifying failures.

    Shared by every task that writes inside transactions, so both use `<group.id>-<connector>-<task>`
    the same way and the fencing round finds their ids."""
    why = "exactly-once tasks use <group.id>-<connector>-<task>"
    config = forced(config, "transactional.id", transactional_id, why, origin=origin)
    config = forced(config, "enable.idempotence", True, "transactions need idempotence", origin=origin)
    return config, int(config.get("transaction.timeout.ms", LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS))


def classify_transaction_error(
    exc: KafkaException,
    doing: str,
    *,
    task_id: str,
    transactional_id: str,
    transaction_timeout_ms: int,
    txn_started: float | None,
    timeout_remedies: str = (
        "tune the producer for throughput (producer.override.linger.ms, batch.size), raise "
        "producer.override.transaction.timeout.ms (up to the broker's transaction.max.timeout.ms), lower "
        "transaction.boundary.interval.ms, or use transaction.boundary=poll"
    ),
) -> Exception:
    """The task-failing error for a transactional producer's `exc` while `doing` something.

    Shared by every task that writes inside transactions (exactly-once sources, the KIP-656 mirror
    sink), so that a zombie and a timed-out transaction read the same everywhere. `txn_started` is
    the monotonic time the failed transaction began (None: no transaction was open); the caller
    names its own settings in `timeout_remedies`.
    """
    err: KafkaError = exc.args[0]
    open_for_ms = (time.monotonic() - txn_started) * 1000 if txn_started is not None else 0
    if txn_started is not None and open_for_ms >= transaction_timeout_ms:
        return TransactionTimedOutError(
            f"{task_id}: the transaction was open for {open_for_ms / 1000:.1f}s, longer than the "
            f"producer's transaction.timeout.ms ({transaction_timeout_ms} ms), and the broker "
            f"aborted it ({err.str()}). Remedies: {timeout_remedies}."
        )
    if err.code() in FENCED_CODES:
        return TaskFencedError(
            f"{task_id}: fenced while {doing}: another instance of this task (transactional.id "
            f"{transactional_id}) has started, so this one is a zombie and stops "
            f"without committing ({err.str()})"
        )
    return ConnectException(f"{task_id}: Kafka error while {doing}: {err.name()}: {err.str()}")


def fatal_cause(producer: Any, exc: KafkaException) -> KafkaException:
    """`produce()` on a producer that already hit a fatal error (e.g. fenced, learnt from a
    produce response) only says _FATAL; any transactional call then raises the cause itself, so
    a fenced zombie is told apart from a real failure (shared by sources and the mirror sink)."""
    if exc.args[0].code() != KafkaError._FATAL:
        return exc
    return _producer_fatal_error(producer) or exc


def failure_cause(producer: Any, exc: BaseException) -> KafkaException | None:
    """The Kafka error behind a failed `flush()`, `poll()` or pipelined commit of a transactional
    producer, to classify it (`classify_transaction_error`); None when there is none to be found.

    Those calls report a producer's fatal error (a zombie fenced by its successor) only indirectly:
    as `_FATAL`, or as a SystemError from confluent-kafka's callback machinery whose cause is the
    KafkaException, or not at all. The one way, for sources and the mirror sink alike: a linked
    KafkaException is taken (its fatal cause, `fatal_cause`); without one, a transactional call on
    the producer raises its fatal error, if it has one."""
    if isinstance(exc, KafkaException):
        return fatal_cause(producer, exc)
    linked = exc.__cause__ or exc.__context__
    if isinstance(linked, KafkaException):
        return fatal_cause(producer, linked)
    return _producer_fatal_error(producer)


def _producer_fatal_error(producer: Any) -> KafkaException | None:
    """The fatal error a producer is in, learnt from a transactional call that raises it at once
    (a healthy producer's 0.1 s abort on a failure path is no loss: the task fails either way)."""
    if producer is None:
        return None
    try:
        producer.abort_transaction(0.1)
    except KafkaException as cause:
        err: KafkaError = cause.args[0]
        if err.fatal() and err.code() != KafkaError._FATAL:
            return cause
    return None


# --------------------------------------------------------------------------------- a new producer
#: After this long a new producer's `init_transactions()` says once, at WARN, that it is still
#: waiting (it takes well under a second when the coordinator has nothing left to end).
INIT_WARN_AFTER_S = 10.0


class ProducerInitTimedOut(ConnectException):
    """A new transactional producer was not let in within `init_timeout_s`: the task fails, naming
    the setting the bound derives from."""


def init_timeout_s(transaction_timeout_ms: int) -> float:
    """How long a task's new transactional producer may wait in `init_transactions()` (at start-up,
    on a Spark retry, and when renewed in place): `CALL_TIMEOUT_S` plus one `transaction.timeout.ms`.

    The coordinator lets a new epoch of a transactional id in only once the previous epoch's
    transaction has ended: while it writes that transaction's abort markers it answers
    CONCURRENT_TRANSACTIONS, which librdkafka retries inside the call (every 500 ms). A renewal
    comes exactly when the old transaction could not be ended in time, so that wait is part of the
    renewal; it is bounded by the transaction's own timeout, at least the former 60 s, so that a
    coordinator that never ends it still fails the task."""
    return CALL_TIMEOUT_S + transaction_timeout_ms / 1000


def init_in_time(
    producer: Any,
    login: LoginWatch,
    *,
    transaction_timeout_ms: int,
    setting: str,
    transactional_id: str,
    doing: str,
    logger: logging.Logger | logging.LoggerAdapter[Any],
    clock: Callable[[], float] = time.monotonic,
    init: Callable[[Any, float, LoginWatch, str], None] = init_transactions,
) -> None:
    """`init_transactions()` of a task's new producer within `init_timeout_s`: one WARN if it takes
    longer than `INIT_WARN_AFTER_S`, one INFO when it then succeeds, and `ProducerInitTimedOut`
    naming `setting` (the user's name for the producer's `transaction.timeout.ms`) if it never
    does. A refused login or any other non-retriable error is raised at once, as it is."""
    limit = init_timeout_s(transaction_timeout_ms)
    began = clock()
    warned = False
    while True:
        left = limit - (clock() - began)
        step = left if warned else min(INIT_WARN_AFTER_S, left)
        try:
            init(producer, max(MIN_CALL_TIMEOUT_S, step), login, doing)
            break
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal() or not (err.code() == KafkaError._TIMED_OUT or err.retriable()):
                raise
            waited = clock() - began
            if waited >= limit:
                raise ProducerInitTimedOut(
                    f"{doing}: the transaction coordinator did not let a new producer of transactional.id "
                    f"{transactional_id} in within {waited:.0f}s ({CALL_TIMEOUT_S:.0f}s plus {setting}="
                    f"{transaction_timeout_ms} ms); last answer {err.name()}: {err.str()}. It lets a new "
                    "producer in only once the previous producer's transaction has ended, its abort "
                    "markers written to every partition it touched (librdkafka logs CONCURRENT_TRANSACTIONS "
                    "meanwhile): check the brokers leading those partitions. The task restarts from its "
                    f"committed offsets; a longer {setting} also waits longer here."
                ) from exc
            if not warned:
                warned = True
                logger.warning(
                    "%s: not let in after %.0fs (%s); the transaction coordinator is probably still "
                    "ending the previous producer's transaction of transactional.id %s (it answers "
                    "CONCURRENT_TRANSACTIONS meanwhile); waiting up to %.0fs (%.0fs plus %s=%d ms)",
                    doing,
                    waited,
                    err.str(),
                    transactional_id,
                    limit,
                    CALL_TIMEOUT_S,
                    setting,
                    transaction_timeout_ms,
                )
    if warned:
        logger.info("%s: let in after %.1fs", doing, clock() - began)


# --------------------------------------------------------------------------------- bounded transactions
@dataclass(frozen=True)
class TransactionBudget:
    """The time a transaction may take, counted from when it began, as shares of the producer's
    `transaction.timeout.ms` (docs/architecture.md, "Bounded transactions"): its records delivered
    by `ABORT_AFTER_SHARE`, its commit returned by `COMMIT_BY_SHARE`, its abort before 1.0.

    Every call is given what is left of its share and no more: a call retried after a timeout gets
    the rest, never a fresh full timeout (which is how one transaction outlived the broker's)."""

    timeout_ms: int

    def left_s(self, started: float | None, share: float) -> float:
        """Seconds left up to `share` of the timeout for a transaction begun at `started`
        (monotonic; None: none is open, the whole share is left)."""
        open_for = 0.0 if started is None else time.monotonic() - started
        return self.timeout_ms / 1000 * share - open_for

    def deliver_within_s(self, started: float | None) -> float:
        """How long a transaction's records may still take to be delivered before its commit: half
        of what is left before the broker's timeout (`ABORT_AFTER_SHARE` of it for a transaction
        that just began), the other half kept for the commit, or for an abort and a retry. Counted
        from what is left, not from the start, so that a transaction a boundary held open for long
        (an interval) is not aborted for records sent a moment ago."""
        return max(0.0, self.left_s(started, 1.0) * ABORT_AFTER_SHARE)

    def call_timeout_s(self, started: float | None, share: float) -> float:
        """The timeout for a call that must end by `share`: what is left, within [1 s, 60 s]."""
        return min(CALL_TIMEOUT_S, max(MIN_CALL_TIMEOUT_S, self.left_s(started, share)))


def commit_in_time(
    commit: Callable[[float], Any],
    budget: TransactionBudget,
    started: float | None,
    on_timeout: Callable[[KafkaError], None] | None = None,
) -> None:
    """`commit(timeout_s)` (a `commit_transaction()`), tried again while it times out and the budget
    up to `COMMIT_BY_SHARE` lasts: librdkafka allows no abort once the commit began, and a commit
    that timed out resumes where it was when called again. Anything else is raised as it is: an
    abortable error (`txn_requires_abort()`) for the caller to abort and retry the transaction, the
    rest to be classified."""
    while True:
        try:
            commit(budget.call_timeout_s(started, COMMIT_BY_SHARE))
            return
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal() or err.txn_requires_abort() or not err.retriable():
                raise
            if budget.left_s(started, COMMIT_BY_SHARE) <= 0:
                raise
            if on_timeout is not None:
                on_timeout(err)


def abort_in_time(abort: Callable[[float], Any], budget: TransactionBudget, started: float | None) -> None:
    """`abort(timeout_s)` (an `abort_transaction()`) within what is left before the broker would
    abort the transaction itself, tried again while it times out; a fatal or non-retriable error,
    or a timeout past the budget, is raised as it is (the caller classifies it, or renews its
    producer)."""
    while True:
        timeout = max(MIN_CALL_TIMEOUT_S, min(CALL_TIMEOUT_S, budget.left_s(started, 1.0) - 1))
        try:
            abort(timeout)
            return
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            if err.fatal() or not err.retriable() or budget.left_s(started, 1.0) <= 0:
                raise


def held_records(producer: Producer) -> int:
    """How many records `producer` still holds (queued, in flight, or with a delivery report not yet
    served), asked right before an abort; nonzero means the abort will purge records.

    Why it matters: librdkafka's `abort_transaction()` purges the records still queued and moves the
    partition's sequence numbering back over them, so that the next records take their numbers. A
    queued record may be one that was sent once already, appended by its leader, and queued again
    because the answer never came (the leader froze or moved: "possibly persisted"). Then the
    aborted batch is in the log, and the next transaction's first batch to that partition carries
    the same producer epoch and sequence numbers: when its size matches (a transaction sent again
    from memory, say) the broker takes it for a duplicate of the aborted batch, answers with that
    batch's offsets, and the records are never written; the commit then succeeds without them.
    The chaos soak lost whole resent transactions so; tests/integration/test_abort_sequence_reuse.py
    reproduces it. A new producer (`init_transactions()` bumps the epoch, numbering starts again)
    after such an abort makes that impossible, so the runners renew theirs whenever this is
    nonzero. That needs no word from the leader: the abort's success proves this instance held the
    current epoch a moment ago (a successor's `init_transactions()` would have fenced it). Delivery
    reports are served first so that they do not count (an overcount only costs a renewal)."""
    with contextlib.suppress(KafkaException):  # a fatal error surfaces at the abort that follows
        producer.poll(0)
    return len(producer)


def warn_aborted(
    logger: logging.Logger | logging.LoggerAdapter[Any],
    task_id: str,
    records: int,
    open_for_s: float,
    timeout_ms: int,
    why: str,
    then: str,
) -> None:
    """The one WARN line of a transaction the task aborted itself to write it again (the same for
    sources and sinks, so that operators and the chaos soak find it by one text)."""
    logger.warning(
        "[%s] aborted its transaction of %d records after %.1fs (transaction.timeout.ms=%d): %s; %s",
        task_id,
        records,
        open_for_s,
        timeout_ms,
        why,
        then,
    )


# --------------------------------------------------------------------------------- one transaction
@dataclass(eq=False)
class Transaction:
    """One open transaction of a source task: what went into it since it began.

    `offsets` are the source offsets of its records (per source partition, the latest), committed
    in it; `records` are kept only when something needs them after the commit (`commit_record()`,
    or a participant that derives records from where they landed), and `sequence` holds what the
    participant needs, in send order."""

    started: float = field(default_factory=time.monotonic)
    sent: int = 0
    offsets: dict[Any, Any] = field(default_factory=dict)
    records: list[SourceRecord] = field(default_factory=list)
    sequence: list[Any] = field(default_factory=list)
    #: What was sent, in order, to send it again should the transaction be aborted to be retried:
    #: (record, outgoing record or None when filtered) or (SourceBatch, its converted columns).
    #: None once it outgrew the runner's limit (a transaction that stalls then fails the task).
    replay: list[tuple[Any, Any]] | None = field(default_factory=list)


#: Turns a producer failure during a step into the error that fails the task; the float is when the
#: failed transaction began (None: the open one, if any).
Classifier = Callable[[KafkaException, str, float | None], Exception]


class TransactionalProducer:
    """A task's transactional producer and its one open `Transaction` (`current`, None when none is).

    Every transactional call goes through `call(step, ...)`, so a failure names its step; `begin()`
    opens the transaction object, `ended()` closes it (and notes when, for the pause before the
    next one). Not thread-safe, except that a pipelined commit may set `ended_at` from its thread.
    """

    def __init__(self, producer: Producer, classify: Classifier) -> None:
        self.producer = producer
        self.classify = classify
        self.current: Transaction | None = None
        #: When the last transaction ended (monotonic; 0: none yet).
        self.ended_at = 0.0

    @property
    def open(self) -> bool:
        return self.current is not None

    def call(self, step: Step, call: Callable[[], T]) -> T:
        """Run a transactional call; a `KafkaException` fails the task naming `step`."""
        try:
            return call()
        except KafkaException as exc:
            raise self.classify(exc, step, None) from exc

    def init(
        self,
        login: LoginWatch,
        task_id: str,
        *,
        transaction_timeout_ms: int,
        setting: str,
        transactional_id: str,
        logger: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        """`init_transactions()` within `init_timeout_s` (`init_in_time`), in steps, so that a
        refused login (`login` is the producer's error callback) fails at once, naming the
        principal, instead of timing out."""
        doing = f"{task_id}: {Step.INIT}"
        self.call(
            Step.INIT,
            lambda: init_in_time(
                self.producer,
                login,
                transaction_timeout_ms=transaction_timeout_ms,
                setting=setting,
                transactional_id=transactional_id,
                doing=doing,
                logger=logger,
            ),
        )

    def begin(self) -> Transaction:
        self.call(Step.BEGIN, self.producer.begin_transaction)
        self.current = Transaction()
        return self.current

    def commit(self, timeout_s: float) -> Transaction:
        """Commit the open transaction here and now (not pipelined) and close it."""
        self.call(Step.COMMIT, lambda: self.producer.commit_transaction(timeout_s))
        return self.ended()

    def abort(self, timeout_s: float) -> Transaction:
        """Abort the open transaction and close it."""
        self.call(Step.ABORT, lambda: self.producer.abort_transaction(timeout_s))
        return self.ended()

    def ended(self, now: bool = True) -> Transaction:
        """Close the open transaction (committed or aborted, `now`; or handed to a pipelined commit,
        which sets `ended_at` itself once it returned) and return it."""
        txn, self.current = self.current, None
        assert txn is not None, "no transaction is open"
        if now:
            self.ended_at = time.monotonic()
        return txn


# --------------------------------------------------------------------------------- boundaries
class TransactionEnds(Protocol):
    """What a boundary strategy asks of the source runner it serves."""

    @property
    def transaction_open(self) -> bool: ...

    @property
    def last_commit(self) -> float: ...

    def end_transaction(self, abort: bool) -> None: ...

    def await_commit(self) -> None: ...

    def serve_deliveries(self) -> None: ...

    def commit_offsets_heartbeat(self) -> None: ...

    def abort_on_stop(self) -> None: ...


class Boundary:
    """When a source task's transaction ends (KIP-618's `transaction.boundary`), asked at five
    points of the runner's loop. This base never ends one on its own but on pause and stop."""

    #: Whether the strategy looks at every record (then batches go record by record).
    per_record = False
    context: RequestedTransactionContext | None = None

    def __init__(self, runner: TransactionEnds) -> None:
        self.runner = runner

    def after_record(self, record: SourceRecord) -> None:
        """A record of the polled batch was sent."""

    def after_batch(self) -> None:
        """The polled batch went to the producer; its delivery reports are served here."""
        self.runner.serve_deliveries()

    def on_idle(self) -> None:
        """`poll()` returned nothing."""

    def on_pause(self) -> None:
        """The task was paused: commit what is open."""
        if self.runner.transaction_open:
            self.runner.end_transaction(abort=False)
            self.runner.await_commit()

    def on_stop(self) -> None:
        """The task stops: commit what is open (the runner then waits for the commit)."""
        if self.runner.transaction_open:
            self.runner.end_transaction(abort=False)


class PollBoundary(Boundary):
    """`transaction.boundary=poll`: one transaction per batch `poll()` returned."""

    def after_batch(self) -> None:
        self.runner.end_transaction(abort=False)  # the commit serves the batch's delivery reports


class IntervalBoundary(Boundary):
    """`transaction.boundary=interval`: commit every `interval_s`, also with no records (KIP-910)."""

    def __init__(self, runner: TransactionEnds, interval_s: float) -> None:
        super().__init__(runner)
        self.interval_s = interval_s

    def after_batch(self) -> None:
        super().after_batch()
        self._commit_if_due()

    def on_idle(self) -> None:
        self._commit_if_due()

    def _commit_if_due(self) -> None:
        runner = self.runner
        if time.monotonic() - runner.last_commit < self.interval_s:
            return
        if runner.transaction_open:
            runner.end_transaction(abort=False)
        else:
            runner.commit_offsets_heartbeat()


class ConnectorBoundary(Boundary):
    """`transaction.boundary=connector`: the task asks through its `TransactionContext`."""

    per_record = True
    context: RequestedTransactionContext

    def __init__(self, runner: TransactionEnds) -> None:
        super().__init__(runner)
        self.context = RequestedTransactionContext()

    def after_record(self, record: SourceRecord) -> None:
        if self.context.should_abort_on(record):
            self.runner.end_transaction(abort=True)
        elif self.context.should_commit_on(record):
            self.runner.end_transaction(abort=False)

    def after_batch(self) -> None:
        super().after_batch()
        self._batch_request()

    def on_idle(self) -> None:
        self.context.check()

    def on_pause(self) -> None:
        """Only the connector ends its transactions, paused or not."""

    def on_stop(self) -> None:
        if not self._batch_request() and self.runner.transaction_open:
            self.runner.abort_on_stop()  # the connector did not commit it

    def _batch_request(self) -> bool:
        """End the transaction as the connector asked for the batch; False if it asked nothing."""
        if self.context.should_abort_batch():
            self.runner.end_transaction(abort=True)
        elif self.context.should_commit_batch():
            self.runner.end_transaction(abort=False)
        else:
            return False
        return True


def boundary_for(kind: TransactionBoundary, runner: TransactionEnds, interval_s: float) -> Boundary:
    if kind is TransactionBoundary.POLL:
        return PollBoundary(runner)
    if kind is TransactionBoundary.INTERVAL:
        return IntervalBoundary(runner, interval_s)
    return ConnectorBoundary(runner)
