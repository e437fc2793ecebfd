"""JdbcSink asks the runtime for a flush once `batch.size` rows wait, and also as soon as the
consumer has no more records queued (a batch smaller than the largest so far, or an empty one), so
the last rows of a burst are written at once instead of at the next `offset.flush.interval.ms`.
Against a real SQLite file (exactly once: rows and positions in one transaction)."""

from __future__ import annotations

from pathlib import Path

from eosconnect.api.context import SinkTaskContext
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.connectors.jdbc_sink.connector import JdbcSinkTask
from eosconnect.runtime.wall_time import WallTime


def records(start: int, count: int) -> list[SinkRecord]:
    return [SinkRecord("t", 0, i, None, {"k": i}) for i in range(start, start + count)]


def test_a_flush_is_asked_for_at_batch_size_and_when_the_consumer_caught_up(tmp_path: Path) -> None:
    config = {"name": "c", "connection.url": f"sqlite:///{tmp_path / 'db.sqlite'}", "topics": "t"}
    config |= {"auto.create": "true", "batch.size": "1000"}
    context = SinkTaskContext(configs=config)
    task = JdbcSinkTask()
    task.initialize(context)
    task.start(config)
    try:
        task.open([TopicPartition("t", 0)])
        task.put(records(0, 500))  # full batches, 500 rows waiting: no flush yet
        assert not context.commit_requested
        task.put(records(500, 500))  # batch.size reached
        assert context.commit_requested
        context.commit_requested = False
        tp = TopicPartition("t", 0)
        assert task.pre_commit({tp: OffsetAndMetadata(1000)}) == {tp: OffsetAndMetadata(1000)}
        task.put(records(1000, 500))
        assert not context.commit_requested
        task.put(records(1500, 120))  # fewer than the consumer gave before: nothing more queued
        assert context.commit_requested
        context.commit_requested = False
        task.pre_commit({tp: OffsetAndMetadata(1620)})
        assert task.written == 1620
        task.put([])  # an empty batch with nothing buffered asks for nothing
        assert not context.commit_requested
        task.put(records(1620, 500))
        assert not context.commit_requested
        task.put([])  # nothing more queued, 500 rows waiting
        assert context.commit_requested
    finally:
        task.stop()


def test_wall_time_sums_phases_and_reports_the_rest_as_other() -> None:
    wall = WallTime()
    wall.add("poll", 0.25)
    wall.add("poll", 0.25)
    with wall.phase("put"):
        pass
    assert wall.seconds["poll"] == 0.5 and "put" in wall.seconds
    summary = wall.summary()
    assert summary.startswith("total ") and "poll 0.50s" in summary and summary.endswith("%)")
    assert "other" in summary
