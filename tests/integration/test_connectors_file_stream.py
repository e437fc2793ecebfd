"""FileStreamSource end to end on the real broker and Spark, exactly once across a restart."""

from __future__ import annotations

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
