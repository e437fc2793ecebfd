"""Both transactional runners renew their producer after an abort that purged records, and only then
(`held_records`; why: tests/integration/test_abort_sequence_reuse.py, on real brokers). These tests
check the runners' decision with stand-in producers; what librdkafka and the broker do is the
integration test's."""

from __future__ import annotations

from typing import Any

import pytest

from eosconnect.api.records import TopicPartition
from eosconnect.runtime.exactly_once import ExactlyOnceSourceTaskRunner
from eosconnect.runtime.metrics import TaskMetrics
from eosconnect.runtime.sink_transactions import TransactionalSinkProducer, TransactionRetry
from eosconnect.runtime.transactions import Transaction, TransactionalProducer, TransactionBudget
from support.sink_writers import unconnected_sink_writer


class _HoldingProducer:
    """A producer that still holds `held` records when the abort comes (its queue's length)."""

    def __init__(self, held: int) -> None:
        self.held = held
        self.calls: list[str] = []

    def __len__(self) -> int:
        return self.held

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return self.held

    def abort_transaction(self, _timeout: float) -> None:
        self.calls.append("abort")
        self.held = 0  # librdkafka purged them


def _source_runner(producer: _HoldingProducer, events: list[str]) -> ExactlyOnceSourceTaskRunner:
    runner = ExactlyOnceSourceTaskRunner.__new__(ExactlyOnceSourceTaskRunner)  # no Spark, no broker
    runner.producer = producer  # type: ignore[assignment]
    runner.txn = TransactionalProducer(producer, lambda exc, doing, started: exc)  # type: ignore[arg-type]
    runner.budget = TransactionBudget(20_000)
    runner.metrics = TaskMetrics("c", 0)
    runner._renew = lambda why: events.append(f"renew: {why}")  # type: ignore[method-assign]
    runner._resend = lambda old, why: events.append("resend")  # type: ignore[method-assign]
    return runner


@pytest.mark.parametrize("held", [0, 3])
def test_a_source_task_renews_its_producer_before_resending_only_when_the_abort_purged_records(held: int):
    events: list[str] = []
    runner = _source_runner(_HoldingProducer(held), events)
    runner._retry(Transaction(sent=3), "3 of its records were still undelivered")
    if held:
        assert len(events) == 2 and events[1] == "resend", events
        assert events[0].startswith("renew: 3 of its records were still undelivered; the abort purged 3")
    else:
        assert events == ["resend"]


def _sink_writer(producer: _HoldingProducer, renewals: list[None]) -> TransactionalSinkProducer:
    writer = unconnected_sink_writer()
    writer.producer = producer  # type: ignore[assignment]
    writer._bounded_call = lambda step, call, timeout, raw=False: call()  # type: ignore[method-assign]

    def renew(err: Any) -> None:
        renewals.append(err)
        writer.producer = _HoldingProducer(0)  # type: ignore[assignment]

    writer._renew_producer = renew  # type: ignore[method-assign]
    writer._first_offsets[TopicPartition("orders", 0)] = 41
    return writer


@pytest.mark.parametrize("held", [0, 2])
def test_a_sink_task_renews_its_producer_before_rewinding_only_when_the_abort_purged_records(held: int):
    renewals: list[None] = []
    producer = _HoldingProducer(held)
    writer = _sink_writer(producer, renewals)
    with pytest.raises(TransactionRetry) as retry:
        writer._abort_and_rewind("it could not be committed in time")
    assert producer.calls == ["abort"]
    assert renewals == ([None] if held else [])
    assert retry.value.rewind == {TopicPartition("orders", 0): 41}
