"""The worker end to end, continued (issue 4): mode changes, failed fencing, zombie leaders, lost tasks.

Each test runs real `eosconnect worker` processes (one Spark driver each, at most two at a time)
against the real broker and checks the output topic with read_committed: no gap, and no duplicate
wherever exactly-once is promised.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections import Counter
from typing import Any

import httpx
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from eosconnect.connectors.sequence import parse_value
from eosconnect.devkafka.ports import free_port
from eosconnect.storage.config_state import ConfigStateBuilder
from eosconnect.storage.serialization import decode_key, decode_value
from eosconnect.storage.topic_reader import TopicRecord, end_offsets
from eosconnect.tools.verify import check_sequences
from eosconnect.tools.worker_process import WorkerProcess
from support.chaos import endless_sequence

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def sequence(topic: str, tasks: int, rate: int = 200, **extra: str) -> dict[str, str]:
    """`endless_sequence` plus connector settings of the test."""
    return {**endless_sequence(topic, tasks, rate), **extra}


def worker_id(worker: WorkerProcess) -> str:
    return worker.url.split("://", 1)[1]


def running_on(worker: WorkerProcess, connector: str, tasks: int, via: WorkerProcess | None = None) -> bool:
    """All `tasks` tasks RUNNING, as reported by `worker` (status records outlive their writer)."""
    status = (via or worker).status(connector)
    entries = status.get("tasks", [])
    return len(entries) == tasks and all(
        t["state"] == "RUNNING" and t["worker_id"] == worker_id(worker) for t in entries
    )


def task_rate(worker: WorkerProcess, connector: str) -> str:
    """`rate.per.task` of the connector's current task configs."""
    return worker.request("GET", f"/connectors/{connector}/tasks").json()[0]["config"]["rate.per.task"]


def sequences(records: list[TopicRecord]) -> list[tuple[int, int]]:
    return [parse_value(r.value) for r in records]


def highest(observed: list[tuple[int, int]]) -> dict[int, int]:
    top: dict[int, int] = {}
    for task, seq in observed:
        top[task] = max(top.get(task, -1), seq)
    return top


def assert_exactly_once(observed: list[tuple[int, int]]) -> None:
    """Every sequence number from 0 to the highest seen, per task, exactly once."""
    report = check_sequences(observed, {t: n + 1 for t, n in highest(observed).items()})
    assert report.ok, report.anomalies


def assert_no_gap(observed: list[tuple[int, int]]) -> None:
    seen: dict[int, set[int]] = {}
    for task, seq in observed:
        seen.setdefault(task, set()).add(seq)
    for task, seqs in seen.items():
        missing = sorted(set(range(max(seqs) + 1)) - seqs)
        assert not missing, f"task {task}: {len(missing)} sequence numbers lost, first {missing[:10]}"


def count_of(read_committed, topic: str, task: int) -> int:
    return sum(1 for t, _ in sequences(read_committed(topic)) if t == task)


# ============================================================================ 1. rolling upgrade


