"""Task status comes from heartbeats, and the REST API answers it from memory, also without Kafka.

A task whose Python worker is frozen (SIGSTOP) still "runs" as far as Spark knows; its status must
say it is not RUNNING once it has been silent for `task.heartbeat.timeout.ms`, and RUNNING again when
it reports. With the worker's only broker down, status requests keep answering promptly, the log
says each repeated problem once per interval with a count instead of once per occurrence, and once
the broker is back the tasks run again and their output is exactly once.

The module runs one worker on a broker of its own (`private_kafka`), which the outage test stops.
Its outage lasts OUTAGE_S seconds (`make test-long`: longer).
"""

from __future__ import annotations

import os
import re
import signal
import time
from collections import Counter
from collections.abc import Iterator

import pytest

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.runtime.log_repeats import INTERVAL_ENV
from eosconnect.tools.verify import verify_sequence_topic
from eosconnect.tools.worker_process import WorkerProcess
from support.workers import LONG_TESTS, create_topics, private_kafka, sequence_config, worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

OUTAGE_S = 30.0 if LONG_TESTS else 12.0
#: The worker's repeat interval: short, so that the outage shows the count lines.
REPEAT_INTERVAL_S = 4.0
#: A functional bound (status is answered from memory), far above what it takes on a quiet machine.
STATUS_BOUND_S = 2.0
ERROR_LINE = re.compile(r"^\S+ \S+ ERROR (?P<logger>\S+) (?P<message>.*)$")
REPEATED = re.compile(r" \(repeated \d+ more times in the last \d+ s\)$")
REPEATED_COUNT = re.compile(r"\(repeated (\d+) more times in the last \d+ s\)")
#: Processes writing to the worker log, each with its own repeat filter: the worker and 2 tasks.
PROCESSES = 3


@pytest.fixture(scope="module")
def own_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    with private_kafka(tmp_path_factory.mktemp("status-kafka")) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def worker(own_kafka: LocalKafkaCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    props = worker_settings(
        own_kafka.bootstrap_servers,
        "status-truth",
        # One task per Python worker, whatever the default: freezing seq-1's worker must leave
        # seq-0 RUNNING. Packed, the two share a worker and go silent together; that form is
        # test_task_groups.py::test_a_frozen_slot_host_shows_each_task_unassigned_naming_the_host.
        **{
            "task.heartbeat.timeout.ms": "3000",
            "spark.master": "local[4,4]",
            "eosconnect.tasks.per.slot": "1",
        },
    )
    process = WorkerProcess(
        props, tmp_path_factory.mktemp("status-worker"), env={INTERVAL_ENV: str(REPEAT_INTERVAL_S)}
    ).start(timeout=240)  # Spark starts slowly under load
    yield process
    process.stop()


def test_status_follows_heartbeats(own_kafka: LocalKafkaCluster, worker: WorkerProcess) -> None:
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
    worker.stop_connector("seq")


def test_broker_outage_status_from_memory_bounded_logs_and_exactly_once_after(
    own_kafka: LocalKafkaCluster, worker: WorkerProcess
) -> None:
    bootstrap = own_kafka.bootstrap_servers
    create_topics(bootstrap, ("outage", 2))
    assert worker.create_connector("out", sequence_config("outage", tasks=2)).status_code == 201
    worker.wait_for(lambda: worker.task_states("out") == ["RUNNING"] * 2, 120, "two RUNNING tasks")
    before = committed_seqs(worker, "out", at_least=20)

    log_start = worker.log_path.stat().st_size
    nodes = [node.node_id for node in own_kafka.state.nodes]
    for node in nodes:
        own_kafka.kill_node(node)
    answers: list[tuple[float, list[str]]] = []
    try:
        deadline = time.monotonic() + OUTAGE_S
        while time.monotonic() < deadline:
            began = time.monotonic()
            response = worker.request("GET", "/connectors/out/status")
            took = time.monotonic() - began
            assert response.status_code == 200, response.text
            assert took < STATUS_BOUND_S, f"status took {took:.2f}s without Kafka (answer {len(answers)})"
            answers.append((took, [t["state"] for t in response.json()["tasks"]]))
            time.sleep(0.5)
        outage_log = worker.log_path.read_bytes()[log_start:].decode(errors="replace")
    finally:
        for node in nodes:
            own_kafka.start_node(node)

    assert len(answers) >= OUTAGE_S / 2.5, f"only {len(answers)} status answers in {OUTAGE_S:.0f}s"
    assert all(len(states) == 2 for _, states in answers), answers
    errors = Counter(
        m["logger"] + " " + re.sub(r"\d+", "#", REPEATED.sub("", m["message"]))
        for line in outage_log.splitlines()
        if (m := ERROR_LINE.match(line))
    )
    # Each process (the worker and the two tasks' Python workers, each with its own filter) logs a
    # message when first seen, then at most once per interval with its count.
    bound = PROCESSES * (int(OUTAGE_S / REPEAT_INTERVAL_S) + 2)
    assert errors, f"no ERROR line at all while the broker was down:\n{outage_log[-3000:]}"
    assert max(errors.values()) <= bound, errors.most_common(5)
    suppressed = [int(m[1]) for m in REPEATED_COUNT.finditer(outage_log)]
    assert suppressed, f"no repeat-count line in the outage log:\n{outage_log[-3000:]}"
    assert sum(suppressed) > sum(errors.values()), "the count lines stand for fewer lines than were logged"

    worker.wait_for(lambda: worker.task_states("out") == ["RUNNING"] * 2, 120, "two RUNNING tasks again")
    committed_seqs(worker, "out", at_least=max(before.values()) + 100)
    worker.stop_connector("out")
    final = committed_seqs(worker, "out")
    report = verify_sequence_topic({"bootstrap.servers": bootstrap}, "outage")  # read_committed
    assert report.ok, report.anomalies
    assert report.seen == sum(seq + 1 for seq in final.values()), (report.seen, final)


def committed_seqs(worker: WorkerProcess, connector: str, at_least: int = 0) -> dict[int, int]:
    """The committed source offsets (task -> last sequence number), once every task has committed
    at least up to `at_least`."""

    def offsets() -> dict[int, int] | None:
        listed = worker.request("GET", f"/connectors/{connector}/offsets").json()["offsets"]
        seqs = {o["partition"]["task"]: o["offset"]["seq"] for o in listed}
        return seqs if len(seqs) == 2 and min(seqs.values()) >= at_least else None

    return worker.wait_for(offsets, 120, f"{connector}'s offsets at {at_least} or more")
