"""`eosconnect-kafka`: a Spark sink (Python Data Source API) that writes Kafka exactly once.

Per (micro-batch, Spark partition) one Kafka transaction (docs/architecture.md):

1. the task's producer has the transactional id `<prefix>-<query id>-<partition>` (the query id
   survives restarts from the checkpoint; a batch job uses its `job.id`), and `init_transactions()`
   fences every earlier attempt of that partition: a retried task, a zombie of a killed driver;
2. after fencing it reads the partition's newest commit marker (read_committed): if the batch is
   already committed (a replay after a driver crash, a stage retry after the job committed some
   partitions) the rows are counted and checked against the marker, and nothing is written;
3. otherwise the rows, then the marker, go out in one transaction, which commits.

The driver's `commit`/`abort` have nothing left to make durable: each partition's transaction is
already committed or not. `commit` checks the messages and logs (Spark may call it again for the
same batch after a restart: it has no side effects); `abort` logs which partitions are committed,
which the replay will skip.

Preconditions (docs/spark.md): a replayed batch must give each Spark partition the same rows
(deterministic sources and transformations, which Spark's own exactly-once sinks need too), checked
here by row count and checksum; and `spark.speculation=false` (`register()` checks it).
"""

from __future__ import annotations

import contextlib
import logging
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from eosconnect.api.errors import ConnectException, DataException
from eosconnect.runtime.transactions import FENCED_CODES
from eosconnect.spark.progress import (
    Marker,
    ensure_progress_topic,
    marker_key,
    progress_partition,
    read_last_marker,
)
from eosconnect.spark.sink_options import SinkOptions, check_sink_schema, parse_sink_options
from eosconnect.storage.producing import produce_rows, produce_waiting

__all__ = ["EosKafkaSink", "PartitionCommit", "ReplayMismatchError", "write_partition"]

log = logging.getLogger(__name__)

FORMAT_NAME = "eosconnect-kafka"
BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
CHECKSUM_MASK = (1 << 64) - 1


class ReplayMismatchError(ConnectException):
    """A replayed partition differs from the committed one: the precondition is violated."""


@dataclass
class PartitionCommit(WriterCommitMessage):
    """What one Spark task did: wrote (and committed) `rows`, or skipped an already committed batch."""

    batch: int
    partition: int
    rows: int
    skipped: bool
    transactional_id: str


def _raw(v: Any) -> bytes:
    return v.encode() if isinstance(v, str) else (v or b"")


def _checksums(keys: list[Any], values: list[Any]) -> int:
    """The sum over rows of crc32(value, seeded with crc32(key)): what a commit marker records, so
    that a replay can be compared with it. The caller masks the sum (CHECKSUM_MASK): (a + b) mod 2^64
    is the same whether the mask is taken per row or once."""
    crc, raw = zlib.crc32, _raw
    return sum(crc(raw(v), crc(raw(k))) for k, v in zip(keys, values, strict=True))


@dataclass(frozen=True)
class _Target:
    """Where this task's transaction belongs: query (or job), batch, Spark partition, attempt."""

    query: str
    batch: int
    partition: int
    attempt: int


def _task_target(options: SinkOptions, streaming: bool) -> _Target:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise ConnectException("eosconnect-kafka writes run inside Spark tasks only")
    if not streaming:
        assert options.job_id is not None
        return _Target(f"job-{options.job_id}", 0, ctx.partitionId(), ctx.attemptNumber())
    batch, query = ctx.getLocalProperty(BATCH_ID_PROPERTY), ctx.getLocalProperty(QUERY_ID_PROPERTY)
    if batch is None or query is None:
        raise ConnectException(
            f"Spark did not pass {BATCH_ID_PROPERTY}/{QUERY_ID_PROPERTY} to the task; eosconnect-kafka "
            "needs micro-batch execution (continuous triggers are not supported)"
        )
    return _Target(query, int(batch), ctx.partitionId(), ctx.attemptNumber())


