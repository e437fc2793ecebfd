"""Clean stops lose nothing and repeat nothing (issue 24, item 5).

An at-least-once source task commits its source offsets when it stops cleanly, as Kafka Connect's
does, not only every `offset.flush.interval.ms`: a worker stopped with SIGTERM (or a connector
stopped and resumed) before the first periodic flush starts again where it stopped. The flush
interval is set far beyond the test's length, so every offset the second run finds was written by
a clean stop.
"""

from __future__ import annotations

import signal
import time

import pytest

from eosconnect.connectors.sequence import parse_value
from eosconnect.tools.verify import check_sequences

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PER_TASK = 2500
NEVER_FLUSH = {"offset.flush.interval.ms": "3600000"}


def sequences(read_committed, topic: str) -> list[tuple[int, int]]:
    return [parse_value(r.value) for r in read_committed(topic)]


def test_sigterm_and_connector_stop_before_the_first_flush_repeat_nothing(
    workers, topic_name, create_topic, read_committed, tmp_path
):
    data = create_topic(topic_name("data"), partitions=2)
    config = {
        "connector.class": "SequenceSource",
        "tasks.max": "2",
        "topic": data,
        "records.per.task": str(PER_TASK),
        "batch.size": "20",
        "rate.per.task": "250",
    }
    worker = workers("w1", mode="disabled", **NEVER_FLUSH)
    assert worker.create_connector("clean", config).status_code == 201
    # A sink reading what the source writes: its consumer offsets are committed at the stop too.
    copied = tmp_path / "copied.txt"
    sink = {"connector.class": "FileStreamSink", "tasks.max": "1", "topics": data, "file": str(copied)}
    assert worker.create_connector("clean-sink", sink).status_code == 201
    worker.wait_for(lambda: len(read_committed(data)) >= 400, 90, "400 records")
    worker.wait_for(lambda: copied.exists() and copied.stat().st_size > 0, 60, "the sink to write")
    # SIGTERM to its process group and its Spark JVM (`timeout`, `kill -- -PGID`): the tasks stop
    # cleanly and commit their offsets (the JVM, which ignores SIGTERM, runs them to the end)
    worker.signal(signal.SIGTERM)
    worker.proc.wait(60)
    assert worker.proc is not None and worker.proc.returncode == 0, worker.tail()
    # Its slot hosts (tasks are packed by default) ended by themselves once their tasks had stopped:
    # the worker cancelled no Spark job.
    assert "cancelling Spark job group" not in worker.log_path.read_text(errors="replace"), worker.tail()
    first_run = len(read_committed(data))
    assert first_run < 2 * PER_TASK, "the run was over before the stop: raise records.per.task"

    worker = workers("w1", mode="disabled", **NEVER_FLUSH)  # the same group, topics and connector
    worker.wait_for(lambda: len(read_committed(data)) >= first_run + 300, 90, "the restarted run to write")
    worker.stop_connector("clean")  # PUT /stop: the tasks commit before the connector shows STOPPED
    stopped_at = len(read_committed(data))
    time.sleep(1)
    assert len(read_committed(data)) == stopped_at, "a stopped connector kept writing"
    assert worker.request("PUT", "/connectors/clean/resume").status_code == 202

    worker.wait_for(lambda: len(read_committed(data)) >= 2 * PER_TASK, 120, "all records")
    time.sleep(1)  # anything repeated after the last record would show up now
    report = check_sequences(sequences(read_committed, data), {0: PER_TASK, 1: PER_TASK})
    assert report.ok, report.anomalies
    assert report.seen == 2 * PER_TASK
    worker.wait_for(lambda: len(copied.read_text().splitlines()) >= 2 * PER_TASK, 60, "the sink's copy")
    time.sleep(1)
    lines = copied.read_text().splitlines()
    twice = len(lines) - len(set(lines))
    assert len(lines) == len(set(lines)) == 2 * PER_TASK, f"{twice} lines written twice"
