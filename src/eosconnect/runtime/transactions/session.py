"""`TransactionSession`: a task's transactional producer and the one transaction open on it.

Both transactional writers of the runtime, the exactly-once source runner (runtime/exactly_once.py)
and the KIP-656 sink writer (runtime/transactions/sink_writer.py), write through one: it owns the
producer across its renewals, opens and ends the transaction (`begin`, `commit`, `abort`; a
pipelined commit hands the transaction over with `ended(now=False)`), gives every call what is left
of the transaction's budget, runs the calls librdkafka can hang in on a thread of their own
(`bounded`), and renews the producer in place when it cannot end its transaction, on the leader's
word (`renewed_in_place`, `renewed_after_fence`). What goes into a transaction besides the records
(the offsets: runtime/transactions/offsets.py) and how a transaction is written again after an
abort (from memory for a source, by a rewind for a sink) are the writers' own.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

from eosconnect.api.errors import ConnectException
from eosconnect.api.transactions import TransactionRecord
from eosconnect.runtime.control import CurrentInstance
from eosconnect.runtime.transactions.budget import CALL_TIMEOUT_S, TransactionBudget, init_in_time
from eosconnect.runtime.transactions.errors import (
    PURGED,
    Step,
    TransactionCallHung,
    classify_transaction_error,
    fatal_cause,
    transactional_producer_config,
)
from eosconnect.storage.client_login import LoginWatch
from eosconnect.storage.hang_safe import HUNG_CALL_GRACE_S, CallHung, call_within

__all__ = ["HUNG_CALL_GRACE_S", "DeliveryFailed", "Transaction", "TransactionSession", "Undelivered"]

T = TypeVar("T")

#: How many distinct delivery failures of records without a callback of their own are kept for the
#: task's error message.
KEPT_DELIVERY_FAILURES = 3

DEFAULT_TIMEOUT_REMEDIES = (
    "tune the producer for throughput (producer.override.linger.ms, batch.size), raise "
    "producer.override.transaction.timeout.ms (up to the broker's transaction.max.timeout.ms), lower "
    "transaction.boundary.interval.ms, or use transaction.boundary=poll"
)


class Undelivered(Exception):
    """The transaction's records were not delivered within its budget: abort it and retry."""


class DeliveryFailed(Exception):
    """The producer failed while the transaction's records were still being delivered, before its
    commit was asked for (the cause says how): nothing of the transaction can be committed."""


@dataclass(eq=False)
class Transaction:
    """One open transaction: when it began (monotonic) and how many records went into it."""

    started: float = field(default_factory=time.monotonic)
    sent: int = 0


TxnT = TypeVar("TxnT", bound=Transaction)


