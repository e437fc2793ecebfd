"""Task groups: several connector tasks in one Spark task slot (`eosconnect.tasks.per.slot`), and
the fault semantics docs/architecture.md promises for them, on a real worker and broker."""

from __future__ import annotations

import os
import signal
import time

import pytest

from eosconnect.connectors.sequence import parse_value
from eosconnect.tools.verify import check_sequences

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PACKED = {"eosconnect.tasks.per.slot": "4", "spark.master": "local[2,4]"}


def sequence(topic: str, total: int, rate: str = "200", **extra: str) -> dict[str, str]:
    return {
        "connector.class": "SequenceSource",
        "tasks.max": "1",
        "topic": topic,
        "records.per.task": str(total),
        "batch.size": "20",
        "rate.per.task": rate,
        "payload.bytes": "10",
        **extra,
    }


def runtimes(worker) -> dict:
    return worker.request("GET", "/internal/tasks").json()


def committed(read_committed, topic: str) -> list[tuple[int, int]]:
    return [parse_value(r.value) for r in read_committed(topic)]


def test_a_failing_task_leaves_its_slot_mate_running_and_a_killed_slot_brings_the_mate_back_exactly_once(
    workers, topic_name, create_topic, read_committed
):
    good_topic, bad_topic = create_topic(topic_name("good")), create_topic(topic_name("bad"))
    worker = workers(**PACKED)
    assert worker.create_connector("good", sequence(good_topic, 4000)).status_code == 201
    bad = {
        **sequence(bad_topic, 100000),
        "connector.class": "support.connectors.FailingSequenceConnector",
        "fail.after.polls": "60",
    }
    assert worker.create_connector("bad", bad).status_code == 201
    worker.wait_for(lambda: worker.task_states("good") == ["RUNNING"], 90, "good RUNNING")
    worker.wait_for(lambda: worker.task_states("bad") == ["FAILED"], 90, "bad FAILED")
    tasks = runtimes(worker)
    assert tasks["good-0"]["pid"] == tasks["bad-0"]["pid"], f"the two tasks do not share a slot: {tasks}"
    assert "the source went away" in worker.status("bad")["tasks"][0]["trace"]

    # Its slot mate goes on writing after the failure.
    before = len(read_committed(good_topic))
    worker.wait_for(lambda: len(read_committed(good_topic)) > before + 200, 60, "good to go on writing")
    assert worker.task_states("good") == ["RUNNING"]

    # SIGKILL the shared Python worker: Spark retries the slot, the task comes back in a new process
    # from its committed offsets; the failed task (ended) is not run again.
    host_pid = runtimes(worker)["good-0"]["pid"]
    os.kill(host_pid, signal.SIGKILL)
    worker.wait_for(
        lambda: (t := runtimes(worker)["good-0"])["pid"] not in (None, host_pid) and t["state"] == "RUNNING",
        120,
        "good RUNNING in a new Python worker",
    )
    assert worker.task_states("bad") == ["FAILED"]
    worker.wait_for(lambda: len(read_committed(good_topic)) >= 4000, 120, "all 4000 records committed")
    time.sleep(2)
    report = check_sequences(committed(read_committed, good_topic), {0: 4000})
    assert report.ok, report.anomalies


def test_reconfiguring_one_connector_does_not_restart_its_slot_mate(
    workers, topic_name, create_topic, read_committed
):
    a_topic, b_topic = create_topic(topic_name("a")), create_topic(topic_name("b"))
    worker = workers(**PACKED)
    for name, topic in (("a", a_topic), ("b", b_topic)):
        assert worker.create_connector(name, sequence(topic, 1_000_000, rate="100")).status_code == 201
    for name in ("a", "b"):
        worker.wait_for(lambda n=name: worker.task_states(n) == ["RUNNING"], 90, f"{name} RUNNING")
    before = runtimes(worker)
    assert before["a-0"]["pid"] == before["b-0"]["pid"], f"the two tasks do not share a slot: {before}"

    reconfigured = worker.request(
        "PUT", "/connectors/a/config", json=sequence(a_topic, 1_000_000, rate="150")
    )
    assert reconfigured.status_code == 200, reconfigured.text
    worker.wait_for(
        lambda: (
            runtimes(worker)["a-0"]["generation"] > before["a-0"]["generation"]
            and worker.task_states("a") == ["RUNNING"]
        ),
        90,
        "a's new generation RUNNING",
    )
    after = runtimes(worker)
    for key in ("pid", "instance", "generation", "state"):
        assert after["b-0"][key] == before["b-0"][key], (
            f"b-0 was restarted: {before['b-0']} -> {after['b-0']}"
        )
    assert worker.task_states("b") == ["RUNNING"]
    count = len(read_committed(b_topic))
    worker.wait_for(lambda: len(read_committed(b_topic)) > count + 100, 60, "b to go on writing")


def test_tasks_without_a_free_slot_are_unassigned_naming_the_packing_setting(
    workers, topic_name, create_topic
):
    topic = create_topic(topic_name("data"))
    worker = workers(**{"spark.master": "local[1,2]"})
    assert worker.create_connector("first", sequence(topic, 1_000_000, rate="50")).status_code == 201
    worker.wait_for(lambda: worker.task_states("first") == ["RUNNING"], 90, "first RUNNING")
    assert worker.create_connector("second", sequence(topic, 1_000_000, rate="50")).status_code == 201
    worker.wait_for(lambda: worker.task_states("second") == ["UNASSIGNED"], 60, "second UNASSIGNED")
    trace = worker.status("second")["tasks"][0].get("trace", "")
    assert "0 of 1 are free" in trace and "eosconnect.tasks.per.slot" in trace, trace
