"""`eosconnect verify` and its checks: it passes clean data and catches injected duplicates and gaps.

The records are written directly with a producer, so every anomaly is put there on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa
from confluent_kafka import Producer
from typer.testing import CliRunner

from eosconnect.tools import verify_cli
from eosconnect.tools.verify import (
    SequenceCollector,
    check_contiguous,
    check_ids,
    parse_start_offsets,
    record_id,
    verify_sequence_records,
    verify_sequence_topic,
)
from eosconnect.tools.verify_cli import verify_app
from support.runtime_helpers import wait_until

runner = CliRunner()


# ------------------------------------------------------------------------------------ pure checks


def test_contiguous_sequences_without_counts():
    assert check_contiguous([("a", 0), ("a", 1), ("b", 0)]).ok
    gap = check_contiguous([("a", 0), ("a", 2)])
    assert gap.missing == 1 and not gap.ok
    late_start = check_contiguous([("a", 5), ("a", 6)])
    assert late_start.missing == 5, "without --from-offsets numbering starts at 0"
    assert check_contiguous([("a", 5), ("a", 6)], from_zero=False).ok


def test_ids_exactly_once():
    assert check_ids([1, 2, 3], [3, 2, 1]).ok
    report = check_ids([1, 2, 2, 4, None], [1, 2, 3])
    assert (report.duplicates, report.missing, report.unexpected) == (1, 1, 2)
    assert any("id 2 seen 2 times" in a for a in report.anomalies)
    assert check_ids([5.0], [5]).ok, "ids from JSON and from the database compare by value"


def test_aborted_transactions_are_expected_to_be_absent():
    collector = SequenceCollector(observed=[(0, s) for s in range(10) if (s // 2 + 1) % 2 != 0])
    report = verify_sequence_records(collector, tasks=1, records_per_task=10, commit_every=2, abort_every=2)
    assert report.ok, report.anomalies


def test_start_offsets_parsing():
    assert parse_start_offsets("0:10, 2:7") == {0: 10, 2: 7}
    assert parse_start_offsets("") is None
    with pytest.raises(ValueError, match="PARTITION:OFFSET"):
        parse_start_offsets("0=10")


# ------------------------------------------------------------------------------------ on the broker


def produce(bootstrap: str, topic: str, items: list[tuple[object, object]], partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for key, value in items:
        producer.produce(topic, key=json.dumps(key), value=json.dumps(value), partition=partition)
    assert producer.flush(30) == 0


def sequence_items(task: int, seqs: list[int]) -> list[tuple[object, object]]:
    return [(f"task-{task}", {"task": task, "seq": s, "payload": "x"}) for s in seqs]


def invoke(*args: str):
    return runner.invoke(verify_app, list(args))


@pytest.mark.kafka
def test_sequence_mode_passes_clean_data_and_catches_duplicate_and_gap(bootstrap, topic_name, create_topic):
    clean = create_topic(topic_name("clean"), partitions=2)
    produce(bootstrap, clean, sequence_items(0, list(range(100))), partition=0)
    produce(bootstrap, clean, sequence_items(1, list(range(100))), partition=1)
    # An aborted transaction's duplicates are invisible to read_committed: still clean.
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": topic_name("txn")})
    producer.init_transactions(30)
    producer.begin_transaction()
    for key, value in sequence_items(0, [5, 6]):
        producer.produce(clean, key=json.dumps(key), value=json.dumps(value), partition=0)
    producer.abort_transaction(30)

    result = invoke(
        "--topic", clean, "-b", bootstrap, "--sequence", "--tasks", "2", "--records-per-task", "100"
    )
    assert result.exit_code == 0, result.output
    assert "OK: exactly once" in result.output and "200" in result.output
    assert invoke("--topic", clean, "-b", bootstrap, "--sequence").exit_code == 0

    duplicate = create_topic(topic_name("dup"))
    produce(bootstrap, duplicate, sequence_items(0, [*range(50), 17]))
    result = invoke(
        "--topic", duplicate, "-b", bootstrap, "--sequence", "--tasks", "1", "--records-per-task", "50"
    )
    assert result.exit_code == verify_cli.EXIT_ANOMALIES, result.output
    assert "sequence 17 seen 2 times" in result.output and "FAILED" in result.output

    gap = create_topic(topic_name("gap"))
    produce(bootstrap, gap, sequence_items(0, [s for s in range(50) if s != 23]))
    result = invoke("--topic", gap, "-b", bootstrap, "--sequence")
    assert result.exit_code == verify_cli.EXIT_ANOMALIES, result.output
    assert "1 missing, first [23]" in result.output

    # The lost tail is only visible against the expected counts.
    tail = create_topic(topic_name("tail"))
    produce(bootstrap, tail, sequence_items(0, list(range(40))))
    assert invoke("--topic", tail, "-b", bootstrap, "--sequence").exit_code == 0
    result = invoke(
        "--topic", tail, "-b", bootstrap, "--sequence", "--tasks", "1", "--records-per-task", "50"
    )
    assert result.exit_code == verify_cli.EXIT_ANOMALIES and "10 missing" in result.output


@pytest.mark.kafka
def test_from_offsets_checks_from_there(bootstrap, topic_name, create_topic):
    topic = create_topic(topic_name("from"))
    produce(bootstrap, topic, sequence_items(0, [0, 1, 1, 2, 3, 4, 5]))
    assert invoke("--topic", topic, "-b", bootstrap, "--sequence").exit_code == verify_cli.EXIT_ANOMALIES
    result = invoke("--topic", topic, "-b", bootstrap, "--sequence", "--from-offsets", "0:3")
    assert result.exit_code == 0, result.output
    report = verify_sequence_topic({"bootstrap.servers": bootstrap}, topic, start_offsets={0: 3})
    assert report.ok and report.seen == 4


@pytest.mark.kafka
def test_jdbc_mode_matches_rows_by_id(bootstrap, topic_name, create_topic, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE orders (order_id INTEGER PRIMARY KEY, item TEXT)")
        conn.execute(
            sa.text("INSERT INTO orders (order_id, item) VALUES (:i, 'x')"), [{"i": i} for i in range(1, 61)]
        )
    engine.dispose()
    rows = [(i, {"order_id": i, "item": "x"}) for i in range(1, 61)]
    args = ["--jdbc", url, "--table", "orders", "--id-column", "order_id", "-b", bootstrap]

    clean = create_topic(topic_name("clean"))
    produce(bootstrap, clean, rows)
    result = invoke("--topic", clean, *args)
    assert result.exit_code == 0, result.output
    assert "OK: exactly once" in result.output

    broken = create_topic(topic_name("broken"))
    produce(bootstrap, broken, [r for r in rows if r[0] != 42] + [rows[9]])
    result = invoke("--topic", broken, *args)
    assert result.exit_code == verify_cli.EXIT_ANOMALIES, result.output
    assert "id 10 seen 2 times" in result.output and "first ids [42]" in result.output

    record = type("R", (), {"key": b"7", "value": b'{"other": 1}'})()
    assert record_id(record, "order_id") == 7, "falls back to the key (the incrementing id)"


@pytest.mark.kafka
def test_progress_bar_on_large_topics(bootstrap, topic_name, create_topic, monkeypatch):
    monkeypatch.setattr(verify_cli, "PROGRESS_THRESHOLD", 100)
    topic = create_topic(topic_name("large"))
    produce(bootstrap, topic, sequence_items(0, list(range(2000))))
    result = invoke(
        "--topic", topic, "-b", bootstrap, "--sequence", "--tasks", "1", "--records-per-task", "2000"
    )
    assert result.exit_code == 0, result.output
    assert "2000" in result.output


@pytest.mark.kafka
def test_unreadable_topic_and_bad_usage_exit_codes(bootstrap, topic_name):
    result = invoke("--topic", topic_name("absent"), "-b", bootstrap, "--sequence", "--timeout", "5")
    assert result.exit_code == verify_cli.EXIT_UNREADABLE and "cannot verify" in result.output
    assert invoke("--topic", "t", "-b", bootstrap).exit_code == 2, "a check must be chosen"
    assert invoke("--topic", "t", "--sequence", "--jdbc", "sqlite://").exit_code == 2
    assert invoke("--topic", "t", "--jdbc", "sqlite://").exit_code == 2, "--jdbc needs --table"
    assert invoke("--topic", "t", "--sequence", "--tasks", "2").exit_code == 2
    assert invoke("--topic", "t", "--sequence", "--from-offsets", "x").exit_code == 2


@pytest.mark.kafka
@pytest.mark.spark
def test_real_sequence_source_output_verifies(run_job, worker_props, topic_name, create_topic, bootstrap):
    """What the demo does: run SequenceSource exactly once (aborting every 3rd transaction on
    purpose), then check the topic with the CLI."""
    data = create_topic(topic_name("seq"), partitions=2)
    connector = {
        "name": "seq-verify",
        "connector.class": "SequenceSource",
        "tasks.max": "2",
        "topic": data,
        "records.per.task": "300",
        "batch.size": "40",
        "payload.bytes": "10",
        "transaction.boundary": "connector",
        "transaction.commit.every": "30",
        "transaction.abort.every": "3",
    }
    job = run_job(connector, worker_props("enabled"))
    expected = 2 * 210  # 10 transactions of 30 per task, 3 of them aborted
    args = ["--topic", data, "-b", bootstrap, "--sequence", "--tasks", "2", "--records-per-task", "300"]

    def delivered() -> bool:
        collector = SequenceCollector()
        verify_sequence_topic({"bootstrap.servers": bootstrap}, data, on_record=collector)
        return len(collector.observed) >= expected

    wait_until(delivered, 120, f"{expected} committed records", job)
    job.stop()
    result = invoke(*args, "--commit-every", "30", "--abort-every", "3")
    assert result.exit_code == 0, result.output
    result = invoke(*args)
    assert result.exit_code == verify_cli.EXIT_ANOMALIES, "without the abort settings the gaps are anomalies"
    assert "missing" in result.output
