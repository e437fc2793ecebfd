"""The worker end to end: a real `eosconnect worker` process, its REST API, its tasks on Spark."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import httpx
import pytest

from eosconnect.connectors.sequence import parse_value
from eosconnect.tools.verify import check_sequences

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def sequence(name: str, topic: str, tasks: int, total: int, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "SequenceSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "records.per.task": str(total),
        "batch.size": "20",
        "rate.per.task": extra.pop("rate", "500"),
        "payload.bytes": "10",
        **extra,
    }


def guide_example() -> str:
    """The first Python block of docs/connector-guide.md (the counter source connector)."""
    guide = Path(__file__).resolve().parents[2] / "docs" / "connector-guide.md"
    match = re.search(r"```python\n(.*?)```", guide.read_text(), re.S)
    assert match is not None
    return match.group(1)


def committed_sequences(read_committed, topic: str) -> list[tuple[int, int]]:
    return [parse_value(r.value) for r in read_committed(topic)]


def test_connector_lifecycle_on_one_worker(workers, topic_name, create_topic, read_committed):
    data = create_topic(topic_name("data"), partitions=2)
    worker = workers()
    assert worker.request("GET", "/").json()["version"]

    created = worker.create_connector("seq", sequence("seq", data, 2, 1500))
    assert created.status_code == 201, created.text
    worker.wait_for(lambda: worker.task_states("seq") == ["RUNNING", "RUNNING"], 90, "two RUNNING tasks")

    assert worker.request("PUT", "/connectors/seq/pause").status_code == 202
    worker.wait_for(lambda: worker.task_states("seq") == ["PAUSED", "PAUSED"], 30, "tasks PAUSED")
    paused_count = len(read_committed(data))
    time.sleep(2)
    assert len(read_committed(data)) == paused_count, "a paused connector kept writing"
    assert worker.request("PUT", "/connectors/seq/resume").status_code == 202

    worker.wait_for(lambda: len(read_committed(data)) >= 3000, 120, "3000 committed records")
    report = check_sequences(committed_sequences(read_committed, data), {0: 1500, 1: 1500})
    assert report.ok, report.anomalies

    unsigned = worker.request("PUT", "/connectors/seq/fence")
    assert unsigned.status_code == 400  # Kafka Connect: missing signature 400, wrong one 403
    forged = worker.request(
        "PUT",
        "/connectors/seq/fence",
        headers={
            "X-Connect-Authorization": "Zm9yZ2Vk",
            "X-Connect-Request-Signature-Timestamp": str(int(time.time() * 1000)),
        },
    )
    assert forged.status_code == 403

    assert worker.request("DELETE", "/connectors/seq").status_code == 204
    assert worker.request("GET", "/connectors/seq").status_code == 404


def test_reconfiguration_fences_a_frozen_zombie(workers, topic_name, create_topic, read_committed):
    """3 tasks -> 2 -> 4 while a generation-0 task's Python worker is frozen with SIGSTOP."""
    data = create_topic(topic_name("data"), partitions=4)
    worker = workers(**{"eosconnect.zombie.cancel.timeout.ms": "600000"})
    config = sequence(
        "zz",
        data,
        3,
        100000,
        rate="200",
        **{"transaction.boundary": "interval"},
        **{"transaction.boundary.interval.ms": "1000"},
    )
    assert worker.create_connector("zz", config).status_code == 201
    worker.wait_for(lambda: worker.task_states("zz") == ["RUNNING"] * 3, 90, "three RUNNING tasks")
    worker.wait_for(lambda: len(read_committed(data)) > 300, 60, "some committed records")

    runtimes = worker.request("GET", "/internal/tasks").json()
    zombie_pid = runtimes["zz-2"]["pid"]
    os.kill(zombie_pid, signal.SIGSTOP)
    try:
        # (No read_committed read here: the frozen task's open transaction blocks readers of its
        # partition until the next generation's fencing round aborts it.)
        assert (
            worker.request("PUT", "/connectors/zz/config", json={**config, "tasks.max": "2"}).status_code
            == 200
        )
        worker.wait_for(lambda: worker.task_states("zz") == ["RUNNING"] * 2, 90, "generation with 2 tasks")
        frozen_at = len([1 for t, _ in committed_sequences(read_committed, data) if t == 2])
        assert (
            worker.request("PUT", "/connectors/zz/config", json={**config, "tasks.max": "4"}).status_code
            == 200
        )
        worker.wait_for(lambda: worker.task_states("zz") == ["RUNNING"] * 4, 90, "generation with 4 tasks")
        worker.wait_for(
            lambda: (
                len([1 for t, _ in committed_sequences(read_committed, data) if t == 2]) > frozen_at + 200
            ),
            90,
            "the new task 2 to write",
        )
    finally:
        os.kill(zombie_pid, signal.SIGCONT)
    time.sleep(5)  # let the zombie try to commit what it had open
    assert worker.request("DELETE", "/connectors/zz").status_code == 204
    observed = committed_sequences(read_committed, data)
    highest: dict[int, int] = {}
    for task, seq in observed:
        highest[task] = max(highest.get(task, -1), seq)
    report = check_sequences(observed, {t: n + 1 for t, n in highest.items()})
    assert report.ok, report.anomalies


