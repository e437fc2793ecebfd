"""The exactly-once (and at-least-once) source task loop on Spark against the real broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException

from eosconnect.connectors.sequence import expected_sequences, parse_value
from eosconnect.storage.transactional_ids import task_transactional_id
from eosconnect.tools.verify import SequenceReport, check_sequences
from support.runtime_helpers import committed_offsets, wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


def sequence_config(name: str, topic: str, tasks: int, total: int, **extra: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": extra.pop("connector_class", "SequenceSource"),
        "tasks.max": str(tasks),
        "topic": topic,
        "records.per.task": str(total),
        "batch.size": extra.pop("batch_size", "50"),
        "payload.bytes": "20",
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


def verify(records, tasks: int, per_task: int) -> SequenceReport:
    """Each of `tasks` keys holds sequence numbers 0..per_task-1 exactly once."""
    return check_sequences([parse_value(r.value) for r in records], {t: per_task for t in range(tasks)})


def test_poll_boundary_one_transaction_per_batch(
    run_job, worker_props, topic_name, create_topic, read_committed
):
    data = create_topic(topic_name("data"), partitions=2)
    worker = worker_props("enabled")
    job = run_job(sequence_config("seq-poll", data, tasks=2, total=1000, batch_size="50"), worker)
    wait_until(lambda: len(read_committed(data)) >= 2000, 120, "2000 committed records", job)
    outcomes = job.stop()

    report = verify(read_committed(data), 2, 1000)
    assert report.ok, report.anomalies
    assert [o["state"] for o in outcomes] == ["STOPPED", "STOPPED"], outcomes
    for o in outcomes:
        m = o["metrics"]
        assert m["transaction-size-min"] == m["transaction-size-max"] == 50
        assert m["transaction-size-avg"] == 50.0
        assert m["transactions-committed"] == 20
    offsets = committed_offsets(read_committed, worker["offset.storage.topic"], "seq-poll")
    assert offsets == {json.dumps({"task": t}): {"seq": 999} for t in range(2)}


def test_interval_boundary_groups_batches(run_job, worker_props, topic_name, create_topic, read_committed):
    data = create_topic(topic_name("data"))
    connector = sequence_config(
        "seq-interval",
        data,
        tasks=1,
        total=600,
        batch_size="10",
        rate_per_task="400",
        transaction_boundary="interval",
        transaction_boundary_interval_ms="500",
    )
    job = run_job(connector, worker_props("enabled"))
    wait_until(lambda: len(read_committed(data)) >= 600, 120, "600 committed records", job)
    (outcome,) = job.stop()

    assert verify(read_committed(data), 1, 600).ok
    m = outcome["metrics"]
    assert m["transaction-size-max"] > 10, "interval boundaries should span several polls"
    assert m["transactions-committed"] < 60


@pytest.mark.parametrize(
    ("total", "batch", "every"),
    [
        (300, 45, 30),
        # Transactions end mid-batch with 200 records left, sent after waiting for the commit.
        (1200, 300, 100),
    ],
    ids=["short-rests", "deferred-rests"],
)
def test_connector_boundary_commits_and_aborts(
    run_job, worker_props, topic_name, create_topic, read_committed, total, batch, every
):
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    name = f"seq-connector-{batch}"
    connector = sequence_config(
        name,
        data,
        tasks=1,
        total=total,
        batch_size=str(batch),
        transaction_boundary="connector",
        transaction_commit_every=str(every),
        transaction_abort_every="3",
    )
    job = run_job(connector, worker)
    expected = expected_sequences(total, every, 3)
    wait_until(
        lambda: (
            committed_offsets(read_committed, worker["offset.storage.topic"], name)
            .get(json.dumps({"task": 0}), {})
            .get("seq")
            == total - 1
        ),
        120,
        f"offsets to reach {total - 1}",
        job,
    )
    (outcome,) = job.stop()

    records = read_committed(data)
    seqs = sorted(parse_value(r.value)[1] for r in records)
    assert seqs == expected, "aborted transactions' records must be absent, the others exactly once"
    transactions = total // every  # every 3rd aborted
    assert len(expected) == (transactions - transactions // 3) * every
    m = outcome["metrics"]
    assert m["transactions-aborted"] == transactions // 3
    assert m["transactions-committed"] == transactions - transactions // 3
    assert m["transaction-size-min"] == m["transaction-size-max"] == every


def test_conflicting_commit_and_abort_fails_the_task(run_job, worker_props, topic_name, create_topic):
    data = create_topic(topic_name("data"))
    connector = sequence_config(
        "seq-conflict",
        data,
        tasks=1,
        total=100,
        transaction_boundary="connector",
        connector_class="support.connectors.ConflictingBoundaryConnector",
    )
    job = run_job(connector, worker_props("enabled"))
    (outcome,) = job.wait(120)
    assert outcome["state"] == "FAILED"
    assert "both a commit and an abort" in outcome["trace"]


def test_task_refuses_to_write_to_its_own_offsets_topic(run_job, worker_props, topic_name, create_topic):
    worker = worker_props("enabled")
    connector = sequence_config("seq-self", worker["offset.storage.topic"], tasks=1, total=10)
    job = run_job(connector, worker)
    (outcome,) = job.wait(120)
    assert outcome["state"] == "FAILED"
    assert "must not write to its own offsets topic" in outcome["trace"]


def test_sigkilled_task_resumes_exactly_once(
    run_job, worker_props, topic_name, create_topic, read_committed, tmp_path
):
    data = create_topic(topic_name("data"), partitions=2)
    markers = tmp_path / "markers"
    markers.mkdir()
    connector = sequence_config(
        "seq-crash",
        data,
        tasks=2,
        total=3000,
        batch_size="20",
        rate_per_task="1500",
        transaction_boundary="interval",
        transaction_boundary_interval_ms="400",
        connector_class="support.connectors.CrashingSequenceConnector",
        crash_after_polls="40",
        crash_marker_dir=str(markers),
    )
    job = run_job(connector, worker_props("enabled"))
    wait_until(lambda: len(read_committed(data)) >= 6000, 180, "6000 committed records", job)
    outcomes = job.stop()

    assert sorted(p.name for p in markers.iterdir()) == ["crashed-0", "crashed-1"], (
        "both tasks must have crashed"
    )
    report = verify(read_committed(data), 2, 3000)
    assert report.ok, report.anomalies
    assert all(o["state"] == "STOPPED" for o in outcomes)


def test_zombie_is_fenced_by_second_instance(run_job, worker_props, topic_name, create_topic, read_committed):
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    connector = sequence_config("seq-zombie", data, tasks=1, total=4000, batch_size="20", rate_per_task="400")
    zombie = run_job(connector, worker)
    wait_until(lambda: len(read_committed(data)) >= 200, 60, "the first instance to commit", zombie)

    successor = run_job(connector, worker)
    (zombie_outcome,) = zombie.wait(60)
    assert zombie_outcome["state"] == "FAILED"
    assert "fenced" in zombie_outcome["trace"] and "zombie" in zombie_outcome["trace"]

    wait_until(lambda: len(read_committed(data)) >= 4000, 120, "4000 committed records", successor)
    successor.stop()
    report = verify(read_committed(data), 1, 4000)
    assert report.ok, report.anomalies


@pytest.mark.parametrize("mode", ["enabled", "disabled"])
def test_update_offsets_advances_idle_partition(
    mode, run_job, worker_props, topic_name, create_topic, read_committed
):
    data = create_topic(topic_name("data"))
    worker = worker_props(mode)
    connector = sequence_config(
        "seq-heartbeat",
        data,
        tasks=1,
        total=200,
        connector_class="support.connectors.HeartbeatConnector",
        transaction_boundary="interval",
        transaction_boundary_interval_ms="300",
    )
    job = run_job(connector, worker)
    idle_key = json.dumps({"table": "idle-0"})

    def heartbeats() -> list[int]:
        offsets = [
            json.loads(r.value)["heartbeat"]
            for r in read_committed(worker["offset.storage.topic"])
            if json.loads(r.key)[1] == {"table": "idle-0"}
        ]
        return offsets

    wait_until(lambda: len(read_committed(data)) >= 200, 60, "200 records", job)
    first = heartbeats()
    wait_until(
        lambda: len(heartbeats()) > len(first) + 1, 30, "the idle partition's offset to advance again", job
    )
    job.stop()
    later = heartbeats()
    assert later == sorted(later) and later[-1] > (first[-1] if first else 0)
    assert (
        committed_offsets(read_committed, worker["offset.storage.topic"], "seq-heartbeat")[idle_key]
        is not None
    )
    assert verify(read_committed(data), 1, 200).ok


def test_an_unchanged_offset_is_written_once_per_task_instance(
    run_job, worker_props, topic_name, create_topic, read_committed
):
    """A partition whose offset never changes (MirrorHeartbeat's, a heartbeat's) is written by the
    first transaction of each task instance only, while the busy partition's offset is written by
    every transaction; the committed offsets stay right across a restart."""
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    offsets_topic = worker["offset.storage.topic"]

    def run(total: int) -> list[dict[str, Any]]:
        connector = sequence_config(
            "seq-constant",
            data,
            tasks=1,
            total=total,
            batch_size="50",
            connector_class="support.connectors.HeartbeatConnector",
            heartbeat_constant="true",
        )
        job = run_job(connector, worker)
        wait_until(lambda: len(read_committed(data)) >= total, 60, f"{total} records", job)
        return job.stop()

    def written() -> dict[str, list[Any]]:
        values: dict[str, list[Any]] = {}
        for record in read_committed(offsets_topic):
            name, partition = json.loads(record.key)
            if name == "seq-constant":
                values.setdefault(json.dumps(partition), []).append(json.loads(record.value))
        return values

    idle, busy = json.dumps({"table": "idle-0"}), json.dumps({"task": 0})
    (first,) = run(500)
    assert first["metrics"]["transactions-committed"] == 10
    assert written()[idle] == [{"heartbeat": 0}], "the unchanged offset once, not in each of 10 transactions"
    assert [v["seq"] for v in written()[busy]] == list(range(49, 500, 50))
    (second,) = run(1000)  # a new instance: resumes at seq 500, writes the unchanged offset once more
    assert second["metrics"]["transactions-committed"] == 10
    assert written()[idle] == [{"heartbeat": 0}] * 2
    assert [v["seq"] for v in written()[busy]] == list(range(49, 1000, 50))
    assert committed_offsets(read_committed, offsets_topic, "seq-constant") == {
        idle: {"heartbeat": 0},
        busy: {"seq": 999},
    }
    assert verify(read_committed(data), 1, 1000).ok


@pytest.mark.parametrize("mode", ["enabled", "disabled"])
def test_retriable_exception_from_poll_is_polled_again(
    mode, run_job, worker_props, topic_name, create_topic, read_committed
):
    """A RetriableException from poll() does not fail the task: it polls again, as Kafka Connect's
    source loop does (here polls 2-150 raise it, about 1.5 s), and every record arrives once."""
    data = create_topic(topic_name("data"))
    connector = sequence_config(
        "seq-flaky",
        data,
        tasks=1,
        total=300,
        connector_class="support.connectors.FlakySequenceConnector",
        flaky_from_poll="2",
        flaky_to_poll="150",
    )
    job = run_job(connector, worker_props(mode))
    wait_until(lambda: len(read_committed(data)) >= 300, 60, "300 records", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes
    report = verify(read_committed(data), 1, 300)
    assert report.ok, report.anomalies


def test_at_least_once_mode_delivers_everything(
    run_job, worker_props, topic_name, create_topic, read_committed
):
    data = create_topic(topic_name("data"))
    worker = worker_props("disabled")
    job = run_job(sequence_config("seq-alos", data, tasks=2, total=500), worker)
    wait_until(lambda: len(read_committed(data)) >= 1000, 60, "1000 records", job)
    wait_until(
        lambda: (
            committed_offsets(read_committed, worker["offset.storage.topic"], "seq-alos")
            == {json.dumps({"task": t}): {"seq": 499} for t in range(2)}
        ),
        30,
        "offsets of acknowledged records to be flushed",
        job,
    )
    outcomes = job.stop()
    assert verify(read_committed(data), 2, 500).ok
    assert all(o["state"] == "STOPPED" for o in outcomes)


def test_at_least_once_task_that_fails_commits_what_was_acknowledged(
    run_job, worker_props, topic_name, create_topic, read_committed
):
    """Kafka Connect commits a source task's offsets in `finally`: records acknowledged before the
    failure are not sent again by the restarted task, though no periodic flush came round."""
    data = create_topic(topic_name("data"))
    worker = worker_props("disabled", offset_flush_interval_ms="3600000")
    connector = sequence_config(
        "seq-fail", data, tasks=1, total=100000, connector_class="support.connectors.FailingSequenceConnector"
    )
    connector["fail.after.polls"] = "4"
    (outcome,) = run_job(connector, worker).wait(90)
    assert outcome["state"] == "FAILED" and "the source went away" in outcome["trace"]
    assert verify(read_committed(data), 1, 200).ok
    committed = committed_offsets(read_committed, worker["offset.storage.topic"], "seq-fail")
    assert committed == {json.dumps({"task": 0}): {"seq": 199}}


def test_transactional_id_override_is_ignored(
    run_job, worker_props, topic_name, create_topic, read_committed
):
    """If the override were honoured, both tasks would share one transactional id and fence each other."""
    data = create_topic(topic_name("data"), partitions=2)
    connector = sequence_config(
        "seq-override", data, tasks=2, total=400, producer_override_transactional_id="shared-by-everyone"
    )
    job = run_job(connector, worker_props("enabled"))
    wait_until(lambda: len(read_committed(data)) >= 800, 90, "800 committed records", job)
    outcomes = job.stop()
    assert all(o["state"] == "STOPPED" for o in outcomes), outcomes
    assert verify(read_committed(data), 2, 400).ok


def test_unknown_client_setting_fails_with_its_name(run_job, worker_props, topic_name, create_topic):
    data = create_topic(topic_name("data"))
    connector = sequence_config(
        "seq-badclient", data, tasks=1, total=10, producer_override_no_such_setting="1"
    )
    (outcome,) = run_job(connector, worker_props("enabled")).wait(60)
    assert outcome["state"] == "FAILED"
    assert "producer.override.no.such.setting" in outcome["trace"]


def test_transaction_timeout_fails_with_remedies(run_job, worker_props, topic_name, create_topic):
    data = create_topic(topic_name("data"))
    connector = sequence_config(
        "seq-timeout",
        data,
        tasks=1,
        total=100000,
        batch_size="10",
        rate_per_task="50",
        transaction_boundary="interval",
        transaction_boundary_interval_ms="20000",
        producer_override_transaction_timeout_ms="2000",
    )
    (outcome,) = run_job(connector, worker_props("enabled")).wait(90)
    assert outcome["state"] == "FAILED"
    assert "transaction.timeout.ms" in outcome["trace"] and "transaction.boundary=poll" in outcome["trace"]


@pytest.mark.parametrize("mode", ["enabled", "disabled"])
def test_oversized_record_fails_the_task_without_committing_its_offset(
    mode, run_job, worker_props, topic_name, create_topic, read_committed
):
    data = create_topic(topic_name("data"))
    worker = worker_props(mode)
    connector = sequence_config("seq-big", data, tasks=1, total=5, batch_size="1", payload_bytes="2000000")
    (outcome,) = run_job(connector, worker).wait(90)
    assert outcome["state"] == "FAILED"
    assert "message.max.bytes" in outcome["trace"]
    assert committed_offsets(read_committed, worker["offset.storage.topic"], "seq-big") == {}


def test_separate_offsets_topic_is_created_used_and_copied_to_the_global_topic(
    run_job, worker_props, topic_name, create_topic, read_committed
):
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    separate = topic_name("own-offsets")
    connector = sequence_config("seq-own", data, tasks=1, total=300, offsets_storage_topic=separate)
    job = run_job(connector, worker)

    def final_offset_in_own_topic() -> bool:
        try:
            return committed_offsets(read_committed, separate, "seq-own") == {
                json.dumps({"task": 0}): {"seq": 299}
            }
        except KafkaException:  # the task has not created its offsets topic yet
            return False

    wait_until(
        final_offset_in_own_topic,
        90,
        "the final offset in the connector's own offsets topic",
        job,
    )
    wait_until(
        lambda: (
            committed_offsets(read_committed, worker["offset.storage.topic"], "seq-own")
            == {json.dumps({"task": 0}): {"seq": 299}}
        ),
        60,
        "the copy in the worker's global offsets topic",
        job,
    )
    job.stop()
    assert verify(read_committed(data), 1, 300).ok


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def assert_commit_records_match(calls: list[dict[str, Any]], records: list[Any], aborted: set[int]) -> None:
    """One commit_record() per record whose offset was committed, in order; the metadata of a written
    record is where Kafka holds it, None for an aborted one."""
    where = {parse_value(r.value)[1]: (r.partition, r.offset) for r in records}
    assert [c["seq"] for c in calls] == sorted(set(where) | aborted)
    for call in calls:
        if call["seq"] in aborted:
            assert call["offset"] is None, call
        else:
            assert (call["partition"], call["offset"]) == where[call["seq"]], call


@pytest.mark.parametrize("fence_at", ["update_offsets", "poll"])
def test_fenced_mid_pipeline_commits_nothing_of_the_batch_polled_meanwhile(
    fence_at, run_job, worker_props, topic_name, create_topic, read_committed, bootstrap, tmp_path
):
    """With poll boundaries the commit of batch 5 runs while batch 6 is polled and converted. The
    task is fenced there: at batch 5's boundary, so that very commit fails (`update_offsets`), or
    during poll 6, racing the commit in flight (`poll`; the commit may win). Either way the task
    fails, no record of batch 6 is in Kafka, the data is an exact prefix matching the committed
    offset, and commit_record() ran for exactly the committed records."""
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    logs = tmp_path / "logs"
    logs.mkdir()
    name = f"seq-fence-{fence_at.replace('_', '-')}"
    connector = sequence_config(
        name,
        data,
        tasks=1,
        total=2000,
        batch_size="20",
        connector_class="support.connectors.FencingSequenceConnector",
        fence_after_polls="5",
        fence_at=fence_at,
        fence_bootstrap_servers=bootstrap,
        fence_transactional_id=task_transactional_id(worker["group.id"], name, 0),
        log_dir=str(logs),
    )
    (outcome,) = run_job(connector, worker).wait(120)
    assert outcome["state"] == "FAILED"
    assert "fenced" in outcome["trace"] and "zombie" in outcome["trace"]

    records = read_committed(data)
    seqs = [parse_value(r.value)[1] for r in records]
    batches = len(seqs) // 20
    assert seqs == list(range(20 * batches)), "an exact prefix of whole batches, no duplicate"
    assert batches == 4 if fence_at == "update_offsets" else batches in (4, 5)
    polled = {p["poll"]: p["seqs"] for p in read_jsonl(logs / "polled-0.jsonl")}
    assert polled[6] == list(range(100, 120)), "batch 6 was polled while batch 5 was committing"
    assert not set(polled[6]) & set(seqs)
    offsets = committed_offsets(read_committed, worker["offset.storage.topic"], name)
    assert offsets == {json.dumps({"task": 0}): {"seq": seqs[-1]}}
    assert_commit_records_match(read_jsonl(logs / "committed-0.jsonl"), records, aborted=set())


def test_commit_record_follows_commits_in_order(
    run_job, worker_props, topic_name, create_topic, read_committed, tmp_path
):
    """Connector boundaries end transactions mid-batch (the next record then waits for the pipelined
    commit): commit_record() still runs once per record, in order, None for aborted records, and
    never for the records of the transaction still open (and aborted) at stop."""
    data = create_topic(topic_name("data"))
    worker = worker_props("enabled")
    logs = tmp_path / "logs"
    logs.mkdir()
    connector = sequence_config(
        "seq-commit-record",
        data,
        tasks=1,
        total=310,
        batch_size="45",
        connector_class="support.connectors.FencingSequenceConnector",
        transaction_boundary="connector",
        transaction_commit_every="30",
        transaction_abort_every="3",
        log_dir=str(logs),
    )
    job = run_job(connector, worker)
    wait_until(
        lambda: len(read_jsonl(logs / "committed-0.jsonl")) >= 300, 120, "commit_record() up to seq 299", job
    )
    wait_until(lambda: len(read_jsonl(logs / "polled-0.jsonl")) == 7, 30, "all 310 records polled", job)
    (outcome,) = job.stop()
    assert outcome["state"] == "STOPPED"

    records = read_committed(data)
    expected = expected_sequences(300, 30, 3)
    assert sorted(parse_value(r.value)[1] for r in records) == expected
    aborted = set(range(300)) - set(expected)
    assert_commit_records_match(read_jsonl(logs / "committed-0.jsonl"), records, aborted)
    offsets = committed_offsets(read_committed, worker["offset.storage.topic"], "seq-commit-record")
    assert offsets == {json.dumps({"task": 0}): {"seq": 299}}


# ------------------------------------------------------------------ columnar batches (SourceBatch)
COLUMNAR = "support.columnar_connectors.ColumnarSequenceConnector"


def test_columnar_batches_commit_one_offset_per_batch_exactly_once_across_sigkill(
    run_job, worker_props, topic_name, create_topic, read_committed, tmp_path
):
    data = create_topic(topic_name("data"), partitions=2)
    markers = tmp_path / "markers"
    markers.mkdir()
    worker = worker_props("enabled")
    connector = sequence_config(
        "col-crash",
        data,
        tasks=2,
        total=2000,
        batch_size="40",
        rate_per_task="1500",
        connector_class=COLUMNAR,
        crash_after_polls="15",
        crash_marker_dir=str(markers),
    )
    job = run_job(connector, worker)
    wait_until(lambda: len(read_committed(data)) >= 4000, 180, "4000 committed records", job)
    outcomes = job.stop()

    assert sorted(p.name for p in markers.iterdir()) == ["crashed-0", "crashed-1"]
    report = verify(read_committed(data), 2, 2000)
    assert report.ok, report.anomalies
    assert all(o["state"] == "STOPPED" for o in outcomes), outcomes
    assert all(o["metrics"]["transaction-size-max"] <= 40 for o in outcomes), "a batch is one transaction"
    offsets = committed_offsets(read_committed, worker["offset.storage.topic"], "col-crash")
    assert offsets == {json.dumps({"task": t}): {"seq": 1999} for t in range(2)}


def test_columnar_batches_go_through_transformations_whole_or_record_by_record(
    run_job, worker_props, topic_name, create_topic, read_committed
):
    """Transformations take a batch whole (`apply_columns`) or, where one declines it, record by
    record: both reach Kafka exactly once, each record transformed once."""
    data = create_topic(topic_name("data"))
    connector = sequence_config(
        "col-smt",
        data,
        tasks=1,
        total=300,
        batch_size="20",
        connector_class=COLUMNAR,
        transforms="tag,alt",
        transforms_tag_type="InsertField",
        transforms_tag_static_field="via_insert",
        transforms_tag_static_value="smt",
        transforms_alt_type="support.columnar_connectors.AlternatingTag",
    )
    job = run_job(connector, worker_props("enabled"))
    wait_until(lambda: len(read_committed(data)) >= 300, 120, "300 committed records", job)
    job.stop()

    records = read_committed(data)
    assert verify(records, 1, 300).ok
    envelopes = [json.loads(r.value) for r in records]  # the default JsonConverter's, schemaless values
    assert all(e["schema"] is None for e in envelopes)
    values = [e["payload"] for e in envelopes]
    assert all(v["via_insert"] == "smt" for v in values)
    assert {v["via"] for v in values} == {"columns", "records"}


def test_columnar_batches_at_least_once_deliver_everything_and_flush_offsets(
    run_job, worker_props, topic_name, create_topic, read_committed
):
    data = create_topic(topic_name("data"))
    worker = worker_props("disabled")
    connector = sequence_config(
        "col-alos",
        data,
        tasks=2,
        total=500,
        connector_class=COLUMNAR,
        transforms="alt",  # every other batch record by record
        transforms_alt_type="support.columnar_connectors.AlternatingTag",
    )
    job = run_job(connector, worker)
    wait_until(lambda: len(read_committed(data)) >= 1000, 60, "1000 records", job)
    wait_until(
        lambda: (
            committed_offsets(read_committed, worker["offset.storage.topic"], "col-alos")
            == {json.dumps({"task": t}): {"seq": 499} for t in range(2)}
        ),
        30,
        "offsets of acknowledged batches to be flushed",
        job,
    )
    outcomes = job.stop()
    assert verify(read_committed(data), 2, 500).ok
    assert all(o["state"] == "STOPPED" for o in outcomes)
