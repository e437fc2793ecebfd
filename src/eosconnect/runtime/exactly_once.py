"""The exactly-once source task (KIP-618): records and their offsets in one Kafka transaction.

Start-up follows DESIGN.md section 3 step by step. Per transaction, records are sent inside a
lazily begun transaction while their source offsets are collected; at the boundary the offsets are
written to the offsets topic *with the same producer in the same transaction*, and the transaction
commits. Only then do `commit_record()` and `commit()` run. An abort drops the records but commits
their offsets in a fresh transaction, so they are not polled again.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import RecordMetadata, SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.api.transactions import RequestedTransactionContext
from eosconnect.cluster.fencing import task_transactional_id
from eosconnect.runtime.config import TransactionBoundary
from eosconnect.runtime.source_task import Offsets, SourceTaskRunner, offset_of
from eosconnect.storage.clients import client_config, forced
from eosconnect.storage.offsets import encode_offset_records
from eosconnect.storage.topics import ensure_topic

LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


class TaskFencedError(ConnectException):
    """A newer instance of this task took over its transactional id: this one is a zombie."""


class TransactionTimedOutError(ConnectException):
    """The transaction outlived `transaction.timeout.ms`; the message lists the remedies."""


class ExactlyOnceSourceTaskRunner(SourceTaskRunner):
    producer: Producer

    def prepare(self) -> None:
        name, coordinator = self.spec.connector, self.spec.coordinator
        if coordinator is None:
            raise ConnectException(f"{self.task_id}: exactly-once tasks need a start-up coordinator")
        # 1. the leader fences zombies of the previous generation
        coordinator.fence_zombies(name, self.spec.generation)
        # 2. our generation must still be the latest
        coordinator.ensure_latest_generation(name, self.spec.generation)
        # 3. a separate offsets topic is created if missing
        if self.placement.separate:
            ensure_topic(
                self.placement.admin(),
                self.placement.topic,
                partitions=int(self.worker.values["offset.storage.partitions"]),
                replication_factor=int(self.worker.values["offset.storage.replication.factor"]),
                replication_setting="offset.storage.replication.factor",
            )
        # 4. the transactional producer; init_transactions() fences our own predecessor
        config = client_config("producer", self.worker.originals, self.connector.originals).validate()
        config = forced(
            config,
            "transactional.id",
            task_transactional_id(self.worker.group_id, name, self.spec.task),
            "exactly-once source tasks use <group.id>-<connector>-<task>",
        )
        config = forced(config, "enable.idempotence", True, "transactions need idempotence")
        self.transaction_timeout_ms = int(
            config.get("transaction.timeout.ms", LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS)
        )
        self.producer = Producer(config)
        self._call_producer(lambda: self.producer.init_transactions(60))
        # 5. still the latest generation after the (possibly slow) producer set-up
        coordinator.ensure_latest_generation(name, self.spec.generation)
        self._txn_open = False
        self._txn_started = 0.0
        self._txn_records: list[SourceRecord] = []
        self._txn_sent = 0
        self._txn_offsets: Offsets = {}
        self._metadata: dict[int, RecordMetadata] = {}
        self._boundary = self.connector.transaction_boundary
        self._interval_s = self.connector.interval_ms(self.worker) / 1000
        self._last_commit = time.monotonic()
        self._context = (
            RequestedTransactionContext() if self._boundary is TransactionBoundary.CONNECTOR else None
        )
        # Per-record delivery callbacks cost a Python call each: only pay for them when the task
        # overrides commit_record() and so can use the metadata.
        self._wants_metadata = type(self.task).commit_record is not SourceTask.commit_record

    def transaction_context(self) -> Any:
        return self._context

    # ----------------------------------------------------------------------------- per batch
    def send_batch(self, batch: list[SourceRecord]) -> None:
        for record in batch:
            self._send(record)
            if self._context is not None:
                if self._context.should_abort_on(record):
                    self._end_transaction(abort=True)
                elif self._context.should_commit_on(record):
                    self._end_transaction(abort=False)
        self.producer.poll(0)
        if self._boundary is TransactionBoundary.POLL:
            self._end_transaction(abort=False)
        elif self._boundary is TransactionBoundary.INTERVAL:
            self._commit_if_interval_passed()
        elif self._context is not None:
            if self._context.should_abort_batch():
                self._end_transaction(abort=True)
            elif self._context.should_commit_batch():
                self._end_transaction(abort=False)

    def on_idle(self) -> None:
        if self._boundary is TransactionBoundary.INTERVAL:
            self._commit_if_interval_passed()
        elif self._context is not None:
            self._context.check()

    def on_pause(self) -> None:
        if self._boundary is not TransactionBoundary.CONNECTOR and self._txn_open:
            self._end_transaction(abort=False)

    def on_stop(self) -> None:
        if self._context is not None:
            if self._context.should_abort_batch():
                self._end_transaction(abort=True)
            elif self._context.should_commit_batch():
                self._end_transaction(abort=False)
            elif self._txn_open:
                self.log.info("stopping with an open transaction the connector did not commit; aborting it")
                self._call_producer(lambda: self.producer.abort_transaction(30))
                self._txn_open = False
        elif self._txn_open:
            self._end_transaction(abort=False)

    def close_clients(self) -> None:
        producer = getattr(self, "producer", None)
        if producer is not None:
            with contextlib.suppress(KafkaException):  # a fenced producer raises its fatal error
                producer.flush(0)

    # ----------------------------------------------------------------------------- transactions
    def _send(self, record: SourceRecord) -> None:
        outgoing = self.pipeline.convert(record)
        if not self._txn_open:
            self._call_producer(self.producer.begin_transaction)
            self._txn_open, self._txn_started = True, time.monotonic()
        if self._wants_metadata:  # kept only for commit_record(); also keeps id(record) unique
            self._txn_records.append(record)
        partition, offset = offset_of(record)
        self._txn_offsets[partition] = offset
        if outgoing is None:
            self.metrics.record_filtered()
            return
        on_delivery = self._metadata_callback(record) if self._wants_metadata else None

        try:
            self.produce(self.producer, outgoing, record, on_delivery)
        except KafkaException as exc:
            raise self._classify(exc, f"sending a record to {outgoing.topic!r}") from exc
        self._txn_sent += 1

    def _metadata_callback(self, record: SourceRecord) -> Any:
        key = id(record)

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                self._metadata[key] = RecordMetadata(
                    msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1]
                )

        return on_delivery

    def _commit_if_interval_passed(self) -> None:
        if time.monotonic() - self._last_commit < self._interval_s:
            return
        if self._txn_open:
            self._end_transaction(abort=False)
        else:
            # KIP-910 heartbeat: an interval with no records may still move idle partitions' offsets.
            heartbeat = self.updated_offsets({})
            if heartbeat:
                self._commit_offsets_only(heartbeat)
            self._last_commit = time.monotonic()

    def _end_transaction(self, abort: bool) -> None:
        if not self._txn_open:
            if abort:
                return
            self._call_producer(self.producer.begin_transaction)
            self._txn_open, self._txn_started = True, time.monotonic()
        started = time.monotonic()
        records, sent = self._txn_records, self._txn_sent
        offsets = self.updated_offsets(self._txn_offsets)
        if abort:
            # Let in-flight sends settle first: an EndTxn(abort) racing the transaction's first
            # AddPartitions/Produce requests is rejected by Kafka 4 with INVALID_TXN_STATE (fatal).
            self.producer.flush(60)
            self._call_producer(lambda: self.producer.abort_transaction(60))
            self._txn_open = False
            self.metrics.record_abort()
            self.log.info("aborted a transaction of %d records; committing their offsets", sent)
            self._commit_offsets_only(offsets)
        else:
            self._write_offsets(offsets)
            self._call_producer(
                lambda: self.producer.commit_transaction(max(60, self.transaction_timeout_ms / 1000))
            )
            self._txn_open = False
            self.offsets_committed(offsets)
            self.metrics.record_transaction(sent)
            self.metrics.record_write(sent)
        self.metrics.record_offset_commit(time.monotonic() - started)
        self._last_commit = time.monotonic()
        self._txn_records, self._txn_sent, self._txn_offsets = [], 0, {}
        self.producer.poll(0)
        if self._wants_metadata:
            for record in records:
                self.task.commit_record(record, None if abort else self._metadata.pop(id(record), None))
        self._metadata.clear()
        self.task.commit()

    def _commit_offsets_only(self, offsets: Offsets) -> None:
        if not offsets:
            return
        self._call_producer(self.producer.begin_transaction)
        self._txn_open, self._txn_started = True, time.monotonic()
        self._write_offsets(offsets)
        self._call_producer(lambda: self.producer.commit_transaction(60))
        self._txn_open = False
        self.offsets_committed(offsets)

    def _write_offsets(self, offsets: Offsets) -> None:
        for key, value in encode_offset_records(self.spec.connector, offsets):
            self.producer.produce(self.placement.topic, key=key, value=value)

    # ----------------------------------------------------------------------------- errors
    def _call_producer(self, call: Any) -> Any:
        try:
            return call()
        except KafkaException as exc:
            raise self._classify(exc, "committing the transaction") from exc

    def _classify(self, exc: KafkaException, doing: str) -> Exception:
        err: KafkaError = exc.args[0]
        fenced_codes = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
        open_for_ms = (time.monotonic() - self._txn_started) * 1000 if self._txn_open else 0
        if self._txn_open and open_for_ms >= self.transaction_timeout_ms:
            return TransactionTimedOutError(
                f"{self.task_id}: the transaction was open for {open_for_ms / 1000:.1f}s, longer than the "
                f"producer's transaction.timeout.ms ({self.transaction_timeout_ms} ms), and the broker "
                f"aborted it ({err.str()}). Remedies: tune the producer for throughput "
                "(producer.override.linger.ms, batch.size), raise producer.override.transaction.timeout.ms "
                "(up to the broker's transaction.max.timeout.ms), lower transaction.boundary.interval.ms, "
                "or use transaction.boundary=poll."
            )
        if err.code() in fenced_codes:
            return TaskFencedError(
                f"{self.task_id}: fenced while {doing}: another instance of this task (transactional.id "
                f"{self.producer_transactional_id}) has started, so this one is a zombie and stops "
                f"without committing ({err.str()})"
            )
        return ConnectException(f"{self.task_id}: Kafka error while {doing}: {err.name()}: {err.str()}")

    @property
    def producer_transactional_id(self) -> str:
        return task_transactional_id(self.worker.group_id, self.spec.connector, self.spec.task)
