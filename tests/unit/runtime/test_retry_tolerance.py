"""errors.retry.timeout / errors.retry.delay.max.ms / errors.tolerance as Kafka Connect's
RetryWithToleranceOperator applies them (runtime/retry_tolerance.py), and the source pipeline's
skipping of failed records (errors.tolerance=all)."""

from __future__ import annotations

import logging

import pytest

from eosconnect.api.batch import SourceBatch
from eosconnect.api.errors import ConnectException, DataException, RetriableException
from eosconnect.api.records import SourceRecord
from eosconnect.runtime.metrics import TaskMetrics
from eosconnect.runtime.pipeline import RecordPipeline
from eosconnect.runtime.retry_tolerance import RetryWithTolerance, ToleranceSettings


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def operator(
    timeout_ms: int, max_delay_ms: int = 60_000, **kw: object
) -> tuple[RetryWithTolerance, FakeTime]:
    fake = FakeTime()
    settings = ToleranceSettings(retry_timeout_ms=timeout_ms, retry_delay_max_ms=max_delay_ms)
    return RetryWithTolerance(settings, sleep=fake.sleep, clock=fake.clock, **kw), fake  # type: ignore[arg-type]


def failing(times: int, exc: type[Exception] = RetriableException):
    calls = {"n": 0}

    def op() -> str:
        calls["n"] += 1
        if calls["n"] <= times:
            raise exc(f"attempt {calls['n']}")
        return "ok"

    return op, calls


def test_settings_parse_kafkas_names_and_defaults() -> None:
    assert ToleranceSettings.parse({}) == ToleranceSettings(0, 60_000, False, False, False)
    parsed = ToleranceSettings.parse(
        {
            "errors.retry.timeout": "-1",
            "errors.retry.delay.max.ms": "500",
            "errors.tolerance": "ALL",
            "errors.log.enable": "true",
            "errors.log.include.messages": "true",
        }
    )
    assert parsed == ToleranceSettings(-1, 500, True, True, True) and parsed.retries


def test_no_retry_by_default() -> None:
    retry, fake = operator(0)
    op, calls = failing(1)
    with pytest.raises(RetriableException):
        retry.execute(op)
    assert calls["n"] == 1 and fake.slept == []
    assert retry.metrics()["total-record-failures"] == 1 and retry.metrics()["total-retries"] == 0


def test_retries_back_off_300_600_1200_ms_until_success() -> None:
    retry, fake = operator(10_000)
    op, calls = failing(3)
    assert retry.execute(op) == "ok"
    assert calls["n"] == 4
    assert [round(s, 3) for s in fake.slept] == [0.3, 0.5, 0.1, 0.5, 0.5, 0.2]  # 0.3, 0.6, 1.2 in 0.5 s steps
    assert retry.metrics() == {
        "total-record-failures": 3,
        "total-retries": 3,
        "total-record-errors": 0,
        "total-records-skipped": 0,
    }


def test_retries_stop_at_the_deadline_and_the_last_error_propagates() -> None:
    retry, fake = operator(1000)
    op, calls = failing(100)
    with pytest.raises(RetriableException):
        retry.execute(op)
    # 300 + 600 ms, then only the 100 ms left to the deadline, then the deadline is past.
    assert calls["n"] == 4 and abs(fake.now - 1.0) < 1e-9


def test_a_delay_over_the_maximum_becomes_a_random_one_below_it() -> None:
    retry, _ = operator(-1, max_delay_ms=1000)
    assert retry.delay_ms(1, 1e9) == 300 and retry.delay_ms(2, 1e9) == 600
    for attempt in range(3, 10):  # 1200 ms and more: random below 1000
        assert 0 <= retry.delay_ms(attempt, 1e9) < 1000
    assert retry.delay_ms(1, 120) == 120, "never past the deadline"


def test_forever_retries_until_it_works_and_non_retriable_errors_are_not_retried() -> None:
    retry, _ = operator(-1)
    op, calls = failing(20)
    assert retry.execute(op) == "ok" and calls["n"] == 21
    op, calls = failing(1, DataException)
    with pytest.raises(DataException):
        retry.execute(op)
    assert calls["n"] == 1


