"""The at-least-once source task: an idempotent producer, offsets flushed after acknowledgement.

Offsets are committable per source partition up to the last record such that every earlier record
of that partition was acknowledged (Kafka Connect's SubmittedRecords rule). A flusher thread writes
them every `offset.flush.interval.ms`, off the polling thread, then calls `commit_record()` for the
flushed records and `commit()`. A record the producer could not deliver fails the task before its
offset is ever committed, so nothing is lost: it is polled again after a restart.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Producer

from eosconnect.api.batch import SourceBatch, expand
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import RecordMetadata, SourceOffset, SourcePartition, SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.runtime.config import SourceConnectorConfig
from eosconnect.runtime.errors import send_error_message
from eosconnect.runtime.pipeline import OutgoingRecord
from eosconnect.runtime.source_task import Offsets, SourceTaskRunner, offset_of
from eosconnect.runtime.task import TaskSpec
from eosconnect.storage.clients import client_config, forced
from eosconnect.storage.offsets import encode_offset_records
from eosconnect.worker_config import WorkerConfig


@dataclass
class _Submitted:
    record: SourceRecord
    partition: SourcePartition
    offset: SourceOffset | None
    acked: bool = False
    metadata: RecordMetadata | None = None


@dataclass
class _SubmittedBatch:
    """A `SourceBatch` sent on the fast path: acknowledged once every one of its records is.

    Delivery reports may be served on the task thread and on the flusher thread at once, so they
    are counted with `itertools.count` (one atomic step under the GIL) rather than `-= 1`."""

    batch: SourceBatch
    partition: SourcePartition
    offset: SourceOffset | None
    size: int
    runner: AtLeastOnceSourceTaskRunner
    topic: str
    acked: bool = False
    _delivered: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def on_delivery(self, err: KafkaError | None, _msg: Any) -> None:
        if err is not None:
            self.runner._record_send_error(self.topic, err, f"source partition {dict(self.partition)}")
        elif next(self._delivered) == self.size:
            self.acked = True


class AtLeastOnceSourceTaskRunner(SourceTaskRunner):
    """Runs a `SourceTask` at least once: records go through an idempotent producer, and their
    offsets are committed by a flusher thread once the producer acknowledged them. The producers
    are made in `prepare()` (None before); the flusher runs from then until the task stops."""

    def __init__(self, spec: TaskSpec, worker: WorkerConfig, connector: SourceConnectorConfig) -> None:
        super().__init__(spec, worker, connector)
        self._producer: Producer | None = None
        self._offset_producer: Producer | None = None
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._submitted: dict[SourcePartition, deque[_Submitted]] = {}
        # Per-record delivery callbacks cost a Python call each: the fast path skips the metadata
        # unless the task overrides commit_record() and so can use it.
        self._wants_metadata = type(self.task).commit_record is not SourceTask.commit_record
        self._send_error: str | None = None
        self._flush_interval_s = self.worker.offset_flush_interval_ms / 1000
        self._stop_flusher = threading.Event()
        self._flusher_error: BaseException | None = None
        self._flusher = threading.Thread(
            target=self._flush_loop, name=f"offset-flush-{self.task_id}", daemon=True
        )

    @property
    def producer(self) -> Producer:
        assert self._producer is not None, "prepare() makes it"
        return self._producer

    @property
    def offset_producer(self) -> Producer:
        assert self._offset_producer is not None, "prepare() makes it"
        return self._offset_producer

    def prepare(self) -> None:
        config = client_config("producer", self.worker.originals, self.connector.originals).validate()
        if "transactional.id" in config:
            config = forced(config, "transactional.id", None, "at-least-once tasks do not use transactions")
        config = forced(config, "enable.idempotence", True, "source tasks write with an idempotent producer")
        self._producer = Producer(config)
        offsets_config = client_config("producer", self.worker.originals, None)
        offsets_config.pop("transactional.id", None)
        self._offset_producer = Producer({**offsets_config, "enable.idempotence": True})
        self._flusher.start()

    def send_batch(self, batch: list[SourceRecord]) -> None:
        self._send_converted((record, self.pipeline.convert(record)) for record in batch)

    def _send_converted(self, converted: Iterable[tuple[SourceRecord, OutgoingRecord | None]]) -> None:
        """Records with what the pipeline made of each (None: dropped by a transformation)."""
        self._raise_if_failed()
        for record, outgoing in converted:
            entry = _Submitted(record, *offset_of(record))
            with self._lock:
                self._submitted.setdefault(entry.partition, deque()).append(entry)
            if outgoing is None:
                entry.acked = True
                self.metrics.record_filtered()
                continue
            topic = outgoing.topic
            self.produce(
                self.producer,
                outgoing,
                record,
                lambda err, msg, entry=entry, topic=topic: self._on_delivery(entry, topic, err, msg),
            )
            self.metrics.record_write()
        self.producer.poll(0)

    def send_columns(self, polled: Sequence[SourceRecord | SourceBatch]) -> None:
        """The fast path for `SourceBatch`es: one entry and one offset per batch, records produced in
        a tight loop; per-record objects only when transformations or `commit_record()` need them."""
        if not self.pipeline.columnar or self._wants_metadata:
            self.send_batch(expand(polled))
            return
        self._raise_if_failed()
        for item in [polled] if isinstance(polled, SourceBatch) else polled:
            if not isinstance(item, SourceBatch):
                self.send_batch([item])
                continue
            columns = self.pipeline.convert_columns(item)
            if isinstance(columns, list):  # a batch its transformations took record by record
                self._send_converted(columns)
                continue
            entry = _SubmittedBatch(
                item, item.source_partition, item.source_offset, len(item), self, columns.topic
            )
            with self._lock:
                self._submitted.setdefault(entry.partition, deque()).append(entry)  # type: ignore[arg-type]
            if not entry.size:
                entry.acked = True
                continue
            self.produce_columns(self.producer, columns, entry.on_delivery)
            self.metrics.record_write(entry.size)
        self.producer.poll(0)

    def on_idle(self) -> None:
        self.producer.poll(0)
        self._raise_if_failed()

    def on_pause(self) -> None:
        self.producer.poll(0)

    def on_stop(self) -> None:
        """A clean stop (worker shutdown, connector stop, pause-then-stop, delete, reconfiguration,
        task restart) commits, as Kafka Connect's source tasks do: otherwise a restart sends again
        everything since the last periodic flush."""
        self._final_commit()
        self._raise_if_failed()

    def on_failure(self) -> None:
        """Acknowledged records are in Kafka whatever failed after them: commit their offsets, so
        that a restarted task does not send them again (Kafka Connect commits in `finally` too)."""
        if self._flusher.ident is None:
            return  # failed before it could send anything (prepare() starts the flusher last)
        try:
            self._final_commit()
        except Exception as exc:
            self.log.warning("could not commit the offsets of the acknowledged records: %s", exc)

    def _final_commit(self) -> None:
        """Wait for the records sent to be acknowledged, then commit the offsets of every
        acknowledged one, all within `task.shutdown.graceful.timeout.ms` (the worker gives up on a
        task that takes longer); records still unacknowledged then are sent again after a restart."""
        budget_ms = self.worker.task_shutdown_graceful_timeout_ms
        deadline = time.monotonic() + budget_ms / 1000
        self._stop_flusher.set()
        self._flusher.join(max(0.0, deadline - time.monotonic()))
        unacknowledged = self.producer.flush(max(0.0, deadline - time.monotonic()))
        if unacknowledged:
            self.log.warning(
                "%d record(s) not acknowledged within task.shutdown.graceful.timeout.ms=%d; committing "
                "the offsets of the acknowledged ones only (the rest is sent again after a restart)",
                unacknowledged,
                budget_ms,
            )
        self._flush_offsets(max(1.0, deadline - time.monotonic()))

    def close_clients(self) -> None:
        self._stop_flusher.set()
        for producer in (self._producer, self._offset_producer):
            if producer is not None:
                producer.flush(5)

    # ----------------------------------------------------------------------------- acknowledgements
    def _record_send_error(self, topic: str, err: KafkaError, where: str) -> None:
        with self._lock:
            if self._send_error is None:
                self._send_error = send_error_message(self.task_id, topic, err, where)

    def _on_delivery(self, entry: _Submitted, topic: str, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            where = f"source partition {dict(entry.partition)}, offset {entry.offset}"
            self._record_send_error(topic, err, where)
            return
        with self._lock:
            entry.acked = True
            entry.metadata = RecordMetadata(msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1])

    def _committable(self) -> tuple[Offsets, list[_Submitted]]:
        offsets: Offsets = {}
        done: list[_Submitted] = []
        with self._lock:
            for partition, queue in self._submitted.items():
                while queue and queue[0].acked:
                    entry = queue.popleft()
                    offsets[partition] = entry.offset
                    done.append(entry)
        return offsets, done

    # ----------------------------------------------------------------------------- flushing
    def _flush_loop(self) -> None:
        try:
            while not self._stop_flusher.wait(self._flush_interval_s):
                self.producer.poll(0)
                self._flush_offsets()
        except BaseException as exc:
            self._flusher_error = exc

    def _flush_offsets(self, timeout_s: float = 60.0) -> None:
        # One flush at a time: a final commit must not write its offsets before (and then be
        # overwritten by) older ones of a periodic flush still in flight.
        if not self._flush_lock.acquire(timeout=timeout_s):
            raise ConnectException(f"{self.task_id}: an offset flush still running after {timeout_s:.0f}s")
        try:
            self._flush_offsets_locked(timeout_s)
        finally:
            self._flush_lock.release()

    def _flush_offsets_locked(self, timeout_s: float) -> None:
        started = time.monotonic()
        offsets, done = self._committable()
        offsets = self.updated_offsets(offsets)
        if offsets and self.spec.offset_store is not None:
            self.spec.offset_store.write(self.spec.connector, offsets)
            self.metrics.record_offset_commit(time.monotonic() - started)
            self.offsets_committed(offsets)
        elif offsets:
            errors: list[str] = []
            for key, value in encode_offset_records(self.spec.connector, offsets):
                self.offset_producer.produce(
                    self.placement.topic,
                    key=key,
                    value=value,
                    on_delivery=lambda err, _msg: errors.append(err.str()) if err else None,
                )
            remaining = self.offset_producer.flush(timeout_s)
            if remaining or errors:
                raise ConnectException(
                    f"{self.task_id}: could not commit offsets to {self.placement.topic!r}: "
                    f"{errors[:1] or [f'{remaining} offset records unacknowledged after {timeout_s:.0f}s']}"
                )
            self.metrics.record_offset_commit(time.monotonic() - started)
            self.offsets_committed(offsets)
        for entry in done:
            if isinstance(entry, _SubmittedBatch):  # only when commit_record() is not overridden
                continue
            self.task.commit_record(entry.record, entry.metadata)
        if offsets or done:
            self.task.commit()

    def _raise_if_failed(self) -> None:
        with self._lock:
            error = self._send_error
        if error is not None:
            raise ConnectException(error)
        if self._flusher_error is not None:
            raise ConnectException(
                f"{self.task_id}: offset flush failed: {self._flusher_error}"
            ) from self._flusher_error
