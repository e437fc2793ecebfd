"""The sink task loop a Spark task runs: consume, convert, `put`, commit; at least once.

Kafka Connect's sink model (DESIGN.md section 7): the task's consumer joins the group
`connect-<connector>` (read_committed, no auto-commit) and subscribes to `topics`/`topics.regex`.
Partitions assigned to it are `open`ed on the task, revoked ones have their offsets committed and
are then `close`d. Batches go through the converters (bytes to values) and transformations to
`put`; every `offset.flush.interval.ms` (or when the task asks) the runtime calls `pre_commit` with
the positions after everything `put` so far and commits exactly what it returns, synchronously.

Why at least once: offsets are committed only after `pre_commit` (by default `flush`) made the
data durable, so nothing acknowledged is lost; records `put` after the last commit are delivered
again after a crash. Committing is a strategy object (`OffsetCommitter`) so that KIP-656's
exactly-once sink can reuse this loop and commit the offsets inside a producer transaction.

Two opt-ins serve sinks that deliver exactly once into Kafka (KIP-656, see api/sink.py): a task
config with `task.assigned.partitions` gets those partitions by `assign` (no group rebalances, still
`open`ed and `close`d), and a connector whose `exactly_once_delivery` holds (given a `coordinator`
by the worker) goes through KIP-618's start-up first: the leader fences zombies, the generation must
still be the latest before and after the task's `start` (which creates its transactional producer
with the id in its context), else the task quietly does not start (SUPERSEDED).

A record the converters or transformations reject fails the task naming its topic, partition
and offset (`errors.tolerance=none`, Kafka Connect's default); with `errors.tolerance=all` it is
skipped with a warning and its offset committed like any other.
"""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.context import SinkTaskContext
from eosconnect.api.errors import ConnectException, RetriableException
from eosconnect.api.records import OffsetAndMetadata, SinkRecord, TopicPartition
from eosconnect.api.sink import ASSIGNED_PARTITIONS_CONFIG, SinkTask, decode_partitions
from eosconnect.cluster.fencing import task_transactional_id
from eosconnect.runtime.config import ErrorsTolerance, SinkConnectorConfig, WorkerConfig
from eosconnect.runtime.control import Directive
from eosconnect.runtime.metrics import SinkTaskMetrics
from eosconnect.runtime.pipeline import SinkRecordPipeline, pipeline_config
from eosconnect.runtime.startup import GenerationSuperseded
from eosconnect.runtime.task import TaskLogAdapter, TaskOutcome, TaskSpec, TaskState, instantiate_task
from eosconnect.storage.clients import ClientConfig, client_config

log = logging.getLogger(__name__)

#: Most records handed to one `put` (the Java consumer's max.poll.records default).
MAX_BATCH = 500
#: How long one consume call waits for records; bounds how late the loop sees a stop directive.
POLL_TIMEOUT_S = 0.5
#: How long to wait before giving a batch to `put` again after a RetriableException.
RETRY_BACKOFF_S = 1.0

Offsets = dict[TopicPartition, OffsetAndMetadata]


class OffsetCommitter(Protocol):
    """How a sink runner makes consumed positions durable (the seam for KIP-656's transactions)."""

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Commit these positions (next offset to read per partition) or raise."""
        ...


@dataclass
class ConsumerGroupCommitter:
    """At-least-once: a synchronous commit of the consumer group's offsets on the source cluster."""

    consumer: Consumer

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        if offsets:
            self.consumer.commit(offsets=kafka_offsets(offsets), asynchronous=False)


