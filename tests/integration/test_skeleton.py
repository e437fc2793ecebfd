"""The walking skeleton on a real broker, with tasks on Spark executors."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer

from eosconnect.runtime.skeleton import SkeletonJob, offset_key, record_key, run_skeleton, zombie_task

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def test_each_task_commits_records_and_offsets_atomically(
    spark, bootstrap, topic_name, create_topic, read_committed
):
    data, offsets = create_topic(topic_name("data"), partitions=3), create_topic(topic_name("offsets"))
    job = SkeletonJob(bootstrap, data, offsets, topic_name("txn"), records_per_task=250)

    reports = run_skeleton(spark, job, tasks=3)

    assert sorted(r["task"] for r in reports) == [0, 1, 2]
    records = read_committed(data)
    per_task: dict[int, list[int]] = {}
    for rec in records:
        value = json.loads(rec.value)
        assert rec.key == record_key(value["task"])
        per_task.setdefault(value["task"], []).append(value["seq"])
    assert {t: sorted(s) for t, s in per_task.items()} == {t: list(range(250)) for t in range(3)}
    offset_records = {r.key: json.loads(r.value) for r in read_committed(offsets)}
    assert offset_records == {offset_key(t): {"seq": 249} for t in range(3)}


def test_second_producer_with_same_transactional_id_fences_the_first(
    spark, bootstrap, topic_name, create_topic, read_committed, tmp_path: Path
):
    data, offsets = create_topic(topic_name("data")), create_topic(topic_name("offsets"))
    job = SkeletonJob(bootstrap, data, offsets, topic_name("txn"), records_per_task=100)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    outcome: list[dict] = []

    def run_zombie() -> None:
        rdd = spark.sparkContext.parallelize([0], 1)
        outcome.extend(
            rdd.mapPartitionsWithIndex(lambda i, rows: zombie_task(i, rows, job, str(barrier))).collect()
        )

    zombie_thread = threading.Thread(target=run_zombie)
    zombie_thread.start()
    for _ in range(600):
        if (barrier / "sent").exists():
            break
        zombie_thread.join(0.1)
    assert (barrier / "sent").exists(), "the zombie task never sent its records"

    successor = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": f"{job.transactional_prefix}-0"}
    )
    successor.init_transactions(30)
    (barrier / "fenced").write_text("1")
    zombie_thread.join(120)

    assert len(outcome) == 1 and outcome[0]["committed"] is False
    assert outcome[0]["error"] == "_FENCED", outcome[0]
    assert outcome[0]["fatal"] is True

    successor.begin_transaction()
    successor.produce(data, key=b"successor", value=b'{"seq":0}')
    successor.commit_transaction(30)
    visible = read_committed(data)
    assert [r.key for r in visible] == [b"successor"], "the fenced transaction's records became visible"
    assert read_committed(offsets) == []
