"""errors.tolerance=all for source tasks, and errors.retry.timeout for retriable stage errors, on
the session broker and Spark (runtime/retry_tolerance.py):

- an exactly-once FileStreamSource whose transformation refuses some lines: with
  errors.tolerance=all the others are sent, exactly once, the task keeps running and its source
  offset passes the refused lines; with errors.tolerance=none the task fails naming the fix;
- a sink whose transformation raises RetriableException for a few seconds (a registry that is
  down): errors.retry.timeout=60000 rides it out and every record is written; with a 1 s timeout
  the task fails saying it retried.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from support.runtime_helpers import committed_offsets, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

STRING = "org.apache.kafka.connect.storage.StringConverter"


def source_config(name: str, path: Path, topic: str, **extra: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "tasks.max": "1",
        "file": str(path),
        "topic": topic,
        "batch.size": "40",
        "value.converter": STRING,
        "exactly.once.support": "required",
        "transforms": "reject",
        "transforms.reject.type": "support.connectors.RejectingTransform",
        **extra,
    }


def test_source_tolerance_all_skips_refused_records_and_commits_past_them(
    run_job, worker_props, topic_name, create_topic, read_committed, tmp_path: Path
):
    topic = create_topic(topic_name("lines"))
    worker = worker_props("enabled")
    path = tmp_path / "input.txt"
    lines = [f"line {i}" if i % 10 else f"bad line {i}" for i in range(200)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    good = [line for line in lines if "bad" not in line]

    config = source_config(
        "tolerant", path, topic, **{"errors.tolerance": "all", "errors.log.enable": "true"}
    )
    job = run_job(config, worker)
    wait_until(lambda: len(read_committed(topic)) >= len(good), 120, f"{len(good)} lines", job)
    time.sleep(1)
    assert job.running(), "the refused records must not fail the task"
    assert [o["state"] for o in job.stop()] == ["STOPPED"]
    assert [r.value.decode() for r in read_committed(topic)] == good, "the others exactly once, in order"
    offsets = committed_offsets(read_committed, worker["offset.storage.topic"], "tolerant")
    assert offsets == {f'{{"filename": "{path}"}}': {"position": path.stat().st_size}}

    strict = run_job(source_config("strict", path, create_topic(topic_name("strict"))), worker)
    (outcome,) = strict.wait(120)
    assert outcome["state"] == "FAILED", outcome
    assert "refusing 'bad line 0'" in outcome["trace"]


def sink_config(name: str, topic: str, out: Path, until_ms: int, retry_timeout_ms: int) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
        "tasks.max": "1",
        "file": str(out),
        "topics": topic,
        "value.converter": STRING,
        "transforms": "registry",
        "transforms.registry.type": "support.connectors.UnavailableUntilTransform",
        "transforms.registry.until.ms": str(until_ms),
        "errors.retry.timeout": str(retry_timeout_ms),
        "errors.retry.delay.max.ms": "1000",
    }


def test_sink_retries_a_retriable_stage_error_within_errors_retry_timeout(
    run_job, worker_props, topic_name, create_topic, tmp_path: Path, bootstrap
):
    from confluent_kafka import Producer

    topic = create_topic(topic_name("records"))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(50):
        producer.produce(topic, value=f"record {i}".encode())
    assert producer.flush(30) == 0
    worker = worker_props("disabled")

    out = tmp_path / "out.txt"
    job = run_job(sink_config("patient", topic, out, int(time.time() * 1000) + 8000, 60_000), worker)

    def written() -> int:
        return len(out.read_text().splitlines()) if out.exists() else 0

    wait_until(lambda: written() >= 50, 120, "50 records written after the retries", job)
    assert [o["state"] for o in job.stop()] == ["STOPPED"]
    assert out.read_text().splitlines() == [f"record {i}" for i in range(50)]

    impatient = tmp_path / "impatient.txt"
    job = run_job(sink_config("impatient", topic, impatient, int(time.time() * 1000) + 600_000, 1000), worker)
    (outcome,) = job.wait(120)
    assert outcome["state"] == "FAILED", outcome
    assert "retried for errors.retry.timeout=1000 ms" in outcome["trace"]
    assert written() == 50 and not (impatient.exists() and impatient.read_text())
