"""Task status comes from heartbeats, and the REST API answers it from memory, also without Kafka.

A task whose Python worker is frozen (SIGSTOP) still "runs" as far as Spark knows; its status must
say it is not RUNNING once it has been silent for `task.heartbeat.timeout.ms`, and RUNNING again when
it reports. With the worker's only broker killed, status requests still answer within a second.

The module runs one worker on a broker of its own (`private_kafka`), which the tests stop.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import pytest

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.tools.worker_process import WorkerProcess
from support.workers import create_topics, private_kafka, sequence_config, worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@pytest.fixture(scope="module")
def own_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    with private_kafka(tmp_path_factory.mktemp("status-kafka")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def worker(own_kafka: LocalKafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    props = worker_settings(
        own_kafka.bootstrap_servers,
        "status-truth",
        **{"task.heartbeat.timeout.ms": "3000", "spark.master": "local[4,4]"},
    )
    process = WorkerProcess(props, tmp_path_factory.mktemp("status-worker")).start()
    yield process
    process.kill()


def test_status_follows_heartbeats_and_is_served_without_kafka(
    own_kafka: LocalKafkaCluster, worker: WorkerProcess
) -> None:
    create_topics(own_kafka.bootstrap_servers, ("data", 2))
    assert worker.create_connector("seq", sequence_config("data", tasks=2)).status_code == 201
    worker.wait_for(lambda: worker.task_states("seq") == ["RUNNING"] * 2, 120, "two RUNNING tasks")

    frozen = worker.request("GET", "/internal/tasks").json()["seq-1"]["pid"]
    os.kill(frozen, signal.SIGSTOP)
    try:
        stopped_at = time.monotonic()
        worker.wait_for(lambda: worker.task_states("seq") == ["RUNNING", "UNASSIGNED"], 20, "seq-1 silent")
        silent_after = time.monotonic() - stopped_at
        trace = worker.status("seq")["tasks"][1].get("trace", "")
        assert "no heartbeat from task seq-1" in trace, trace
        assert silent_after >= 2.5, "shown not RUNNING before the heartbeat timeout"
    finally:
        os.kill(frozen, signal.SIGCONT)
    worker.wait_for(lambda: worker.task_states("seq") == ["RUNNING"] * 2, 30, "seq-1 RUNNING again")

    for node in own_kafka.state.nodes:
        own_kafka.kill_node(node.node_id)
    for _ in range(5):
        began = time.monotonic()
        response = worker.request("GET", "/connectors/seq/status")
        took = time.monotonic() - began
        assert response.status_code == 200, response.text
        assert took < 1.0, f"status took {took:.2f}s without Kafka"
        time.sleep(0.5)
    states = [t["state"] for t in response.json()["tasks"]]
    assert len(states) == 2 and all(s in ("RUNNING", "UNASSIGNED") for s in states), states