@pytest.mark.long
def test_rolling_upgrade_disabled_preparing_enabled(
    workers, bootstrap, topic_name, create_topic, read_committed
):
    """KIP-618 "Rolling upgrade(s)": disabled -> preparing -> enabled, the worker restarted with each
    setting and one connector kept running across the restarts. Nothing is lost in any phase; from
    `enabled` on nothing is duplicated either, and the exactly-once tasks resume right after the
    offsets the at-least-once tasks committed. In `preparing` the leader already writes the config
    topic in transactions (`connect-cluster-<group.id>`); task-count records start with `enabled`."""
    data = create_topic(topic_name("data"), partitions=2)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config = sequence(data, 2, rate=200)

    # -- disabled: at-least-once, the config topic is written by a plain idempotent producer
    disabled = workers("disabled", "disabled")
    config_topic = disabled.props["config.storage.topic"]
    offsets_topic = disabled.props["offset.storage.topic"]
    assert disabled.create_connector("up", config).status_code == 201
    disabled.wait_for(lambda: running_on(disabled, "up", 2), 90, "tasks RUNNING (disabled)")
    disabled.wait_for(lambda: count_of(read_committed, data, 1) > 200, 60, "records (disabled)")
    disabled.stop()
    disabled_config_records = read_committed(config_topic)

    # -- preparing: still at-least-once, but the leader's config writes are transactions
    preparing = workers("preparing", "preparing")
    preparing.wait_for(lambda: running_on(preparing, "up", 2), 90, "tasks RUNNING (preparing)")
    reconfigured = {**config, "rate.per.task": "250"}  # new connector and task configs: leader writes
    assert preparing.request("PUT", "/connectors/up/config", json=reconfigured).status_code == 200
    preparing.wait_for(lambda: task_rate(preparing, "up") == "250", 30, "the new task configs")
    preparing.wait_for(lambda: running_on(preparing, "up", 2), 60, "new generation RUNNING (preparing)")
    before = count_of(read_committed, data, 1)
    preparing.wait_for(lambda: count_of(read_committed, data, 1) > before + 200, 60, "records (preparing)")
    preparing.stop()
    time.sleep(1)  # requests the killed at-least-once producers had in flight are appended by now

    config_records = read_committed(config_topic)
    plain = [r.offset for r in disabled_config_records]
    assert plain == list(range(len(plain))), "disabled: config writes should carry no transaction markers"
    written = [r for r in config_records if r.offset > plain[-1]]
    keys = [r.key.decode() for r in written if r.key]
    assert "connector-up" in keys and "commit-up" in keys, keys
    offsets = {r.offset for r in config_records}
    for r in written:
        # each leader write is one committed transaction: its last record is followed by the
        # transaction's COMMIT marker, which takes an offset but is no record
        if r.offset + 1 not in offsets:
            continue
        assert r.key and r.key.decode().startswith("task-up-"), (
            f"{r.key!r} at {r.offset} not in a transaction"
        )
    transactions = [r for r in written if r.offset + 1 not in offsets]
    assert len(transactions) >= 2, f"expected transactional writes, got offsets {[r.offset for r in written]}"
    group = preparing.props["group.id"]
    assert f"as connect-cluster-{group}" in preparing.log_path.read_text(), "no transactional leader writer"
    assert not [r for r in config_records if r.key == b"tasks-fencing-up"], "fencing before `enabled`"

    # the boundary: everything after these offsets is written by the exactly-once worker
    boundary = end_offsets(admin, [TopicPartition(data, p) for p in (0, 1)])
    committed: dict[int, int] = {}
    for r in read_committed(offsets_topic):
        _, partition = decode_key(r.key)
        offset = decode_value(r.value)
        if offset is not None:
            committed[int(partition["task"])] = int(offset["seq"])

    # -- enabled: exactly-once from here on
    enabled = workers("enabled", "enabled")
    enabled.wait_for(lambda: running_on(enabled, "up", 2), 90, "tasks RUNNING (enabled)")
    counts = {t: count_of(read_committed, data, t) for t in (0, 1)}
    enabled.wait_for(
        lambda: all(count_of(read_committed, data, t) > counts[t] + 300 for t in (0, 1)),
        90,
        "records (enabled)",
    )
    assert enabled.request("DELETE", "/connectors/up").status_code == 204
    time.sleep(2)

    records = read_committed(data)
    everything = sequences(records)
    assert_no_gap(everything)
    after = [parse_value(r.value) for r in records if r.offset >= boundary[(data, r.partition)]]
    assert {t for t, _ in after} == {0, 1}
    duplicates = [key for key, n in Counter(after).items() if n > 1]
    assert not duplicates, f"duplicates after exactly-once was enabled: {duplicates[:10]}"
    for task in (0, 1):
        seqs = sorted(s for t, s in after if t == task)
        assert seqs == list(range(committed[task] + 1, seqs[-1] + 1)), (
            f"task {task}: the exactly-once task should resume right after the committed offset "
            f"{committed[task]} and write without gaps; got {seqs[:5]}...{seqs[-5:]}"
        )
    # the first exactly-once task start-up had the leader write the connector's task-count record
    fencing = [r for r in read_committed(config_topic) if r.key == b"tasks-fencing-up"]
    assert fencing, "the enabled leader should have written a task-count record"


# ============================================================================ 2. failed fencing


