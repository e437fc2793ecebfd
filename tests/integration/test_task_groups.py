"""Task groups: several connector tasks in one Spark task slot (`eosconnect.tasks.per.slot`), and
the fault semantics docs/architecture.md promises for them, on a real worker and broker."""

from __future__ import annotations

import os
import re
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


def _writes_on_exactly_once(worker, name: str, data: str, read_committed) -> None:
    """Connector `name`'s two tasks write on; deleted, every sequence number of each task up to its
    highest is in `data` once."""
    before = len(read_committed(data))
    worker.wait_for(lambda: len(read_committed(data)) > before + 200, 60, "the tasks to write again")
    assert worker.request("DELETE", f"/connectors/{name}").status_code == 204
    time.sleep(2)
    observed = committed(read_committed, data)
    highest = {task: max(seq for t, seq in observed if t == task) for task in (0, 1)}
    report = check_sequences(observed, {task: top + 1 for task, top in highest.items()})
    assert report.ok, report.anomalies  # every number up to the highest, once


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


def test_a_slot_host_spark_gave_up_on_fails_every_task_in_it_naming_the_host(
    workers, topic_name, create_topic, read_committed
):
    """The packed form of test_worker_modes.py::test_task_spark_gave_up_on_fails_and_its_siblings_run_on:
    the two tasks share a slot host, so killing its Python worker once per Spark attempt (`local[2,4]`:
    4) kills both each time. When Spark gives up on the host, each task is FAILED with Spark's reason,
    naming the host, the mate that died with it and the settings that change it (cluster/host_loss.py);
    a REST restart of each brings them back, and the output stays exactly once."""
    data = create_topic(topic_name("data"), partitions=2)
    # a crash loop however slow the machine (see the next test for spread-out attempts)
    worker = workers(**PACKED, **{"eosconnect.relaunch.min.attempt.ms": "600000"})
    connector = {**sequence(data, 1_000_000), "tasks.max": "2"}
    assert worker.create_connector("gu", connector).status_code == 201
    worker.wait_for(lambda: worker.task_states("gu") == ["RUNNING"] * 2, 90, "two RUNNING tasks")
    tasks = runtimes(worker)
    assert tasks["gu-0"]["pid"] == tasks["gu-1"]["pid"], f"the two tasks do not share a slot: {tasks}"
    for attempt in range(4):
        host_pid = runtimes(worker)["gu-0"]["pid"]
        os.kill(host_pid, signal.SIGKILL)
        if attempt < 3:  # Spark runs attempts 2..4 of the host, each running both tasks again
            worker.wait_for(
                lambda p=host_pid: all(
                    (t := runtimes(worker)[f"gu-{i}"])["pid"] not in (None, p) and t["state"] == "RUNNING"
                    for i in (0, 1)
                ),
                120,
                f"attempt {attempt + 2} of the slot host",
            )
    worker.wait_for(lambda: worker.task_states("gu") == ["FAILED"] * 2, 90, "both tasks FAILED")
    for task, mate in ((0, "gu-1"), (1, "gu-0")):
        trace = worker.status("gu")["tasks"][task]["trace"]
        assert f"task gu-{task} was lost: Spark gave up on it" in trace and "failed 4 times" in trace, trace
        assert "It ran in slot host" in trace and f"sharing its Python worker: {mate}" in trace, trace
        assert "eosconnect.own.slot=true" in trace and "eosconnect.tasks.per.slot, now 4" in trace, trace
        assert "Python worker exited unexpectedly" in trace, trace

    for task in (0, 1):
        assert worker.request("POST", f"/connectors/gu/tasks/{task}/restart").status_code == 204
    worker.wait_for(lambda: worker.task_states("gu") == ["RUNNING"] * 2, 120, "both RUNNING after restart")
    _writes_on_exactly_once(worker, "gu", data, read_committed)


def test_a_slot_host_whose_attempts_were_spread_out_runs_its_tasks_again_instead_of_failing_them(
    workers, topic_name, create_topic, read_committed
):
    """Spark's attempt budget is for a long-running task's whole life: `local[2,2]` gives a slot host
    two. Its Python worker killed twice, with the attempts living longer than
    `eosconnect.relaunch.min.attempt.ms` on average, is no crash loop (the test above is one): the
    leader runs both tasks again in a new Spark job, never FAILED, and the output stays exactly once."""
    data = create_topic(topic_name("data"), partitions=2)
    settings = {**PACKED, "spark.master": "local[2,2]", "eosconnect.relaunch.min.attempt.ms": "4000"}
    worker = workers(**settings)
    connector = {**sequence(data, 1_000_000), "tasks.max": "2"}
    created = time.monotonic()
    assert worker.create_connector("so", connector).status_code == 201
    worker.wait_for(lambda: worker.task_states("so") == ["RUNNING"] * 2, 90, "two RUNNING tasks")
    seen: set[str] = set()

    def running_in_a_new_worker(old_pid: int) -> bool:
        states = worker.task_states("so")
        seen.update(states)
        tasks = runtimes(worker)
        return states == ["RUNNING"] * 2 and all(
            tasks[f"so-{i}"]["pid"] not in (None, old_pid) and tasks[f"so-{i}"]["state"] == "RUNNING"
            for i in (0, 1)
        )

    for attempt in range(2):  # the second kill uses up the host's last attempt
        time.sleep(max(0.0, created + 7 * (attempt + 1) - time.monotonic()))  # > 4 s per attempt
        host_pid = runtimes(worker)["so-0"]["pid"]
        assert host_pid == runtimes(worker)["so-1"]["pid"], "the two tasks share a slot host"
        os.kill(host_pid, signal.SIGKILL)
        worker.wait_for(
            lambda p=host_pid: running_in_a_new_worker(p), 120, f"both tasks back after kill {attempt + 1}"
        )
    assert "FAILED" not in seen, f"a task was failed on the way: {seen}"
    assert "not a crash loop" in worker.log_path.read_text(), "the relaunch is said once, at WARN"
    _writes_on_exactly_once(worker, "so", data, read_committed)


