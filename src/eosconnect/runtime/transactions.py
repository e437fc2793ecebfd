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
- `TransactionBoundary` strategies (KIP-618's `transaction.boundary`): when a source task's
  transaction ends (after every poll, on an interval, when the connector asks), each a small object
  the runner consults at the same five points (`boundary_for`).
"""

from __future__ import annotations

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
    "FENCED_CODES",
    "Boundary",
    "Step",
    "TaskFencedError",
    "Transaction",
    "TransactionCallHung",
    "TransactionTimedOutError",
    "TransactionalProducer",
    "boundary_for",
    "classify_transaction_error",
    "fatal_cause",
    "transactional_producer_config",
]

LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})

T = TypeVar("T")


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
    """A transaction call never returned (librdkafka issues 5456 and 5511). The producer is not
    re-initialised in place: a replaced instance doing that would fence its own successor. The task
    ends, quietly if a newer instance already replaced it (runtime/supersession.py)."""


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
    if producer is None or exc.args[0].code() != KafkaError._FATAL:
        return exc
    try:
        producer.abort_transaction(0.1)
    except KafkaException as cause:
        return cause if cause.args[0].code() != KafkaError._FATAL else exc
    return exc


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

    def init(self, timeout_s: float, login: LoginWatch, task_id: str) -> None:
        """`init_transactions()` in steps, so that a refused login (`login` is the producer's
        error callback) fails at once, naming the principal, instead of timing out."""
        doing = f"{task_id}: {Step.INIT}"
        self.call(Step.INIT, lambda: init_transactions(self.producer, timeout_s, login, doing))

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