def test_failed_fencing_round_fails_tasks_until_fixed(workers, topic_name, create_topic, read_committed):
    """KIP-618 "Cannot fence out producers during zombie fencing": a reconfiguration 2 -> 1 tasks needs
    the old ids fenced with the connector's producer settings; pointed at an unreachable cluster, the
    round fails, the task is FAILED with the leader's reason in its trace, and nothing is written.
    With the cause removed (a good config) the connector runs exactly once again, and so it does
    after a manual restart (`POST /connectors/ff/restart?includeTasks=true`)."""
    data = create_topic(topic_name("data"), partitions=2)
    worker = workers("w1")
    config = sequence(data, 2, rate=200)
    assert worker.create_connector("ff", config).status_code == 201
    worker.wait_for(lambda: running_on(worker, "ff", 2), 90, "two RUNNING tasks")
    worker.wait_for(lambda: count_of(read_committed, data, 1) > 200, 60, "some records")

    nobody_there = f"127.0.0.1:{free_port()}"  # nothing listens
    unreachable = {**config, "tasks.max": "1", "producer.override.bootstrap.servers": nobody_there}
    assert worker.request("PUT", "/connectors/ff/config", json=unreachable).status_code == 200
    worker.wait_for(lambda: worker.task_states("ff") == ["FAILED"], 120, "the task to FAIL")
    trace = worker.status("ff")["tasks"][0]["trace"]
    assert "could not fence zombies of connector 'ff'" in trace, trace
    assert "HTTP 500" in trace and "could not fence 2 of 2 transactional ids" in trace, trace
    group = worker.props["group.id"]
    assert f"{group}-ff-0" in trace and f"{group}-ff-1" in trace, trace
    # ... and why: the producers' own errors, not just librdkafka's "timed out"
    assert f"bootstrap.servers={nobody_there}" in trace and "Connection refused" in trace, trace
    failed_at = len(read_committed(data))
    time.sleep(2)
    assert len(read_committed(data)) == failed_at, "a task wrote although its fencing round failed"

    fixed = {**config, "tasks.max": "1"}
    assert worker.request("PUT", "/connectors/ff/config", json=fixed).status_code == 200
    worker.wait_for(lambda: running_on(worker, "ff", 1), 90, "the fixed task RUNNING")
    before = count_of(read_committed, data, 0)
    worker.wait_for(lambda: count_of(read_committed, data, 0) > before + 300, 60, "records after the fix")

    restarted = worker.request("POST", "/connectors/ff/restart?includeTasks=true")
    assert restarted.status_code == 202, restarted.text
    assert [t["state"] for t in restarted.json()["tasks"]] == ["RESTARTING"], restarted.text
    worker.wait_for(lambda: running_on(worker, "ff", 1), 60, "RUNNING after a restart")
    before = count_of(read_committed, data, 0)
    worker.wait_for(lambda: count_of(read_committed, data, 0) > before + 200, 60, "records after restart")
    assert worker.request("DELETE", "/connectors/ff").status_code == 204
    time.sleep(2)
    assert_exactly_once(sequences(read_committed(data)))


# ============================================================================ 3. zombie leader


