"""render_prometheus: task metric snapshots and states as Prometheus text."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from eosconnect.rest.metrics import build_registry, render_prometheus
from eosconnect.runtime.metrics import TaskMetrics


def samples(text: bytes) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def test_real_task_metrics_snapshot_is_exported() -> None:
    metrics = TaskMetrics("orders", 3)
    for size in (2, 5, 8):
        metrics.record_transaction(size)
    metrics.record_poll(15)
    metrics.record_write(15)
    metrics.record_abort()
    metrics.record_offset_commit(0.004)
    got = samples(render_prometheus([metrics.snapshot()]))
    labels = (("connector", "orders"), ("task", "3"))
    assert got[("eosconnect_source_task_transaction_size_min", labels)] == 2
    assert got[("eosconnect_source_task_transaction_size_max", labels)] == 8
    assert got[("eosconnect_source_task_transaction_size_avg", labels)] == 5
    assert got[("eosconnect_source_task_transactions_committed_total", labels)] == 3
    assert got[("eosconnect_source_task_transactions_aborted_total", labels)] == 1
    assert got[("eosconnect_source_task_source_record_poll_total", labels)] == 15
    assert got[("eosconnect_source_task_source_record_write_total", labels)] == 15
    assert got[("eosconnect_source_task_source_record_poll_rate", labels)] > 0
    assert got[("eosconnect_source_task_source_record_write_rate", labels)] > 0
    assert abs(got[("eosconnect_source_task_offset_commit_avg_time_ms", labels)] - 4.0) < 1e-6
    assert abs(got[("eosconnect_source_task_offset_commit_max_time_ms", labels)] - 4.0) < 1e-6


def test_unset_values_are_left_out_and_unknown_numbers_become_gauges() -> None:
    fresh = TaskMetrics("c", 0).snapshot()
    fresh["custom-thing"] = 7
    fresh["a-string"] = "ignored"
    got = samples(render_prometheus([fresh]))
    names = {name for name, _ in got}
    assert "eosconnect_source_task_transaction_size_min" not in names
    assert "eosconnect_source_task_offset_commit_avg_time_ms" not in names
    assert got[("eosconnect_task_custom_thing", (("connector", "c"), ("task", "0")))] == 7
    assert not any("a_string" in n for n in names)


def test_status_counts() -> None:
    statuses = [
        {
            "name": "a",
            "connector": {"state": "RUNNING"},
            "tasks": [{"id": 0, "state": "RUNNING"}, {"id": 1, "state": "FAILED"}],
        },
        {"name": "b", "connector": {"state": "PAUSED"}, "tasks": [{"id": 0, "state": "PAUSED"}]},
    ]
    got = samples(render_prometheus([], statuses))
    assert got[("eosconnect_connectors", (("state", "RUNNING"),))] == 1
    assert got[("eosconnect_connectors", (("state", "PAUSED"),))] == 1
    assert got[("eosconnect_connectors", (("state", "FAILED"),))] == 0
    assert got[("eosconnect_tasks", (("state", "FAILED"),))] == 1
    assert got[("eosconnect_tasks", (("state", "RUNNING"),))] == 1
    assert got[("eosconnect_tasks", (("state", "PAUSED"),))] == 1
    assert got[("eosconnect_connector_tasks", (("connector", "a"), ("state", "FAILED")))] == 1
    assert got[("eosconnect_connector_tasks", (("connector", "b"), ("state", "RUNNING")))] == 0


def test_every_call_uses_a_fresh_registry() -> None:
    first = build_registry([{"connector": "gone", "task": 0, "transactions-committed": 1}])
    second = build_registry([])
    assert first is not second
    assert b"gone" not in render_prometheus([])
    empty = samples(render_prometheus([]))
    assert empty[("eosconnect_connectors", (("state", "RUNNING"),))] == 0


def test_auto_restarts_are_a_counter_once_there_was_one() -> None:
    assert b"auto_restarts" not in render_prometheus([], [], {})
    text = render_prometheus([], [], {("orders", 1): 2, ('we"ird', 0): 1})
    got = samples(text)
    assert got[("eosconnect_task_auto_restarts_total", (("connector", "orders"), ("task", "1")))] == 2
    assert got[("eosconnect_task_auto_restarts_total", (("connector", 'we"ird'), ("task", "0")))] == 1
    assert b"# TYPE eosconnect_task_auto_restarts_total counter" in text


def test_fencing_rounds_per_connector() -> None:
    text = render_prometheus([], fencing_rounds={"a": 2, "b": 1}).decode()
    assert 'eosconnect_connector_fencing_rounds_total{connector="a"} 2.0' in text
    assert 'eosconnect_connector_fencing_rounds_total{connector="b"} 1.0' in text
    assert "fencing_rounds" not in render_prometheus([]).decode()
