"""`TransactionSession`, the one producer-and-transaction both exactly-once writers use
(runtime/transactions/session.py): what it commits and aborts, on a real broker; when it may renew
its producer in place (only on the leader's word); and that a call librdkafka hangs in is given up
on in bounded time and keeps the producer from being renewed after a fence."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import KafkaError, KafkaException

from eosconnect.api.errors import ConnectException
from eosconnect.runtime.transactions import session as session_module
from eosconnect.runtime.transactions.errors import (
    FENCED_CODES,
    Step,
    TaskFencedError,
    TransactionCallHung,
    TransactionTimedOutError,
)
from eosconnect.runtime.transactions.session import Transaction, TransactionSession

NOWHERE = "127.0.0.1:9999"  # a port nothing listens on: the producer is made but never used


class Leader:
    """The leader's answers as a `CurrentInstance`, counting the questions."""

    def __init__(self, current: bool = True, superseded: bool = False) -> None:
        self.current, self.replaced = current, superseded
        self.asked: list[str] = []

    def confirmed_current(self) -> bool:
        self.asked.append("confirmed_current")
        return self.current

    def superseded(self) -> bool:
        self.asked.append("superseded")
        return self.replaced


def make_session(
    bootstrap: str = NOWHERE, transactional_id: str = "g-c-0", leader: Leader | None = None
) -> TransactionSession[Transaction]:
    return TransactionSession(
        {"bootstrap.servers": bootstrap, "transaction.timeout.ms": 10_000},
        transactional_id=transactional_id,
        task_id="c-0",
        make=Transaction,
        leader=leader,
        logger=logging.getLogger("test_transaction_session"),
        timeout_setting="transaction.timeout.ms",
    )


@pytest.fixture
def sessions() -> Iterator[Callable[..., TransactionSession[Transaction]]]:
    """Sessions closed at the end of the test (their producers aborting what is open)."""
    made: list[TransactionSession[Transaction]] = []

    def _make(*args: object, **kwargs: object) -> TransactionSession[Transaction]:
        session = make_session(*args, **kwargs)  # type: ignore[arg-type]
        made.append(session)
        return session

    yield _make
    for session in made:
        session.close()


# ----------------------------------------------------------------------------- the leader's word
def test_without_a_leader_the_producer_is_never_renewed_in_place(sessions) -> None:
    session = sessions()
    producer = session.producer
    assert not session.renewed_in_place("the abort did not end in time")
    assert not session.renewed_after_fence("fenced")
    assert session.producer is producer and not session.renewed


def test_a_leader_that_does_not_confirm_the_instance_keeps_its_producer(sessions) -> None:
    leader = Leader(current=False)
    session = sessions(leader=leader)
    producer = session.producer
    assert not session.renewed_in_place("the abort did not end in time")
    assert session.producer is producer and leader.asked == ["confirmed_current"]


def test_a_fenced_instance_that_was_replaced_is_not_renewed_and_never_asks_for_confirmation(sessions) -> None:
    """A replaced instance must not renew: its `init_transactions()` would fence its successor."""
    leader = Leader(current=True, superseded=True)
    session = sessions(leader=leader)
    producer = session.producer
    assert not session.renewed_after_fence("its producer was fenced")
    assert session.producer is producer and leader.asked == ["superseded"]


def test_a_call_that_outlives_its_timeout_is_given_up_and_keeps_a_fenced_producer_from_renewing(
    sessions, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session_module, "HUNG_CALL_GRACE_S", 0.2)
    leader = Leader()
    session = sessions(leader=leader)
    release = threading.Event()
    began = time.monotonic()
    try:
        with pytest.raises(TransactionCallHung, match="did not return within"):
            session.bounded(Step.SEND_OFFSETS, lambda: release.wait(30), timeout_s=0.1)
        assert time.monotonic() - began < 5
        assert session.hung == Step.SEND_OFFSETS
        # A hang proves nothing about the epoch: after a fence, the instance does not renew.
        assert not session.renewed_after_fence("fenced") and leader.asked == []
    finally:
        release.set()


