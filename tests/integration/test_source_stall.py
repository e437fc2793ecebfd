"""An exactly-once source task whose broker stalls aborts its transaction in time and sends it again
(issue 25, docs/architecture.md "Bounded transactions"), against a real broker frozen with SIGSTOP
(the session's `second_kafka`, so that freezing it stalls nothing else)."""

from __future__ import annotations

import os
import signal
import time

import pytest
from confluent_kafka.admin import AdminClient

from eosconnect.connectors.sequence import parse_value
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.storage.topics import ensure_topic
from eosconnect.tools.verify import check_sequences
from support.runtime_helpers import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

#: The stalled producer's transaction timeout: the freeze lasts longer than half of it (the task must
#: abort) and shorter than all of it (the broker would abort it otherwise).
TIMEOUT_MS = 20_000
FREEZE_S = 13
#: A record every half second: a freeze that begins while the task waits for its next record (most of
#: the time) stalls the transaction that record opens, which the task must abort. One that begins
#: while a commit is in flight only delays the commit (it cannot be aborted, and completes after the
#: thaw): with a record every 7 ms that was most freezes under load, so the task froze twice.
RATE = 2
FREEZES = 2


def test_a_stalled_broker_makes_a_source_task_abort_and_resend_its_transaction_in_time(
    run_job, worker_props, topic_name, read_committed, second_kafka: LocalKafkaCluster
):
    """The broker the task writes to (records and offsets, one transaction) freezes for longer than
    half the producer's transaction timeout while a transaction is open: the task aborts it before
    the broker would, sends the same records again from memory in a new transaction and goes on.
    The task does not fail, and a read_committed consumer sees every record exactly once."""
    servers = second_kafka.bootstrap_servers
    data = topic_name("data")
    ensure_topic(AdminClient({"bootstrap.servers": servers}), data, partitions=1, replication_factor=1)
    total = 90
    connector = {
        "name": "seq-stall",
        "connector.class": "SequenceSource",
        "tasks.max": "1",
        "topic": data,
        "records.per.task": str(total),
        "batch.size": "20",
        "payload.bytes": "20",
        "rate.per.task": str(RATE),
        "transaction.boundary": "poll",
        "producer.override.bootstrap.servers": servers,
        "producer.override.transaction.timeout.ms": str(TIMEOUT_MS),
    }
    job = run_job(connector, worker_props("enabled"))
    wait_until(
        lambda: len(read_committed(data, servers=servers)) >= 6, 120, "the first committed records", job
    )
    (broker,) = second_kafka.broker_ids()
    pid = second_kafka.node(broker).pid
    assert pid is not None
    for _ in range(FREEZES):
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(FREEZE_S)  # past half of 20 s: the task must abort; before 20 s: the broker would
        finally:
            os.kill(pid, signal.SIGCONT)
        time.sleep(3)
    wait_until(
        lambda: len(read_committed(data, servers=servers)) >= total, 180, "every record committed", job
    )
    (outcome,) = job.stop()
    assert outcome["state"] == "STOPPED", outcome
    records = read_committed(data, servers=servers)
    report = check_sequences([parse_value(r.value) for r in records], {0: total})
    assert report.ok, report.anomalies
    assert len(records) == total
    # Aborted by the task itself, not by the broker: the task would have failed then.
    assert outcome["metrics"]["transactions-aborted"] >= 1, outcome["metrics"]