def test_leader_failover_keeps_exactly_once(workers, topic_name, create_topic, read_committed):
    data = create_topic(topic_name("data"), partitions=2)
    first = workers("w1")
    second = workers("w2")
    leader, follower = (first, second)
    config = sequence("ha", data, 2, 2500, rate="250")
    response = follower.create_connector("ha", config)
    assert response.status_code == 201, response.text  # forwarded to the leader
    leader.wait_for(lambda: leader.task_states("ha") == ["RUNNING", "RUNNING"], 90, "tasks RUNNING")
    leader.wait_for(lambda: len(read_committed(data)) > 400, 60, "some records")

    leader.kill()
    follower.wait_for(
        lambda: (
            httpx.get(follower.url + "/connectors/ha/status", timeout=10).json()["tasks"][0]["worker_id"]
            == follower.url.split("://")[1]
            and follower.task_states("ha") == ["RUNNING", "RUNNING"]
        ),
        90,
        "the follower to take over",
    )
    follower.wait_for(lambda: len(read_committed(data)) >= 5000, 180, "all 5000 records")
    report = check_sequences(committed_sequences(read_committed, data), {0: 2500, 1: 2500})
    assert report.ok, report.anomalies


def test_kafka_connect_py_drives_the_real_worker(workers, topic_name, create_topic, read_committed, tmp_path):
    """A client written for Kafka Connect (kafka-connect-py from PyPI) works unchanged. The worker's
    plugin.path holds docs/connector-guide.md's example as a module: listed with its version."""
    kafka_connect = pytest.importorskip("kafka_connect")
    data = create_topic(topic_name("data"))
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "guide_counter.py").write_text(guide_example() + '\n__version__ = "1.0"\n')
    worker = workers(**{"plugin.path": str(plugins)})
    connect = kafka_connect.KafkaConnect(url=worker.url)
    assert set(connect.get_cluster_info()) == {"version", "commit", "kafka_cluster_id"}
    listed = {p["class"]: p for p in connect.list_connector_plugins()}
    assert "eosconnect.connectors.sequence.SequenceSourceConnector" in listed
    assert listed["guide_counter.CounterSourceConnector"] == {
        "class": "guide_counter.CounterSourceConnector",
        "type": "source",
        "version": "1.0",
    }
    bad = connect.validate_connector_config(
        "SequenceSource", {"connector.class": "SequenceSource", "tasks.max": "0"}
    )
    assert bad["error_count"] >= 1
    config = sequence("kc", data, 1, 100000, rate="100")
    worker.wait_for(lambda: worker.create_connector("kc", config).status_code in (201, 409), 60, "creation")
    assert connect.list_connectors() == ["kc"]
    worker.wait_for(
        lambda: connect.get_connector_status("kc")["tasks"][0]["state"] == "RUNNING", 90, "RUNNING"
    )
    assert connect.update_connector("kc", {**config, "rate.per.task": "200"})["name"] == "kc"
    assert connect.get_connector_config("kc")["rate.per.task"] == "200"
    connect.pause_connector("kc")
    worker.wait_for(lambda: connect.get_connector_status("kc")["tasks"][0]["state"] == "PAUSED", 60, "PAUSED")
    connect.resume_connector("kc")
    worker.wait_for(
        lambda: connect.get_connector_status("kc")["tasks"][0]["state"] == "RUNNING", 60, "RUNNING"
    )
    connect.restart_connector_task("kc", 0)
    worker.wait_for(
        lambda: connect.get_connector_status("kc")["tasks"][0]["state"] == "RUNNING", 90, "restarted"
    )
    worker.wait_for(
        lambda: connect.list_connector_topics("kc") == {"kc": {"topics": [data]}}, 30, "active topics"
    )
    connect.delete_connector("kc")
    assert connect.list_connectors() == []
    observed = committed_sequences(read_committed, data)
    report = check_sequences(observed, {0: max(s for _, s in observed) + 1})
    assert report.ok, report.anomalies


def test_running_connector_asks_for_new_task_configs_and_can_fail_itself(
    workers, topic_name, create_topic, read_committed, tmp_path
):
    """The leader keeps the connector started: its own thread asks for new task configs (a new
    generation starts without any REST call) and can fail it (FAILED with the error, tasks go on,
    until a restart)."""
    data = create_topic(topic_name("watched"), partitions=2)
    watch = tmp_path / "watch"
    watch.write_text("tasks=1")
    worker = workers()
    config = sequence("w", data, 2, 1500, rate="300")
    config["connector.class"] = "support.connectors.WatchingSequenceConnector"
    config["watch.file"] = str(watch)
    assert worker.create_connector("w", config).status_code == 201
    worker.wait_for(lambda: worker.task_states("w") == ["RUNNING"], 90, "one RUNNING task")

    watch.write_text("tasks=2")
    worker.wait_for(lambda: worker.task_states("w") == ["RUNNING", "RUNNING"], 90, "a second task, unasked")

    watch.write_text("fail")
    worker.wait_for(lambda: worker.status("w")["connector"]["state"] == "FAILED", 30, "the connector FAILED")
    status = worker.status("w")
    assert "the watched source is gone" in status["connector"]["trace"]
    assert [t["state"] for t in status["tasks"]] == ["RUNNING", "RUNNING"], "tasks keep running"

    watch.write_text("tasks=2")
    assert worker.request("POST", "/connectors/w/restart").status_code in (200, 202, 204)
    worker.wait_for(lambda: worker.status("w")["connector"]["state"] == "RUNNING", 30, "RUNNING again")

    worker.wait_for(lambda: len(read_committed(data)) >= 3000, 120, "3000 committed records")
    report = check_sequences(committed_sequences(read_committed, data), {0: 1500, 1: 1500})
    assert report.ok, report.anomalies
