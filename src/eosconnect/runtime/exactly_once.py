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
as the KIP-656 sink's (`TransactionBudget` in runtime/transactions.py): its records must be
delivered within half of what is left of `transaction.timeout.ms` when its commit begins (the
commit then gets as long as before: it cannot be aborted any more). A transaction whose records a
stalled broker does not take in time is aborted by the task itself, before the broker would abort
it, with one WARN; its records are then sent again in a new transaction, from memory. A
`SourceTask` cannot be rewound in process (it has no seek, only the offsets it is started from),
but it already handed those records over: the transaction keeps what it sent
(`Transaction.replay`) until it committed, and sends exactly that again, with the same source
offsets. Nothing is lost or doubled: the aborted records and offsets never became visible.
"""

from __future__ import annotations

import contextlib
import logging
import threading
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
from eosconnect.runtime.landing import Landing, landed_records
from eosconnect.runtime.pipeline import OutgoingColumns, OutgoingRecord
from eosconnect.runtime.source_task import Offsets, RestartFromStoredOffsets, SourceTaskRunner
from eosconnect.runtime.transactions import (
    FENCED_CODES,
    PURGED,
    Step,
    TaskFencedError,
    Transaction,
    TransactionalProducer,
    TransactionBudget,
    abort_in_time,
    boundary_for,
    classify_transaction_error,
    failure_cause,
    fatal_cause,
    held_records,
    transactional_producer_config,
    warn_aborted,
)
from eosconnect.storage.client_login import LoginWatch
from eosconnect.storage.clients import client_config
from eosconnect.storage.offsets import encode_offset_records
from eosconnect.storage.topics import ensure_topic
from eosconnect.storage.transactional_ids import task_transactional_id

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
#: The most records a transaction keeps to send again should it have to be aborted and retried (a
#: reference to each converted record, which the producer's queue holds anyway until delivered).
#: A larger one (a long `transaction.boundary.interval.ms` at a high rate) that stalls fails the
#: task as before: it restarts from its committed offsets.
REPLAY_LIMIT = 200_000

log = logging.getLogger(__name__)


class _Undelivered(Exception):
    """The transaction's records were not delivered within its budget: abort it and retry."""


#: Delivery errors of the idempotent producer's sequence bookkeeping (a broker lost or refused its
#: state): the transaction is aborted and sent again (`_resent_after_abortable`).
SEQUENCE_ERRORS = frozenset({KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError.UNKNOWN_PRODUCER_ID})


#: produce() refusing a record because the open transaction already failed: abortably (`_STATE`),
#: fatally (`_FATAL`), or fenced (`_resent_after_refused_send`).
REFUSED_SEND_CODES = frozenset({KafkaError._STATE, KafkaError._FATAL, *FENCED_CODES})


class _DeliveryFailed(Exception):
    """The producer failed while the transaction's records were still being delivered, before its
    commit was asked for (the cause says how): nothing of the transaction can be committed."""


@dataclass
class _PendingCommit:
    """A transaction whose `commit_transaction()` runs on the helper thread."""

    future: Future[None]
    transaction: Transaction
    offsets: Offsets  # as updated by the task (KIP-910) and committed
    commit_started: float
    #: The offsets topic's records (key -> value) that hold `offsets` once this commits.
    records: dict[bytes, bytes | None]