def test_zombie_leader_cannot_write_the_config_topic(workers, topic_name, create_topic, read_committed):
    """Leader failover with a frozen leader: its driver, herder and tasks are SIGSTOPped; the other
    worker takes over (fencing the leader's config writer and tasks) and reconfigures the connector.
    Then the ex-leader wakes up (SIGCONT) with a pause request already waiting on its REST port,
    which it serves at once, before or after noticing that it no longer leads. Either way its
    leader's writer, fenced by the new leader, gets nothing into the config topic; it does not claim
    the config topic back; its fenced tasks do not overwrite the new leader's task states; and the
    output stays exactly once."""
    data = create_topic(topic_name("data"), partitions=3)
    first = workers("w1")
    second = workers("w2")
    config = sequence(data, 2, rate=200)
    assert first.create_connector("zl", config).status_code == 201
    first.wait_for(
        lambda: running_on(first, "zl", 2) or running_on(second, "zl", 2, via=first), 90, "tasks RUNNING"
    )
    leader, other = (first, second) if running_on(first, "zl", 2) else (second, first)
    other.wait_for(lambda: count_of(read_committed, data, 1) > 200, 60, "some records")
    config_topic = leader.props["config.storage.topic"]

    # Spark's Python workers run in a process group of their own (pyspark's daemon calls setpgid):
    # freeze it too, so the whole ex-leader, tasks included, is a zombie.
    pids = [t["pid"] for t in leader.request("GET", "/internal/tasks").json().values() if t["pid"]]
    task_groups = {os.getpgid(pid) for pid in pids}
    assert task_groups and os.getpgid(leader.proc.pid) not in task_groups

    def freeze(sig: signal.Signals) -> None:
        leader.signal(sig)
        for group in task_groups:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, sig)

    freeze(signal.SIGSTOP)
    try:
        other.wait_for(lambda: running_on(other, "zl", 2), 90, "the other worker to take over")
        reconfigured = {**config, "tasks.max": "3"}
        assert other.request("PUT", "/connectors/zl/config", json=reconfigured).status_code == 200
        other.wait_for(lambda: running_on(other, "zl", 3), 90, "3 tasks RUNNING on the new leader")
        before = read_committed(config_topic)
        zombie_log_start = leader.log_path.stat().st_size
        zombie_answer: dict[str, Any] = {}

        def ask_zombie() -> None:
            try:
                response = httpx.put(leader.url + "/connectors/zl/pause", timeout=90)
                zombie_answer.update(status=response.status_code, body=response.text)
            except httpx.HTTPError as exc:
                zombie_answer.update(error=repr(exc))

        asker = threading.Thread(target=ask_zombie, daemon=True)
        asker.start()
        time.sleep(1)  # the request waits in the frozen worker's socket
    finally:
        freeze(signal.SIGCONT)
    asker.join(90)
    time.sleep(5)  # give the zombie time to do whatever it still would

    zombie_log = leader.log_path.read_text(errors="replace")[zombie_log_start:]
    written = read_committed(config_topic)[len(before) :]
    print(f"the zombie answered {zombie_answer}; config records since: {[r.key for r in written]}")
    assert "claimed write privileges" not in zombie_log, "the ex-leader took the config topic back"
    if zombie_answer.get("status") == 500:
        # served while it still believed it led: through the leader's writer, which is fenced
        assert "LeaderFencedError" in zombie_answer["body"] and "fenced while writing" in zombie_log
        assert written == [], f"a fenced leader's write landed: {written}"
    else:
        # it had already dropped the leader's writer, so it wrote the target state with a plain
        # producer, as any worker may (target states are no privileged write, as in Kafka
        # Connect); its leader's writer was not used. Undo the pause.
        assert zombie_answer.get("status") == 202, zombie_answer
        assert [r.key for r in written] == [b"target-state-zl"], written
        assert "fenced while writing" not in zombie_log
        assert other.request("PUT", "/connectors/zl/resume").status_code == 202
    state = ConfigStateBuilder()
    for r in read_committed(config_topic):
        state.apply(r.key, r.value, r.offset)
    snapshot = state.snapshot()
    assert snapshot.task_count("zl") == 3 and snapshot.task_count_record("zl") == 3
    assert not snapshot.pending_fencing("zl")

    other.wait_for(lambda: running_on(other, "zl", 3), 60, "the new leader to keep running all 3 tasks")
    counts = {t: count_of(read_committed, data, t) for t in range(3)}
    other.wait_for(
        lambda: all(count_of(read_committed, data, t) > counts[t] + 200 for t in range(3)), 60, "records"
    )
    assert running_on(other, "zl", 3), "a fenced zombie task overwrote the new leader's task states"
    assert other.request("DELETE", "/connectors/zl").status_code == 204
    time.sleep(2)
    assert_exactly_once(sequences(read_committed(data)))


# ============================================================================ 4. SIGKILL of a task


def test_sigkilled_task_python_worker_is_retried_exactly_once(
    workers, topic_name, create_topic, read_committed
):
    """SIGKILL of the Python worker process running a task: Spark re-runs the task (master
    `local[8,4]`), the new attempt fences the dead one's open transaction and resumes from the
    committed offsets: no duplicate, no gap, and the task is RUNNING again in a new process."""
    data = create_topic(topic_name("data"), partitions=2)
    worker = workers("w1")
    config = sequence(
        data, 2, rate=200, **{"transaction.boundary": "interval", "transaction.boundary.interval.ms": "1000"}
    )
    assert worker.create_connector("kk", config).status_code == 201
    worker.wait_for(lambda: running_on(worker, "kk", 2), 90, "two RUNNING tasks")
    worker.wait_for(lambda: count_of(read_committed, data, 0) > 200, 60, "some records")

    runtimes = worker.request("GET", "/internal/tasks").json()
    victim, bystander = runtimes["kk-0"]["pid"], runtimes["kk-1"]["pid"]
    assert victim and bystander
    # Packed (eosconnect.tasks.per.slot > 1), both tasks run in one slot host's Python worker and
    # are killed and retried together; with a slot per task, task 1 is left alone.
    packed = victim == bystander
    before = count_of(read_committed, data, 0)
    os.kill(victim, signal.SIGKILL)

    def retried() -> bool:
        task = worker.request("GET", "/internal/tasks").json()["kk-0"]
        return task["pid"] not in (None, victim) and task["state"] == "RUNNING"

    worker.wait_for(retried, 90, "task 0 to run again in a new Python worker")
    assert "Python worker exited unexpectedly" in worker.log_path.read_text(errors="replace")
    worker.wait_for(lambda: running_on(worker, "kk", 2), 30, "both tasks RUNNING")
    after = worker.request("GET", "/internal/tasks").json()
    if packed:
        assert after["kk-1"]["pid"] == after["kk-0"]["pid"] != victim, after
    else:
        assert after["kk-1"]["pid"] == bystander, after
    worker.wait_for(lambda: count_of(read_committed, data, 0) > before + 400, 60, "task 0 to write again")
    assert worker.request("DELETE", "/connectors/kk").status_code == 204
    time.sleep(2)
    assert_exactly_once(sequences(read_committed(data)))


