"""What every source task runner does, whatever its delivery guarantee.

A runner lives inside one Spark task. It builds the connector's `SourceTask`, polls it until its
`TaskControl` says stop, passes every record through the pipeline (transformations, converters)
to a producer, and commits source offsets the way its subclass defines: in the same transaction as
the records (exactly-once) or after the producer acknowledged them (at-least-once).
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, cast

from confluent_kafka import KafkaException, Producer

from eosconnect.api.batch import SourceBatch, expand
from eosconnect.api.errors import ConnectException, RetriableException
from eosconnect.api.records import SourceOffset, SourcePartition, SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.policies.database_hosts import check_database_host
from eosconnect.policies.file_access import FILE_ALLOWED_DIRS
from eosconnect.runtime.config import SourceConnectorConfig
from eosconnect.runtime.control import Directive
from eosconnect.runtime.errors import OVERSIZED_CODES, send_error_message
from eosconnect.runtime.failure import failure_message, failure_trace
from eosconnect.runtime.metrics import TaskMetrics
from eosconnect.runtime.pipeline import OutgoingColumns, OutgoingRecord, RecordPipeline, pipeline_config
from eosconnect.runtime.retry_tolerance import RetryWithTolerance, ToleranceSettings
from eosconnect.runtime.startup import GenerationSuperseded
from eosconnect.runtime.task import TaskLogAdapter, TaskOutcome, TaskSpec, TaskState, instantiate_task
from eosconnect.storage.offsets import (
    ConnectorOffsetView,
    GlobalOffsetCopier,
    OffsetsTopicPlacement,
    offsets_topic_for,
)
from eosconnect.storage.producing import produce_rows, produce_waiting
from eosconnect.worker_config import WorkerConfig

log = logging.getLogger(__name__)

#: The shortest turn of an idle loop (poll returned nothing), so a task without its own wait cannot
#: spin; a poll that waited this long itself is not slept after (one wake-up per idle poll, not two).
IDLE_SLEEP_S = 0.01
#: Longest wait of a paused task between two looks at its directive (a change wakes it sooner).
PAUSE_WAIT_S = 1.0

#: Per source partition, the offset to commit; None deletes the partition's offset (a tombstone).
Offsets = dict[SourcePartition, SourceOffset | None]


class RestartFromStoredOffsets(Exception):
    """The runner's `SourceTask` must start again from the stored offsets: what it handed over is
    no longer what comes next (another instance of the task committed meanwhile, see
    `ReplayRecovery.ensure_not_overtaken` in runtime/transactions/replay.py). A `SourceTask` has no
    seek, so `run` stops it and starts a new instance of its class; the runner, its producer and
    fencing stay."""


def offset_of(record: SourceRecord) -> tuple[SourcePartition, SourceOffset | None]:
    offset = record.source_offset
    return SourcePartition.of(record.source_partition), None if offset is None else SourceOffset.of(offset)


class SourceTaskRunner(ABC):
    def __init__(self, spec: TaskSpec, worker: WorkerConfig, connector: SourceConnectorConfig) -> None:
        self.spec = spec
        self.worker = worker
        self.connector = connector
        self.task_id = f"{spec.connector}-{spec.task}"
        self.log = TaskLogAdapter(log, {"id": self.task_id})
        self._retriable_in_a_row = 0  # poll()s in a row that raised RetriableException
        self.metrics = TaskMetrics(spec.connector, spec.task)
        self.placement: OffsetsTopicPlacement = offsets_topic_for(
            spec.connector, connector.originals, worker.originals
        )
        self.task: SourceTask = instantiate_task(spec, SourceTask)  # type: ignore[type-abstract]
        # errors.retry.* and errors.tolerance for the transformation and converter stages.
        tolerance = RetryWithTolerance(
            ToleranceSettings.parse(connector.originals),
            stopping=lambda: spec.control.directive() is Directive.STOP,
            metrics=self.metrics,
        )
        self.pipeline = RecordPipeline(
            pipeline_config(connector.originals, self.task, self.log),
            frozenset({self.placement.topic}),
            self.log,
            self.task_id,
            retry=tolerance,
        )
        self.metrics.plugins.monitor_pipeline(
            self.pipeline.key_converter, self.pipeline.value_converter, self.pipeline.transforms
        )
        self.offset_view: ConnectorOffsetView | None = None
        self.copier: GlobalOffsetCopier | None = None
        self._task_started = False

    # ----------------------------------------------------------------------------- template
    def run(self) -> TaskOutcome:
        state, trace = TaskState.STOPPED, None
        try:
            self.prepare()
            self.start_task()
            while True:
                try:
                    self.loop()
                    break
                except RestartFromStoredOffsets as restart:
                    self.restart_task(str(restart))
            self.log.info("stopped after %s records", self.metrics.records_written)
        except GenerationSuperseded as exc:
            state = TaskState.SUPERSEDED
            self.log.info("not starting: %s", exc)
        except Exception as exc:
            from eosconnect.runtime.supersession import replaced_by_design

            if replaced_by_design(self.spec, exc):
                state = TaskState.SUPERSEDED
                self.log.info("ending: a newer instance of this task took over and fenced this one (%s)", exc)
            else:
                state, trace = TaskState.FAILED, failure_trace(exc)
                from eosconnect.storage.acls import task_authorization_hint

                hint = task_authorization_hint(
                    trace,
                    self.worker.originals,
                    self.spec.connector,
                    self.connector.originals,
                    self.spec.task,
                )
                if hint:
                    trace = f"{hint}\n\n{trace}"
                self.log.error("failed: %s%s", failure_message(exc), f" ({hint})" if hint else "")
                self.on_failure()
        finally:
            self._shutdown()
        return TaskOutcome(self.spec.connector, self.spec.task, state, trace, self.metrics.snapshot())

    @abstractmethod
    def prepare(self) -> None:
        """Producer, offsets topic, fencing: whatever must exist before the task starts."""

    @abstractmethod
    def send_batch(self, batch: list[SourceRecord]) -> None:
        """Send one non-empty batch of records returned by `poll()`."""

    def send_columns(self, polled: Sequence[SourceRecord | SourceBatch]) -> None:
        """Send what `poll()` returned when it holds `SourceBatch`es. Runners with a columnar fast
        path override this; the default sends the batches record by record."""
        self.send_batch(expand(polled))

    def on_idle(self) -> None:  # noqa: B027 - optional hook
        """`poll()` returned nothing; a chance to commit on time."""

    def on_pause(self) -> None:  # noqa: B027 - optional hook
        """The task was paused; a chance to commit what is open."""

    @abstractmethod
    def on_stop(self) -> None:
        """The final commit before the task stops."""

    def on_failure(self) -> None:  # noqa: B027 - optional hook
        """The task failed: a chance to commit what is safe to commit (never raises)."""

    def forget_sent(self) -> None:  # noqa: B027 - optional hook
        """Before `restart_task`: drop whatever the runner keeps of what the stopped `SourceTask`
        handed over, and take the stored offsets as its own."""

    @abstractmethod
    def close_clients(self) -> None:
        """Release producers and background threads."""

    # ----------------------------------------------------------------------------- shared steps
    def start_task(self) -> None:
        from eosconnect.api.context import SourceTaskContext

        if self.offset_view is None:  # a runner's prepare() may have read them already
            self.offset_view = self.read_offsets()
        if self.placement.separate and self.copier is None:
            self.copier = GlobalOffsetCopier.for_placement(self.spec.connector, self.placement)
        context = SourceTaskContext(
            configs=dict(self.spec.task_config),
            offset_storage_reader=self.offset_view,
            transaction_context=self.transaction_context(),
            file_allowed_dirs=self.worker.originals.get(FILE_ALLOWED_DIRS),
            metrics_registry=self.metrics.plugins.for_task(),
        )
        self.spec.control.attach(self.metrics)  # the control's heartbeat carries them to the worker
        self.task.initialize(context)
        # the worker's database.allowed.hosts of now, not of when the config was stored
        check_database_host({**self.connector.originals, **self.spec.task_config}, self.worker.originals)
        self.task.start(dict(self.spec.task_config))
        self._task_started = True
        self.metrics.mark_started()
        self.log.info("started %s", type(self.task).__name__)

    def restart_task(self, why: str) -> None:
        """Stop the `SourceTask` and start a new instance of its class from the stored offsets
        (`RestartFromStoredOffsets`), as a task restart over REST would, without one."""
        self.log.warning("%s; restarting %s from the stored offsets", why, type(self.task).__name__)
        self._stop_task()
        self.forget_sent()
        self.task = instantiate_task(self.spec, SourceTask)  # type: ignore[type-abstract]
        self.start_task()

    def read_offsets(self) -> ConnectorOffsetView:
        """The connector's committed offsets: read to the end of its offsets topic(s), or from the
        standalone worker's offsets file."""
        if self.spec.offset_store is not None:
            file_view = self.spec.offset_store.view(self.spec.connector)
            file_view.refresh()
            return file_view
        view = ConnectorOffsetView.create(self.spec.connector, self.placement, self.worker.originals)
        view.refresh(self.offsets_read_timeout_s())
        return view

    def offsets_read_timeout_s(self) -> float:
        """How long the start-up read may wait for the offsets topic's end (read_committed)."""
        return 60.0

    def transaction_context(self) -> Any:
        return None

    def loop(self) -> None:
        control = self.spec.control
        while True:
            directive = control.directive()
            if directive is Directive.STOP:
                break
            if directive is Directive.PAUSE:
                self.on_pause()
                control.confirm_paused()
                control.wait_while_paused(PAUSE_WAIT_S)
                continue
            polled_at = time.monotonic()
            try:
                polled = self.task.poll()
            except RetriableException as exc:  # as in Kafka Connect: nothing this time, poll again
                self.retriable_poll_error(exc)
                polled = None
            else:
                self._retriable_in_a_row = 0
                self.metrics.record_batch(time.monotonic() - polled_at)
            if polled:
                if type(polled) is list and all(type(r) is SourceRecord for r in polled):
                    records = cast(list[SourceRecord], polled)
                    self.metrics.record_poll(len(records))
                    self.send_batch(records)
                else:  # a SourceBatch, a list holding some, or something poll() must not return
                    items = checked_poll_result(self.task, polled)
                    self.metrics.record_poll(polled_count(items))
                    self.send_columns(items)
            else:
                self.on_idle()
                rest_s = IDLE_SLEEP_S - (time.monotonic() - polled_at)
                if rest_s > 0:
                    time.sleep(rest_s)
        self.on_stop()

    def retriable_poll_error(self, exc: RetriableException) -> None:
        """`poll()` raised `RetriableException`: logged at WARN (the first of a run of them, then
        every 100th), and the loop goes on as after an empty poll (None), as Kafka Connect's does."""
        self._retriable_in_a_row += 1
        if self._retriable_in_a_row % 100 == 1:
            self.log.warning(
                "poll() raised a RetriableException (%d in a row); polling again: %s",
                self._retriable_in_a_row,
                exc,
            )

    def updated_offsets(self, offsets: Offsets) -> Offsets:
        return apply_update_offsets(self.task, offsets, self.log)

    def produce(
        self, producer: Producer, outgoing: OutgoingRecord, record: SourceRecord, on_delivery: Any
    ) -> None:
        """Hand one record to the producer, waiting while its queue is full.

        A record too large to send fails the task with the fix in the message; other Kafka errors
        are raised as they are, for the runner to classify.
        """
        topic = outgoing.topic
        # The producer's own defaults stand for "none": partition -1 (partitioner), timestamp 0 (now).
        partition = -1 if outgoing.partition is None else outgoing.partition
        self.metrics.topics.add(topic)
        try:
            produce_waiting(
                producer,
                topic,
                outgoing.value,
                outgoing.key,
                partition,
                on_delivery=on_delivery,
                timestamp=outgoing.timestamp or 0,
                headers=outgoing.headers,
            )
        except KafkaException as exc:
            err = exc.args[0]
            if err.code() in OVERSIZED_CODES:
                where = f"source partition {dict(record.source_partition)}, offset {record.source_offset}"
                message = send_error_message(self.task_id, outgoing.topic, err, where)
                raise ConnectException(message) from exc
            raise

    def produce_columns(
        self,
        producer: Producer,
        columns: OutgoingColumns,
        on_delivery: Any = None,
        ends: tuple[Any, Any] | None = None,
    ) -> None:
        """Hand a converted `SourceBatch` to the producer in one tight loop (no object per record),
        waiting while its queue is full; errors as in `produce`. `ends` (first, last): delivery
        callbacks for the first and the last record only, instead of `on_delivery` for every one."""
        count = len(columns.values)
        if ends is None or count == 0:
            self._produce_range(producer, columns, 0, count, on_delivery)
            return
        first, last = ends
        if count == 1:

            def both(err: Any, msg: Any) -> None:
                first(err, msg)
                last(err, msg)

            self._produce_range(producer, columns, 0, 1, both)
            return
        self._produce_range(producer, columns, 0, 1, first)
        self._produce_range(producer, columns, 1, count - 1, None)
        self._produce_range(producer, columns, count - 1, count, last)

    def _produce_range(
        self, producer: Producer, columns: OutgoingColumns, start: int, count: int, on_delivery: Any
    ) -> None:
        """Records `start` to `count` (exclusive) of `columns`; see `produce_columns`."""
        topic, partition, keys, values, timestamps, headers = columns
        self.metrics.topics.add(topic)

        def failed(exc: KafkaException, i: int) -> Exception | None:
            err = exc.args[0]
            if err.code() not in OVERSIZED_CODES:
                return None  # raised as it is, for the runner to classify
            return ConnectException(
                send_error_message(self.task_id, topic, err, f"record {i} of a SourceBatch")
            )

        produce_rows(
            producer,
            topic,
            values,
            keys,
            partition,
            start=start,
            stop=count,
            on_delivery=on_delivery,
            timestamps=timestamps,
            headers=headers,
            failed=failed,
        )

    def offsets_committed(self, offsets: Offsets) -> None:
        """After a successful commit: copy to the global topic if the connector has its own."""
        if self.copier is not None and offsets:
            self.copier.submit(offsets)

    # ----------------------------------------------------------------------------- internals
    def _stop_task(self) -> None:
        if self._task_started:
            self._task_started = False
            try:
                self.task.stop()
            except Exception:
                self.log.exception("SourceTask.stop() raised")

    def _shutdown(self) -> None:
        self._stop_task()
        try:
            self.pipeline.close()
        finally:
            self.metrics.plugins.close()
            self.close_clients()
            if self.copier is not None:
                self.copier.close(5)


