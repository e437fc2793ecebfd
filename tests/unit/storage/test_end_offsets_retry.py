"""`end_offsets` rides out a leader moving: transient ListOffsets errors are retried, others are not.

The chaos soak found FENCED_LEADER_EPOCH coming back from ListOffsets while a restarted broker's
leadership propagated; it failed the herder's tick. The broker is replaced by a scripted admin
client here because what is tested is which answers lead to a retry.
"""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from eosconnect.storage import topic_reader
from eosconnect.storage.topic_reader import end_offsets


class _Offset:
    def __init__(self, offset: int) -> None:
        self.offset = offset


class ScriptedAdmin:
    """Answers each list_offsets call with the next scripted outcome (an error code or an offset)."""

    def __init__(self, *outcomes: int | KafkaError) -> None:
        self.outcomes = list(outcomes)
        self.calls: list[float] = []
        #: Topics whose metadata was asked for (what refreshes a real client's leaders).
        self.metadata_asked: list[str] = []

    def list_topics(self, topic: str, timeout: float) -> None:
        self.metadata_asked.append(topic)

    def list_offsets(
        self, request: dict[TopicPartition, object], isolation_level: object, request_timeout: float
    ) -> dict[TopicPartition, Future]:
        self.calls.append(request_timeout)
        outcome = self.outcomes.pop(0) if len(self.outcomes) > 1 else self.outcomes[0]
        futures: dict[TopicPartition, Future] = {}
        for tp in request:
            fut: Future = Future()
            if isinstance(outcome, KafkaError):
                fut.set_exception(KafkaException(outcome))
            else:
                fut.set_result(_Offset(outcome))
            futures[tp] = fut
        return futures


PARTITIONS = [TopicPartition("t", 0), TopicPartition("t", 1)]


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topic_reader.time, "sleep", lambda _s: None)


@pytest.mark.parametrize(
    "code",
    # _NOENT: "No leaders found", a single broker fenced by its controller after a freeze (issue 25)
    [
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError._TIMED_OUT,
        KafkaError._NOENT,
    ],
)
def test_transient_errors_are_retried_until_an_answer(code: int) -> None:
    admin = ScriptedAdmin(KafkaError(code), KafkaError(code), 42)
    assert end_offsets(admin, PARTITIONS) == {("t", 0): 42, ("t", 1): 42}  # type: ignore[arg-type]
    assert len(admin.calls) == 3
    # an answer that says the client's leaders are out of date refreshes them before the next try
    stale = code in topic_reader.STALE_LEADER_CODES
    assert admin.metadata_asked == (["t", "t"] if stale else []), admin.metadata_asked


def test_each_attempt_is_short_so_a_dead_leader_costs_one_attempt_not_the_whole_timeout() -> None:
    admin = ScriptedAdmin(KafkaError(KafkaError._TIMED_OUT), 7)
    end_offsets(admin, PARTITIONS, timeout=60.0)  # type: ignore[arg-type]
    assert admin.calls[0] == topic_reader.LIST_OFFSETS_ATTEMPT_S < 60.0


def test_other_errors_are_raised_at_once() -> None:
    admin = ScriptedAdmin(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))
    with pytest.raises(KafkaException) as caught:
        end_offsets(admin, PARTITIONS)  # type: ignore[arg-type]
    assert caught.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert len(admin.calls) == 1


def test_transient_errors_are_raised_once_the_timeout_has_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter(range(0, 1000, 4))  # every reading of the clock is 4 s later
    monkeypatch.setattr(topic_reader.time, "monotonic", lambda: float(next(clock)))
    admin = ScriptedAdmin(KafkaError(KafkaError.FENCED_LEADER_EPOCH))
    with pytest.raises(KafkaException):
        end_offsets(admin, PARTITIONS, timeout=10.0)  # type: ignore[arg-type]
    assert 1 < len(admin.calls) <= 3