def test_task_spark_gave_up_on_fails_and_its_siblings_run_on(
    workers, topic_name, create_topic, read_committed
):
    """A task whose Python worker dies once per attempt uses up Spark's attempts (`local[8,4]`: 4,
    counted over the task's whole life); Spark then aborts the generation's job and kills its other
    tasks too. The worker must notice: the task Spark gave up on is FAILED with Spark's reason
    (until a REST restart), the tasks killed along with it run again at once, and the output stays
    exactly once. (It used to keep both tasks RUNNING in its status while nothing ran any more.)"""
    data = create_topic(topic_name("data"), partitions=2)
    # One task per Python worker, whatever the default: killing task 0's worker must leave task 1
    # alive. Packed in one slot host, the two share a Python worker and die together; that form is
    # test_task_groups.py::test_a_slot_host_spark_gave_up_on_fails_every_task_in_it_naming_the_host.
    # Attempts shorter than 10 minutes on average are a crash loop (the default is 60 s; this keeps a
    # slow machine's attempts from counting as spread out, test_task_groups.py has that case).
    worker = workers(
        "w1", **{"eosconnect.tasks.per.slot": "1", "eosconnect.relaunch.min.attempt.ms": "600000"}
    )
    assert worker.create_connector("gu", sequence(data, 2, rate=200)).status_code == 201
    worker.wait_for(lambda: running_on(worker, "gu", 2), 90, "two RUNNING tasks")

    def runtime(task: int) -> dict[str, Any]:
        return worker.request("GET", "/internal/tasks").json()[f"gu-{task}"]

    bystander = runtime(1)["pid"]
    for attempt in range(4):
        victim = runtime(0)["pid"]
        os.kill(victim, signal.SIGKILL)
        if attempt < 3:  # Spark runs attempts 2..4 of the task
            worker.wait_for(
                lambda v=victim: runtime(0)["pid"] not in (None, v) and runtime(0)["state"] == "RUNNING",
                90,
                f"attempt {attempt + 2} of task 0",
            )
    worker.wait_for(lambda: worker.task_states("gu")[0] == "FAILED", 60, "task 0 to be FAILED")
    trace = worker.status("gu")["tasks"][0]["trace"]
    assert "task gu-0 was lost: Spark gave up on it (Task 0 in stage" in trace, trace
    assert "failed 4 times" in trace and "POST /connectors/gu/tasks/0/restart" in trace, trace
    assert "faster than eosconnect.relaunch.min.attempt.ms=600000 per attempt" in trace, trace
    assert "Python worker exited unexpectedly" in trace, trace
    # fenced before it was marked FAILED: its last attempt's open transaction, if any, is aborted at
    # once instead of holding task 1's start-up read of the offsets topic for transaction.timeout.ms
    assert "of the task(s) Spark gave up on, so an open transaction" in worker.tail(400), worker.tail(60)

    # task 1 was killed with the job; it runs again, in a new Python worker, and writes on
    worker.wait_for(
        lambda: runtime(1)["pid"] not in (None, bystander) and worker.task_states("gu")[1] == "RUNNING",
        90,
        "task 1 to run again",
    )
    before = count_of(read_committed, data, 1)
    worker.wait_for(lambda: count_of(read_committed, data, 1) > before + 200, 60, "task 1 to write again")

    assert worker.request("POST", "/connectors/gu/tasks/0/restart").status_code == 204
    worker.wait_for(lambda: running_on(worker, "gu", 2), 90, "task 0 RUNNING after its restart")
    before = count_of(read_committed, data, 0)
    worker.wait_for(lambda: count_of(read_committed, data, 0) > before + 200, 60, "task 0 to write again")
    assert worker.request("DELETE", "/connectors/gu").status_code == 204
    time.sleep(2)
    assert_exactly_once(sequences(read_committed(data)))