def kafka_offsets(offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> list[KafkaTopicPartition]:
    result = []
    for tp, om in sorted(offsets.items()):
        extra: dict[str, Any] = {"metadata": om.metadata} if om.metadata else {}
        if om.leader_epoch is not None:
            extra["leader_epoch"] = om.leader_epoch
        result.append(KafkaTopicPartition(tp.topic, tp.partition, om.offset, **extra))
    return result


def _kafka_tp(tp: TopicPartition) -> KafkaTopicPartition:
    return KafkaTopicPartition(tp.topic, tp.partition)


def sink_consumer_config(worker: WorkerConfig, connector: SinkConnectorConfig) -> ClientConfig:
    """The task consumer's settings: the worker's `consumer.*`, the connector's
    `consumer.override.*`, then what the runtime needs (warning when that overrides the user)."""
    config = client_config("consumer", worker.originals, connector.originals)
    config.setdefault("auto.offset.reset", "earliest")  # Kafka Connect's default for sink consumers
    config.force(
        "group.id", connector.consumer_group, "a sink connector's tasks share the group connect-<name>"
    )
    config.force("enable.auto.commit", False, "the sink runtime commits offsets after pre_commit()")
    config.force("isolation.level", "read_committed", "sinks deliver only records of committed transactions")
    return config.validate()


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
        self.task: SinkTask = instantiate_task(spec, SinkTask)
        self.pipeline = SinkRecordPipeline(pipeline_config(self.connector.originals, self.task, self.log))
        self.context = SinkTaskContext(
            configs=dict(spec.task_config), consumer_group=connector.consumer_group
        )
        #: Partitions the connector assigned to this task itself; None: the consumer group decides.
        self.static_partitions: list[TopicPartition] | None = (
            decode_partitions(spec.task_config[ASSIGNED_PARTITIONS_CONFIG])
            if ASSIGNED_PARTITIONS_CONFIG in spec.task_config
            else None
        )
        self.consumer: Consumer | None = None
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

    # ----------------------------------------------------------------------------- template
    def run(self) -> TaskOutcome:
        state, trace = TaskState.STOPPED, None
        try:
            self.start()
            self.loop()
            self.commit_offsets()
            self._close_partitions(self.context.assignment())
            self.log.info("stopped after %s records", self.metrics.records_written)
        except GenerationSuperseded as exc:
            state = TaskState.SUPERSEDED
            self.log.info("not starting: %s", exc)
        except Exception as exc:
            self._failed = True
            state, trace = TaskState.FAILED, traceback.format_exc()
            self.log.error("failed: %s", exc)
        finally:
            self._shutdown()
        return TaskOutcome(self.spec.connector, self.spec.task, state, trace, self.metrics.snapshot())

    def start(self) -> None:
        attach = getattr(self.spec.control, "attach", None)
        if attach is not None:
            attach(self.metrics)  # the heartbeat carries the metrics to the worker
        coordinator = self.spec.coordinator
        if coordinator is not None:
            # KIP-618 start-up, steps 1 and 2: zombies of older generations fenced, ours the latest.
            coordinator.fence_zombies(self.spec.connector, self.spec.generation)
            coordinator.ensure_latest_generation(self.spec.connector, self.spec.generation)
            self.context.transactional_id = task_transactional_id(
                self.worker.group_id, self.spec.connector, self.spec.task
            )
        self.consumer = Consumer(sink_consumer_config(self.worker, self.connector))
        self.committer = self.make_committer(self.consumer)
        self.task.initialize(self.context)
        self.task.start(dict(self.spec.task_config))  # step 4: a transactional task inits its producer
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

    def make_committer(self, consumer: Consumer) -> OffsetCommitter:
        """The commit strategy; KIP-656's exactly-once sink returns a transactional one."""
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
            else:
                self._poll_nothing()
            self._apply_context_requests()
            if self.context.commit_requested or time.monotonic() >= next_commit:
                self.context.commit_requested = False
                self.commit_offsets()
                next_commit = time.monotonic() + flush_interval_s

    # ----------------------------------------------------------------------------- delivery
    def _deliver_next_batch(self) -> None:
        if self._retry is not None:
            if time.monotonic() < self._retry_at:
                self._poll_nothing()  # keeps the group membership alive while we wait
                return
            records, positions = self._retry
        else:
            assert self.consumer is not None
            messages = self.consumer.consume(num_messages=MAX_BATCH, timeout=POLL_TIMEOUT_S)
            records, positions = self._convert(messages)
        try:
            self.task.put(records)
        except RetriableException as exc:
            self.log.warning("put() asked for a retry (%s); retrying in %.1fs", exc, RETRY_BACKOFF_S)
            self._retry, self._retry_at = (records, positions), time.monotonic() + RETRY_BACKOFF_S
            self._pause_assigned(True)
            return
        if self._retry is not None:
            self._retry = None
            self._pause_assigned(False)
        self.metrics.record_write(len(records))
        self.current.update(positions)

    def _convert(self, messages: list[Any]) -> tuple[list[SinkRecord], Offsets]:
        """Records for `put` and, per partition, the position after the batch's last message.

        Counters and positions are gathered per batch: a lock and two objects per record would be
        paid on the hot path for values only the last message of each partition decides."""
        records: list[SinkRecord] = []
        last: dict[tuple[str, int], tuple[int, int | None]] = {}
        polled = filtered = 0
        for message in messages:
            error = message.error()
            if error is not None:
                self._consumer_error(error)
                continue
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            polled += 1
            last[(topic, partition)] = (offset, message.leader_epoch())
            try:
                record = self.pipeline.convert(message)
            except Exception as exc:
                where = f"topic {topic!r} partition {partition} offset {offset}"
                if self.connector.errors_tolerance is not ErrorsTolerance.ALL:
                    raise ConnectException(
                        f"{self.task_id}: the record at {where} could not be converted or transformed: "
                        f"{exc}. Fix the data or the key.converter/value.converter/transforms settings, or "
                        "set errors.tolerance=all to skip such records (they are then logged and lost)."
                    ) from exc
                self.log.warning("skipping the record at %s (errors.tolerance=all): %s", where, exc)
                record = None
            if record is None:
                filtered += 1
                continue
            records.append(record)
        self.metrics.record_poll(polled)
        self.metrics.record_filtered(filtered)
        self.metrics.topics.update(topic for topic, _ in last)
        positions: Offsets = {
            TopicPartition(topic, partition): OffsetAndMetadata(
                offset + 1, leader_epoch=epoch if epoch is not None and epoch >= 0 else None
            )
            for (topic, partition), (offset, epoch) in last.items()
        }
        return records, positions

    def _consumer_error(self, error: KafkaError) -> None:
        if error.code() == KafkaError._PARTITION_EOF:
            return
        if error.fatal():
            raise KafkaException(error)
        self.log.warning("consumer error: %s", error.str())

    def _poll_nothing(self) -> None:
        """Serve the consumer (rebalances, heartbeats) without taking records: all are paused."""
        assert self.consumer is not None
        self._pause_assigned(True)
        for message in self.consumer.consume(num_messages=1, timeout=POLL_TIMEOUT_S / 5):
            if message.error() is not None:
                self._consumer_error(message.error())
            else:  # fetched before the pause took effect: read it again after resuming
                self.consumer.seek(
                    KafkaTopicPartition(message.topic(), message.partition(), message.offset())
                )

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
        returned = dict(self.task.pre_commit(dict(current)) or {})
        assigned = self.context.assigned
        unassigned = [str(tp) for tp in returned if tp not in assigned]
        if unassigned:
            self.log.warning("pre_commit() returned unassigned partitions %s; ignoring them", unassigned[:5])
        to_commit = {tp: om for tp, om in returned.items() if tp in assigned and self.committed.get(tp) != om}
        if not to_commit:
            return
        self.committer.commit(to_commit)
        self.committed.update(to_commit)
        self.metrics.record_offset_commit(time.monotonic() - started)
        self.log.debug("committed %s", {str(tp): om.offset for tp, om in to_commit.items()})

    # ----------------------------------------------------------------------------- rebalances
    def _assign_static(self, partitions: list[TopicPartition]) -> None:
        """Static assignment: the same open()/rewind steps as a group assignment, then `assign`.

        Partitions the task did not rewind start from the consumer group's committed offset on the
        consumer's cluster, else from `auto.offset.reset` (librdkafka's OFFSET_INVALID).
        """
        assert self.consumer is not None
        self._on_assign(self.consumer, [_kafka_tp(tp) for tp in partitions])

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        assigned = [TopicPartition(p.topic, p.partition) for p in partitions]
        self.context.assigned.update(assigned)
        self.log.info("assigned %s", [str(tp) for tp in assigned])
        self.task.open(assigned)
        for p in partitions:  # rewinds the task asked for in open()
            rewind = self.context.requested_offsets.pop(TopicPartition(p.topic, p.partition), None)
            if rewind is not None:
                p.offset = rewind
        consumer.assign(partitions)
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
            for tp, offset in list(context.requested_offsets.items()):
                if tp in context.assigned:
                    self.consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, offset))
                    self.current[tp] = OffsetAndMetadata(offset)
                else:
                    self.log.warning("offset(): %s is not assigned to this task; ignoring the rewind", tp)
            context.requested_offsets.clear()
        if context.resumed:
            resumed = [
                KafkaTopicPartition(tp.topic, tp.partition) for tp in context.resumed & context.assigned
            ]
            if resumed and not self._paused_by_worker and self._retry is None:
                self.consumer.resume(resumed)
            context.resumed.clear()
        if context.paused:
            paused = [_kafka_tp(tp) for tp in context.paused & context.assigned]
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
        finally:
            if self.consumer is not None:
                try:
                    self.consumer.close()
                except Exception as exc:
                    self.log.warning("closing the consumer failed: %s", exc)


def run_sink_task(spec: TaskSpec) -> TaskOutcome:
    """Parse the configs and run the sink task; never raises."""
    try:
        runner = SinkTaskRunner(
            spec, WorkerConfig.parse(spec.worker_config), SinkConnectorConfig.parse(spec.connector_config)
        )
    except Exception:
        log.exception("[%s-%s] could not be created", spec.connector, spec.task)
        return TaskOutcome(spec.connector, spec.task, TaskState.FAILED, traceback.format_exc())
    return runner.run()
