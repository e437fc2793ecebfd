"""Sink connectors driven through a real worker's REST API, against the real broker and Spark.

What Kafka Connect promises for sinks, checked end to end: offsets of a STOPPED sink connector
altered and reset over REST (and refused while it runs or is paused), pause/resume, tasks sharing
the partitions of the consumer group `connect-<name>` across a task restart, and `topics.regex`.

One worker serves the whole module (start-up costs ~10 s); every test uses connector and topic
names of its own and deletes its connectors at the end.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from eosconnect.tools.worker_process import WorkerProcess
from support.workers import worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

COLLECTING = "support.connectors.CollectingSinkConnector"


@pytest.fixture(scope="module")
def worker(bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    prefix = f"sinkworker-{uuid.uuid4().hex[:6]}"
    props = worker_settings(bootstrap, prefix)
    started = WorkerProcess(props, tmp_path_factory.mktemp("sink-worker")).start()
    yield started
    started.stop()


@pytest.fixture
def sink(worker: WorkerProcess, tmp_path: Path) -> Iterator[Callable[..., tuple[str, Path]]]:
    """Create a CollectingSink connector: `sink(name, tasks_max=1, **config)` -> (name, output dir).
    The connectors are deleted at teardown, so a failed test does not hold the worker's task slots."""
    created: list[str] = []

    def _create(name: str, tasks_max: int = 1, **config: str) -> tuple[str, Path]:
        out = tmp_path / f"out-{name}"
        out.mkdir()
        full = {
            "connector.class": COLLECTING,
            "tasks.max": str(tasks_max),
            "collect.dir": str(out),
            "consumer.override.session.timeout.ms": "6000",
            "value.converter.schemas.enable": "false",  # produce() writes plain JSON
            **{k.replace("_", "."): v for k, v in config.items()},
        }
        response = worker.create_connector(name, full)
        assert response.status_code == 201, response.text
        assert response.json()["type"] == "sink"
        created.append(name)
        return name, out

    yield _create
    for name in created:
        worker.request("DELETE", f"/connectors/{name}")


# ============================================================================ helpers