def _fail(exc: KafkaException, txn_id: str, doing: str) -> ConnectException:
    err: KafkaError = exc.args[0]
    if err.code() in FENCED_CODES:
        return ConnectException(
            f"fenced while {doing}: a newer attempt of this Spark partition (transactional.id {txn_id}) "
            f"took over, so this attempt stops without committing ({err.str()})"
        )
    return ConnectException(
        f"Kafka error while {doing} (transactional.id {txn_id}): {err.name()}: {err.str()}"
    )


def write_partition(options: SinkOptions, columns: tuple[str, ...], batches: Iterator[Any], streaming: bool):
    """Write one Spark partition of one batch in one transaction; see the module docstring."""
    target = _task_target(options, streaming)
    txn_id = f"{options.transactional_id_prefix}-{target.query}-{target.partition}"
    key = marker_key(target.query, target.partition)
    producer = Producer({**options.producer, "transactional.id": txn_id})
    try:
        producer.init_transactions(60)
    except KafkaException as exc:
        raise _fail(exc, txn_id, "initialising the transactional producer") from exc
    topic_meta = producer.list_topics(options.progress_topic, timeout=30).topics.get(options.progress_topic)
    if topic_meta is None or topic_meta.error is not None or not topic_meta.partitions:
        raise ConnectException(f"progress topic {options.progress_topic!r} is not available")
    progress_part = progress_partition(key, len(topic_meta.partitions))
    committed = read_last_marker(options.connection, options.progress_topic, progress_part, key)
    if committed is not None and committed.batch >= target.batch:
        return _skip(options, target, committed, columns, batches, txn_id)
    producer.begin_transaction()
    rows, checksum = 0, 0
    try:
        rows, checksum = _produce_rows(producer, options, columns, batches)
        marker = Marker(target.query, target.batch, target.partition, rows, checksum, txn_id, target.attempt)
        producer.produce(options.progress_topic, key=key, value=marker.encode(), partition=progress_part)
        producer.commit_transaction(120)
    except KafkaException as exc:
        raise _fail(exc, txn_id, f"writing batch {target.batch} partition {target.partition}") from exc
    except BaseException:
        with contextlib.suppress(KafkaException):
            producer.abort_transaction(30)
        raise
    return PartitionCommit(target.batch, target.partition, rows, False, txn_id)


def _skip(
    options: SinkOptions,
    target: _Target,
    committed: Marker,
    columns: tuple[str, ...],
    batches: Iterator[Any],
    txn_id: str,
) -> PartitionCommit:
    """The batch is committed already: check the replay matches it, write nothing."""
    rows, checksum = 0, 0
    ki, vi = columns.index("key") if "key" in columns else None, columns.index("value")
    for batch in batches:
        keys = batch.column(ki).to_pylist() if ki is not None else [None] * batch.num_rows
        checksum = (checksum + _checksums(keys, batch.column(vi).to_pylist())) & CHECKSUM_MASK
        rows += batch.num_rows
    if (
        committed.batch == target.batch
        and options.replay_check
        and (rows != committed.rows or checksum != committed.checksum)
    ):
        raise ReplayMismatchError(
            f"batch {target.batch} partition {target.partition} was committed with {committed.rows} rows "
            f"(checksum {committed.checksum}), but its replay has {rows} rows (checksum {checksum}): the "
            "query does not replay its batches deterministically (a non-deterministic source or "
            "transformation, or a changed query), so exactly once cannot hold. Fix the query, or set "
            "replay.check=false to accept the committed rows as they are."
        )
    log.info("batch %d partition %d is committed already; skipped", target.batch, target.partition)
    return PartitionCommit(target.batch, target.partition, rows, True, txn_id)


def _produce_rows(
    producer: Producer, options: SinkOptions, columns: tuple[str, ...], batches: Iterator[Any]
) -> tuple[int, int]:
    index = {name: i for i, name in enumerate(columns)}
    # Only `key` and `value`, all to the `topic` option: the fast path, decided once per partition.
    plain = options.topic is not None and not {"topic", "partition", "headers"} & index.keys()
    rows, checksum = 0, 0
    for batch in batches:
        n = batch.num_rows
        values = batch.column(index["value"]).to_pylist()
        keys = batch.column(index["key"]).to_pylist() if "key" in index else [None] * n
        if plain:
            # Only key and value to one topic: positional produce() calls in one tight loop.
            produce_rows(producer, str(options.topic), values, keys)
        else:
            _produce_each(producer, options, batch, index, keys, values)
        checksum = (checksum + _checksums(keys, values)) & CHECKSUM_MASK
        rows += n
        producer.poll(0)
    return rows, checksum


