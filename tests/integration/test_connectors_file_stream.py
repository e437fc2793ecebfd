"""FileStreamSource end to end on the real broker and Spark, exactly once across a restart;
FileStreamSink with it through a real worker, at least once across a restart and a SIGKILL."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from support.runtime_helpers import committed_offsets, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def file_config(name: str, path: Path, topic: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1",
        "file": str(path),
        "topic": topic,
        "batch.size": "40",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "exactly.once.support": "required",
    }


def test_lines_exactly_once_across_a_restart(
    run_job, worker_props, topic_name, create_topic, read_committed, tmp_path: Path
):
    data = create_topic(topic_name("lines"))
    worker = worker_props("enabled")
    path = tmp_path / "input.txt"
    lines = [f"line {i} {'é' * (i % 3)}" for i in range(300)]
    path.write_text("".join(line + "\n" for line in lines) + "half a li", encoding="utf-8")
    config = file_config("file-eos", path, data)

    def values() -> list[str]:
        return [r.value.decode() for r in read_committed(data)]

    job = run_job(config, worker)
    wait_until(lambda: len(read_committed(data)) >= 300, 120, "300 committed lines", job)
    assert [o["state"] for o in job.stop()] == ["STOPPED"]
    assert values() == lines, "the unfinished last line must not be emitted"

    more = [f"more {i}" for i in range(200)]
    with path.open("a", encoding="utf-8") as f:
        f.write("ne\n" + "".join(line + "\n" for line in more))
    expected = [*lines, "half a line", *more]

    job = run_job(config, worker, generation=1, previous_task_count=1)
    wait_until(lambda: len(read_committed(data)) >= len(expected), 120, f"{len(expected)} lines", job)
    assert [o["state"] for o in job.stop()] == ["STOPPED"]
    assert values() == expected, "every line exactly once, in order, across the restart"

    offsets = committed_offsets(read_committed, worker["offset.storage.topic"], "file-eos")
    assert offsets == {f'{{"filename": "{path}"}}': {"position": path.stat().st_size}}


def test_tasks_refuse_files_outside_file_allowed_dirs(
    run_job, worker_props, topic_name, create_topic, read_committed, tmp_path: Path
):
    """The worker's file.allowed.dirs reaches the tasks themselves: a job started without any
    validation (as a config written straight to the config topic would be) fails its source and
    sink tasks, each naming the file, the setting and the fix, and reads or writes nothing."""
    data = create_topic(topic_name("lines"))
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the topic\n")
    worker = worker_props("enabled", file_allowed_dirs=str(allowed))

    source = run_job(file_config("confined-src", allowed / ".." / "secret.txt", data), worker)
    (outcome,) = source.wait(120)
    assert outcome["state"] == "FAILED", outcome
    assert "secret.txt" in outcome["trace"] and f"file.allowed.dirs={allowed}" in outcome["trace"]
    assert "Point the connector's `file` at a file inside one of them" in outcome["trace"]
    assert read_committed(data) == []

    written = tmp_path / "written.txt"
    sink_config = {
        "name": "confined-sink",
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "file": str(written),
        "topics": data,
    }
    (outcome,) = run_job(sink_config, worker).wait(120)
    assert outcome["state"] == "FAILED", outcome
    assert str(written) in outcome["trace"] and "file.allowed.dirs" in outcome["trace"]
    assert not written.exists()


# ============================================================================ FileStreamSink


def wait_lines(worker, path: Path, count: int, timeout: float = 120) -> list[str]:
    def enough() -> list[str] | None:
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        return lines if len(lines) >= count else None

    return worker.wait_for(enough, timeout, f"{count} lines in {path.name}")


def without_replayed_tail(out: list[str], expected: list[str]) -> bool:
    """True if `out` is `expected` with one stretch re-appended after a crash: expected[:k] then
    expected[j:] with j <= k (lines after the last commit delivered again, nothing lost)."""
    for k in range(len(out) + 1):
        if out[:k] != expected[:k]:
            return False
        rest = out[k:]
        j = len(expected) - len(rest)
        if 0 <= j <= k and rest == expected[j:]:
            return True
    return False


def test_file_round_trip_through_a_worker_across_restart_and_sigkill(
    workers, topic_name, create_topic, tmp_path: Path
):
    """FileStreamSource -> topic -> FileStreamSink in a real worker. A REST restart of the sink
    task (graceful: final flush and commit) leaves the output exactly equal to the input; a SIGKILL
    of its Python worker mid-stream may repeat lines written after the last commit, never loses
    one, and the repeat is one contiguous stretch of the input."""
    data = create_topic(topic_name("lines"))
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"
    lines = [f"line {i} {'é' * (i % 3)}" for i in range(3000)]
    source_file.write_text("".join(line + "\n" for line in lines[:1000]), encoding="utf-8")
    worker = workers()
    string = {"value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    source = {**file_config("src", source_file, data), "batch.size": "20"}
    sink = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "file": str(sink_file),
        "topics": data,
        "consumer.override.session.timeout.ms": "6000",
        **string,
    }
    assert worker.create_connector("src", source).status_code == 201
    created = worker.create_connector("sink", sink)
    assert created.status_code == 201, created.text
    assert created.json()["type"] == "sink"
    worker.wait_for(lambda: worker.task_states("sink") == ["RUNNING"], 90, "the sink task RUNNING")
    assert wait_lines(worker, sink_file, 1000) == lines[:1000]
    assert worker.status("sink")["type"] == "sink"
    plugins = {p["class"]: p["type"] for p in worker.request("GET", "/connector-plugins").json()}
    assert plugins["eosconnect.connectors.file_stream.FileStreamSinkConnector"] == "sink"

    # A REST restart while lines keep arriving: the old task commits what it flushed, then stops.
    with source_file.open("a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines[1000:2000]))
    assert worker.request("POST", "/connectors/sink/tasks/0/restart").status_code == 204
    worker.wait_for(lambda: worker.task_states("sink") == ["RUNNING"], 90, "the restarted sink task")
    assert wait_lines(worker, sink_file, 2000) == lines[:2000], "a graceful restart repeats nothing"

    # SIGKILL of the sink's Python worker mid-stream: Spark runs the task again in a new one.
    victim = worker.request("GET", "/internal/tasks").json()["sink-0"]["pid"]
    assert victim
    writer = threading.Thread(target=append_slowly, args=(source_file, lines[2000:]))
    writer.start()
    try:
        wait_lines(worker, sink_file, 2100)
        os.kill(victim, signal.SIGKILL)
    finally:
        writer.join()

    def retried() -> bool:
        task = worker.request("GET", "/internal/tasks").json()["sink-0"]
        return task["pid"] not in (None, victim) and task["state"] == "RUNNING"

    worker.wait_for(retried, 120, "the sink task to run again in a new Python worker")
    worker.wait_for(
        lambda: set(sink_file.read_text(encoding="utf-8").splitlines()) == set(lines), 120, "every line"
    )
    out = sink_file.read_text(encoding="utf-8").splitlines()
    assert set(out) == set(lines), "nothing missing, nothing foreign"
    assert without_replayed_tail(out, lines), f"{len(out)} lines; not the input with one replayed stretch"

    # Offsets in Kafka Connect's sink format; the source's transaction markers take offsets too,
    # so the position after the last line is at least 3000, not exactly.
    def sink_offsets() -> list[dict]:
        return worker.request("GET", "/connectors/sink/offsets").json()["offsets"]

    worker.wait_for(lambda: sink_offsets()[0]["offset"]["kafka_offset"] >= 3000, 30, "offsets >= 3000")
    (entry,) = sink_offsets()
    assert entry["partition"] == {"kafka_topic": data, "kafka_partition": 0}
    assert set(entry["offset"]) == {"kafka_offset"}
    assert worker.request("DELETE", "/connectors/sink").status_code == 204
    assert worker.request("DELETE", "/connectors/src").status_code == 204


def append_slowly(path: Path, lines: list[str]) -> None:
    """Append in small bursts, so the sink is mid-stream for a few seconds."""
    for start in range(0, len(lines), 20):
        with path.open("a", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines[start : start + 20]))
        time.sleep(0.05)
