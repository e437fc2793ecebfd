"""The exactly-once source task (KIP-618): records and their offsets in one Kafka transaction.

Start-up follows docs/architecture.md. Per transaction, records are sent inside a
lazily begun transaction while their source offsets are collected; at the boundary the offsets are
written to the offsets topic *with the same producer in the same transaction*, and the transaction
commits. Only then do `commit_record()` and `commit()` run. An abort drops the records but commits
their offsets in a fresh transaction, so they are not polled again.

Commits are pipelined: `commit_transaction()` blocks for a network round trip or more, so it runs
on one helper thread per task while the task thread polls and converts the next batch. librdkafka
allows one transaction at a time, so nothing of the next batch is produced before the commit has
returned (`await_commit`, which also re-raises the commit's error on the task thread and then runs
the callbacks and metrics of the committed transaction, in order).

Every transaction is bounded (docs/architecture.md, "Bounded transactions"), by the same mechanism
as the KIP-656 sink's (`TransactionBudget` in runtime/transactions/budget.py): its records must be
delivered within half of what is left of `transaction.timeout.ms` when its commit begins (the commit
then gets `max(60 s, transaction.timeout.ms)`: it cannot be aborted any more). A transaction whose
records a stalled broker does not take in time is aborted by the task itself, before the broker
would abort it, with one WARN; its records are then sent again in a new transaction, from memory
(`ReplayRecovery`, runtime/transactions/replay.py).

The producer and its transaction are a `TransactionSession` (runtime/transactions/session.py), the
same as the KIP-656 sink writer's; the offsets go in through `SourceOffsetsInTransaction`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from eosconnect.api.batch import LandedRecords, SourceBatch, expand
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import RecordMetadata, SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.api.transactions import TransactionParticipant
from eosconnect.runtime.config import SourceConnectorConfig
from eosconnect.runtime.landing import (
    Landing,
    batch_partitions,
    derivable_from_ends,
    landed_records,
    report_into,
    sent_records,
)
from eosconnect.runtime.pipeline import OutgoingColumns, OutgoingRecord
from eosconnect.runtime.source_task import Offsets, SourceTaskRunner
from eosconnect.runtime.task import TaskSpec
from eosconnect.runtime.transactions.boundaries import Boundary, boundary_for
from eosconnect.runtime.transactions.errors import Step
from eosconnect.runtime.transactions.offsets import OffsetRecords, SourceOffsetsInTransaction
from eosconnect.runtime.transactions.replay import ReplayRecovery, SourceTransaction
from eosconnect.runtime.transactions.session import DeliveryFailed, TransactionSession, Undelivered
from eosconnect.storage.clients import client_config
from eosconnect.storage.topics import ensure_topic
from eosconnect.storage.transactional_ids import task_transactional_id
from eosconnect.worker_config import WorkerConfig

#: The pause between the end of one transaction and the first record of the next. The broker
#: writes a finished transaction's markers just *after* answering EndTxn; an AddPartitionsToTxn of
#: the next transaction that arrives before they are written is refused (CONCURRENT_TRANSACTIONS)
#: and librdkafka retries it after a fixed 20 ms (rdkafka_txnmgr.c), which with poll boundaries hit
#: one transaction in eight on a loaded 2-core machine. A millisecond, during which a co-located
#: broker also gets the CPU, avoids most of those retries; it is only paid when the task thread was
#: waiting for the commit, since polling and converting the next batch usually take longer.
NEXT_TRANSACTION_GAP_S = 0.001
#: The same pause for a task whose transactions carry records made from where its records landed
#: (MirrorSource's offset syncs): it flushes before it commits, so a refused AddPartitionsToTxn delays
#: the flush itself. Measured on a quiet machine (bare producer, 2000-record transactions, a flush
#: each): the flush took a median 28-34 ms after a gap of 0-2 ms (the retry), 11-13 ms after 3-4 ms
#: and 6.5-8 ms after 5 ms. Without a flush the shorter gap is better (bench/source_throughput.py:
#: eos poll 32k records/s with 1 ms, 21k with 5 ms).
FLUSHING_TRANSACTION_GAP_S = 0.005

log = logging.getLogger(__name__)


@dataclass
class _PendingCommit:
    """A transaction whose `commit_transaction()` runs on the helper thread."""

    future: Future[None]
    transaction: SourceTransaction
    offsets: Offsets  # as updated by the task (KIP-910) and committed
    commit_started: float
    #: The offsets topic's records (key -> value) that hold `offsets` once this commits.
    records: OffsetRecords


class ExactlyOnceSourceTaskRunner(SourceTaskRunner):
    """Runs a `SourceTask` exactly once (KIP-618): its records and their source offsets commit in one
    transaction of its `TransactionSession`, made in `prepare()` (start-up steps 1-5 of
    docs/architecture.md), committed on a helper thread while the next batch is converted."""

    def __init__(self, spec: TaskSpec, worker: WorkerConfig, connector: SourceConnectorConfig) -> None:
        super().__init__(spec, worker, connector)
        #: The producer and its open transaction; made in `prepare()`, after the checks that may
        #: refuse to start the task (None before).
        self._session: TransactionSession[SourceTransaction] | None = None
        self._offsets: SourceOffsetsInTransaction | None = None
        self._recovery: ReplayRecovery | None = None
        #: Transactions aborted because they could not be committed in time, and sent again.
        self.retried_transactions = 0
        #: The stored offsets as this instance knows them (read at start-up, then its commits).
        self.stored_offsets: Offsets = {}
        #: Delivery reports kept for commit_record(), by id() of the record.
        self._metadata: dict[int, RecordMetadata] = {}
        self._pending: _PendingCommit | None = None
        self._last_commit = time.monotonic()
        self.boundary = self._new_boundary()
        # Per-record delivery callbacks cost a Python call each: only pay for them when the task
        # overrides commit_record() and reads its metadata (`SourceTask.commit_record_metadata`).
        self._wants_metadata = type(self.task).commit_record is not SourceTask.commit_record
        self._uses_metadata = self._wants_metadata and type(self.task).commit_record_metadata
        #: What adds the task's own records to each transaction, made from where its records landed
        #: (the mirror's offset syncs; see `_write_participant_records`). Asked for once the task has
        #: started: its answer may depend on its config.
        self._participant: TransactionParticipant | None = None
        self._participant_asked = False
        #: Whether `_send` keeps every record for commit_record() or a participant, and whether it
        #: asks for every record's delivery report (commit_record() reading it, or a participant).
        self._record_metadata = self._wants_metadata
        self._delivery_reports = self._uses_metadata
        #: With a participant: batches may take the columnar path, their offsets derived from the
        #: first and last record's delivery reports. Off for good once a batch was not contiguous.
        self._columnar_landing = True

    @property
    def session(self) -> TransactionSession[SourceTransaction]:
        assert self._session is not None, "prepare() makes the session"
        return self._session

    @property
    def producer(self) -> Producer:
        return self.session.producer

    @property
    def offsets(self) -> SourceOffsetsInTransaction:
        assert self._offsets is not None, "prepare() makes it"
        return self._offsets

    @property
    def recovery(self) -> ReplayRecovery:
        assert self._recovery is not None, "prepare() makes it"
        return self._recovery

    def _new_boundary(self) -> Boundary:
        return boundary_for(
            self.connector.transaction_boundary, self, self.connector.interval_ms(self.worker) / 1000
        )

    def offsets_read_timeout_s(self) -> float:
        """A sibling task killed mid-transaction (Spark gave up on it, so no successor fences it)
        holds the shared offsets topic's last stable offset back until the broker aborts its
        transaction: `transaction.timeout.ms` after it began, found by a check that runs every 10 s.
        The read waits that long, not a fixed 60 s that a 60 s transaction timeout can outlast."""
        return max(super().offsets_read_timeout_s(), self.session.timeout_ms / 1000 + 20)

    def prepare(self) -> None:
        """Start-up steps 1-5 of docs/architecture.md, with the waits that need no order overlapped.

        The producer is created first (creating one sends nothing that fences: librdkafka asks for
        a producer id only in `init_transactions()`), so its connections are made while the fencing
        request is in flight. The offsets are read (a step of `start_task`) while step 5 checks the
        generation again: they must be read *after* `init_transactions()`, which fences the previous
        instance of this very task (a Spark retry needs no fencing round), so that no zombie can
        commit offsets after the read began; `start_task` then uses the view read here.
        """
        name, coordinator = self.spec.connector, self.spec.coordinator
        if coordinator is None:
            raise ConnectException(f"{self.task_id}: exactly-once tasks need a start-up coordinator")
        began = time.monotonic()
        config = client_config("producer", self.worker.originals, self.connector.originals).validate()
        session: TransactionSession[SourceTransaction] = TransactionSession(
            config,
            transactional_id=task_transactional_id(self.worker.group_id, name, self.spec.task),
            task_id=self.task_id,
            make=SourceTransaction,
            leader=self.spec.control.leader,
            logger=self.log,
            timeout_setting=config.origin.get(
                "transaction.timeout.ms", "producer.override.transaction.timeout.ms"
            ),
        )
        self._session = session
        self._offsets = SourceOffsetsInTransaction(session, name, self.placement.topic)
        self._recovery = ReplayRecovery(self, session)
        # 1. the leader fences zombies of the previous generation
        coordinator.fence_zombies(name, self.spec.generation)
        fenced = time.monotonic()
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
        checked = time.monotonic()
        # 4. init_transactions() fences our own predecessor
        session.init()
        initialized = time.monotonic()
        # 5. still the latest generation after the (possibly slow) producer set-up; the offsets
        # are read meanwhile (see above)
        pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"offsets-{self.task_id}")
        try:
            view = pool.submit(self.read_offsets)
            coordinator.ensure_latest_generation(name, self.spec.generation)
            self.offset_view = view.result()
        finally:
            pool.shutdown(wait=False)  # superseded: nobody needs the read any more
        self.stored_offsets = dict(self.offset_view.snapshot())
        self.log.info(
            "start-up took %.2f s: fencing %.2f s, generation check %.2f s, init_transactions %.2f s, "
            "offsets read with the second check %.2f s",
            time.monotonic() - began,
            fenced - began,
            checked - fenced,
            initialized - checked,
            time.monotonic() - initialized,
        )
        self._last_commit = time.monotonic()  # the first interval counts from here

    def transaction_context(self) -> Any:
        return self.boundary.context

    # ----------------------------------------------------------------------------- per batch
    def _ask_participant(self) -> None:
        """Once, at the first batch: a task with a `TransactionParticipant` needs to know where its
        records landed: per-record delivery reports on the per-record path, the first and last
        record's on the columnar path (`Landing`)."""
        if not self._participant_asked:
            self._participant = self.task.transaction_participant()
            self._record_metadata = self._wants_metadata or self._participant is not None
            self._delivery_reports = self._uses_metadata or self._participant is not None
            self._participant_asked = True

    def _columnar_ok(self, polled: Sequence[SourceRecord | SourceBatch]) -> bool:
        if not self.pipeline.columnar or self._wants_metadata or self.boundary.per_record:
            return False
        if self._participant is None:
            return True
        items = [polled] if isinstance(polled, SourceBatch) else polled
        return self._columnar_landing and derivable_from_ends(items)

    def send_batch(self, batch: list[SourceRecord]) -> None:
        self._ask_participant()
        try:
            # Transformations and converters run while the previous commit is still in flight.
            converted = [self.pipeline.convert(record) for record in batch]
        finally:
            self.await_commit()
        boundary = self.boundary
        if boundary.per_record:
            for record, outgoing in zip(batch, converted, strict=True):
                self._send(record, outgoing)
                boundary.after_record(record)
        else:
            for record, outgoing in zip(batch, converted, strict=True):
                self._send(record, outgoing)
        boundary.after_batch()

    def send_columns(self, polled: Sequence[SourceRecord | SourceBatch]) -> None:
        """The fast path for `SourceBatch`es: converted column by column, produced in a tight loop,
        one offset per batch. Per-record objects are only made where something needs them:
        transformations, `commit_record()` or connector-defined boundaries."""
        self._ask_participant()
        if not self._columnar_ok(polled):
            self.send_batch(expand(polled))
            return
        items = [polled] if isinstance(polled, SourceBatch) else polled
        pipeline = self.pipeline
        try:
            converted = [
                pipeline.convert_columns(item) if isinstance(item, SourceBatch) else pipeline.convert(item)
                for item in items
            ]
        finally:
            self.await_commit()
        for item, outgoing in zip(items, converted, strict=True):
            if isinstance(outgoing, list):  # a batch its transformations took record by record
                for record, each in outgoing:
                    self._send(record, each)
            elif isinstance(item, SourceBatch):
                self._send_batch(item, outgoing)  # type: ignore[arg-type]
            else:
                self._send(item, outgoing)  # type: ignore[arg-type]
        self.boundary.after_batch()

    def _send_batch(self, item: SourceBatch, outgoing: OutgoingColumns) -> None:
        """Send one converted `SourceBatch` into the open transaction (one offset for all of it)."""
        txn = self.session.current or self.open_transaction()
        txn.offsets[item.source_partition] = item.source_offset
        try:
            if self._participant is None:
                self.produce_columns(self.producer, outgoing)
            else:
                landing = Landing(item, outgoing.topic)
                txn.sequence.append(landing)
                ends = (landing.on_first, landing.on_last)
                self.produce_columns(self.producer, outgoing, ends=ends)
        except KafkaException as exc:
            raise self.session.classify(exc, f"sending records to {item.topic!r}") from exc
        txn.sent += len(outgoing.values)  # records errors.tolerance=all skipped were not sent
        txn.keep(item, outgoing)

    def on_idle(self) -> None:
        self.await_commit()  # nothing to overlap it with
        self.boundary.on_idle()

    def on_pause(self) -> None:
        self.await_commit()
        self.boundary.on_pause()

    def on_stop(self) -> None:
        self.boundary.on_stop()
        self.await_commit()  # the final commit, or the last pipelined one

    # ----------------------------------------------------------------------------- for the boundary
    @property
    def transaction_open(self) -> bool:
        return self.session.open

    @property
    def last_commit(self) -> float:
        return self._last_commit

    def serve_deliveries(self) -> None:
        """A transaction may span many batches: serve their delivery reports now and then."""
        try:
            self.producer.poll(0)
        except KafkaException as exc:  # a fatal error (fenced) surfaces here first
            raise self.session.classify(exc, "sending records") from exc

    def commit_offsets_heartbeat(self) -> None:
        """KIP-910 heartbeat: an interval with no records may still move idle partitions' offsets."""
        heartbeat = self.updated_offsets({})
        if heartbeat:
            self._commit_offsets_only(heartbeat)
        self._last_commit = time.monotonic()

    def end_transaction(self, abort: bool) -> None:
        if not self.session.open:
            if abort:
                return
            self.open_transaction()
        if abort:
            self._abort()
        else:
            self._start_commit()

    def abort_on_stop(self) -> None:
        """Abort the open transaction of a stopping task. librdkafka 2.16 can send the abort while
        a partition registration of the transaction is still under way, and the coordinator then
        refuses it (INVALID_TXN_STATE, fatal for the producer; seen in the chaos soak with
        transaction.boundary=connector). Nothing of the transaction was committed and the next
        instance's `init_transactions()` ends it, so the stop goes on; anything else fails the task."""
        self.log.info("stopping with an open transaction the connector did not commit; aborting it")
        try:
            self.producer.abort_transaction(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.INVALID_TXN_STATE:
                raise self.session.classify(exc, Step.ABORT) from exc
            self.log.info(
                "the broker refused the abort (%s); nothing of the transaction was committed, and the "
                "next instance's init_transactions() ends it",
                exc.args[0].str(),
            )
        self.session.ended(now=False)

    def forget_sent(self) -> None:
        """Nothing of the dropped transaction stays (its producer was renewed, which ended it): the
        boundary and participant are made afresh for the new `SourceTask`, and the offsets just
        read (`ReplayRecovery`) are this instance's from now on."""
        assert self.offset_view is not None
        if self.session.open:  # not expected: the renewal ended the producer's transaction
            with contextlib.suppress(KafkaException):
                self.producer.abort_transaction(30)
            self.session.ended(now=True)
        self._metadata.clear()
        self.session.delivery_failures.clear()
        self.stored_offsets = dict(self.offset_view.snapshot())
        self.session.renewed = False
        self.boundary = self._new_boundary()
        self._participant, self._participant_asked, self._columnar_landing = None, False, True

    def close_clients(self) -> None:
        self._abandon_pending_commit()
        if self._session is not None:
            # A failed task may leave a transaction open (a commit refused for an ACL, say): the
            # session aborts it rather than leave read_committed readers stalled until
            # transaction.timeout.ms.
            self._session.close()

    # ----------------------------------------------------------------------------- transactions
    def _send(self, record: SourceRecord, outgoing: OutgoingRecord | None) -> None:
        txn = self.session.current or self.open_transaction()
        if self._record_metadata:  # kept for commit_record() and participants; keeps id(record) unique
            txn.records.append(record)
            if self._participant is not None:
                txn.sequence.append(record)
        # SourceRecord stores its partition and offset frozen, ready to key and value the map.
        txn.offsets[record.source_partition] = record.source_offset
        if outgoing is None:
            self.metrics.record_filtered()
            return
        on_delivery = report_into(self._metadata, record) if self._delivery_reports else None
        try:
            self.produce(self.producer, outgoing, record, on_delivery)
        except KafkaException as exc:
            if not self.recovery.resent_after_refused_send(exc):
                raise self.session.classify(exc, f"sending a record to {outgoing.topic!r}") from exc
            # the records before this one are in a new transaction (this one's bookkeeping too)
            resent = self.session.current
            assert resent is not None
            txn = resent
            try:
                self.produce(self.producer, outgoing, record, on_delivery)
            except KafkaException as again:
                raise self.session.classify(again, f"sending a record to {outgoing.topic!r}") from again
        txn.sent += 1
        txn.keep(record, outgoing)

    def send_again(self, item: Any, outgoing: Any) -> None:
        """Send a record or batch of an aborted transaction again (`ReplayRecovery`)."""
        if isinstance(item, SourceBatch):
            self._send_batch(item, outgoing)
        else:
            self._send(item, outgoing)

    def forget_metadata(self) -> None:
        """Drop the delivery reports of an aborted transaction's records."""
        self._metadata.clear()

    def open_transaction(self) -> SourceTransaction:
        """Open a transaction; a pipelined commit must have returned first (one at a time)."""
        self.await_commit()
        pause = NEXT_TRANSACTION_GAP_S if self._participant is None else FLUSHING_TRANSACTION_GAP_S
        gap = self.session.ended_at + pause - time.monotonic()
        if gap > 0:
            time.sleep(gap)
        txn = self.session.begin()
        self.metrics.record_transaction_open(True)
        return txn

    def _start_commit(self) -> None:
        """Write the offsets into the open transaction and hand its commit to the helper thread."""
        txn = self.session.current
        assert txn is not None
        self._submit_commit(self.updated_offsets(txn.offsets))

    def _submit_commit(self, offsets: Offsets) -> None:
        """Add the participant's records and `offsets` to the open transaction and hand its commit
        to the helper thread, which first waits for the records' delivery within the transaction's
        budget (`Undelivered` past it: `await_commit` aborts and sends the transaction again)."""
        while self._participant is not None:
            txn = self.session.current
            assert txn is not None
            if not txn.sequence:
                break
            try:
                self._write_participant_records(self._participant)
                break
            except Undelivered as exc:  # (a resend per record may have replaced `txn`)
                self.recovery.retry(self.session.ended(now=False), str(exc))
        txn = self.session.current
        assert txn is not None
        records = self.offsets.write(offsets, skip_written=True)
        txn, future = self.session.commit_pipelined()
        self._pending = _PendingCommit(future, txn, offsets, time.monotonic(), records)

    def await_commit(self) -> None:
        """Join the pipelined commit, if any: raise its error here, else run what follows a commit."""
        while True:
            pending, self._pending = self._pending, None
            if pending is None:
                return
            txn = pending.transaction
            try:
                pending.future.result()
                break
            except (Undelivered, DeliveryFailed, KafkaException, SystemError) as exc:
                if self.recovery.recovered_commit(txn, pending.offsets, exc):
                    break  # it committed after all
                self._submit_commit(pending.offsets)  # sent again: that transaction's commit is next
        self.stored_offsets.update(pending.offsets)
        self.offsets.committed(pending.records)
        self.offsets_committed(pending.offsets)
        self.metrics.record_transaction(txn.sent)
        self.metrics.record_write(txn.sent)
        self._after_transaction(txn.records, pending.commit_started, aborted=False)

    def _abort(self) -> None:
        started = time.monotonic()
        txn = self.session.current
        assert txn is not None
        offsets = self.updated_offsets(txn.offsets)
        # Let in-flight sends settle first: an EndTxn(abort) racing the transaction's first
        # AddPartitions/Produce requests is rejected by Kafka 4 with INVALID_TXN_STATE (fatal).
        held = self.producer.flush(60)
        self.session.abort(60)
        if held:  # the abort purged records (`held_records`)
            self.recovery.renew_after_purge("the connector aborted its transaction", held)
        self.metrics.record_abort()
        self.log.info("aborted a transaction of %d records; committing their offsets", txn.sent)
        self._commit_offsets_only(offsets)
        self._after_transaction(txn.records, started, aborted=True)

    def _after_transaction(self, records: list[SourceRecord], started: float, aborted: bool) -> None:
        """On the task thread, in transaction order: metrics, then commit_record() and commit()."""
        self._last_commit = time.monotonic()
        self.metrics.record_transaction_open(False)
        self.metrics.record_offset_commit(self._last_commit - started)
        for record in records:  # empty unless commit_record() or a participant needs them
            self.task.commit_record(record, None if aborted else self._metadata.pop(id(record), None))
        self._metadata.clear()
        self.task.commit()

    def _abandon_pending_commit(self) -> None:
        """The task failed with a commit in flight: let it end before the producer is closed.

        Its outcome no longer matters to exactly-once (the broker either committed the records with
        their offsets or neither), and the callbacks are skipped: the task is failing.
        """
        pending, self._pending = self._pending, None
        if pending is None:
            return
        try:
            pending.future.result()
            self.log.info("the transaction in flight when the task failed committed")
        except Exception as exc:
            self.log.info("the transaction in flight when the task failed did not commit: %s", exc)

    def _commit_offsets_only(self, offsets: Offsets) -> None:
        if not offsets:
            return
        self.open_transaction()
        records = self.offsets.write(offsets)
        self.session.commit(60)
        self.stored_offsets.update(offsets)
        self.offsets.committed(records)
        self.offsets_committed(offsets)

    def _write_participant_records(self, participant: TransactionParticipant) -> None:
        """The participant's records for this transaction, made from where its records landed,
        written into it (see `TransactionParticipant`). The delivery reports are waited for first
        (commit_transaction() would wait for them anyway).

        A columnar batch's offsets come from its first and last record's reports. Should another
        producer have written into its partition meanwhile, they do not tell where the records in
        between went: then this transaction is aborted (nothing of it was committed, its offsets
        neither) and sent again record by record, as every later one is."""
        landed = self._landed()
        if landed is None:
            self._resend_per_record()
            landed = self._landed()
            assert landed is not None
        self.session.write_records(participant.transaction_records(landed))

    def _landed(self) -> list[LandedRecords] | None:
        txn = self.session.current
        assert txn is not None
        remaining = self.producer.flush(self.session.budget.deliver_within_s(txn.started))
        if remaining:
            raise Undelivered(f"{remaining} of its records were still undelivered")
        return landed_records(txn.sequence, self._metadata)

    def _resend_per_record(self) -> None:
        """Abort the open transaction (not a connector's abort: no offsets commit) and send its
        records again, each with its delivery report; later batches take the per-record path too."""
        txn = self.session.current
        assert txn is not None
        self.log.warning(
            "records of this transaction to %s did not land contiguously (another producer writes "
            "there too); resending it record by record so that the offsets derived from it are exact",
            ", ".join(batch_partitions(txn.sequence)),
        )
        items = sent_records(txn.sequence)
        self.session.abort(60)
        self._metadata.clear()
        self._columnar_landing = False
        for record in items:
            self._send(record, self.pipeline.convert(record))
        resent = self.session.current or self.open_transaction()  # every record was filtered
        resent.offsets = dict(txn.offsets)
