"""Task metrics the console's exactly-once panel reads: how long the open transaction has been
open, and the dead letters sent."""

from __future__ import annotations

import time

from eosconnect.runtime.metrics import SinkTaskMetrics, TaskMetrics


def test_open_transaction_age_while_open_and_none_between() -> None:
    metrics = TaskMetrics("c", 0)
    assert metrics.snapshot()["transaction-open-age-ms"] is None
    metrics.record_transaction_open(True)
    time.sleep(0.05)
    age = metrics.snapshot()["transaction-open-age-ms"]
    assert isinstance(age, float) and age >= 50
    metrics.record_transaction_open(False)
    assert metrics.snapshot()["transaction-open-age-ms"] is None


def test_dead_letters_are_counted() -> None:
    metrics = SinkTaskMetrics("c", 0)
    assert metrics.snapshot()["deadletterqueue-produce-requests"] == 0
    metrics.record_dead_letter()
    metrics.record_dead_letter()
    assert metrics.snapshot()["deadletterqueue-produce-requests"] == 2
