"""The bounded-transaction budget shared by source and sink tasks (runtime/transactions/budget.py):
every retried call gets what is left of the transaction's budget, never a fresh full timeout; and a
new producer's `init_transactions()` waits for the coordinator within its own bound
(`init_in_time`)."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from eosconnect.runtime.transactions import (
    INIT_WARN_AFTER_S,
    ProducerInitTimedOut,
    TransactionBudget,
    abort_in_time,
    commit_in_time,
    init_in_time,
    init_timeout_s,
)


def timed_out() -> KafkaException:
    return KafkaException(KafkaError(KafkaError._TIMED_OUT, "timed out", retriable=True))


def test_budget_counts_from_the_transaction_start():
    budget = TransactionBudget(20_000)
    started = time.monotonic() - 4
    assert budget.left_s(started, 0.5) == pytest.approx(6, abs=0.1)
    assert budget.left_s(None, 0.5) == 10
    # Records may take half of what is left before the broker's timeout.
    assert budget.deliver_within_s(started) == pytest.approx(8, abs=0.1)
    assert budget.deliver_within_s(time.monotonic() - 25) == 0
    # A call's timeout is what is left, at least 1 s and at most 60 s.
    assert budget.call_timeout_s(time.monotonic() - 30, 0.85) == 1.0
    assert TransactionBudget(600_000).call_timeout_s(None, 0.85) == 60.0


def test_a_commit_that_times_out_is_tried_again_with_what_is_left_then_raised():
    budget = TransactionBudget(2_000)
    started = time.monotonic()
    timeouts: list[float] = []

    def commit(timeout: float) -> None:
        timeouts.append(timeout)
        time.sleep(0.3)
        raise timed_out()

    with pytest.raises(KafkaException):
        commit_in_time(commit, budget, started)
    assert time.monotonic() - started < 2.0  # within 0.85 of the timeout, plus the last call's 0.3 s
    assert timeouts[0] == pytest.approx(1.7, abs=0.05) and len(timeouts) >= 3


def test_an_abortable_or_fatal_commit_error_is_raised_at_once():
    for err in (
        KafkaError(KafkaError._OUTDATED, "abortable", retriable=True, txn_requires_abort=True),
        KafkaError(KafkaError._FENCED, "fenced", fatal=True),
    ):
        calls = 0

        def commit(timeout: float, err: KafkaError = err) -> None:
            nonlocal calls
            calls += 1
            raise KafkaException(err)

        with pytest.raises(KafkaException):
            commit_in_time(commit, TransactionBudget(60_000), time.monotonic())
        assert calls == 1


def test_an_abort_is_tried_again_until_the_broker_would_abort_itself():
    budget = TransactionBudget(1_500)
    started = time.monotonic()
    calls: list[float] = []

    def abort(timeout: float) -> None:
        calls.append(timeout)
        if len(calls) < 3:
            time.sleep(0.1)
            raise timed_out()

    abort_in_time(abort, budget, started)
    assert len(calls) == 3 and calls[0] == 1.0  # at least 1 s, however little is left


class FakeClock:
    """Monotonic time that moves only when a fake `init_transactions()` step takes its timeout."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def scripted_init(clock: FakeClock, admitted_after_s: float | None, steps: list[float]):
    """A stand-in for `storage.client_login.init_transactions`: it times out (taking its whole
    timeout) until the coordinator admits the producer at `admitted_after_s` (None: never)."""

    def init(_producer: object, timeout_s: float, _login: object, _doing: str) -> None:
        steps.append(timeout_s)
        if admitted_after_s is not None and clock.now + timeout_s >= admitted_after_s:
            clock.now = max(clock.now, admitted_after_s)
            return
        clock.now += timeout_s
        raise timed_out()

    return init


def init_with(clock: FakeClock, init, timeout_ms: int = 30_000) -> None:
    init_in_time(
        None,
        None,  # type: ignore[arg-type]  # the login watch is the fake init's business
        transaction_timeout_ms=timeout_ms,
        setting="target.cluster.transaction.timeout.ms",
        transactional_id="g-mm-0",
        doing="[g-mm-0] initialising the transactional producer again",
        logger=logging.getLogger("test.init"),
        clock=clock,
        init=init,
    )


def test_a_new_producer_waits_past_60_s_for_the_coordinator_within_its_bound_and_warns_once(caplog):
    """Issue 25: after a long freeze the coordinator answered a renewal CONCURRENT_TRANSACTIONS for
    longer than the former fixed 60 s (it was still ending the previous epoch's transaction). The
    wait is now bounded by 60 s plus transaction.timeout.ms, with one WARN and one INFO."""
    assert init_timeout_s(30_000) == 90.0
    assert init_timeout_s(60_000) == 120.0
    clock, steps = FakeClock(), []
    with caplog.at_level(logging.INFO, logger="test.init"):
        init_with(clock, scripted_init(clock, 75.0, steps))
    assert clock.now == 75.0
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, caplog.text
    assert "CONCURRENT_TRANSACTIONS" in warnings[0].getMessage()
    assert "waiting up to 90s" in warnings[0].getMessage()
    assert "let in after 75.0s" in caplog.text
    assert steps == [INIT_WARN_AFTER_S, 80.0]  # the first step before the WARN, then the rest


def test_a_new_producer_let_in_at_once_logs_nothing(caplog):
    clock, steps = FakeClock(), []
    with caplog.at_level(logging.INFO, logger="test.init"):
        init_with(clock, scripted_init(clock, 0.4, steps))
    assert caplog.records == [] and steps == [INIT_WARN_AFTER_S]


def test_a_coordinator_that_never_lets_the_producer_in_fails_the_task_naming_the_setting():
    clock, steps = FakeClock(), []
    with pytest.raises(ProducerInitTimedOut) as failure:
        init_with(clock, scripted_init(clock, None, steps), timeout_ms=20_000)
    message = str(failure.value)
    assert clock.now == 80.0  # 60 s plus transaction.timeout.ms, not a fresh 60 s per try
    assert "target.cluster.transaction.timeout.ms=20000 ms" in message
    assert "g-mm-0" in message and "CONCURRENT_TRANSACTIONS" in message


def test_a_refused_or_fatal_init_is_raised_at_once():
    clock = FakeClock()
    for err in (
        KafkaError(KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "refused"),
        KafkaError(KafkaError._FENCED, "fenced", fatal=True),
    ):
        calls = 0

        def init(*_args: object, err: KafkaError = err) -> None:
            nonlocal calls
            calls += 1
            raise KafkaException(err)

        with pytest.raises(KafkaException):
            init_with(clock, init)
        assert calls == 1
