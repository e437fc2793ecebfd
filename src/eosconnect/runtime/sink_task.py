"""The sink task loop a Spark task runs: consume, convert, `put`, commit; at least once.

Kafka Connect's sink model (docs/architecture.md): the task's consumer joins the group
`connect-<connector>` (read_committed, no auto-commit) and subscribes to `topics`/`topics.regex`.
Partitions assigned to it are `open`ed on the task, revoked ones have their offsets committed and
are then `close`d. Batches go through the converters (bytes to values) and transformations to
`put`; every `offset.flush.interval.ms` (or when the task asks) the runtime calls `pre_commit` with
the positions after everything `put` so far and commits exactly what it returns, synchronously.

Why at least once: offsets are committed only after `pre_commit` (by default `flush`) made the
data durable, so nothing acknowledged is lost; records `put` after the last commit are delivered
again after a crash. Committing is a strategy object (`OffsetCommitter`, runtime/sink_consumer.py,
with the consumer's settings). A KIP-656 sink commits its positions inside its own transactions
instead, from `pre_commit`, through the `TransactionalWriter` its context makes it
(`SinkTaskContext.transactional_writer`).

Two opt-ins serve sinks that deliver exactly once into Kafka (KIP-656, see api/sink.py): a task
config with `task.assigned.partitions` gets those partitions by `assign` (no group rebalances, still
`open`ed and `close`d), and a connector whose `exactly_once_delivery` holds (given a `coordinator`
by the worker) goes through KIP-618's start-up first: the leader fences zombies, the generation must
still be the latest before and after the task's `start` (which creates its transactional producer
with the id in its context), else the task quietly does not start (SUPERSEDED).

Log truncation (KIP-320): every committed offset carries the leader epoch of the record before
it. Where a partition starts on assignment, checked against the leaders' logs, and where it starts
again after librdkafka stopped it (a truncation while running, or no usable offset) is
runtime/sink_restarts.py's; the rules are runtime/truncation.py's and docs/truncation.md's.

A record the converters or transformations reject fails the task naming it, or under
`errors.tolerance=all` is skipped, dead-lettered and its offset committed like any other
(runtime/sink_batches.py; retried first per `errors.retry.*`, runtime/retry_tolerance.py).
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.context import SinkTaskContext
from eosconnect.api.errors import RetriableException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.api.sink import ASSIGNED_PARTITIONS_CONFIG, SinkTask, decode_partitions
from eosconnect.policies.database_hosts import check_database_host
from eosconnect.policies.file_access import FILE_ALLOWED_DIRS
from eosconnect.runtime.config import ErrorsTolerance, SinkConnectorConfig
from eosconnect.runtime.consumer_lag import ConsumerLag
from eosconnect.runtime.control import Directive
from eosconnect.runtime.dead_letter import DeadLetterQueue, for_sink_task
from eosconnect.runtime.failure import failure_message, failure_trace
from eosconnect.runtime.fetch_stall import FetchStallWatch
from eosconnect.runtime.frozen_heap import frozen_heap
from eosconnect.runtime.metrics import SinkTaskMetrics
from eosconnect.runtime.pipeline import SinkRecordPipeline, pipeline_config
from eosconnect.runtime.retry_tolerance import RetryWithTolerance, ToleranceSettings
from eosconnect.runtime.sink_batches import SinkBatchConverter
from eosconnect.runtime.sink_consumer import (
    ConsumerGroupCommitter,
    InformationalGroupCommitter,
    OffsetCommitter,
    Offsets,
    kafka_offsets,
    kafka_tp,
    sink_consumer_settings,
)
from eosconnect.runtime.sink_restarts import PartitionRestarts
from eosconnect.runtime.startup import GenerationSuperseded
from eosconnect.runtime.supersession import replaced_by_design
from eosconnect.runtime.task import TaskLogAdapter, TaskOutcome, TaskSpec, TaskState, instantiate_task
from eosconnect.runtime.transactions.sink_writer import sink_writer_factory
from eosconnect.runtime.truncation import (
    OffsetReset,
    TruncationRepair,
)
from eosconnect.runtime.wall_time import WallTime
from eosconnect.storage.clients import ClientConfig
from eosconnect.storage.topic_reader import load_leaders
from eosconnect.storage.transactional_ids import task_transactional_id
from eosconnect.worker_config import WorkerConfig

log = logging.getLogger(__name__)

#: Most records handed to one `put` (the Java consumer's max.poll.records default).
MAX_BATCH = 500
#: How long one consume call waits for the first record when none is queued; bounds how late the
#: loop sees a stop directive.
POLL_TIMEOUT_S = 0.5
#: How long to wait before giving a batch to `put` again after a RetriableException.
RETRY_BACKOFF_S = 1.0


class SinkTaskRunner:
    """Runs one `SinkTask` inside a Spark task until its `TaskControl` says stop; never raises
    from `run`."""

    def __init__(self, spec: TaskSpec, worker: WorkerConfig, connector: SinkConnectorConfig) -> None:
        self.spec = spec
        self.worker = worker
        self.connector = connector
        self.task_id = f"{spec.connector}-{spec.task}"
        self.log = TaskLogAdapter(log, {"id": self.task_id})
        self.metrics = SinkTaskMetrics(spec.connector, spec.task)
        # the abstract base is what the loaded class is checked against (issubclass), never instantiated
        self.task: SinkTask = instantiate_task(spec, SinkTask)  # type: ignore[type-abstract]
        self.pipeline = SinkRecordPipeline(pipeline_config(self.connector.originals, self.task, self.log))
        #: errors.retry.* and errors.tolerance for the converter and transformation stages.
        self.retry = RetryWithTolerance(
            ToleranceSettings.parse(self.connector.originals),
            stopping=lambda: self.spec.control.directive() is Directive.STOP,
            metrics=self.metrics,
        )
        self.context = SinkTaskContext(
            configs=dict(spec.task_config),
            consumer_group=connector.consumer_group,
            file_allowed_dirs=worker.originals.get(FILE_ALLOWED_DIRS),
            metrics_registry=self.metrics.plugins.for_task(),
        )
        self.metrics.plugins.monitor_pipeline(
            self.pipeline.key_converter, self.pipeline.value_converter, self.pipeline.transforms
        )
        #: Partitions the connector assigned to this task itself; None: the consumer group decides.
        self.static_partitions: list[TopicPartition] | None = (
            decode_partitions(spec.task_config[ASSIGNED_PARTITIONS_CONFIG])
            if ASSIGNED_PARTITIONS_CONFIG in spec.task_config
            else None
        )
        self.consumer: Consumer | None = None
        #: Where partitions start and restart (KIP-320, auto.offset.reset); made with the consumer.
        self.restarts: PartitionRestarts | None = None
        #: Consumed messages to records and positions; made in start() with the dead letter queue.
        self.batches: SinkBatchConverter | None = None
        self.committer: OffsetCommitter | None = None
        #: Per partition, the position after the last record given to `put` (what may be committed).
        self.current: Offsets = {}
        self.committed: Offsets = {}
        self._retry: tuple[list[SinkRecord], Offsets] | None = None
        self._retry_at = 0.0
        self._paused_by_worker = False
        self._failed = False
        self._partitions_closed = False
        self._task_started = False
        #: Failed records' logging and dead letter queue (KIP-298/610); made in start().
        self.dead_letters: DeadLetterQueue | None = None
        #: Where the loop's wall time goes (logged when the task stops), see runtime/wall_time.py.
        self.wall = WallTime()
        #: Seconds from the runner's creation to the first and the last record consumed, and to the
        #: last commit that moved a position: the last minus the commit is how long the last records
        #: waited to be written (logged when the task stops).
        self.first_record_s: float | None = None
        self.last_record_s: float | None = None
        self.last_commit_s: float | None = None
        #: The last consume found nothing queued (the task got an empty `put`): the next one waits.
        self._drained = False
        #: Partitions with records the consumer stopped delivering are sought again (fetch_stall.py).
        self.fetch_stall = FetchStallWatch(self.log)
        #: Kafka's sink-record-lag-max, measured on this thread (consumer_lag.py).
        self.lag = ConsumerLag()

    # ----------------------------------------------------------------------------- template
    def run(self) -> TaskOutcome:
        state, trace = TaskState.STOPPED, None
        try:
            self.start()
            with frozen_heap():  # the start-up heap out of the cycle collector's way (see the module)
                self.loop()
            self.commit_offsets()
            self._close_partitions(self.context.assignment())
            self.log.info(
                "stopped after %s records; first record after %s, last after %s, last commit after %s; "
                "loop wall time %s",
                self.metrics.records_written,
                *(
                    "-" if s is None else f"{s:.2f}s"
                    for s in (self.first_record_s, self.last_record_s, self.last_commit_s)
                ),
                self.wall.summary(),
            )
        except GenerationSuperseded as exc:
            state = TaskState.SUPERSEDED
            self.log.info("not starting: %s", exc)
        except Exception as exc:
            self._failed = True
            if replaced_by_design(self.spec, exc):
                state = TaskState.SUPERSEDED
                self.log.info("ending: a newer instance of this task took over and fenced this one (%s)", exc)
            else:
                state, trace = TaskState.FAILED, failure_trace(exc)
                from eosconnect.storage.acls import sink_task_authorization_hint

                hint = sink_task_authorization_hint(
                    trace, self.worker.originals, self.spec.connector, self.connector.originals
                )
                if hint:
                    trace = f"{hint}\n\n{trace}"
                self.log.error("failed: %s%s", failure_message(exc), f" ({hint})" if hint else "")
        finally:
            self._shutdown()
        return TaskOutcome(self.spec.connector, self.spec.task, state, trace, self.metrics.snapshot())

    def start(self) -> None:
        self.spec.control.attach(self.metrics)  # the heartbeat carries the metrics to the worker
        coordinator = self.spec.coordinator
        if coordinator is not None:
            # KIP-618 start-up, steps 1 and 2: zombies of older generations fenced, ours the latest.
            coordinator.fence_zombies(self.spec.connector, self.spec.generation)
            coordinator.ensure_latest_generation(self.spec.connector, self.spec.generation)
            transactional_id = task_transactional_id(
                self.worker.group_id, self.spec.connector, self.spec.task
            )
            self.context.transactional_id = transactional_id
            self.context.writer_factory = sink_writer_factory(
                transactional_id, self.context.consumer_group, self.spec.control.leader
            )
        consumer_config, offset_reset = sink_consumer_settings(self.worker, self.connector)
        self.consumer = Consumer(consumer_config)
        self.restarts = self.partition_restarts(self.consumer, consumer_config, offset_reset)
        self.dead_letters = for_sink_task(  # KIP-298/610, see runtime/dead_letter.py
            self.worker.originals,
            self.connector.originals,
            self.spec.connector,
            self.spec.task,
            self.log,
            self.metrics,
        )
        self.batches = SinkBatchConverter(
            self.task_id,
            self.pipeline,
            self.retry,
            self.dead_letters,
            self.connector.originals,
            self.metrics,
            self._consumer_error,
            self.log,
        )
        if self.connector.errors_tolerance is ErrorsTolerance.ALL:
            self.context.errant_reporter = self.dead_letters.reporter(type(self.task).__qualname__)
        self.task.initialize(self.context)
        # the worker's database.allowed.hosts of now, not of when the config was stored
        check_database_host({**self.connector.originals, **self.spec.task_config}, self.worker.originals)
        self.task.start(dict(self.spec.task_config))  # step 4: a transactional task inits its producer
        self.committer = self.make_committer(self.consumer)  # after start: see SinkTask.stores_offsets
        self._task_started = True
        if coordinator is not None:  # step 5: still the latest after the (possibly slow) start
            coordinator.ensure_latest_generation(self.spec.connector, self.spec.generation)
        if self.static_partitions is not None:
            self._assign_static(self.static_partitions)
            where = f"assigned partitions {[str(tp) for tp in self.static_partitions]}"
        else:
            self.consumer.subscribe(
                self.connector.subscription(),
                on_assign=self._on_assign,
                on_revoke=self._on_revoke,
                on_lost=self._on_lost,
            )
            where = f"consumer group {self.connector.consumer_group} on {self.connector.subscription()}"
        self.metrics.mark_started()
        self.log.info("started %s in %s", type(self.task).__name__, where)

    def partition_restarts(
        self, consumer: Consumer, consumer_config: ClientConfig, offset_reset: OffsetReset
    ) -> PartitionRestarts:
        """Start positions and restarts for this task's consumer, with the user's auto.offset.reset
        (the consumer itself runs with `error`, see runtime/truncation.py)."""
        repair = TruncationRepair(
            task_id=self.task_id,
            connector=self.spec.connector,
            policy=self.connector.log_truncation_policy,
            offset_reset=offset_reset,
            metrics=self.metrics,
            log=self.log,
        )
        return PartitionRestarts(
            consumer,
            consumer_config,
            repair,
            static=self.static_partitions is not None,
            moved=self._moved,
            log=self.log,
        )

    def _moved(self, tp: TopicPartition, position: OffsetAndMetadata) -> None:
        """The consumer continues an assigned partition elsewhere (a truncation's divergence
        offset): the next commit moves the group there."""
        if tp in self.context.assigned:
            self.current[tp] = position

    def make_committer(self, consumer: Consumer) -> OffsetCommitter:
        """The commit strategy: the source group's offsets are the truth unless the task commits
        its positions into its own transactions (KIP-656), where they are only information."""
        if self.context.transactional_id is not None or self.task.stores_offsets:
            return InformationalGroupCommitter(consumer, self.log)
        return ConsumerGroupCommitter(consumer)

    def loop(self) -> None:
        flush_interval_s = self.worker.offset_flush_interval_ms / 1000
        next_commit = time.monotonic() + flush_interval_s
        while True:
            directive = self.spec.control.directive()
            if directive is Directive.STOP:
                return
            self._pause_for_worker(directive is Directive.PAUSE)
            if directive is Directive.RUN:
                self._deliver_next_batch()
                self._watch_fetching()
            else:
                self._poll_nothing()
                self.spec.control.confirm_paused()
            if self.restarts is not None and self.restarts.pending:
                self._restart_partitions()
            self._apply_context_requests()
            if self.context.commit_requested or time.monotonic() >= next_commit:
                self.context.commit_requested = False
                self.commit_offsets()
                # A rewind pre_commit() asked for (an exactly-once sink that aborted its transaction
                # rewinds to its first records) applies before the next poll, never after it.
                self._apply_context_requests()
                next_commit = time.monotonic() + flush_interval_s
            if self.wall.due():
                self.log.debug("loop wall time %s", self.wall.summary())

    # ----------------------------------------------------------------------------- delivery
    def _deliver_next_batch(self) -> None:
        if self._retry is not None:
            if time.monotonic() < self._retry_at:
                self._poll_nothing()  # keeps the group membership alive while we wait
                return
            records, positions = self._retry
        else:
            assert self.consumer is not None
            polled = time.perf_counter()
            messages = self._consume()
            self.metrics.record_lag(self.lag.measure(self.consumer, self.context.assigned))
            converting = time.perf_counter()
            self.wall.add("poll" if messages else "poll (nothing)", converting - polled)
            if messages:
                self.last_record_s = converting - self.wall.started
                if self.first_record_s is None:
                    self.first_record_s = self.last_record_s
            assert self.batches is not None
            records, positions = self.batches.convert(messages)
            if self.dead_letters is not None:
                self.dead_letters.remember(messages)
            self.wall.add("convert", time.perf_counter() - converting)
        putting = time.monotonic()
        try:
            with self.wall.phase("put"):
                self.task.put(records)
        except RetriableException as exc:
            self.log.warning("put() asked for a retry (%s); retrying in %.1fs", exc, RETRY_BACKOFF_S)
            self._retry, self._retry_at = (records, positions), time.monotonic() + RETRY_BACKOFF_S
            self._pause_assigned(True)
            return
        if self._retry is not None:
            self._retry = None
            self._pause_assigned(False)
        self.metrics.record_batch(time.monotonic() - putting)
        self.metrics.record_write(len(records))
        self.current.update(positions)

    def _watch_fetching(self) -> None:
        """Seek again the partitions the consumer stopped delivering (fetch_stall.py): those the task
        reads (assigned, not paused, not waiting for a restart) at the position it expects next."""
        if self._retry is not None or self._paused_by_worker or self.consumer is None:
            return
        idle_s = time.perf_counter() - self.wall.started - (self.last_record_s or 0.0)

        def positions() -> dict[TopicPartition, int]:  # only when the watch is due, not every batch
            restarting = self.restarts.pending.keys() if self.restarts is not None else set()
            reading = self.context.assigned - self.context.paused - restarting
            return {tp: self.current[tp].offset for tp in reading if tp in self.current}

        self.fetch_stall.check(self.consumer, idle_s, positions)

    def _consume(self) -> list[Any]:
        """What the consumer has queued (up to `MAX_BATCH`), without waiting; when nothing is, an
        empty batch first (so that `put([])` tells the task it caught up, e.g. to flush what it
        buffered, at once) and on the next call a wait of up to `POLL_TIMEOUT_S` for the first record.

        As Java's `KafkaConsumer.poll`, which returns as soon as it has records: librdkafka's
        `consume(n, timeout)` waits the whole timeout unless n records arrive, so a stream's last
        partial batch (or every batch of a slow stream) would wait `POLL_TIMEOUT_S` in it."""
        assert self.consumer is not None
        messages = self.consumer.consume(num_messages=MAX_BATCH, timeout=0)
        if not messages and self._drained:
            messages = self.consumer.consume(num_messages=1, timeout=POLL_TIMEOUT_S)
            if messages:
                messages += self.consumer.consume(num_messages=MAX_BATCH - 1, timeout=0)
        self._drained = not messages
        return messages

    def _consumer_error(self, message: Any) -> OffsetAndMetadata | None:
        """Handle an error the consumer returned; the partition's new position if it was moved."""
        error: KafkaError = message.error()
        if error.code() == KafkaError._PARTITION_EOF:
            return None
        if error.code() == KafkaError._AUTO_OFFSET_RESET:
            assert self.restarts is not None
            return self.restarts.stopped(message.topic(), message.partition(), error.str())
        if error.fatal():
            raise KafkaException(error)
        self.log.warning("consumer error: %s", error.str())
        return None

    # ----------------------------------------------------------------------------- resets, truncation
    def _restart_partitions(self) -> None:
        """Start the partitions librdkafka stopped again (`PartitionRestarts.restart`), then apply
        the pauses again: a new assignment fetches."""
        assert self.restarts is not None and self.consumer is not None
        if not self.restarts.restart():
            return
        if self._paused_by_worker or self._retry is not None:
            self._pause_assigned(True)
        held = [kafka_tp(tp) for tp in self.context.paused & self.context.assigned]
        if held:
            self.consumer.pause(held)

    def _poll_nothing(self) -> None:
        """Serve the consumer (rebalances, heartbeats) without taking records: all are paused. It
        waits as long as an idle consume does (a resume is seen within `POLL_TIMEOUT_S`): a fifth of
        it made a paused sink cost more CPU than a running idle one."""
        assert self.consumer is not None
        self._pause_assigned(True)
        for message in self.consumer.consume(num_messages=1, timeout=POLL_TIMEOUT_S):
            if message.error() is not None:
                self._consumer_error(message)  # a moved partition's position is in self.current
            else:  # fetched before the pause took effect: read it again after resuming
                topic, partition, offset = message.topic(), message.partition(), message.offset()
                assert topic is not None and partition is not None and offset is not None  # a record
                self.consumer.seek(KafkaTopicPartition(topic, partition, offset))

    # ----------------------------------------------------------------------------- commits
    def commit_offsets(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """pre_commit() with the current positions, then commit what it returned (sync)."""
        if self.committer is None:
            return
        wanted = None if partitions is None else set(partitions)
        current = {tp: om for tp, om in self.current.items() if wanted is None or tp in wanted}
        if not current:
            return
        started = time.monotonic()
        if self.dead_letters is not None:
            self.dead_letters.flush()  # skipped records' positions only once their dead letters are written
        with self.wall.phase("pre_commit"):
            returned = dict(self.task.pre_commit(dict(current)) or {})
        if self.dead_letters is not None:
            self.dead_letters.committed(current)  # what pre_commit reported (KIP-610) is written first
        assigned = self.context.assigned
        unassigned = [str(tp) for tp in returned if tp not in assigned]
        if unassigned:
            self.log.warning("pre_commit() returned unassigned partitions %s; ignoring them", unassigned[:5])
        to_commit = {tp: om for tp, om in returned.items() if tp in assigned and self.committed.get(tp) != om}
        if not to_commit:
            return
        with self.wall.phase("group offsets commit"):
            self.committer.commit(to_commit)
        self.committed.update(to_commit)
        self.last_commit_s = time.perf_counter() - self.wall.started
        self.metrics.record_offset_commit(time.monotonic() - started)
        self.log.debug("committed %s", {str(tp): om.offset for tp, om in to_commit.items()})

    # ----------------------------------------------------------------------------- rebalances
    def _assign_static(self, partitions: list[TopicPartition]) -> None:
        """Static assignment: the same open()/rewind steps as a group assignment, then `assign`.

        Partitions the task did not rewind start from the consumer group's committed offset on the
        consumer's cluster, else from `auto.offset.reset` (librdkafka's OFFSET_INVALID).
        """
        assert self.consumer is not None
        load_leaders(self.consumer, {tp.topic for tp in partitions})  # see assign_promptly
        self._on_assign(self.consumer, [kafka_tp(tp) for tp in partitions])

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        assigned = [TopicPartition(p.topic, p.partition) for p in partitions]
        self.context.assigned.update(assigned)
        self.log.info("assigned %s", [str(tp) for tp in assigned])
        self.task.open(assigned)
        assert self.restarts is not None
        consumer.assign(self.restarts.start_positions(assigned, self.context.requested_position))
        if self._paused_by_worker or self._retry is not None:
            consumer.pause(partitions)

    def _on_revoke(self, _consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        revoked = [TopicPartition(p.topic, p.partition) for p in partitions]
        if not self._failed and not self._partitions_closed:
            self.commit_offsets(revoked)
        self._close_partitions(revoked)

    def _on_lost(self, _consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        """Another member owns them already: committing would be wrong, just close them."""
        self._close_partitions([TopicPartition(p.topic, p.partition) for p in partitions])

    def _close_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        closing = [tp for tp in partitions if tp in self.context.assigned]
        if not closing or self._partitions_closed:
            return
        self.log.info("closing %s", [str(tp) for tp in closing])
        self.context.assigned.difference_update(closing)
        for tp in closing:
            self.current.pop(tp, None)
            self.committed.pop(tp, None)
            if self.restarts is not None:
                self.restarts.forget(tp)
        if self._retry is not None:
            records, positions = self._retry
            kept = [r for r in records if r.topic_partition not in closing]
            self._retry = (kept, {tp: om for tp, om in positions.items() if tp not in closing})
        self.task.close(closing)

    # ----------------------------------------------------------------------------- pausing
    def _pause_for_worker(self, paused: bool) -> None:
        if paused != self._paused_by_worker:
            self._paused_by_worker = paused
            self.log.info("paused" if paused else "resumed")
            if not paused and self._retry is None:
                self._pause_assigned(False)

    def _pause_assigned(self, pause: bool) -> None:
        """Pause or resume every assigned partition (resuming keeps those the task paused)."""
        assert self.consumer is not None
        assignment = self.consumer.assignment()
        if pause:
            if assignment:
                self.consumer.pause(assignment)
            return
        kept = self.context.paused
        resumed = [p for p in assignment if TopicPartition(p.topic, p.partition) not in kept]
        if resumed:
            self.consumer.resume(resumed)

    def _apply_context_requests(self) -> None:
        """Rewinds, pauses and resumes the task asked for through its context."""
        assert self.consumer is not None
        context = self.context
        if context.requested_offsets:
            for tp in list(context.requested_offsets):
                position = context.requested_position(tp)
                assert position is not None
                if tp in context.assigned:
                    # with a leader epoch, librdkafka checks the position (a truncation is reported)
                    self.consumer.seek(kafka_offsets({tp: position})[0])
                    self.current[tp] = position
                else:
                    self.log.warning("offset(): %s is not assigned to this task; ignoring the rewind", tp)
            context.requested_epochs.clear()
        if context.resumed:
            resumed = [
                KafkaTopicPartition(tp.topic, tp.partition) for tp in context.resumed & context.assigned
            ]
            if resumed and not self._paused_by_worker and self._retry is None:
                self.consumer.resume(resumed)
            context.resumed.clear()
        if context.paused:
            paused = [kafka_tp(tp) for tp in context.paused & context.assigned]
            if paused:
                self.consumer.pause(paused)

    # ----------------------------------------------------------------------------- shutdown
    def _shutdown(self) -> None:
        if self._failed:
            try:
                self._close_partitions(self.context.assignment())
            except Exception:
                self.log.exception("SinkTask.close() raised")
        self._partitions_closed = True  # the consumer's own revocation on close() has nothing to do
        if self._task_started:
            try:
                self.task.stop()
            except Exception:
                self.log.exception("SinkTask.stop() raised")
        try:
            self.pipeline.close()
            self.metrics.plugins.close()
            if self.dead_letters is not None:
                self.dead_letters.close()
        finally:
            if self.consumer is not None:
                try:
                    self.consumer.close()
                except Exception as exc:
                    self.log.warning("closing the consumer failed: %s", exc)


def task_topics(spec: TaskSpec) -> dict[str, str]:
    """The connector config, with the topic list its connector resolved for this task, if it did:
    a task config with `topics` and no `topics.regex` (MirrorSink matches MM2's topic patterns
    with Python regexes, which librdkafka's subscription dialect cannot express) wins."""
    config = dict(spec.connector_config)
    topics = spec.task_config.get("topics")
    if topics and not spec.task_config.get("topics.regex"):
        config.pop("topics.regex", None)
        config["topics"] = topics
    return config


def run_sink_task(spec: TaskSpec) -> TaskOutcome:
    """Parse the configs and run the sink task; never raises."""
    try:
        runner = SinkTaskRunner(
            spec, WorkerConfig.parse(spec.worker_config), SinkConnectorConfig.parse(task_topics(spec))
        )
    except Exception:
        log.exception("[%s-%s] could not be created", spec.connector, spec.task)
        return TaskOutcome(spec.connector, spec.task, TaskState.FAILED, traceback.format_exc())
    return runner.run()
