"""The sink task loop on Spark against the real broker: calls, commits, malformed records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient

from support.runtime_helpers import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

RECORDING = "support.connectors.RecordingSinkConnector"


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 1) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for i, value in enumerate(values):
        producer.produce(topic, value=value, partition=i % partitions)
    assert producer.flush(30) == 0


def events(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def put_records(path: Path) -> list[list]:
    return [r for e in events(path) if e["call"] == "put" for r in e["records"]]


def committed(bootstrap: str, group: str) -> dict[int, int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def sink_config(name: str, topic: str, calls: Path, **extra: str) -> dict[str, str]:
    """The recording sink on `topic`, whose values are plain JSON from a plain producer."""
    return {
        "name": name,
        "connector.class": RECORDING,
        "tasks.max": "1",
        "topics": topic,
        "record.file": str(calls),
        "value.converter.schemas.enable": "false",
        "consumer.override.session.timeout.ms": "6000",
        **extra,
    }


def test_calls_in_order_and_commits_are_what_pre_commit_returned(
    run_job, worker_props, topic_name, create_topic, bootstrap, tmp_path: Path
):
    data = create_topic(topic_name("data"), partitions=2)
    values = [{"n": i} for i in range(200)]
    produce(bootstrap, data, [json.dumps(v).encode() for v in values], partitions=2)
    calls = tmp_path / "calls.jsonl"
    name = topic_name("sink")
    job = run_job(sink_config(name, data, calls), worker_props("disabled"))
    wait_until(lambda: len(put_records(calls)) >= 200, 120, "200 records put", job)
    wait_until(lambda: any(e["call"] == "pre_commit" for e in events(calls)), 30, "a pre_commit", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes

    seen = events(calls)
    order = [e["call"] for e in seen]
    assert order[:2] == ["start", "open"] and order[-2:] == ["close", "stop"], order
    assert seen[1]["partitions"] == seen[-2]["partitions"] == [f"{data}-0", f"{data}-1"]
    records = put_records(calls)
    assert sorted(r[3]["n"] for r in records) == list(range(200)), "every record put exactly once"
    for p in (0, 1):
        offsets = [r[2] for r in records if r[1] == p]
        assert offsets == list(range(100)), f"partition {p} in offset order"
    assert all(r[0] == data for r in records)

    last = next(e for e in reversed(seen) if e["call"] == "pre_commit")
    assert last["returned"] == {f"{data}-0": 99, f"{data}-1": 99}  # held back one record each
    assert committed(bootstrap, f"connect-{name}") == {0: 99, 1: 99}
    assert outcomes[0]["metrics"]["sink-record-send-total"] == 200


def test_malformed_record_fails_the_task_naming_it_unless_tolerated(
    run_job, worker_props, topic_name, create_topic, bootstrap, tmp_path: Path
):
    data = create_topic(topic_name("data"))
    produce(bootstrap, data, [b'{"ok": 1}', b"not json", b'{"ok": 2}'])
    worker = worker_props("disabled")

    calls = tmp_path / "strict.jsonl"
    name = topic_name("strict")
    job = run_job(sink_config(name, data, calls), worker)
    outcomes = job.wait(120)
    assert [o["state"] for o in outcomes] == ["FAILED"], outcomes
    trace = outcomes[0]["trace"]
    assert f"the record at topic '{data}' partition 0 offset 1 could not be converted" in trace
    assert "errors.tolerance=all" in trace and "JsonConverter" in trace
    assert committed(bootstrap, f"connect-{name}") == {}, "a failed task commits nothing"
    assert [e["call"] for e in events(calls)][-2:] == ["close", "stop"]

    calls = tmp_path / "tolerant.jsonl"
    job = run_job(sink_config(topic_name("tolerant"), data, calls, **{"errors.tolerance": "all"}), worker)
    wait_until(lambda: len(put_records(calls)) >= 2, 120, "the two good records", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes
    assert [r[3] for r in put_records(calls)] == [{"ok": 1}, {"ok": 2}]
    assert outcomes[0]["metrics"]["sink-record-skipped-total"] == 1