def test_a_frozen_slot_host_is_evacuated_and_its_tasks_of_two_connectors_run_on_exactly_once(
    workers, topic_name, create_topic, read_committed
):
    """A SIGSTOPped slot host running tasks of two connectors is alive for Spark, which therefore never
    runs it again. Each task shows UNASSIGNED naming the host, its Python worker and the mates that
    went silent with it; after twice the heartbeat timeout the leader starts them again in another
    host (cluster/host_evacuation.py), where they fence the frozen instances: both connectors are
    RUNNING again while the host is still frozen. Thawed, the zombies end quietly (no ERROR line, no
    FAILED status), the empty host ends, and every record is written once."""
    fz_topic, fm_topic = create_topic(topic_name("fz"), partitions=2), create_topic(topic_name("fm"))
    worker = workers(**PACKED, **{"task.heartbeat.timeout.ms": "3000"})
    assert worker.create_connector("fz", {**sequence(fz_topic, 4000), "tasks.max": "2"}).status_code == 201
    worker.wait_for(lambda: worker.task_states("fz") == ["RUNNING"] * 2, 90, "fz's two tasks RUNNING")
    assert worker.create_connector("fm", sequence(fm_topic, 4000)).status_code == 201
    worker.wait_for(lambda: worker.task_states("fm") == ["RUNNING"], 90, "fm RUNNING")
    before = runtimes(worker)
    host_pid = before["fz-0"]["pid"]
    assert before["fz-1"]["pid"] == before["fm-0"]["pid"] == host_pid, f"not one slot host: {before}"
    worker.wait_for(lambda: len(read_committed(fm_topic)) > 200, 60, "some records")

    silent: dict[str, str] = {}

    def moved() -> bool:
        for name in ("fz", "fm"):
            for t, entry in enumerate(worker.status(name)["tasks"]):
                if entry["state"] == "UNASSIGNED":
                    silent.setdefault(f"{name}-{t}", entry.get("trace", ""))
        now = runtimes(worker)
        return all(now[k]["state"] == "RUNNING" and now[k]["pid"] not in (None, host_pid) for k in before)

    os.kill(host_pid, signal.SIGSTOP)
    try:
        worker.wait_for(moved, 90, "every task RUNNING in another Python worker while the host is frozen")
        log_text = worker.log_path.read_text(errors="replace")
        found = re.search(rf"slot host (\w+) \(Python worker pid {host_pid}\) has not been heard", log_text)
        assert found, "no evacuation in the log"
        host_id = found.group(1)
        assert "running its task(s) fm-0, fz-0, fz-1 in other slot hosts" in log_text
        mates = f"(Python worker pid {host_pid}) with 2 other task(s) sharing its Python worker: fm-0, fz-1"
        assert mates in silent.get("fz-0", ""), silent
    finally:
        os.kill(host_pid, signal.SIGCONT)
    worker.wait_for(
        lambda: f"slot host {host_id} ends" in worker.log_path.read_text(errors="replace"),
        90,
        "the thawed host to end (its zombies told to stop)",
    )
    worker.wait_for(lambda: len(read_committed(fz_topic)) >= 8000, 120, "fz's 8000 records")
    worker.wait_for(lambda: len(read_committed(fm_topic)) >= 4000, 120, "fm's 4000 records")
    time.sleep(2)
    assert check_sequences(committed(read_committed, fz_topic), {0: 4000, 1: 4000}).ok
    assert check_sequences(committed(read_committed, fm_topic), {0: 4000}).ok
    for name in ("fz", "fm"):
        assert "FAILED" not in worker.task_states(name), worker.status(name)
    problems = [
        line
        for line in worker.log_path.read_text(errors="replace").splitlines()
        if (" ERROR " in line or " CRITICAL " in line) and "eosconnect.kafka" not in line
    ]
    assert not problems, problems


def test_tasks_without_a_free_slot_are_unassigned_naming_the_packing_setting(
    workers, topic_name, create_topic
):
    """One slot, two tasks per slot (set here, whatever the default): `first`'s two tasks fill the one
    slot host, so `second` has no slot and says which setting gives it one."""
    topic = create_topic(topic_name("data"), partitions=2)
    worker = workers(**{"spark.master": "local[1,2]", "eosconnect.tasks.per.slot": "2"})
    first = sequence(topic, 1_000_000, rate="50", **{"tasks.max": "2"})
    assert worker.create_connector("first", first).status_code == 201
    worker.wait_for(lambda: worker.task_states("first") == ["RUNNING"] * 2, 90, "first RUNNING")
    assert worker.create_connector("second", sequence(topic, 1_000_000, rate="50")).status_code == 201
    worker.wait_for(lambda: worker.task_states("second") == ["UNASSIGNED"], 60, "second UNASSIGNED")
    trace = worker.status("second")["tasks"][0].get("trace", "")
    assert "0 of 1 are free" in trace and "raise eosconnect.tasks.per.slot (worker), now 2" in trace, trace