class TransactionSession(Generic[TxnT]):
    """A task's transactional producer (`producer`, replaced by a renewal) and its one open
    transaction (`current`, a `TxnT` made by `make` at `begin`; None when none is open).

    Every transactional call goes through `call` or `bounded`, so a failure is classified
    (`classify`) and names its step. The producer is renewed only through `renew`, which the leader's
    word guards in `renewed_in_place` and `renewed_after_fence`; a producer a call hung in is
    abandoned, never touched again. Used by one task thread, except that a pipelined commit may set
    `ended_at` from its thread.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        *,
        transactional_id: str,
        task_id: str,
        make: Callable[[], TxnT],
        leader: CurrentInstance | None,
        logger: logging.Logger | logging.LoggerAdapter[Any],
        timeout_setting: str,
        timeout_remedies: str = DEFAULT_TIMEOUT_REMEDIES,
        hang_cause: str = "the broker coordinating its transaction died",
    ) -> None:
        origin: Mapping[str, str] = getattr(config, "origin", {})
        self.config, self.timeout_ms = transactional_producer_config(
            dict(config), transactional_id, origin=origin
        )
        # A refused login fails `init_transactions()` at once, naming the principal and the
        # settings it came from (storage/client_login.py), instead of timing out.
        self.login = LoginWatch(
            self.config, origin, client="transactional producer", then=self.config.get("error_cb")
        )
        self.config["error_cb"] = self.login
        # Records without a callback of their own (offsets, a participant's records) report failures
        # here: a commit only says "N message(s) failed delivery", and the reason (a topic the
        # principal may not write, say) must reach the task's error.
        self.config["on_delivery"] = self._note_delivery_failure
        self.transactional_id = transactional_id
        self.task_id = task_id
        self.leader = leader
        self.log = logger
        #: The user's name for the producer's transaction.timeout.ms, for messages.
        self.timeout_setting = timeout_setting
        self.timeout_remedies = timeout_remedies
        self.hang_cause = hang_cause
        self.budget = TransactionBudget(self.timeout_ms)
        self._make = make
        # Creating a producer sends nothing that fences: librdkafka asks for a producer id only in
        # `init_transactions()`, so it connects meanwhile.
        self.producer = Producer(self.config)
        self.current: TxnT | None = None
        #: When the last transaction ended (monotonic; 0: none yet).
        self.ended_at = 0.0
        #: Why records without a callback of their own failed, for the task's error.
        self.delivery_failures: list[str] = []
        #: Whether the producer was renewed since the writer last looked (and cleared it).
        self.renewed = False
        #: The call that never returned: its producer must not be used again (None: none hung).
        self.hung: str | None = None
        #: Producers a call hung in: kept, never destroyed under the thread still blocked in them.
        self._abandoned: list[Producer] = []
        # One long-lived thread for pipelined commits: a task's commits are strictly sequential.
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"commit-{task_id}")
        self._closed = False

    # ----------------------------------------------------------------------------- calls
    @property
    def open(self) -> bool:
        return self.current is not None

    @property
    def started(self) -> float | None:
        """When the open transaction began (None: none is open)."""
        return None if self.current is None else self.current.started

    def call(self, step: str, call: Callable[[], T]) -> T:
        """Run a transactional call; a `KafkaException` fails the task naming `step`."""
        try:
            return call()
        except KafkaException as exc:
            raise self.classify(exc, step) from exc

    def bounded(self, step: str, call: Callable[[], T], timeout_s: float = CALL_TIMEOUT_S) -> T:
        """`call()` on a thread of its own, waited for at most `HUNG_CALL_GRACE_S` longer than its own
        timeout (`timeout_s`, what librdkafka was given): librdkafka's `send_offsets_to_transaction()`
        and `commit_transaction()` can block forever, past their timeout, once the broker they wait
        for died (librdkafka issues 5456 and 5511, open in 2.16). Past that, `TransactionCallHung`,
        and the producer is not used again (`hung`). A `KafkaException` is raised as it is."""
        limit = timeout_s + HUNG_CALL_GRACE_S
        try:
            return call_within(call, limit, name=f"txn-{self.task_id}")
        except CallHung:
            self.hung = step
            raise TransactionCallHung(
                f"{self.task_id}: {step} did not return within {limit:.0f}s although librdkafka was "
                f"given {timeout_s:.0f}s: librdkafka can hang there after {self.hang_cause} (librdkafka "
                "issues 5456 and 5511). Its transaction commits with its offsets or not at all (a "
                "successor fences it); restart the task (POST /connectors/<name>/tasks/<id>/restart): it "
                "resumes from its committed offsets."
            ) from None

    def init(self, doing: str = Step.INIT) -> None:
        """`init_transactions()` within `init_timeout_s` (`init_in_time`: it fences the previous
        epoch, and waits while the coordinator still ends that epoch's transaction), in steps, so
        that a refused login fails at once, naming the principal, instead of timing out."""
        producer = self.producer
        self.call(
            doing,
            lambda: init_in_time(
                producer,
                self.login,
                transaction_timeout_ms=self.timeout_ms,
                setting=self.timeout_setting,
                transactional_id=self.transactional_id,
                doing=f"{self.task_id}: {doing}",
                logger=self.log,
            ),
        )

    # ----------------------------------------------------------------------------- one transaction
    def begin(self) -> TxnT:
        self.call(Step.BEGIN, self.producer.begin_transaction)
        self.current = self._make()
        return self.current

    def commit(self, timeout_s: float) -> TxnT:
        """Commit the open transaction here and now (not pipelined) and close it."""
        self.call(Step.COMMIT, lambda: self.producer.commit_transaction(timeout_s))
        return self.ended()

    def abort(self, timeout_s: float) -> TxnT:
        """Abort the open transaction and close it."""
        self.call(Step.ABORT, lambda: self.producer.abort_transaction(timeout_s))
        return self.ended()

    def commit_pipelined(self) -> tuple[TxnT, Future[None]]:
        """Close the open transaction and hand its commit to the session's commit thread, so that
        the task thread converts the next batch meanwhile (librdkafka allows one transaction at a
        time: the next may begin only once the future is done). The thread first waits for the
        records' delivery while an abort is still allowed, within the budget (`Undelivered` past it,
        `DeliveryFailed` if the producer failed meanwhile); the commit then gets `max(60 s,
        transaction.timeout.ms)`, not the budget's 0.85: a commit cannot be aborted, and one whose
        coordinator died completes once the coordinator moved, which a short timeout's 0.85 does not
        always leave time for."""
        txn = self.current
        assert txn is not None, "no transaction is open"
        producer, budget, began = self.producer, self.budget, txn.started
        commit_timeout_s = max(CALL_TIMEOUT_S, self.timeout_ms / 1000)
        started = threading.Event()

        def commit() -> None:
            started.set()
            try:  # flush() releases the GIL while it waits
                remaining = producer.flush(budget.deliver_within_s(began))
            except (KafkaException, SystemError) as exc:
                raise DeliveryFailed from exc
            if remaining:
                raise Undelivered(f"{remaining} of its records were still undelivered")
            producer.commit_transaction(commit_timeout_s)
            self.ended_at = time.monotonic()  # read by the task thread after joining the future

        future = self._committer.submit(commit)
        # Hand the GIL over until the commit is under way: left to the interpreter, the helper
        # thread would wait for the task thread's next forced switch (sys.getswitchinterval(), 5 ms).
        started.wait()
        return self.ended(now=False), future

    def ended(self, now: bool = True) -> TxnT:
        """Close the open transaction (committed or aborted, `now`; or handed to a pipelined commit,
        which sets `ended_at` itself once it returned) and return it."""
        txn, self.current = self.current, None
        assert txn is not None, "no transaction is open"
        if now:
            self.ended_at = time.monotonic()
        return txn

    def forget(self) -> None:
        """The open transaction ended without a word from the producer (a new producer ended it)."""
        self.current = None
        self.delivery_failures.clear()

    def write_records(self, records: Iterable[TransactionRecord]) -> None:
        """Produce a participant's records into the open transaction (see `TransactionParticipant`)."""
        for record in records:
            try:
                self.producer.produce(
                    record.topic,
                    record.value,
                    record.key,
                    record.partition,
                    headers=list(record.headers) if record.headers else None,
                )
            except KafkaException as exc:
                raise self.classify(
                    exc, f"writing the task's transaction records to {record.topic!r}"
                ) from exc

    # ----------------------------------------------------------------------------- renewals
    def renewed_in_place(self, why: str) -> bool:
        """The producer cannot end its transaction (the abort failed or ran out of time, a call hung
        in it, a commit's outcome is unknown): renew it in place if the leader confirms this
        instance is still the task's current one. The new producer's `init_transactions()` ends the
        open transaction (it completes a commit the coordinator began and aborts anything else) and
        fences the old producer's epoch, so whatever the old one still does is refused. A replaced
        instance must not (it would fence its successor): False, and the task ends (quietly, if it
        was replaced)."""
        if self.leader is None or not self.leader.confirmed_current():
            return False
        self.renew(f"{why}; the leader confirms this instance current")
        return True

    def renewed_after_fence(self, why: str) -> bool:
        """`renewed_in_place` for a producer that was fenced (or whose transaction the broker
        aborted): the fence may come from a newer instance that has not reported to the leader yet,
        so the leader's word is awaited as by a replaced instance (`superseded`, which waits for a
        "stop" for a while) before this instance is confirmed current and fences whoever fenced it.
        A zombie's KIP-360 epoch bump fences the current instance so: the coordinator aborts the
        open transaction and bumps the epoch before it checks the asker's epoch."""
        if self.leader is None or self.hung is not None or self.leader.superseded():
            return False
        return self.renewed_in_place(why)

    def renew(self, why: str) -> None:
        """A new producer with the same transactional id: its `init_transactions()` ends the open
        transaction and fences the old producer's epoch. Without the leader's word only after the
        coordinator answered the old producer itself (fatally but not as a zombie: librdkafka 2.16
        can end up so when an abort races a partition registration, INVALID_TXN_STATE, which the
        coordinator checks only after the producer's epoch; or an abort that purged records,
        `held_records`): the answer proves this instance held the current epoch a moment ago. A
        hung call proves nothing, so a hang renews only on the leader's word."""
        self.log.info("%s: a new producer (a new epoch) takes over", why)
        old, self.producer = self.producer, Producer(self.config)
        if self.hung is not None:
            self._abandoned.append(old)  # the hung call's thread may still be inside it
            self.hung = None
        else:
            with contextlib.suppress(KafkaException):
                old.flush(0)
        self.init("initialising the transactional producer again")
        self.renewed = True

    def close(self) -> None:
        """Abort what the producer still has open (best effort: a fenced producer cannot; a failed
        task may leave a transaction open, which would hold read_committed readers up until
        `transaction.timeout.ms`), unless a call hung in it: then any other call could block as well
        and destroying the client under it is unsafe, so it is left to the thread that holds it and
        the next instance of the task fences its transactional id."""
        if self._closed:
            return
        self._closed = True
        self._committer.shutdown(wait=self.hung is None)
        if self.hung is not None:
            self.log.warning("abandoning the producer: %s never returned", self.hung)
            self._abandoned.append(self.producer)
            return
        # Without a transaction in progress (or on a fenced producer) this raises at once.
        with contextlib.suppress(KafkaException):
            self.producer.abort_transaction(10)
        self.current = None
        with contextlib.suppress(KafkaException):  # a fenced producer raises its fatal error
            self.producer.flush(0)

    # ----------------------------------------------------------------------------- errors
    def classify(self, exc: KafkaException, doing: str, txn_started: float | None = None) -> Exception:
        """The task-failing error for `exc` while `doing` something; `txn_started` is when the failed
        transaction began (default: the open one, if any)."""
        started = self.started if txn_started is None else txn_started
        classified = classify_transaction_error(
            fatal_cause(self.producer, exc),
            doing,
            task_id=self.task_id,
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.timeout_ms,
            txn_started=started,
            timeout_remedies=self.timeout_remedies,
        )
        if self.delivery_failures and type(classified) is ConnectException:
            return ConnectException(f"{classified}; {'; '.join(self.delivery_failures)}")
        return classified

    def _note_delivery_failure(self, err: KafkaError | None, msg: Any) -> None:
        failures = self.delivery_failures
        if err is None or len(failures) >= KEPT_DELIVERY_FAILURES or err.code() in PURGED:
            return
        text = f"a record to {msg.topic()!r} failed: {err.name()}: {err.str()}"
        if text not in failures:
            failures.append(text)
