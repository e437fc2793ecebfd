"""Bounded transactions: the time a transaction and each of its calls may take.

A source task and a KIP-656 sink task abort a transaction that cannot be committed in time, before
the broker's `transaction.timeout.ms` would, and write it again; a new producer waits in
`init_transactions()` at most `init_timeout_s`. One mechanism for both (docs/architecture.md,
"Bounded transactions").
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from eosconnect.runtime.transactions.errors import ProducerInitTimedOut
from eosconnect.storage.client_login import LoginWatch, init_transactions

__all__ = [
    "ABORT_AFTER_SHARE",
    "CALL_TIMEOUT_S",
    "COMMIT_BY_SHARE",
    "INIT_WARN_AFTER_S",
    "MIN_CALL_TIMEOUT_S",
    "TransactionBudget",
    "abort_in_time",
    "commit_in_time",
    "held_records",
    "init_in_time",
    "init_timeout_s",
    "warn_aborted",
]

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

#: After this long a new producer's `init_transactions()` says once, at WARN, that it is still
#: waiting (it takes well under a second when the coordinator has nothing left to end).
INIT_WARN_AFTER_S = 10.0


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
    batch's offsets, and the records are never written; the commit then succeeds without them. Whole
    transactions sent again are lost so. A new producer (`init_transactions()` bumps the epoch,
    numbering starts again) after such an abort makes that impossible, so the runners renew theirs
    whenever this is nonzero. That needs no word from the leader: the abort's success proves this
    instance held the current epoch a moment ago (a successor's `init_transactions()` would have
    fenced it). Delivery reports are served first so that they do not count (an overcount only costs
    a renewal)."""
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
