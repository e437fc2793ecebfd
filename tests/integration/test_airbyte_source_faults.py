"""AirbyteSource under the faults exactly once is about, through real workers and a real broker: the
whole worker SIGKILLed mid-sync and a second worker of the group resuming from the committed state;
the task's Python worker frozen (SIGSTOP), replaced, then thawed and fenced. Every record once, by
primary key and cursor, read read_committed; the source program never outlives the task's process."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from eosconnect.tools.worker_process import WorkerProcess, detached_children
from support.hosted_sources import write_source
from support.hosted_venvs import airbyte_config

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

TOTAL = 3000
#: A state after every EVERY records: a transaction ends at each.
EVERY = 50


def alive(pid: int) -> bool:
    """True while `pid` runs (an exited process awaiting its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def source_pid(task_pid: int, executable: str) -> int:
    """The source program the task's Python worker runs (a session of its own, so a group leader)."""
    (pid,) = [
        child
        for child in detached_children(task_pid)
        if executable in Path(f"/proc/{child}/cmdline").read_bytes().decode(errors="replace")
    ]
    return pid


def task_pid(worker: WorkerProcess, task: str) -> int:
    pid = worker.request("GET", "/internal/tasks").json()[task]["pid"]
    assert pid, f"{task} runs in no Python worker"
    return int(pid)


def committed(read_committed: Any, topic: str) -> tuple[list[int], list[Any]]:
    """The ids of the committed events in topic order, and their keys."""
    records = read_committed(topic)
    return [json.loads(r.value)["id"] for r in records], [json.loads(r.key) for r in records]


def last_id(state: Any) -> int | None:
    """The `events` cursor in a state handed to the source (a list of STREAM states), None for none."""
    for entry in state or []:
        if entry["stream"]["stream_descriptor"]["name"] == "events":
            return int(entry["stream"]["stream_state"]["last_id"])
    return None


def assert_every_event_once(read_committed: Any, topic: str) -> None:
    ids, keys = committed(read_committed, topic)
    assert sorted(ids) == list(range(1, TOTAL + 1)), "every event once"
    assert ids == sorted(ids), "in the source's cursor order"
    assert keys == ids, "keyed by the primary key"


def resumable(tmp_path: Path, prefix: str) -> tuple[dict[str, str], str, Path]:
    scripted = write_source(tmp_path)
    states = tmp_path / "states.jsonl"
    source = {"count": TOTAL, "every": EVERY, "sleep_ms": 2, "state_log": str(states)}
    return airbyte_config(scripted, prefix, "events", source), scripted, states


def test_sigkilled_worker_then_a_second_worker_resumes_from_the_committed_state(
    workers, topic_name, create_topic, read_committed, tmp_path
):
    first = workers("w1")
    prefix = topic_name("killed")
    topic = create_topic(f"{prefix}.events")
    config, scripted, states = resumable(tmp_path, prefix)
    assert first.create_connector("killed", config).status_code == 201
    first.wait_for(lambda: len(read_committed(topic)) >= 500, 120, "500 committed events")
    python_worker = task_pid(first, "killed-0")
    source = source_pid(python_worker, scripted)

    # The whole worker: its process group, Spark's JVM, and the task's Python worker (a group of its own).
    first.kill()
    with contextlib.suppress(ProcessLookupError):
        os.kill(python_worker, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while alive(python_worker) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(python_worker)
    deadline = time.monotonic() + 5
    while alive(source) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(source), "the source program outlived the task's Python worker by 5 s"

    ids, _ = committed(read_committed, topic)
    assert ids == list(range(1, len(ids) + 1)), "before the restart: a prefix of the events, once"
    assert len(ids) % EVERY == 0 and len(ids) < TOTAL, "committed up to a state, mid-sync"

    second = workers("w2")
    second.wait_for(lambda: len(read_committed(topic)) >= TOTAL, 180, "every event")
    assert_every_event_once(read_committed, topic)
    given = [json.loads(line) for line in states.read_text().splitlines()]
    assert [last_id(state) for state in given] == [None, len(ids)], (
        "the restarted sync was given the last committed state"
    )
    (offset,) = second.request("GET", "/connectors/killed/offsets").json()["offsets"]
    assert json.loads(offset["offset"]["state"])["stream"]["stream_state"] == {"last_id": TOTAL}
    assert second.request("DELETE", "/connectors/killed").status_code == 204


def test_a_sigstopped_task_is_replaced_and_the_thawed_zombie_is_fenced(
    workers, topic_name, create_topic, read_committed, tmp_path
):
    # The runtime must not cancel the frozen task's Spark job itself: the thawed zombie has to meet the fence.
    worker = workers(**{"eosconnect.zombie.cancel.timeout.ms": "600000", "task.heartbeat.timeout.ms": "3000"})
    prefix = topic_name("zombie")
    topic = create_topic(f"{prefix}.events")
    config, scripted, states = resumable(tmp_path, prefix)
    assert config["tasks.max"] == "1"
    assert worker.create_connector("zombie", config).status_code == 201
    worker.wait_for(lambda: len(read_committed(topic)) >= 500, 120, "500 committed events")
    zombie = task_pid(worker, "zombie-0")
    zombie_source = source_pid(zombie, scripted)

    os.kill(zombie, signal.SIGSTOP)
    try:
        # (No read_committed read while frozen: its open transaction holds readers back until the
        # replacement's start-up fences it.) The leader takes the silent slot host for frozen after
        # two heartbeat timeouts and runs the task again elsewhere, as a new instance.

        def replaced() -> bool:
            task = worker.request("GET", "/internal/tasks").json()["zombie-0"]
            return task["pid"] not in (None, zombie) and task["state"] == "RUNNING"

        worker.wait_for(replaced, 120, "a replacement task in another Python worker")
        worker.wait_for(lambda: len(read_committed(topic)) >= TOTAL, 150, "the replacement to read the rest")
    finally:
        os.kill(zombie, signal.SIGCONT)

    # Thawed, the zombie meets the fence and ends, said at INFO: its source program stops, the status
    # stays the replacement's, and nothing it had open is committed.
    worker.wait_for(
        lambda: "a newer instance of this task took over and fenced this one" in worker.log_path.read_text(),
        60,
        "the thawed zombie to be fenced",
    )
    deadline = time.monotonic() + 30
    while alive(zombie_source) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not alive(zombie_source), "the fenced zombie's source program still runs"
    time.sleep(3)  # let the zombie try to commit what it had open
    assert worker.task_states("zombie") == ["RUNNING"]
    assert_every_event_once(read_committed, topic)
    given = [last_id(json.loads(line)) for line in states.read_text().splitlines()]
    assert given[0] is None and len(given) == 2 and given[1] is not None and given[1] % EVERY == 0, given
    (offset,) = worker.request("GET", "/connectors/zombie/offsets").json()["offsets"]
    assert json.loads(offset["offset"]["state"])["stream"]["stream_state"] == {"last_id": TOTAL}
    assert worker.request("DELETE", "/connectors/zombie").status_code == 204