def produce(bootstrap: str, topic: str, per_partition: dict[int, range]) -> None:
    """JSON values `{"p": partition, "i": i}`; returns once the broker acknowledged all of them."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, numbers in per_partition.items():
        for i in numbers:
            producer.produce(topic, value=json.dumps({"p": partition, "i": i}).encode(), partition=partition)
    assert producer.flush(30) == 0


def events(out: Path) -> list[dict[str, Any]]:
    """Every event of every task, tagged with the task index, in file order per task."""
    result = []
    for path in sorted(out.glob("task-*.jsonl")):
        task = int(path.stem.removeprefix("task-"))
        result += [{**json.loads(line), "task": task} for line in path.read_text().splitlines() if line]
    return result


def delivered(out: Path) -> list[tuple[int, str, int, int]]:
    """(task, topic, partition, offset) of every record given to put(), per task in order."""
    return [(e["task"], *r[:3]) for e in events(out) if e["call"] == "put" for r in e["records"]]


def positions(records: list[tuple[int, str, int, int]]) -> list[tuple[str, int, int]]:
    return sorted((topic, partition, offset) for _, topic, partition, offset in records)


def offsets_body(topic: str, offsets: dict[int, int | None]) -> dict[str, Any]:
    return {
        "offsets": [
            {
                "partition": {"kafka_topic": topic, "kafka_partition": p},
                "offset": None if o is None else {"kafka_offset": o},
            }
            for p, o in offsets.items()
        ]
    }


def rest_offsets(worker: WorkerProcess, name: str) -> dict[tuple[str, int], int]:
    response = worker.request("GET", f"/connectors/{name}/offsets")
    assert response.status_code == 200, response.text
    return {
        (e["partition"]["kafka_topic"], e["partition"]["kafka_partition"]): e["offset"]["kafka_offset"]
        for e in response.json()["offsets"]
    }


def states(worker: WorkerProcess, name: str) -> tuple[str, list[str]]:
    status = worker.status(name)
    return status.get("connector", {}).get("state", ""), [t["state"] for t in status.get("tasks", [])]


def wait_states(worker: WorkerProcess, name: str, state: str, tasks: int) -> None:
    expected = (state, [state] * tasks)
    worker.wait_for(lambda: states(worker, name) == expected, 90, f"{name} {state} with {tasks} task(s)")


def group_assignment(admin: AdminClient, group: str) -> list[list[str]]:
    """The partitions of each member of the consumer group (sorted), as the broker sees them."""
    description = admin.describe_consumer_groups([group])[group].result(30)
    return sorted(
        sorted(f"{tp.topic}-{tp.partition}" for tp in member.assignment.topic_partitions)
        for member in description.members
    )


# ============================================================================ tests


def test_offsets_of_a_stopped_sink_altered_and_reset_then_redelivered(
    worker, sink, topic_name, create_topic, bootstrap
):
    """KIP-875 for sinks: PATCH/DELETE need a STOPPED connector (400 otherwise); a partition set to
    offset 5 is delivered again from 5, the other one not at all; a reset delivers everything again."""
    data = create_topic(topic_name("data"), partitions=2)
    produce(bootstrap, data, {0: range(10), 1: range(10)})
    name, out = sink(topic_name("sink"), topics=data)
    worker.wait_for(lambda: len(delivered(out)) >= 20, 120, "20 records delivered")
    worker.wait_for(
        lambda: rest_offsets(worker, name) == {(data, 0): 10, (data, 1): 10}, 30, "offsets 10 and 10"
    )
    assert positions(delivered(out)) == sorted((data, p, o) for p in (0, 1) for o in range(10))

    # Running: Kafka Connect refuses to modify offsets with 400 and says how to stop the connector.
    for method, body in (("PATCH", offsets_body(data, {0: 5})), ("DELETE", None)):
        refused = worker.request(method, f"/connectors/{name}/offsets", json=body)
        assert refused.status_code == 400, (method, refused.text)
        assert "must be in the STOPPED state" in refused.json()["message"]
        assert f"/connectors/{name}/stop" in refused.json()["message"]
    assert rest_offsets(worker, name) == {(data, 0): 10, (data, 1): 10}, "nothing changed"

    worker.stop_connector(name)

    # Removing one partition's offset (null) is refused, saying why and what to do instead.
    refused = worker.request("PATCH", f"/connectors/{name}/offsets", json=offsets_body(data, {0: None}))
    assert refused.status_code == 400, refused.text
    message = refused.json()["message"]
    assert "offsets[0].offset" in message and "null" in message and "not supported" in message
    assert "DELETE /connectors/<name>/offsets" in message
    assert rest_offsets(worker, name) == {(data, 0): 10, (data, 1): 10}

    altered = worker.request("PATCH", f"/connectors/{name}/offsets", json=offsets_body(data, {0: 5}))
    assert altered.status_code == 200, altered.text
    assert altered.json() == {"message": "The offsets for this connector have been altered successfully"}
    assert rest_offsets(worker, name) == {(data, 0): 5, (data, 1): 10}

    # Resume: partition 0 again from 5; partition 1 only its new record (order within a partition
    # means that once offset 10 of both arrived, anything re-delivered before it is in the file).
    before = len(delivered(out))
    assert worker.request("PUT", f"/connectors/{name}/resume").status_code == 202
    produce(bootstrap, data, {0: range(10, 11), 1: range(10, 11)})
    wanted = {(data, 0, 10), (data, 1, 10)}
    worker.wait_for(lambda: wanted <= set(positions(delivered(out)[before:])), 120, "offset 10 of both")
    assert positions(delivered(out)[before:]) == [(data, 0, o) for o in range(5, 11)] + [(data, 1, 10)]
    worker.wait_for(
        lambda: rest_offsets(worker, name) == {(data, 0): 11, (data, 1): 11}, 30, "offsets 11 and 11"
    )

    # Reset: the consumer group is gone, so everything is delivered again from the beginning. This
    # time the request follows PUT /stop at once, as Kafka Connect clients do (its herder finishes
    # the stop first); eosconnect waits for the tasks to go instead of answering 400.
    assert worker.request("PUT", f"/connectors/{name}/stop").status_code == 204
    reset = worker.request("DELETE", f"/connectors/{name}/offsets")
    assert reset.status_code == 200, reset.text
    assert reset.json() == {"message": "The offsets for this connector have been reset successfully"}
    assert rest_offsets(worker, name) == {}
    wait_states(worker, name, "STOPPED", 0)
    before = len(delivered(out))
    assert worker.request("PUT", f"/connectors/{name}/resume").status_code == 202
    everything = [(data, p, o) for p in (0, 1) for o in range(11)]
    worker.wait_for(lambda: len(delivered(out)[before:]) >= 22, 120, "all 22 records again")
    assert positions(delivered(out)[before:]) == everything, "each record once more, no more"
    wait_states(worker, name, "RUNNING", 1)


def test_pause_holds_records_back_and_resume_delivers_them_all(
    worker, sink, topic_name, create_topic, bootstrap
):
    data = create_topic(topic_name("data"), partitions=2)
    produce(bootstrap, data, {0: range(15), 1: range(15)})
    name, out = sink(topic_name("sink"), topics=data)
    worker.wait_for(lambda: len(delivered(out)) >= 30, 120, "the first 30 records")
    wait_states(worker, name, "RUNNING", 1)

    assert worker.request("PUT", f"/connectors/{name}/pause").status_code == 202
    wait_states(worker, name, "PAUSED", 1)  # the task reports PAUSED once it has applied the pause
    # PAUSED is not STOPPED: offsets stay locked.
    refused = worker.request("DELETE", f"/connectors/{name}/offsets")
    assert refused.status_code == 400 and "STOPPED" in refused.json()["message"], refused.text

    produce(bootstrap, data, {0: range(15, 40), 1: range(15, 40)})  # acknowledged by the broker
    deadline = time.monotonic() + 6  # a running task takes well under a second to get them
    while time.monotonic() < deadline:
        assert len(delivered(out)) == 30, "a record reached the task while the connector was PAUSED"
        time.sleep(0.25)
    assert states(worker, name) == ("PAUSED", ["PAUSED"])

    assert worker.request("PUT", f"/connectors/{name}/resume").status_code == 202
    worker.wait_for(lambda: len(delivered(out)) >= 80, 120, "all 80 records after resume")
    wait_states(worker, name, "RUNNING", 1)
    assert positions(delivered(out)) == sorted((data, p, o) for p in (0, 1) for o in range(40)), (
        "every record exactly once across the pause"
    )


def test_two_tasks_share_four_partitions_and_lose_nothing_across_a_task_restart(
    worker, sink, topic_name, create_topic, bootstrap, admin
):
    data = create_topic(topic_name("data"), partitions=4)
    produce(bootstrap, data, {p: range(100) for p in range(4)})
    name, out = sink(topic_name("sink"), tasks_max=2, topics=data)
    group = f"connect-{name}"
    every = sorted(f"{data}-{p}" for p in range(4))

    def split() -> bool:  # two members, two partitions each, together all four
        members = group_assignment(admin, group)
        return [len(m) for m in members] == [2, 2] and sorted(tp for m in members for tp in m) == every

    worker.wait_for(lambda: len(delivered(out)) >= 400, 120, "the first 400 records")
    wait_states(worker, name, "RUNNING", 2)
    worker.wait_for(split, 60, f"two members of {group}, 2 partitions each")
    # Task 0 may have taken all four partitions until task 1 joined; records produced now are split.
    produce(bootstrap, data, {p: range(100, 110) for p in range(4)})
    worker.wait_for(lambda: len(set(positions(delivered(out)))) >= 440, 60, "40 more records")
    by_task: dict[int, set[int]] = {}
    for task, _, partition, offset in delivered(out):
        if offset >= 100:
            by_task.setdefault(task, set()).add(partition)
    assert sorted(map(sorted, by_task.values())) in ([[0, 1], [2, 3]], [[0, 2], [1, 3]], [[0, 3], [1, 2]])

    def starts_of_task_1() -> int:
        return sum(1 for e in events(out) if e["task"] == 1 and e["call"] == "start")

    assert starts_of_task_1() == 1

    def trickle() -> None:  # records keep arriving while task 1 stops, the group rebalances, it rejoins
        for i in range(110, 210, 10):
            produce(bootstrap, data, {p: range(i, i + 10) for p in range(4)})
            time.sleep(0.3)

    writer = threading.Thread(target=trickle)
    writer.start()
    try:
        restarted = worker.request("POST", f"/connectors/{name}/tasks/1/restart")
        assert restarted.status_code == 204, restarted.text
    finally:
        writer.join()

    worker.wait_for(lambda: starts_of_task_1() == 2, 120, "task 1 started again")
    worker.wait_for(lambda: len(set(positions(delivered(out)))) >= 840, 120, "all 840 records")
    worker.wait_for(split, 60, "the 2+2 split again")
    wait_states(worker, name, "RUNNING", 2)

    seen = positions(delivered(out))
    assert set(seen) == {(data, p, o) for p in range(4) for o in range(210)}, "nothing lost, nothing foreign"
    repeated = {k: n for k, n in Counter(seen).items() if n > 1}
    assert not repeated, f"a graceful restart commits on revocation; re-delivered: {sorted(repeated)[:10]}"
    assert starts_of_task_1() == 2 and sum(1 for e in events(out) if e["call"] == "start") == 3


def test_topics_regex_receives_matching_topics_only(worker, sink, topic_name, create_topic, bootstrap):
    prefix = topic_name("rx")
    a, b, other = (create_topic(f"{prefix}-{s}") for s in ("a", "b", "ab"))
    for topic in (a, b, other):
        produce(bootstrap, topic, {0: range(10)})
    name, out = sink(topic_name("sink"), topics_regex=f"{prefix}-(a|b)")  # whole names: not "-ab"
    worker.wait_for(lambda: len(delivered(out)) >= 20, 120, "the 20 records of the matching topics")

    # More records everywhere, then one last marker on each matching topic: once the markers are
    # in, anything the sink would have taken from the other topic had the time to come too.
    produce(bootstrap, other, {0: range(10, 20)})
    produce(bootstrap, a, {0: range(10, 11)})
    produce(bootstrap, b, {0: range(10, 11)})
    worker.wait_for(lambda: len(delivered(out)) >= 22, 60, "the markers")
    assert positions(delivered(out)) == sorted((t, 0, o) for t in (a, b) for o in range(11))
    opened = {tp for e in events(out) if e["call"] == "open" for tp in e["partitions"]}
    assert opened == {f"{a}-0", f"{b}-0"}, "the non-matching topic was never assigned"
    worker.wait_for(lambda: rest_offsets(worker, name) == {(a, 0): 11, (b, 0): 11}, 30, "offsets of a, b")