def test_a_stopping_task_stops_retrying() -> None:
    stop = {"now": False}
    retry, fake = operator(-1, stopping=lambda: stop["now"])
    op, calls = failing(1000)

    def sleep(seconds: float) -> None:
        fake.now += seconds
        stop["now"] = calls["n"] >= 3

    retry.sleep = sleep
    with pytest.raises(RetriableException):
        retry.execute(op)
    assert calls["n"] <= 4


def test_counters_reach_the_task_metrics() -> None:
    metrics = TaskMetrics("c", 0)
    retry, _ = operator(1000, metrics=metrics)
    retry.settings = ToleranceSettings(1000, 60_000, tolerate_all=True)
    op, _ = failing(1)
    retry.execute(op)
    assert retry.failed() is True
    snapshot = metrics.snapshot()
    assert (snapshot["total-record-failures"], snapshot["total-retries"]) == (1, 1)
    assert (snapshot["total-record-errors"], snapshot["total-records-skipped"]) == (1, 1)


# ----------------------------------------------------------------------------- the source pipeline

EXTRACT = {
    "transforms": "pick",
    "transforms.pick.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
    "transforms.pick.field": "a",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false",
}


def source_pipeline(config: dict[str, str]) -> tuple[RecordPipeline, RetryWithTolerance]:
    errors = RetryWithTolerance(ToleranceSettings.parse(config))
    return RecordPipeline(config, task_id="src-0", retry=errors), errors


def record(value: object) -> SourceRecord:
    return SourceRecord({"p": 1}, {"o": 1}, "t", value)


def test_source_tolerance_none_fails_naming_the_fix() -> None:
    pipeline, _ = source_pipeline(EXTRACT)
    assert pipeline.convert(record({"a": 1})).value == b"1"  # type: ignore[union-attr]
    with pytest.raises(DataException):
        pipeline.convert(record("not a map"))  # unguarded: errors.tolerance=none and no retries
    pipeline, _ = source_pipeline({**EXTRACT, "errors.retry.timeout": "1"})
    with pytest.raises(ConnectException, match=r"Tolerance exceeded.*errors.tolerance=all"):
        pipeline.convert(record("not a map"))


def test_source_tolerance_all_skips_and_logs_the_failed_record(caplog: pytest.LogCaptureFixture) -> None:
    config = {**EXTRACT, "errors.tolerance": "all", "errors.log.enable": "true"}
    pipeline, errors = source_pipeline(config)
    with caplog.at_level(logging.ERROR):
        assert pipeline.convert(record("not a map")) is None
    assert "Error encountered in task src-0. Executing stage" in caplog.text
    assert "not a map" not in caplog.text, "the record only with errors.log.include.messages=true"
    assert errors.metrics()["total-records-skipped"] == 1
    pipeline, _ = source_pipeline({**config, "errors.log.include.messages": "true"})
    with caplog.at_level(logging.ERROR):
        pipeline.convert(record("not a map"))
    assert "not a map" in caplog.text


def test_a_source_batch_is_sent_without_its_failed_records() -> None:
    config = {
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "errors.tolerance": "all",
    }
    pipeline, errors = source_pipeline(config)
    batch = SourceBatch(
        {"p": 1}, {"o": 3}, "t", [{"a": 1}, {"bad": object()}, {"a": 3}], keys=["x", "y", "z"]
    )
    columns = pipeline.convert_columns(batch)
    assert list(columns.values) == [b'{"a":1}', b'{"a":3}']
    assert errors.metrics()["total-records-skipped"] == 1


def test_a_retriable_converter_error_is_retried_then_the_record_is_sent() -> None:
    config = {**EXTRACT, "errors.retry.timeout": "60000"}
    pipeline, errors = source_pipeline(config)
    errors.sleep = lambda s: None
    real = pipeline.value_converter
    calls = {"n": 0}

    class Flaky:
        def from_connect_data(self, topic: str, schema: object, value: object) -> bytes:
            calls["n"] += 1
            if calls["n"] < 3:
                raise RetriableException("schema registry unavailable")
            return real.from_connect_data(topic, schema, value)

    pipeline.value_converter = Flaky()  # type: ignore[assignment]
    assert pipeline.convert(record({"a": 7})).value == b"7"  # type: ignore[union-attr]
    assert calls["n"] == 3 and errors.metrics()["total-retries"] == 2
