"""The console's ring buffer: rates from counter differences, lag summed per connector, a restarted
task's counters counted from zero, at most `capacity` samples kept."""

from __future__ import annotations

from typing import Any

from eosconnect.cluster.herder_api import MetricsView
from eosconnect.rest.console_samples import ConsoleSamples, task_counters
from support.fake_herder import FakeHerder


def source(task: int, written: int, committed: int, aborted: int = 0) -> dict[str, Any]:
    return {
        "connector": "src",
        "task": task,
        "source-record-write-total": written,
        "transactions-committed": committed,
        "transactions-aborted": aborted,
    }


def sink(task: int, read: int, lag: int | None) -> dict[str, Any]:
    return {
        "connector": "snk",
        "task": task,
        "sink-record-read-total": read,
        "offset-commit-completion-total": 3,
        "sink-record-lag-max": lag,
    }


def test_counters_of_a_source_and_a_sink_snapshot() -> None:
    assert task_counters(source(0, 100, 7, 1)).records == 100
    assert task_counters(source(0, 100, 7, 1)).commits == 7
    assert task_counters(source(0, 100, 7, 1)).lag is None
    counters = task_counters(sink(0, 40, 12))
    assert (counters.records, counters.commits, counters.lag) == (40, 3, 12)


def test_series_are_rates_between_samples_and_lag_summed() -> None:
    samples = ConsoleSamples(FakeHerder(), interval_s=10)
    samples.take(MetricsView([source(0, 0, 0), source(1, 0, 0), sink(0, 0, 5), sink(1, 0, 1)], []), at=1000)
    samples.take(
        MetricsView([source(0, 100, 2), source(1, 300, 4), sink(0, 50, 7), sink(1, 50, 2)], []), at=1010
    )
    series = samples.series()["connectors"]
    assert series["src"] == [[1010, 40.0, None]]
    assert series["snk"] == [[1010, 10.0, 9.0]]
    rates = samples.task_rates()
    assert rates[("src", 1)] == {"records_per_s": 30.0, "commits_per_s": 0.4}


def test_a_restarted_task_counts_from_zero() -> None:
    samples = ConsoleSamples(FakeHerder())
    samples.take(MetricsView([source(0, 1000, 10)], []), at=0)
    samples.take(MetricsView([source(0, 50, 1)], []), at=10)
    assert samples.series()["connectors"]["src"] == [[10, 5.0, None]]


def test_the_buffer_keeps_capacity_samples() -> None:
    samples = ConsoleSamples(FakeHerder(), capacity=3)
    for i in range(10):
        samples.take(MetricsView([source(0, i * 10, i)], []), at=i)
    assert [point[0] for point in samples.series()["connectors"]["src"]] == [8, 9]


def test_the_sampler_thread_samples_and_stops() -> None:
    herder = FakeHerder()
    samples = ConsoleSamples(herder, interval_s=0.05)
    samples.start()
    samples.start()  # once
    try:
        import time

        deadline = time.monotonic() + 5
        while len(samples.samples) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        samples.stop()
    assert len(samples.samples) >= 2