class ExactlyOnceSourceTaskRunner(SourceTaskRunner):
    producer: Producer

    def offsets_read_timeout_s(self) -> float:
        """A sibling task killed mid-transaction (Spark gave up on it, so no successor fences it)
        holds the shared offsets topic's last stable offset back until the broker aborts its
        transaction: `transaction.timeout.ms` after it began, found by a check that runs every 10 s.
        The read waits that long, not a fixed 60 s that a 60 s transaction timeout can outlast."""
        return max(super().offsets_read_timeout_s(), self.transaction_timeout_ms / 1000 + 20)

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
        config, self.transaction_timeout_ms = transactional_producer_config(
            client_config("producer", self.worker.originals, self.connector.originals).validate(),
            task_transactional_id(self.worker.group_id, name, self.spec.task),
        )
        # Records without a callback of their own (the source offsets) report failures here: a
        # commit only says "N message(s) failed delivery", and the reason (an offsets topic the
        # principal may not write, say) must reach the task's error.
        self._delivery_failures: list[str] = []
        config["on_delivery"] = self._note_delivery_failure
        # A refused login fails step 4 at once, naming the principal and its settings (see
        # storage/client_login.py), instead of timing out after 60 s.
        login = LoginWatch(config, client="transactional producer")
        config["error_cb"] = login
        self.producer = Producer(config)
        self._producer_config, self._login = config, login  # for a renewal in place (`_renewed_in_place`)
        self.txn = TransactionalProducer(self.producer, self._classify)
        self.budget = TransactionBudget(self.transaction_timeout_ms)
        #: Transactions aborted because they could not be committed in time, and sent again.
        self.retried_transactions = 0
        #: The stored offsets as this instance knows them (read at start-up, then its commits), and
        #: whether its producer was renewed since it last checked them (`_ensure_not_overtaken`).
        self._stored: Offsets = {}
        #: The offsets topic's records (key -> value) this instance's own transactions committed:
        #: an offset whose record would be the same is not written again (`_write_offsets`).
        self._written: dict[bytes, bytes | None] = {}
        self._renewed = False
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
        self._init_producer()
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
        self._stored = dict(self.offset_view.snapshot())
        self.log.info(
            "start-up took %.2f s: fencing %.2f s, generation check %.2f s, init_transactions %.2f s, "
            "offsets read with the second check %.2f s",
            time.monotonic() - began,
            fenced - began,
            checked - fenced,
            initialized - checked,
            time.monotonic() - initialized,
        )
        self._metadata: dict[int, RecordMetadata] = {}
        # One long-lived thread: the commits of a task are strictly sequential anyway.
        self._committer = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"commit-{self.task_id}")
        self._pending: _PendingCommit | None = None
        self._last_commit = time.monotonic()
        self.boundary = boundary_for(
            self.connector.transaction_boundary, self, self.connector.interval_ms(self.worker) / 1000
        )
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
        # Offsets derive from the ends of a batch only when it goes to one known partition.
        items = [polled] if isinstance(polled, SourceBatch) else polled
        return self._columnar_landing and all(
            isinstance(item, SourceBatch) and item.partition is not None and item.record_offsets is not None
            for item in items
        )

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
        txn = self.txn.current or self._begin()
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
            raise self._classify(exc, f"sending records to {item.topic!r}") from exc
        txn.sent += len(outgoing.values)  # records errors.tolerance=all skipped were not sent
        self._keep(txn, item, outgoing)

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
        return self.txn.open

    @property
    def last_commit(self) -> float:
        return self._last_commit

    def serve_deliveries(self) -> None:
        """A transaction may span many batches: serve their delivery reports now and then."""
        try:
            self.producer.poll(0)
        except KafkaException as exc:  # a fatal error (fenced) surfaces here first
            raise self._classify(exc, "sending records") from exc

    def commit_offsets_heartbeat(self) -> None:
        """KIP-910 heartbeat: an interval with no records may still move idle partitions' offsets."""
        heartbeat = self.updated_offsets({})
        if heartbeat:
            self._commit_offsets_only(heartbeat)
        self._last_commit = time.monotonic()

    def end_transaction(self, abort: bool) -> None:
        if not self.txn.open:
            if abort:
                return
            self._begin()
        if abort:
            self._abort()
        else:
            self._start_commit()

    def abort_on_stop(self) -> None:
        """Abort the open transaction of a stopping task. librdkafka 2.16 can send the abort while
        a partition registration of the transaction is still under way, and the coordinator then
        refuses it (INVALID_TXN_STATE, fatal for the producer; seen in the chaos soak with
        transaction.boundary=connector). Nothing of the transaction was committed and the next
        instance's `init_transactions()` ends it, so the stop goes on; anything else fails as before."""
        self.log.info("stopping with an open transaction the connector did not commit; aborting it")
        try:
            self.producer.abort_transaction(30)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.INVALID_TXN_STATE:
                raise self._classify(exc, Step.ABORT) from exc
            self.log.info(
                "the broker refused the abort (%s); nothing of the transaction was committed, and the "
                "next instance's init_transactions() ends it",
                exc.args[0].str(),
            )
        self.txn.ended(now=False)

    def forget_sent(self) -> None:
        """Nothing of the dropped transaction stays (its producer was renewed, which ended it): the
        boundary and participant are made afresh for the new `SourceTask`, and the offsets just
        read (`_ensure_not_overtaken`) are this instance's from now on."""
        assert self.offset_view is not None
        if self.txn.open:  # not expected: the renewal ended the producer's transaction
            with contextlib.suppress(KafkaException):
                self.producer.abort_transaction(30)
            self.txn.ended(now=True)
        self._metadata.clear()
        self._delivery_failures.clear()
        self._stored = dict(self.offset_view.snapshot())
        self._renewed = False
        self.boundary = boundary_for(
            self.connector.transaction_boundary, self, self.connector.interval_ms(self.worker) / 1000
        )
        self._participant, self._participant_asked, self._columnar_landing = None, False, True

    def close_clients(self) -> None:
        self._abandon_pending_commit()
        committer = getattr(self, "_committer", None)
        if committer is not None:
            committer.shutdown(wait=True)
        producer = getattr(self, "producer", None)
        if producer is not None:
            # A failed task may leave a transaction open (a commit refused for an ACL, say): abort
            # it now rather than leave read_committed readers stalled until transaction.timeout.ms.
            # Without a transaction in progress (or on a fenced producer) this raises at once.
            with contextlib.suppress(KafkaException):
                producer.abort_transaction(10)
            with contextlib.suppress(KafkaException):  # a fenced producer raises its fatal error
                producer.flush(0)

    # ----------------------------------------------------------------------------- transactions
    def _send(self, record: SourceRecord, outgoing: OutgoingRecord | None) -> None:
        txn = self.txn.current or self._begin()
        if self._record_metadata:  # kept for commit_record() and participants; keeps id(record) unique
            txn.records.append(record)
            if self._participant is not None:
                txn.sequence.append(record)
        # SourceRecord stores its partition and offset frozen, ready to key and value the map.
        txn.offsets[record.source_partition] = record.source_offset
        if outgoing is None:
            self.metrics.record_filtered()
            return
        on_delivery = self._metadata_callback(record) if self._delivery_reports else None
        try:
            self.produce(self.producer, outgoing, record, on_delivery)
        except KafkaException as exc:
            if not self._resent_after_refused_send(exc):
                raise self._classify(exc, f"sending a record to {outgoing.topic!r}") from exc
            # the records before this one are in a new transaction (this one's bookkeeping too)
            txn = self.txn.current
            assert txn is not None
            try:
                self.produce(self.producer, outgoing, record, on_delivery)
            except KafkaException as again:
                raise self._classify(again, f"sending a record to {outgoing.topic!r}") from again
        txn.sent += 1
        replay = txn.replay
        if replay is not None:
            replay.append((record, outgoing))
            if txn.sent > REPLAY_LIMIT:
                txn.replay = None

    @staticmethod
    def _keep(txn: Transaction, item: SourceBatch, outgoing: OutgoingColumns) -> None:
        """Keep a sent batch for a retry of its transaction (see `Transaction.replay`)."""
        if txn.replay is not None:
            txn.replay.append((item, outgoing))
            if txn.sent > REPLAY_LIMIT:
                txn.replay = None

    def _metadata_callback(self, record: SourceRecord) -> Any:
        key = id(record)

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                self._metadata[key] = RecordMetadata(
                    msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1]
                )

        return on_delivery

    def _begin(self) -> Transaction:
        """Open a transaction; a pipelined commit must have returned first (one at a time)."""
        self.await_commit()
        pause = NEXT_TRANSACTION_GAP_S if self._participant is None else FLUSHING_TRANSACTION_GAP_S
        gap = self.txn.ended_at + pause - time.monotonic()
        if gap > 0:
            time.sleep(gap)
        return self.txn.begin()

    def _start_commit(self) -> None:
        """Write the offsets into the open transaction and hand its commit to the helper thread."""
        txn = self.txn.current
        assert txn is not None
        self._submit_commit(self.updated_offsets(txn.offsets))

    def _submit_commit(self, offsets: Offsets) -> None:
        """Add the participant's records and `offsets` to the open transaction and hand its commit
        to the helper thread, which first waits for the records' delivery within the transaction's
        budget (`_Undelivered` past it: `await_commit` aborts and sends the transaction again)."""
        while self._participant is not None:
            txn = self.txn.current
            assert txn is not None
            if not txn.sequence:
                break
            try:
                self._write_participant_records(self._participant)
                break
            except _Undelivered as exc:  # (a resend per record may have replaced `txn`)
                self._retry(self.txn.ended(now=False), str(exc))
        txn = self.txn.current
        assert txn is not None
        records = self._write_offsets(offsets, skip_written=True)
        producer, budget, began = self.producer, self.budget, txn.started
        started = threading.Event()
        transactions = self.txn

        # Once the records are in, the commit gets as long as before (not the budget's 0.85: a commit
        # cannot be aborted, and one whose coordinator died completes once the coordinator moved;
        # failing it at 0.85 of a short timeout failed tasks in the chaos soak's broker kills).
        commit_timeout_s = max(60, self.transaction_timeout_ms / 1000)

        def commit() -> None:
            started.set()
            # The records must be in while an abort is still allowed and in time (librdkafka
            # allows none once the commit began); flush() releases the GIL while it waits.
            try:
                remaining = producer.flush(budget.deliver_within_s(began))
            except (KafkaException, SystemError) as exc:
                raise _DeliveryFailed from exc
            if remaining:
                raise _Undelivered(f"{remaining} of its records were still undelivered")
            producer.commit_transaction(commit_timeout_s)
            transactions.ended_at = time.monotonic()  # read by the task thread after joining the future

        future = self._committer.submit(commit)
        # Hand the GIL over until the commit is under way: left to the interpreter, the helper
        # thread would wait for the task thread's next forced switch (sys.getswitchinterval(), 5 ms).
        started.wait()
        self._pending = _PendingCommit(future, self.txn.ended(now=False), offsets, time.monotonic(), records)

    def _retry(self, old: Transaction, why: str) -> None:
        """Abort `old` (already closed in `self.txn`, not committed) before the broker would, say
        so once at WARN, and send what it held again in a new open transaction (`Transaction.replay`),
        with the same source offsets and records for `commit_record()`."""
        if old.replay is None:
            raise ConnectException(
                f"{self.task_id}: a transaction of {old.sent} records could not be committed in time "
                f"({why}), and it holds more records than are kept to send again ({REPLAY_LIMIT}); the "
                "task restarts from its committed offsets. Lower transaction.boundary.interval.ms, or "
                "use transaction.boundary=poll"
            )
        held = held_records(self.producer)
        try:
            abort_in_time(self.producer.abort_transaction, self.budget, old.started)
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            why = f"the abort failed ({err.str()})"
            if err.code() in FENCED_CODES:
                # `old` was not committed; fenced while the leader says current: a zombie's epoch
                # bump (`_resent_after_fatal_delivery`), which a new producer fences in turn
                if not self._renewed_after_fence(why):
                    raise self._classify(exc, Step.ABORT, old.started) from exc
            elif err.fatal():
                self._renew(why)  # the answer proves the epoch current, as for the sink (`_renew`)
            elif not self._renewed_in_place(why):
                raise self._classify(exc, Step.ABORT, old.started) from exc
        else:
            if held:
                self._renew_after_purge(why, held)
        self._resend(old, why)

    def _renew_after_purge(self, why: str, held: int) -> None:
        """The abort purged records the producer still held, one of which may be in the log already
        (`held_records`): a new producer before anything is sent again, or the records sent next
        could be taken for duplicates of the aborted ones and lost."""
        self._renew(f"{why}; the abort purged {held} records its producer still held")

    def _resent_after_fatal_delivery(self, old: Transaction, cause: KafkaException) -> bool:
        """The producer failed fatally while delivering `old`'s records, before its commit was asked
        for (so nothing of `old` was committed): e.g. librdkafka's OUT_OF_ORDER_SEQUENCE_NUMBER after
        a broker died with a produce request in flight (seen in the chaos soak's broker kills), or
        fenced although this instance is the task's current one. The latter is a zombie's doing: a
        replaced instance whose producer woke up with a transaction to abort asks the coordinator
        for an epoch bump (KIP-360) with its producer id and old epoch, and while the current
        instance's transaction is open the coordinator aborts that transaction and bumps the epoch
        before it checks the zombie's epoch (which it then refuses; the chaos soak found a frozen
        and thawed source task doing this to its successor). A fatal producer cannot abort; if the
        leader confirms this instance current, a new producer aborts the transaction (its
        `init_transactions()`, which fences the zombie again) and its records are sent again from
        memory. A replaced instance gets no confirmation: False, and the task ends as before
        (quietly, as superseded)."""
        err: KafkaError = cause.args[0]
        if not err.fatal() or old.replay is None:
            return False
        why = f"its producer failed while delivering its records ({err.name()}: {err.str()})"
        renewed = (
            self._renewed_after_fence(why) if err.code() in FENCED_CODES else self._renewed_in_place(why)
        )
        if not renewed:
            return False
        self._resend(old, why)
        return True

    def _settled_after_fence_at_commit(
        self, old: Transaction, offsets: Offsets, cause: KafkaException
    ) -> bool | None:
        """`old` was fenced at its commit although this instance may be the task's current one: a
        zombie's epoch bump (`_resent_after_fatal_delivery`) that arrived after the commit was
        asked for (the chaos soak, seed 1412404671: two source tasks FAILED so 21 s after renewing
        their producers in a broker kill; test_source_fenced_while_current.py meets it now and
        then). The answer does not say whether the transaction committed: a commit the coordinator
        completed, whose answer was lost and whose retry met the fence, looks the same. Once the
        leader confirms this instance current, `_settled_by_new_producer` tells which. None when
        this does not apply (not fenced, too large to send again, or not confirmed current): the
        task fails as before, quietly if it was replaced."""
        err: KafkaError = cause.args[0]
        if err.code() not in FENCED_CODES or old.replay is None:
            return None
        why = f"fenced while committing ({err.str()})"
        if not self._renewed_after_fence(why):
            return None
        return self._settled_by_new_producer(old, offsets, why)

    def _settled_after_commit_timeout(
        self, old: Transaction, offsets: Offsets, cause: KafkaException
    ) -> bool | None:
        """`old`'s commit did not return within its time (librdkafka's `_TIMED_OUT`, "retry call to
        resume"): whether it committed is unknown. The chaos soak (seed 1350680724) saw a commit's
        EndTxn wait 60 s in librdkafka's queue for a coordinator connection that never came up,
        while the coordinator had moved to a live broker, and the task FAILED. A new producer looks
        the coordinator up afresh; once the leader confirms this instance current,
        `_settled_by_new_producer` tells whether `old` committed. None when this does not apply
        (another error, too large to send again, or not confirmed current): the task fails as
        before."""
        err: KafkaError = cause.args[0]
        if err.fatal() or err.code() != KafkaError._TIMED_OUT or old.replay is None:
            return None
        why = f"its commit did not return in time ({err.str()})"
        if not self._renewed_in_place(why):
            return None
        return self._settled_by_new_producer(old, offsets, why)

    def _settled_by_new_producer(self, old: Transaction, offsets: Offsets, why: str) -> bool:
        """After a new producer ended whatever the coordinator began of `old` (its
        `init_transactions()` completes a prepared commit and aborts an open transaction), the
        connector's offsets, read to the end of their topic (read_committed), tell which: holding
        this transaction's offsets, it committed (True); else nothing of it is visible, and its
        records are sent again from memory into a new open transaction (False)."""
        view = self.offset_view  # read at start-up (`start_task`), before any commit
        assert view is not None
        view.refresh(self.offsets_read_timeout_s())
        found = view.offsets(offsets)
        self._renewed = False  # checked here, on the offsets just read
        if all(found.get(partition) == offset for partition, offset in offsets.items()):
            self.log.info(
                "the transaction whose commit was in doubt (%s) had committed: its offsets are stored", why
            )
            return True
        self._ensure_not_overtaken(old, why, refresh=False)
        self._resend(old, f"{why}; its offsets are not stored, so it did not commit")
        return False

    def _resent_after_abortable(self, old: Transaction, cause: KafkaException, *, commit_asked: bool) -> bool:
        """`old` failed with an abortable error: librdkafka marks the transaction as one to abort
        (`txn_requires_abort()`), e.g. OUT_OF_ORDER_SEQUENCE_NUMBER "requires epoch bump" after a
        broker restart with produce requests in flight (seen in the chaos soak); it was not
        committed, and the abort bumps the producer's epoch. Abort it and send its records again
        (`_retry`). Before the commit was asked for, a delivery error of the idempotent producer's
        sequence bookkeeping counts too. False for anything else (the task fails, as before)."""
        err: KafkaError = cause.args[0]
        if err.fatal() or err.code() in FENCED_CODES or old.replay is None:
            return False
        resendable = err.txn_requires_abort() or (not commit_asked and err.code() in SEQUENCE_ERRORS)
        if not resendable:
            return False
        self._retry(old, f"its {'commit' if commit_asked else 'delivery'} failed ({err.name()}: {err.str()})")
        return True

    def _resent_after_refused_send(self, exc: KafkaException) -> bool:
        """produce() refused a record (`REFUSED_SEND_CODES`): the open transaction had already failed (an
        abortable error, e.g. OUT_OF_ORDER_SEQUENCE_NUMBER "requires epoch bump" after a broker
        restart, reported by librdkafka between two sends of a long connector-defined transaction),
        or as fenced (a zombie's epoch bump, see `_resent_after_fatal_delivery`; `_retry` renews the
        producer if the leader confirms this instance current).
        If the leader confirms this instance current, abort that transaction and send what it held
        again (`_retry`); the caller then sends the refused record into the new one. False when
        that cannot be done (the task fails, as before)."""
        old = self.txn.current
        if exc.args[0].code() not in REFUSED_SEND_CODES or old is None or old.replay is None:
            return False
        confirmed_current = getattr(self.spec.control, "confirmed_current", None)
        if confirmed_current is None or not confirmed_current():
            return False
        self.txn.ended(now=False)
        self._retry(old, f"its producer refused a record ({exc.args[0].str()}): the transaction had failed")
        return True

    def _resend(self, old: Transaction, why: str) -> None:
        """After `old` was aborted (or ended by a new producer): say so once at WARN and send what it
        held again in a new open transaction (after a renewal only if `_ensure_not_overtaken`)."""
        assert old.replay is not None
        if self._renewed:
            self._renewed = False
            self._ensure_not_overtaken(old, why)
        open_for = time.monotonic() - old.started
        self.txn.ended_at = time.monotonic()
        self.retried_transactions += 1
        self.metrics.record_abort()
        with contextlib.suppress(KafkaException):
            self.producer.poll(0)  # the purged records' delivery reports
        self._metadata.clear()
        self._delivery_failures.clear()
        then = "sending them again from memory in a new transaction"
        warn_aborted(log, self.task_id, old.sent, open_for, self.transaction_timeout_ms, why, then)
        txn = self._begin()
        for item, outgoing in old.replay:
            if isinstance(item, SourceBatch):
                self._send_batch(item, outgoing)
            else:
                self._send(item, outgoing)
        txn = self.txn.current or txn
        txn.offsets = old.offsets
        txn.records = old.records  # filtered records too, for commit_record()

    def _ensure_not_overtaken(self, old: Transaction, why: str, refresh: bool = True) -> None:
        """Before a renewed producer sends `old` again: the stored offsets of its source partitions
        must still be those this instance last committed (or read at start-up). A new producer
        fences every other instance, but the leader's word that allowed it may be old: the chaos soak
        (seed 1350680724) froze a slot host while one of its tasks renewed its producer, ran the
        task elsewhere meanwhile, and on SIGCONT the frozen renewal completed, fenced the new
        instance and committed its transaction from memory again, 20 records the new instance had
        committed already. Offsets moved past this instance's mean another instance committed. If
        the leader says this one was replaced: `TaskFencedError` (it ends quietly). Else the other
        was a zombie that renewed on an old word and committed before this instance fenced it in
        turn: what this instance holds follows offsets that are no longer the stored ones, so its
        `SourceTask` starts again from them (`RestartFromStoredOffsets`), and nothing is lost or
        sent twice."""
        view = self.offset_view
        assert view is not None
        if refresh:  # else just read by the caller
            view.refresh(self.offsets_read_timeout_s())
        found = view.offsets(old.offsets)
        moved = [p for p in old.offsets if found.get(p) != self._stored.get(p)]
        if moved:
            detail = "; ".join(
                f"{dict(p)}: stored {found.get(p)}, this instance's {self._stored.get(p)}" for p in moved
            )
            found_why = (
                f"{self.task_id}: after a new producer ({why}), the stored offsets are not this "
                f"instance's ({detail}): another instance of this task committed meanwhile"
            )
            superseded = getattr(self.spec.control, "superseded", None)
            if superseded is None or superseded():
                raise TaskFencedError(f"{found_why}, so this one must not send its transaction again")
            raise RestartFromStoredOffsets(
                f"{found_why}, and the leader says this one is the task's current instance: the other "
                f"was a zombie; the {old.sent} records of this instance's transaction are dropped"
            )

    def _renewed_in_place(self, why: str) -> bool:
        """The producer cannot end its transaction (the abort failed or ran out of time): renew it
        in place if the leader confirms this instance is still the task's current one. The new
        producer's `init_transactions()` aborts the open transaction and fences the old producer's
        epoch. A replaced instance must not (it would fence its successor): False, and the task ends
        as before (quietly, if it was replaced)."""
        confirmed_current = getattr(self.spec.control, "confirmed_current", None)
        if confirmed_current is None or not confirmed_current():
            return False
        self._renew(f"{why}; the leader confirms this instance current")
        return True

    def _renewed_after_fence(self, why: str) -> bool:
        """`_renewed_in_place` for a producer that was fenced: the fence may come from a newer
        instance that has not reported to the leader yet, so the leader's word is awaited as by a
        replaced instance (`superseded`, which waits for a "stop" for a while) before this
        instance is confirmed current and fences whoever fenced it."""
        superseded = getattr(self.spec.control, "superseded", None)
        if superseded is None or superseded():
            return False
        return self._renewed_in_place(why)

    def _renew(self, why: str) -> None:
        """A new producer with the same transactional id: its `init_transactions()` aborts the open
        transaction and fences the old producer's epoch. Without the leader's word only after the
        coordinator answered the old producer fatally but not as a zombie (librdkafka 2.16 can end
        up so when the abort races a partition registration: INVALID_TXN_STATE, which the
        coordinator checks only after the producer's epoch; seen in test_source_stall after a
        broker freeze). The KIP-656 sink does the same (`TransactionalSinkProducer._renew_producer`)."""
        self.log.info("%s: a new producer (a new epoch) takes over", why)
        old, self.producer = self.producer, Producer(self._producer_config)
        with contextlib.suppress(KafkaException):
            old.flush(0)
        self.txn.producer = self.producer
        self._init_producer()
        self._renewed = True  # what it sends again is checked first (`_ensure_not_overtaken`)

    def _init_producer(self) -> None:
        """`init_transactions()` of the task's producer, at start-up or renewed in place (it fences
        the previous epoch, and waits while the coordinator still ends that epoch's transaction)."""
        config = self._producer_config
        self.txn.init(
            self._login,
            self.task_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            setting=getattr(config, "origin", {}).get(
                "transaction.timeout.ms", "producer.override.transaction.timeout.ms"
            ),
            transactional_id=self.producer_transactional_id,
            logger=self.log,
        )

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
            except _Undelivered as exc:
                self._retry(txn, str(exc))
                self._submit_commit(pending.offsets)  # the retried transaction's commit is awaited next
            except _DeliveryFailed as exc:
                failed = exc.__cause__
                assert failed is not None
                cause = failure_cause(self.producer, failed)
                if cause is None:
                    raise failed from None
                if self._resent_after_fatal_delivery(txn, cause) or self._resent_after_abortable(
                    txn, cause, commit_asked=False
                ):
                    self._submit_commit(pending.offsets)
                    continue
                raise self._classify(cause, Step.COMMIT, txn.started) from failed
            except (KafkaException, SystemError) as exc:
                # flush() may report a producer's fatal error (a zombie fenced by its successor)
                # through confluent-kafka's callback machinery, as a SystemError: its cause counts.
                cause = failure_cause(self.producer, exc)
                if cause is None:
                    raise
                if self._resent_after_abortable(txn, cause, commit_asked=True):
                    self._submit_commit(pending.offsets)
                    continue
                committed = self._settled_after_fence_at_commit(txn, pending.offsets, cause)
                if committed is None:
                    committed = self._settled_after_commit_timeout(txn, pending.offsets, cause)
                if committed is None:
                    raise self._classify(cause, Step.COMMIT, txn.started) from exc
                if not committed:
                    self._submit_commit(pending.offsets)  # sent again by `_settled_by_new_producer`
                    continue
                break
        self._stored.update(pending.offsets)
        self._written.update(pending.records)
        self.offsets_committed(pending.offsets)
        self.metrics.record_transaction(txn.sent)
        self.metrics.record_write(txn.sent)
        self._after_transaction(txn.records, pending.commit_started, aborted=False)

    def _abort(self) -> None:
        started = time.monotonic()
        txn = self.txn.current
        assert txn is not None
        offsets = self.updated_offsets(txn.offsets)
        # Let in-flight sends settle first: an EndTxn(abort) racing the transaction's first
        # AddPartitions/Produce requests is rejected by Kafka 4 with INVALID_TXN_STATE (fatal).
        held = self.producer.flush(60)
        self.txn.abort(60)
        if held:  # the abort purged records (`held_records`)
            self._renew_after_purge("the connector aborted its transaction", held)
        self.metrics.record_abort()
        self.log.info("aborted a transaction of %d records; committing their offsets", txn.sent)
        self._commit_offsets_only(offsets)
        self._after_transaction(txn.records, started, aborted=True)

    def _after_transaction(self, records: list[SourceRecord], started: float, aborted: bool) -> None:
        """On the task thread, in transaction order: metrics, then commit_record() and commit()."""
        self._last_commit = time.monotonic()
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
        pending, self._pending = getattr(self, "_pending", None), None
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
        self._begin()
        records = self._write_offsets(offsets)
        self.txn.commit(60)
        self._stored.update(offsets)
        self._written.update(records)
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
        try:
            for record in participant.transaction_records(landed):
                extra = {"headers": record.headers} if record.headers else {}
                self.producer.produce(record.topic, record.value, record.key, record.partition, **extra)
        except KafkaException as exc:
            raise self._classify(exc, "writing the task's transaction records") from exc

    def _landed(self) -> list[LandedRecords] | None:
        txn = self.txn.current
        assert txn is not None
        remaining = self.producer.flush(self.budget.deliver_within_s(txn.started))
        if remaining:
            raise _Undelivered(f"{remaining} of its records were still undelivered")
        return landed_records(txn.sequence, self._metadata)

    def _resend_per_record(self) -> None:
        """Abort the open transaction (not a connector's abort: no offsets commit) and send its
        records again, each with its delivery report; later batches take the per-record path too."""
        txn = self.txn.current
        assert txn is not None
        where = sorted(
            {f"{item.topic}-{item.batch.partition}" for item in txn.sequence if isinstance(item, Landing)}
        )
        self.log.warning(
            "records of this transaction to %s did not land contiguously (another producer writes "
            "there too); resending it record by record so that the offsets derived from it are exact",
            ", ".join(where),
        )
        items: list[SourceRecord] = []
        for item in txn.sequence:
            if isinstance(item, Landing):
                items.extend(item.batch)
            else:
                items.append(item)
        self.txn.abort(60)
        self._metadata.clear()
        self._columnar_landing = False
        for record in items:
            self._send(record, self.pipeline.convert(record))
        resent = self.txn.current or self._begin()  # every record was filtered
        resent.offsets = dict(txn.offsets)

    def _write_offsets(self, offsets: Offsets, *, skip_written: bool = False) -> dict[bytes, bytes | None]:
        """Write `offsets` into the open transaction; the offsets topic's records that hold them.

        With `skip_written`, a record equal to one this instance's own transactions committed is
        not sent again: a source that repeats its offset (MirrorHeartbeat's is always 0) would
        otherwise add the offsets topic's partition, a record and a commit marker to every
        transaction, most of what a fleet of such tasks costs the broker. Records are compared
        (not offset objects, which a task may change in place), and only this instance's commits
        count: an offset read at start-up may come from the worker's global topic, not this one."""
        records = dict(encode_offset_records(self.spec.connector, offsets))
        written = self._written if skip_written else {}
        try:
            for key, value in records.items():
                if key not in written or written[key] != value:
                    self.producer.produce(self.placement.topic, key=key, value=value)
        except KafkaException as exc:
            raise self._classify(exc, f"writing offsets to {self.placement.topic!r}") from exc
        return records

    # ----------------------------------------------------------------------------- errors
    def _classify(self, exc: KafkaException, doing: str, txn_started: float | None = None) -> Exception:
        """A task-failing error for `exc`; `txn_started` is when the failed transaction began
        (default: the open one, if any)."""
        current = self.txn.current if txn_started is None else None
        if current is not None:
            txn_started = current.started
        classified = classify_transaction_error(
            self._fatal_cause(exc),
            doing,
            task_id=self.task_id,
            transactional_id=self.producer_transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            txn_started=txn_started,
        )
        failures = getattr(self, "_delivery_failures", None)
        if failures and type(classified) is ConnectException:
            return ConnectException(f"{classified}; {'; '.join(failures)}")
        return classified

    def _note_delivery_failure(self, err: KafkaError | None, msg: Any) -> None:
        failures = getattr(self, "_delivery_failures", None)
        if err is None or failures is None or len(failures) >= 3 or err.code() in PURGED:
            return
        text = f"a record to {msg.topic()!r} failed: {err.name()}: {err.str()}"
        if text not in failures:
            failures.append(text)

    def _fatal_cause(self, exc: KafkaException) -> KafkaException:
        return fatal_cause(self.producer, exc)

    @property
    def producer_transactional_id(self) -> str:
        return task_transactional_id(self.worker.group_id, self.spec.connector, self.spec.task)
