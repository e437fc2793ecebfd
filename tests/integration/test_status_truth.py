"""Task status comes from heartbeats, and the REST API answers it from memory, also without Kafka.

A task whose Python worker is frozen (SIGSTOP) still "runs" as far as Spark knows; its status must
say it is not RUNNING once it has been silent for `task.heartbeat.timeout.ms`, and RUNNING again when
it reports. With the worker's only broker killed, status requests still answer within a second.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.tools.worker_process import WorkerProcess

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_status_follows_heartbeats_and_is_served_without_kafka(tmp_path: Path) -> None:
    kafka = LocalKafkaCluster(tmp_path / "kafka", brokers=1, tie_to_parent=True)
    kafka.start()
    worker: WorkerProcess | None = None
    try:
        admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
        for future in admin.create_topics([NewTopic("data", 2, 1)]).values():
            future.result(30)
        props = {
            "bootstrap.servers": kafka.bootstrap_servers,
            "group.id": "status-truth",
            "offset.storage.partitions": "1",
            "offset.storage.replication.factor": "1",
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "status.storage.partitions": "1",
            "exactly.once.source.support": "enabled",
            "listeners": "http://127.0.0.1:0",
            "task.heartbeat.timeout.ms": "3000",
            "spark.master": "local[4,4]",
            "spark.driver.memory": "768m",
        }
        worker = WorkerProcess(props, tmp_path / "w1").start()
        config = {
            "connector.class": "SequenceSource",
            "tasks.max": "2",
            "topic": "data",
            "records.per.task": "-1",
            "batch.size": "10",
            "rate.per.task": "50",
        }
        assert worker.create_connector("seq", config).status_code == 201
        worker.wait_for(lambda: worker.task_states("seq") == ["RUNNING"] * 2, 120, "two RUNNING tasks")

        frozen = worker.request("GET", "/internal/tasks").json()["seq-1"]["pid"]
        os.kill(frozen, signal.SIGSTOP)
        try:
            stopped_at = time.monotonic()
            worker.wait_for(
                lambda: worker.task_states("seq") == ["RUNNING", "UNASSIGNED"], 20, "seq-1 silent"
            )
            silent_after = time.monotonic() - stopped_at
            trace = worker.status("seq")["tasks"][1].get("trace", "")
            assert "no heartbeat from task seq-1" in trace, trace
            assert silent_after >= 2.5, "shown not RUNNING before the heartbeat timeout"
        finally:
            os.kill(frozen, signal.SIGCONT)
        worker.wait_for(lambda: worker.task_states("seq") == ["RUNNING"] * 2, 30, "seq-1 RUNNING again")

        for node in kafka.state.nodes:
            kafka.kill_node(node.node_id)
        for _ in range(5):
            began = time.monotonic()
            response = worker.request("GET", "/connectors/seq/status")
            took = time.monotonic() - began
            assert response.status_code == 200, response.text
            assert took < 1.0, f"status took {took:.2f}s without Kafka"
            time.sleep(0.5)
        states = [t["state"] for t in response.json()["tasks"]]
        assert len(states) == 2 and all(s in ("RUNNING", "UNASSIGNED") for s in states), states
    finally:
        if worker is not None:
            worker.kill()
        kafka.stop()
