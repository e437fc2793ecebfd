"""runtime/dead_letter.py without a broker: settings, Kafka's exception names, logging-only reports.

Dead letters on a real broker, with their headers: tests/integration/test_connectors_jdbc_sink.py.
"""

from __future__ import annotations

import logging

import pytest

from eosconnect.api.errors import DataException
from eosconnect.api.records import SinkRecord
from eosconnect.runtime.dead_letter import DeadLetterQueue, ErrorReporting, exception_class_name


def test_settings_parse_with_kafkas_defaults() -> None:
    assert ErrorReporting.parse({}) == ErrorReporting(False, "", 3, False, False, False)
    parsed = ErrorReporting.parse(
        {
            "errors.tolerance": "ALL",
            "errors.deadletterqueue.topic.name": " dlq ",
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.log.enable": "true",
            "errors.log.include.messages": "true",
        }
    )
    assert parsed == ErrorReporting(True, "dlq", 1, True, True, True)


def test_exception_class_names_are_kafkas_for_connect_errors() -> None:
    assert exception_class_name(DataException("x")) == "org.apache.kafka.connect.errors.DataException"
    assert exception_class_name(ValueError("x")) == "builtins.ValueError"


def test_without_a_topic_a_report_is_logged_with_the_record(caplog: pytest.LogCaptureFixture) -> None:
    settings = ErrorReporting.parse({"errors.tolerance": "all", "errors.log.enable": "true"})
    queue = DeadLetterQueue(settings, None, None, "c", 2)
    record = SinkRecord("t", 1, 5, None, "v")
    with caplog.at_level(logging.ERROR):
        future = queue.reporter("MyTask").report(record, DataException("bad row"))
    assert future.result(1) is None
    assert "Executing stage 'TASK_PUT' with class 'MyTask'" in caplog.text
    assert "{topic='t', partition=1, offset=5}: bad row" in caplog.text
    queue.flush()