def polled_count(polled: Sequence[SourceRecord | SourceBatch]) -> int:
    """How many records `poll()` returned, counting every record of its batches."""
    if isinstance(polled, SourceBatch):
        return len(polled)
    return sum(len(item) if isinstance(item, SourceBatch) else 1 for item in polled)


def checked_poll_result(task: SourceTask, batch: Any) -> SourceBatch | list[SourceRecord | SourceBatch]:
    """`poll()` must return None, a SourceBatch or a list of SourceRecords and SourceBatches; anything
    else fails the task naming what it returned (instead of an AttributeError deep in the send path)."""
    where = f"{type(task).__module__}.{type(task).__qualname__}.poll()"
    if isinstance(batch, SourceBatch):
        return batch
    if not isinstance(batch, list | tuple):
        raise ConnectException(
            f"{where} returned {type(batch).__name__} {_preview(batch)}; it must return a list of "
            "SourceRecord, a SourceBatch (or None when there is nothing new)"
        )
    for i, record in enumerate(batch):
        if not isinstance(record, SourceRecord | SourceBatch):
            raise ConnectException(
                f"{where} returned a {type(batch).__name__} whose item {i} is {type(record).__name__} "
                f"{_preview(record)}, not a SourceRecord or SourceBatch"
            )
    return list(batch)


def _preview(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def apply_update_offsets(task: SourceTask, offsets: Offsets, task_log: logging.LoggerAdapter[Any]) -> Offsets:
    """KIP-910: let the task add or change offsets just before they are committed.

    Returned partitions override or add to `offsets`; partitions the task left out are still
    committed (with a warning); None or an empty map changes nothing.
    """
    result = task.update_offsets(dict(offsets))  # type: ignore[arg-type]
    if not result:
        return offsets
    updated: Offsets = dict(offsets)
    returned = set()
    for partition, offset in result.items():
        key = SourcePartition.of(partition)
        returned.add(key)
        updated[key] = None if offset is None else SourceOffset.of(offset)
    dropped = [dict(p) for p in offsets if p not in returned]
    if dropped:
        task_log.warning(
            "update_offsets() left out %d source partition(s) %s; their offsets are committed anyway "
            "(partitions cannot be removed this way)",
            len(dropped),
            dropped[:5],
        )
    return updated


def parse_configs(spec: TaskSpec) -> tuple[WorkerConfig, SourceConnectorConfig]:
    return WorkerConfig.parse(spec.worker_config), SourceConnectorConfig.parse(spec.connector_config)