def _produce_each(
    producer: Producer,
    options: SinkOptions,
    batch: Any,
    index: dict[str, int],
    keys: list[Any],
    values: list[Any],
) -> None:
    """Rows that carry their own `topic`, `partition` or `headers`: one `produce` each."""
    n = batch.num_rows
    topics = batch.column(index["topic"]).to_pylist() if "topic" in index else [options.topic] * n
    parts = batch.column(index["partition"]).to_pylist() if "partition" in index else None
    headers = batch.column(index["headers"]).to_pylist() if "headers" in index else None
    for i in range(n):
        topic = topics[i] or options.topic
        if topic is None:
            raise DataException(
                "a row has a null `topic` column and no topic option is set: set .option('topic', ...) "
                "or fill the column; the partition's transaction is aborted, nothing of it is written"
            )
        row_headers = headers[i] if headers is not None else None
        produce_waiting(
            producer,
            topic,
            values[i],
            keys[i],
            -1 if parts is None or parts[i] is None else parts[i],
            headers=[(h["key"], h["value"]) for h in row_headers] if row_headers else None,
        )


class _StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions, columns: tuple[str, ...]) -> None:
        self.options, self.columns = options, columns

    def write(self, iterator: Iterator[Any]) -> PartitionCommit:
        return write_partition(self.options, self.columns, iterator, streaming=True)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_outcome("committed", messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        _log_outcome("aborted", messages, batchId)


class _BatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions, columns: tuple[str, ...]) -> None:
        self.options, self.columns = options, columns

    def write(self, iterator: Iterator[Any]) -> PartitionCommit:
        return write_partition(self.options, self.columns, iterator, streaming=False)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_outcome("committed", messages, 0)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        _log_outcome("aborted", messages, 0)


def _log_outcome(outcome: str, messages: list[WriterCommitMessage | None], batch: int) -> None:
    """Driver side. Idempotent: Spark may call commit again for a batch after a restart."""
    done = [m for m in messages if isinstance(m, PartitionCommit)]
    written = sum(m.rows for m in done if not m.skipped)
    skipped = [m.partition for m in done if m.skipped]
    if outcome == "aborted":  # a stopped query or a failed task: nothing lost, so not a warning
        log.info(
            "eosconnect-kafka batch %d aborted by Spark (query stopped or a task failed): partitions %s "
            "are committed in Kafka and will be skipped when the batch is replayed; the others wrote "
            "nothing visible",
            batch,
            sorted(m.partition for m in done),
        )
        return
    log.info("eosconnect-kafka batch %d: %d rows committed, partitions skipped %s", batch, written, skipped)


class EosKafkaSink(DataSource):
    """The `eosconnect-kafka` format. Options are checked on the driver when a batch is planned."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def _prepare(self, schema: Any, overwrite: bool, batch: bool) -> tuple[SinkOptions, tuple[str, ...]]:
        if overwrite:
            raise ConnectException("eosconnect-kafka appends to Kafka; use mode('append'), not overwrite")
        options = parse_sink_options(dict(self.options), batch=batch)
        columns = check_sink_schema(schema, options)
        ensure_progress_topic(
            options.connection,
            options.progress_topic,
            options.progress_partitions,
            options.progress_replication,
            options.broker_wait_ms,
        )
        return options, columns

    def streamWriter(self, schema: Any, overwrite: bool) -> _StreamWriter:
        return _StreamWriter(*self._prepare(schema, overwrite, batch=False))

    def writer(self, schema: Any, overwrite: bool) -> _BatchWriter:
        return _BatchWriter(*self._prepare(schema, overwrite, batch=True))
