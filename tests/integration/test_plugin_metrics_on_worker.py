"""KIP-877 on a real broker: metrics a connector, its task, a transformation and a converter register
appear on the worker's `/metrics` under Kafka Connect's tags, and leave with the connector; a sink
task's consumer lag (Kafka's sink-record-lag-max)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from prometheus_client.parser import text_string_to_metric_families

from eosconnect.tools.worker_process import WorkerProcess
from support.workers import create_topics, delete_connector, sequence_config, wait_running, worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SUPPORT = "support.monitored_connectors"

#: Sample labels by series name, for the plugin series of the worker's `/metrics`.
Series = dict[str, list[tuple[dict[str, str], float]]]


@pytest.fixture(scope="module")
def worker(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    props = worker_settings(
        bootstrap, f"plugin-metrics-{uuid.uuid4().hex[:8]}", **{"spark.master": "local[2,2]"}
    )
    process = WorkerProcess(props, tmp_path_factory.mktemp("plugin-metrics") / "w1").start(timeout=300)
    yield process
    process.stop()


def task_series(worker: WorkerProcess, metric: str, connector: str) -> float | None:
    for family in text_string_to_metric_families(worker.request("GET", "/metrics").text):
        for sample in family.samples:
            if sample.name == metric and sample.labels.get("connector") == connector:
                return sample.value
    return None


def plugin_series(worker: WorkerProcess, connector: str) -> Series:
    response = worker.request("GET", "/metrics")
    assert response.status_code == 200, response.text
    series: Series = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            if sample.name.startswith("eosconnect_plugin_") and sample.labels.get("connector") == connector:
                series.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return series


def test_plugin_metrics_carry_kafkas_tags_and_leave_with_the_connector(worker: WorkerProcess) -> None:
    name = f"pm-{uuid.uuid4().hex[:6]}"
    config = {
        **sequence_config(name),
        "connector.class": f"{SUPPORT}.MonitoredSequenceConnector",
        "value.converter": f"{SUPPORT}.CountingJsonConverter",
        "transforms": "count",
        "transforms.count.type": f"{SUPPORT}.CountingTransformation",
    }
    assert worker.create_connector(name, config).status_code == 201
    try:
        wait_running(worker, name)
        wanted = (
            "eosconnect_plugin_task_configs_generated",
            "eosconnect_plugin_next_seq",
            "eosconnect_plugin_poll_size_max",
            "eosconnect_plugin_poll_size_total",
            "eosconnect_plugin_records_seen",
            "eosconnect_plugin_serialise_calls",
        )

        def counted() -> bool:
            series = plugin_series(worker, name)
            return all(series.get(metric) and series[metric][0][1] > 0 for metric in wanted)

        worker.wait_for(counted, 120, "the plugins' metrics, counted, on /metrics")
        series = plugin_series(worker, name)
        [(connector_labels, _)] = series["eosconnect_plugin_task_configs_generated"]
        assert connector_labels == {"connector": name}  # the leader runs the connector: this worker
        task_tags = {"connector": name, "task": "0"}
        for metric in ("eosconnect_plugin_next_seq", "eosconnect_plugin_poll_size_max"):
            [(labels, _)] = series[metric]
            assert {k: v for k, v in labels.items() if v} == task_tags, labels
        [(_, poll_max)] = series["eosconnect_plugin_poll_size_max"]
        assert 0 < poll_max <= 10  # batch.size
        [(seen_labels, _)] = series["eosconnect_plugin_records_seen"]
        assert seen_labels == {
            **task_tags,
            "transformation": "count",
            "class": "CountingTransformation",
            "version": "1.2.3",
        }
        [(converter_labels, _)] = series["eosconnect_plugin_serialise_calls"]
        assert converter_labels == {**task_tags, "converter": "value", "class": "CountingJsonConverter"}
    finally:
        delete_connector(worker, name)
    worker.wait_for(
        lambda: not plugin_series(worker, name), 120, "the deleted connector's plugin metrics to go"
    )


def test_a_sink_task_behind_its_topic_reports_kafkas_sink_record_lag_max(
    worker: WorkerProcess, bootstrap: str
) -> None:
    name = f"lag-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, (name, 1))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5000):
        producer.produce(name, value=str(i).encode())
    assert producer.flush(30) == 0
    config = {
        "connector.class": f"{SUPPORT}.SlowSinkConnector",
        "topics": name,
        "put.delay.ms": "1000",
        "value.converter": "string",
        "key.converter": "string",
    }
    assert worker.create_connector(name, config).status_code == 201
    try:
        wait_running(worker, name)

        # a put takes at most 500 records a second, so most of the 5000 wait behind the position
        def behind() -> bool:
            return (task_series(worker, "eosconnect_task_sink_record_lag_max", name) or 0) >= 1000

        worker.wait_for(behind, 90, "the sink task's lag on /metrics")
        put_max = task_series(worker, "eosconnect_task_put_batch_max_time_ms", name)
        assert put_max is not None and put_max >= 1000, put_max  # a put of records sleeps 1 s
        lag = task_series(worker, "eosconnect_task_sink_record_lag_max", name)
        assert lag is not None and lag <= 5000, lag
    finally:
        delete_connector(worker, name)
