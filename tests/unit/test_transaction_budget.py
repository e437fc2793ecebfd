"""The bounded-transaction budget shared by source and sink tasks (runtime/transactions.py): every
retried call gets what is left of the transaction's budget, never a fresh full timeout."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from eosconnect.runtime.transactions import (
    TransactionBudget,
    abort_in_time,
    commit_in_time,
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
