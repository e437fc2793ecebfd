"""`eosconnect topics produce|consume`, `eosconnect groups describe` and `eosconnect verify --key-field /
--by key` against the session's broker, through the whole CLI (its error handling included)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from typer.testing import CliRunner

from eosconnect.cli import app
from eosconnect.devkafka.ports import free_port
from eosconnect.tools.verify import check_identities

runner = CliRunner()


def cli(*args: str, input: str | None = None) -> Any:
    return runner.invoke(app, list(args), input=input, env={"COLUMNS": "200", "EOSCONNECT_NO_PROGRESS": "1"})


def test_identity_checks() -> None:
    clean = check_identities([1, 2, 3, "4"])
    assert clean.ok and clean.distinct == 4 and clean.missing == 0
    report = check_identities([1, 2, 2, 5, None])
    assert (report.seen, report.distinct, report.duplicates, report.missing, report.unexpected) == (
        5,
        3,
        1,
        2,
        1,
    )
    assert not report.ok
    words = check_identities(["a", "b", "a"])
    assert words.duplicates == 1 and not words.missing_known and words.missing == 0


def test_produce_consume_verify_and_describe(
    bootstrap: str, create_topic: Callable[..., str], topic_name: Callable[[str], str]
) -> None:
    topic = create_topic(topic_name("orders"), partitions=2)
    lines = [f"k{i}:" + json.dumps({"order": {"id": i}}) for i in (0, 1, 2, 3, 5)] + [
        "k3:" + '{"order": {"id": 3}}'
    ]
    produced = cli(
        "topics", "produce", topic, "-b", bootstrap, "--key-separator", ":", input="\n".join(lines)
    )
    assert produced.exit_code == 0, produced.output
    assert "Produced 6 record(s)" in produced.output

    consumed = cli("topics", "consume", topic, "-b", bootstrap, "--json")
    assert consumed.exit_code == 0, consumed.output
    rows = [json.loads(line) for line in consumed.output.splitlines()]
    assert sorted(r["key"] for r in rows) == ["k0", "k1", "k2", "k3", "k3", "k5"]
    table = cli("topics", "consume", topic, "-b", bootstrap, "-X", "client.id=cli-test", "-n", "2")
    assert table.exit_code == 0 and "2 record(s)" in table.output and "read_committed" in table.output
    uncommitted = cli("topics", "consume", topic, "-b", bootstrap, "-X", "isolation.level=read_uncommitted")
    assert uncommitted.exit_code == 2 and "read_committed only" in uncommitted.output

    by_field = cli("verify", "-t", topic, "-b", bootstrap, "--key-field", "order.id")
    assert by_field.exit_code == 1, by_field.output
    summary = dict(
        (cells[0], cells[1])
        for line in by_field.output.splitlines()
        if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 2
    )
    assert summary["records"] == "6" and summary["distinct"] == "5" and summary["duplicates"] == "1"
    assert summary["gaps"] == "1 (in 0..5)", summary
    assert "3 seen 2 times" in by_field.output

    by_key = cli("verify", "-t", topic, "-b", bootstrap, "--by", "key")
    assert by_key.exit_code == 1 and "k3" in by_key.output
    unique = create_topic(topic_name("keyless"))
    assert cli("topics", "produce", unique, "-b", bootstrap, input="a\nb\nc").exit_code == 0
    assert cli("verify", "-t", unique, "-b", bootstrap, "--by", "key").exit_code == 1, "records without a key"

    group = f"{topic}-app"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, 0, 1), TopicPartition(topic, 1, 0)], asynchronous=False
        )
    finally:
        consumer.close()
    described = cli("groups", "describe", group, "-b", bootstrap, "--json")
    assert described.exit_code == 0, described.output
    offsets = {(o["partition"]): o for o in json.loads(described.output)["offsets"]}
    assert sum(o["end"] for o in offsets.values()) == 6
    assert offsets[0]["committed"] == 1 and offsets[0]["lag"] == offsets[0]["end"] - 1
    assert "Lag" in cli("groups", "describe", group, "-b", bootstrap).output


def test_user_mistakes_are_one_line(bootstrap: str, tmp_path: Any) -> None:
    bad = cli("topics", "produce", "t", "-b", bootstrap, "--file", str(tmp_path / "none.txt"))
    assert bad.exit_code == 2 and "none.txt: No such file or directory" in bad.output
    assert "Traceback" not in bad.output
    setting = cli("topics", "consume", "t", "-b", bootstrap, "-X", "nonsense")
    assert setting.exit_code == 2 and "KEY=VALUE" in setting.output
    both = cli("verify", "-t", "t", "-b", bootstrap, "--by", "key", "--sequence")
    assert both.exit_code == 2 and "choose one check" in both.output
    missing = cli("topics", "consume", "no-such-topic-here", "-b", bootstrap)
    assert missing.exit_code == 1 and "topic 'no-such-topic-here': Broker: Unknown topic" in missing.output

    closed = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    unreachable = cli("groups", "describe", "g", "-b", closed)
    assert unreachable.exit_code == 2 and f"--bootstrap-server={closed}" in unreachable.output
    assert len(unreachable.output.strip().splitlines()) == 1, unreachable.output
    assert time.monotonic() - started < 15, "found in seconds, not after a 30 s client timeout"


def test_describe_tells_a_transaction_marker_from_a_record_left(
    bootstrap: str, create_topic: Callable[..., str]
) -> None:
    """A group that read everything a transactional producer committed lags by 1 (the commit
    marker's offset): describe says 0 records are left, and why the lag is not 0."""
    from confluent_kafka import Producer

    topic = create_topic("txn-lag", partitions=1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, value=f"v{i}".encode())
    producer.commit_transaction(30)
    del producer  # closed now, not at the broker's stop
    group = f"{topic}-app"
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)  # after the 3 records
    finally:
        consumer.close()
    described = cli("groups", "describe", group, "-b", bootstrap, "--json")
    assert described.exit_code == 0, described.output
    (row,) = json.loads(described.output)["offsets"]
    assert (row["committed"], row["end"], row["lag"], row["records_left"]) == (3, 4, 1, 0)
    table = cli("groups", "describe", group, "-b", bootstrap).output
    assert "Records left" in table and "by transaction markers" in " ".join(table.split())
