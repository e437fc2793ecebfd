"""Task instances (issue 25): a replaced instance is told to stop and cannot speak for the task,
and a fenced task ends quietly only when the leader confirms a newer instance took over."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from eosconnect.cluster.herder_state import GenerationRun, TaskRuntime
from eosconnect.cluster.task_channel import RestTaskControl
from eosconnect.cluster.task_health import TaskHealth
from eosconnect.runtime.control import Directive, TaskControl
from eosconnect.runtime.supersession import replaced_by_design
from eosconnect.runtime.task import TaskSpec
from eosconnect.runtime.transactions import (
    TaskFencedError,
    TransactionCallHung,
    TransactionTimedOutError,
    classify_transaction_error,
    failure_cause,
    fatal_cause,
)


def run_with(instances: dict[int, str], generation: int = 3) -> GenerationRun:
    run = GenerationRun("c", generation, 2, job=None)  # type: ignore[arg-type]  # no Spark job needed
    run.instances = dict(instances)
    return run


def stale(
    run: GenerationRun | None, runtime: TaskRuntime, report: dict[str, Any], generation: int = 3
) -> bool:
    return TaskHealth._stale_instance(run, runtime, 0, generation, report)


def test_an_instance_launched_before_the_latest_is_stale() -> None:
    run = run_with({0: "new"})
    assert stale(run, TaskRuntime(), {"instance": "old"})
    assert not stale(run, TaskRuntime(), {"instance": "new"})


def test_an_earlier_spark_attempt_of_the_same_launch_is_stale_once_a_later_one_reported() -> None:
    run = run_with({0: "a"})
    runtime = TaskRuntime(state="RUNNING", generation=3, attempt=1, instance="a")
    assert stale(run, runtime, {"instance": "a", "attempt": 0})
    assert not stale(run, runtime, {"instance": "a", "attempt": 1})
    assert not stale(run, runtime, {"instance": "a", "attempt": 2})


def test_other_generations_and_unnamed_instances_are_left_to_the_generation_rule() -> None:
    run = run_with({0: "new"})
    assert not stale(run, TaskRuntime(), {"instance": "old"}, generation=2)
    assert not stale(None, TaskRuntime(), {"instance": "old"})
    assert not stale(run, TaskRuntime(), {})  # a task of an older release names no instance


class Leader(RestTaskControl):
    """Answers the supersession question with a scripted sequence of directives."""

    def __init__(self, answers: list[Directive | None]) -> None:
        super().__init__("http://127.0.0.1:9", {}, "c", 0, 3, instance="i1")
        self.answers = answers
        self.asked: list[dict[str, Any]] = []

    def _report(self, report: dict[str, Any]) -> Directive | None:
        self.asked.append(report)
        return self.answers.pop(0) if self.answers else Directive.RUN


def spec(control: Any) -> TaskSpec:
    return TaskSpec(
        connector="c", task=0, task_config={}, connector_config={}, worker_config={}, control=control
    )


@pytest.mark.parametrize(
    "error", [TaskFencedError("fenced"), TransactionTimedOutError("timed out"), TransactionCallHung("hung")]
)
def test_a_fenced_task_is_replaced_by_design_when_the_leader_says_stop(error: Exception) -> None:
    leader = Leader([Directive.RUN, Directive.STOP])  # the newer attempt had not reported at first
    assert replaced_by_design(spec(leader), error)
    assert len(leader.asked) == 2


def test_a_fenced_task_the_leader_still_wants_running_really_failed() -> None:
    leader = Leader([])
    assert not leader.superseded(wait_s=0.6)
    assert not replaced_by_design(spec(Leader([])), RuntimeError("other"))


def test_a_leader_that_missed_a_question_is_asked_again_before_a_renewal() -> None:
    """After a broker died, a heartbeat to a slow leader can time out once; the task must not fail
    for it (it renews its producer once the leader answers "run"), nor renew on "stop"."""
    leader = Leader([None, None, Directive.RUN])
    assert leader.confirmed_current(wait_s=5.0)
    assert len(leader.asked) == 3
    stopped = Leader([None, Directive.STOP])
    assert not stopped.confirmed_current(wait_s=5.0)
    assert len(stopped.asked) == 2


def test_only_the_renewal_question_is_marked_for_a_leader_in_doubt_to_refuse() -> None:
    leader = Leader([Directive.RUN])
    assert leader.confirmed_current(wait_s=1.0)
    assert leader.asked[0]["confirm"] is True
    asked = Leader([Directive.STOP])
    assert asked.superseded(wait_s=1.0)
    assert "confirm" not in asked.asked[0]


def test_a_leader_that_never_answers_confirms_nothing() -> None:
    silent = Leader([None] * 100)
    assert not silent.confirmed_current(wait_s=0.6)
    assert 2 <= len(silent.asked) <= 3


def test_without_a_leader_to_ask_a_fenced_task_fails_as_before() -> None:
    class FileLike(TaskControl):
        def directive(self) -> Directive:
            return Directive.RUN

    assert not replaced_by_design(spec(FileLike()), TaskFencedError("fenced"))


class _FencedProducer:
    """A producer after a fatal fence: produce() says only _FATAL, a transactional call the cause."""

    def abort_transaction(self, _timeout: float) -> None:
        raise KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))


def test_a_fatal_produce_error_is_classified_by_its_cause_so_a_zombie_reads_as_fenced() -> None:
    """Seen in a full run: the replaced mirror task's produce() raised _FATAL ('Unable to produce
    message'), which read as a plain failure and logged ERROR; the cause is the fence."""
    produce_error = KafkaException(KafkaError(KafkaError._FATAL, "Unable to produce message"))
    cause = fatal_cause(_FencedProducer(), produce_error)
    classified = classify_transaction_error(
        cause,
        "sending a record",
        task_id="t",
        transactional_id="g-c-0",
        transaction_timeout_ms=60000,
        txn_started=None,
    )
    assert isinstance(classified, TaskFencedError)
    assert fatal_cause(None, produce_error) is produce_error


class _HealthyProducer:
    def abort_transaction(self, _timeout: float) -> None:
        raise KafkaException(KafkaError(KafkaError._STATE, "no transaction in progress"))


def test_a_flush_or_commit_failure_is_classified_by_one_cause_for_sources_and_sinks() -> None:
    """`failure_cause`: a SystemError from confluent-kafka's callback machinery counts by the
    KafkaException it was raised from (the source's pipelined commit), else by the producer's own
    fatal error (the sink's flush); a failure with neither has no Kafka cause."""
    fenced = KafkaException(KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True))
    try:
        try:
            raise fenced
        except KafkaException as exc:
            raise SystemError("error return without exception set") from exc
    except SystemError as linked:
        assert failure_cause(_HealthyProducer(), linked) is fenced
    bare = SystemError("error return without exception set")
    cause = failure_cause(_FencedProducer(), bare)
    assert cause is not None and cause.args[0].code() == KafkaError._FENCED
    assert failure_cause(_HealthyProducer(), bare) is None
    assert failure_cause(None, bare) is None
    plain = KafkaException(KafkaError(KafkaError._MSG_TIMED_OUT, "timed out"))
    assert failure_cause(_FencedProducer(), plain) is plain  # not fatal: taken as it is