def test_a_bounded_call_returns_its_result_and_raises_a_kafka_error_as_it_is(sessions) -> None:
    session = sessions()
    assert session.bounded(Step.COMMIT, lambda: 42, timeout_s=1) == 42

    def refused() -> None:
        raise KafkaException(KafkaError(KafkaError._STATE, "not in a transaction"))

    with pytest.raises(KafkaException):
        session.bounded(Step.COMMIT, refused, timeout_s=1)
    assert session.hung is None


# ----------------------------------------------------------------------------- errors
def test_a_failure_reads_as_a_zombie_a_timed_out_transaction_or_a_plain_error(sessions) -> None:
    session = sessions()
    fenced = KafkaException(KafkaError(KafkaError.PRODUCER_FENCED, "fenced", fatal=True))
    assert isinstance(session.classify(fenced, Step.COMMIT), TaskFencedError)
    late = KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "aborted by the broker"))
    assert isinstance(
        session.classify(late, Step.COMMIT, txn_started=time.monotonic() - 11), TransactionTimedOutError
    )
    session.delivery_failures.append("a record to 'offsets' failed: TOPIC_AUTHORIZATION_FAILED")
    plain = session.classify(KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out")), Step.COMMIT)
    assert type(plain) is ConnectException
    assert "committing the transaction" in str(plain) and "TOPIC_AUTHORIZATION_FAILED" in str(plain)


# ----------------------------------------------------------------------------- on a real broker
@pytest.mark.kafka
def test_a_committed_transaction_is_visible_and_an_aborted_one_is_not(
    sessions, bootstrap, create_topic, topic_name, read_committed
) -> None:
    topic = create_topic(topic_name("data"))
    session = sessions(bootstrap, topic_name("txn"))
    session.init()
    session.begin()
    for i in range(3):
        session.producer.produce(topic, value=f"kept-{i}".encode())
    committed = session.commit(30)
    assert session.current is None and session.ended_at >= committed.started
    session.begin()
    session.producer.produce(topic, value=b"dropped")
    session.producer.flush(10)
    session.abort(30)
    assert [r.value for r in read_committed(topic, timeout=30)] == [b"kept-0", b"kept-1", b"kept-2"]


@pytest.mark.kafka
def test_a_renewal_in_place_ends_the_open_transaction_and_fences_the_old_producer(
    sessions, bootstrap, create_topic, topic_name, read_committed
) -> None:
    topic = create_topic(topic_name("data"))
    session = sessions(bootstrap, topic_name("txn"), leader=Leader())
    session.init()
    session.begin()
    session.producer.produce(topic, value=b"never-committed")
    session.producer.flush(10)
    old = session.producer
    assert session.renewed_in_place("the abort did not end in time")
    assert session.producer is not old and session.renewed
    with pytest.raises(KafkaException) as fenced:
        old.commit_transaction(10)
    assert fenced.value.args[0].code() in FENCED_CODES
    session.begin()
    session.producer.produce(topic, value=b"after-renewal")
    session.commit(30)
    assert [r.value for r in read_committed(topic, timeout=30)] == [b"after-renewal"]


@pytest.mark.kafka
def test_closing_aborts_the_open_transaction_so_readers_are_not_held_back(
    sessions, bootstrap, create_topic, topic_name, read_committed
) -> None:
    topic = create_topic(topic_name("data"))
    session = sessions(bootstrap, topic_name("txn"))
    session.init()
    session.begin()
    session.producer.produce(topic, value=b"open-at-close")
    session.producer.flush(10)
    session.close()
    began = time.monotonic()
    assert read_committed(topic, timeout=20) == []
    assert time.monotonic() - began < 8  # well within the transaction's 10 s timeout
