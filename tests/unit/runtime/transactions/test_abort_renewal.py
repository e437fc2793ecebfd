"""Both transactional runners renew their producer after an abort that purged records, and only then
(`held_records`; why: tests/integration/test_abort_sequence_reuse.py, on real brokers), and after an
abort that hangs inside librdkafka only on the leader's word. These tests check the runners'
decision with stand-in producers; what librdkafka and the broker do is the integration test's."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from eosconnect.api.records import TopicPartition
from eosconnect.api.transactions import TransactionRetry
from eosconnect.runtime.transactions import session as session_module
from eosconnect.runtime.transactions.errors import TransactionCallHung
from eosconnect.runtime.transactions.replay import ReplayRecovery, SourceTransaction
from eosconnect.runtime.transactions.sink_writer import TransactionalSinkWriter
from support.sessions import unconnected_session
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


def _source_recovery(producer: _HoldingProducer, events: list[str], leader: Any = None) -> ReplayRecovery:
    session = unconnected_session(producer, leader)
    session.renew = lambda why: events.append(f"renew: {why}")  # type: ignore[method-assign]
    recovery = ReplayRecovery(None, session)  # type: ignore[arg-type]  # no runner: nothing is sent
    recovery._resend = lambda old, why: events.append("resend")  # type: ignore[method-assign]
    return recovery


@pytest.mark.parametrize("held", [0, 3])
def test_a_source_task_renews_its_producer_before_resending_only_when_the_abort_purged_records(held: int):
    events: list[str] = []
    recovery = _source_recovery(_HoldingProducer(held), events)
    recovery.retry(SourceTransaction(sent=3), "3 of its records were still undelivered")
    if held:
        assert len(events) == 2 and events[1] == "resend", events
        assert events[0].startswith("renew: 3 of its records were still undelivered; the abort purged 3")
    else:
        assert events == ["resend"]


class _HangingProducer(_HoldingProducer):
    """A producer whose abort never returns (librdkafka issues 5456 and 5511) until released."""

    def __init__(self) -> None:
        super().__init__(0)
        self.release = threading.Event()

    def abort_transaction(self, _timeout: float) -> None:
        self.release.wait(30)


class _Current:
    def confirmed_current(self) -> bool:
        return True

    def superseded(self) -> bool:
        return False


@pytest.mark.parametrize("leader", [_Current(), None], ids=["confirmed current", "no leader"])
def test_a_source_abort_that_hangs_renews_the_producer_only_on_the_leaders_word(
    leader: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_module, "HUNG_CALL_GRACE_S", 0.2)
    events: list[str] = []
    producer = _HangingProducer()
    recovery = _source_recovery(producer, events, leader)
    # began long ago: the abort is given what is left, 1 s, and counts as hung 0.2 s after that
    old = SourceTransaction(started=time.monotonic() - 59.5, sent=3)
    try:
        if leader is None:
            with pytest.raises(TransactionCallHung):
                recovery.retry(old, "3 of its records were still undelivered")
            assert events == []
        else:
            recovery.retry(old, "3 of its records were still undelivered")
            assert events == ["renew: aborting hung; the leader confirms this instance current", "resend"]
    finally:
        producer.release.set()


def _sink_writer(producer: _HoldingProducer, renewals: list[str]) -> TransactionalSinkWriter:
    writer = unconnected_sink_writer()
    session = writer.session
    session.producer = producer  # type: ignore[assignment]
    session.bounded = lambda step, call, timeout=0: call()  # type: ignore[method-assign]

    def renew(why: str) -> None:
        renewals.append(why)
        session.producer = _HoldingProducer(0)  # type: ignore[assignment]

    session.renew = renew  # type: ignore[method-assign]
    writer._first_offsets[TopicPartition("orders", 0)] = 41
    return writer


@pytest.mark.parametrize("held", [0, 2])
def test_a_sink_task_renews_its_producer_before_rewinding_only_when_the_abort_purged_records(held: int):
    renewals: list[str] = []
    producer = _HoldingProducer(held)
    writer = _sink_writer(producer, renewals)
    with pytest.raises(TransactionRetry) as retry:
        writer._abort_and_rewind("it could not be committed in time")
    assert producer.calls == ["abort"]
    assert renewals == (["the abort purged 2 records it still held"] if held else [])
    assert retry.value.rewind == {TopicPartition("orders", 0): 41}
