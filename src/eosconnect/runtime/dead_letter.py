"""Dead letter queues (KIP-298) and the errant record reporter (KIP-610) for sink tasks.

With `errors.tolerance=all` a record the converters or transformations reject, or one the task
reports through `SinkTaskContext.errant_record_reporter()` (KIP-610; e.g. a row it cannot write),
is skipped. It is logged when `errors.log.enable=true` (with the record itself when
`errors.log.include.messages=true`), and when `errors.deadletterqueue.topic.name` is set, the
*original* consumed bytes (key, value, headers) are produced to that topic, created if missing with
one partition and `errors.deadletterqueue.topic.replication.factor`. With
`errors.deadletterqueue.context.headers.enable=true` each dead letter carries Kafka Connect's
`__connect.errors.*` headers (same names and string encodings as Kafka's DeadLetterQueueReporter).

Dead letters are flushed before the runtime calls `pre_commit`, so a skipped record's position is
committed (into the consumer group or, exactly once, the target's own transaction) only after its
dead letter was acknowledged: a crash in between delivers the record again, never loses it.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import SinkRecord
from eosconnect.runtime.metrics import TaskMetrics
from eosconnect.storage.producing import produce_waiting

__all__ = ["DeadLetterQueue", "ErrorReporting", "Stage"]

log = logging.getLogger(__name__)

HEADER_PREFIX = "__connect.errors."
ERROR_HEADER_ORIG_TOPIC = HEADER_PREFIX + "topic"
ERROR_HEADER_ORIG_PARTITION = HEADER_PREFIX + "partition"
ERROR_HEADER_ORIG_OFFSET = HEADER_PREFIX + "offset"
ERROR_HEADER_CONNECTOR_NAME = HEADER_PREFIX + "connector.name"
ERROR_HEADER_TASK_ID = HEADER_PREFIX + "task.id"
ERROR_HEADER_STAGE = HEADER_PREFIX + "stage"
ERROR_HEADER_EXECUTING_CLASS = HEADER_PREFIX + "class.name"
ERROR_HEADER_EXCEPTION = HEADER_PREFIX + "exception.class.name"
ERROR_HEADER_EXCEPTION_MESSAGE = HEADER_PREFIX + "exception.message"
ERROR_HEADER_EXCEPTION_STACK_TRACE = HEADER_PREFIX + "exception.stacktrace"

#: Our exceptions that are Kafka Connect's, under Kafka's class names (what the headers show).
_KAFKA_EXCEPTIONS = {
    "DataException": "org.apache.kafka.connect.errors.DataException",
    "ConnectException": "org.apache.kafka.connect.errors.ConnectException",
    "RetriableException": "org.apache.kafka.connect.errors.RetriableException",
    "SchemaBuilderException": "org.apache.kafka.connect.errors.SchemaBuilderException",
    "SchemaProjectorException": "org.apache.kafka.connect.errors.SchemaProjectorException",
}


class Stage:
    """Kafka Connect's `Stage` names: where in the pipeline a record failed."""

    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"


class RawMessage(Protocol):
    """The consumed message (confluent-kafka's `Message`) a dead letter copies."""

    def topic(self) -> str: ...
    def partition(self) -> int: ...
    def offset(self) -> int: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def headers(self) -> list[tuple[str, bytes]] | None: ...


@dataclass(frozen=True)
class ErrorReporting:
    """The connector's `errors.*` settings that decide what happens to a failed record."""

    tolerate: bool
    topic: str
    replication_factor: int
    context_headers: bool
    log_errors: bool
    log_messages: bool

    @classmethod
    def parse(cls, config: Mapping[str, str]) -> ErrorReporting:
        def flag(name: str) -> bool:
            return str(config.get(name, "false")).strip().lower() == "true"

        return cls(
            tolerate=str(config.get("errors.tolerance", "none")).strip().lower() == "all",
            topic=str(config.get("errors.deadletterqueue.topic.name") or "").strip(),
            replication_factor=int(config.get("errors.deadletterqueue.topic.replication.factor") or 3),
            context_headers=flag("errors.deadletterqueue.context.headers.enable"),
            log_errors=flag("errors.log.enable"),
            log_messages=flag("errors.log.include.messages"),
        )


def exception_class_name(exc: BaseException) -> str:
    name = type(exc).__name__
    return _KAFKA_EXCEPTIONS.get(name, f"{type(exc).__module__}.{type(exc).__qualname__}")


def _text(value: object) -> bytes:
    return str(value).encode("utf-8")


class DeadLetterQueue:
    """Logs and dead-letters the records of one sink task; `flush` before committing positions."""

    def __init__(
        self,
        settings: ErrorReporting,
        producer_config: Mapping[str, Any] | None,
        admin_config: Mapping[str, Any] | None,
        connector: str,
        task: int,
        logger: logging.LoggerAdapter | logging.Logger = log,
        metrics: TaskMetrics | None = None,
    ) -> None:
        self.settings, self.connector, self.task, self.log = settings, connector, task, logger
        #: The task's metrics, counting each dead letter sent (`deadletterqueue-produce-requests`).
        self.metrics = metrics
        self.producer: Producer | None = None
        self._error: KafkaError | None = None
        self.reported = 0
        #: (topic, partition, offset) -> the consumed message, for the task's own reports (KIP-610).
        self._raw: dict[tuple[str, int, int], RawMessage] = {}
        if settings.topic:
            assert producer_config is not None and admin_config is not None
            from eosconnect.storage.topics import ensure_topic

            ensure_topic(
                AdminClient(dict(admin_config)),
                settings.topic,
                1,
                settings.replication_factor,
                compacted=False,
                replication_setting="errors.deadletterqueue.topic.replication.factor",
            )
            config = dict(producer_config)
            config.pop("transactional.id", None)
            config["enable.idempotence"] = True
            self.producer = Producer(config)

    # ----------------------------------------------------------------------------- the runtime's side
    def remember(self, messages: list[Any]) -> None:
        """The batch about to be `put`: what a KIP-610 report of one of its records copies (kept
        until its position is committed: a task may report a record when it writes it, in pre_commit)."""
        if self.settings.tolerate:
            self._raw.update(
                {(m.topic(), m.partition(), m.offset()): m for m in messages if m.error() is None}
            )

    def committed(self, positions: Mapping[Any, Any]) -> None:
        """After `pre_commit(positions)`: the dead letters it reported are written before anything is
        committed, and the copies of the records before those positions (all seen by it) dropped."""
        self.flush()
        if self._raw:
            below = {(tp.topic, tp.partition): om.offset for tp, om in positions.items()}
            self._raw = {
                k: m for k, m in self._raw.items() if (k[0], k[1]) not in below or k[2] >= below[(k[0], k[1])]
            }

    def failed(self, message: RawMessage, stage: str, class_name: str, exc: BaseException) -> None:
        """A consumed message the converters or transformations rejected (errors.tolerance=all)."""
        self._report(message, stage, class_name, exc, None)

    def flush(self, timeout: float = 30.0) -> None:
        """Wait for every dead letter's acknowledgement; raise if one could not be written."""
        if self.producer is None:
            return
        remaining = self.producer.flush(timeout)
        if self._error is not None or remaining:
            why = (
                self._error.str() if self._error is not None else f"{remaining} still queued after {timeout}s"
            )
            raise ConnectException(
                f"could not write to the dead letter queue {self.settings.topic!r}: {why}. The records' "
                "positions are not committed; they are delivered again after the task restarts."
            )

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(10)
            self.producer = None

    # ----------------------------------------------------------------------------- KIP-610
    def reporter(self, task_class: str) -> ErrantRecordReporter:
        return ErrantRecordReporter(self, task_class)

    def report_record(self, record: SinkRecord, exc: BaseException, task_class: str) -> Future[None]:
        message = self._raw.get((record.original_topic, record.original_partition, record.offset))
        return self._report(message, Stage.TASK_PUT, task_class, exc, record)

    # ----------------------------------------------------------------------------- both
    def _report(
        self,
        message: RawMessage | None,
        stage: str,
        class_name: str,
        exc: BaseException,
        record: SinkRecord | None,
    ) -> Future[None]:
        self.reported += 1
        topic = message.topic() if message is not None else record.topic if record is not None else "?"
        partition = message.partition() if message is not None else record.partition if record else -1
        offset = message.offset() if message is not None else record.offset if record else -1
        if self.settings.log_errors:
            detail = ""
            if self.settings.log_messages:
                detail = (
                    f" key={message.key()!r} value={message.value()!r}"
                    if message is not None
                    else f" record={record!r}"
                )
            self.log.error(
                "Error encountered in task %s-%s. Executing stage '%s' with class '%s', where consumed "
                "record is {topic='%s', partition=%s, offset=%s}%s: %s",
                self.connector,
                self.task,
                stage,
                class_name,
                topic,
                partition,
                offset,
                detail,
                exc,
            )
        done: Future[None] = _Delivery(self)
        if self.producer is None:
            done.set_result(None)
            return done
        if message is None:
            raise ConnectException(
                f"the task reported {topic}-{partition}@{offset}, which is not in the batch it was given: "
                "report records from put() only"
            )
        if self.metrics is not None:
            self.metrics.record_dead_letter()
        headers = list(message.headers() or [])
        if self.settings.context_headers:
            headers += [
                (ERROR_HEADER_ORIG_TOPIC, _text(topic)),
                (ERROR_HEADER_ORIG_PARTITION, _text(partition)),
                (ERROR_HEADER_ORIG_OFFSET, _text(offset)),
                (ERROR_HEADER_CONNECTOR_NAME, _text(self.connector)),
                (ERROR_HEADER_TASK_ID, _text(self.task)),
                (ERROR_HEADER_STAGE, _text(stage)),
                (ERROR_HEADER_EXECUTING_CLASS, _text(class_name)),
                (ERROR_HEADER_EXCEPTION, _text(exception_class_name(exc))),
                (ERROR_HEADER_EXCEPTION_MESSAGE, _text(exc)),
                (
                    ERROR_HEADER_EXCEPTION_STACK_TRACE,
                    _text("".join(traceback.format_exception(exc))),
                ),
            ]

        def delivered(err: KafkaError | None, _msg: Any) -> None:
            if err is not None:
                self._error = self._error or err
                done.set_exception(ConnectException(err.str()))
            else:
                done.set_result(None)

        assert self.producer is not None
        produce_waiting(
            self.producer,
            self.settings.topic,
            message.value(),
            message.key(),
            headers=headers,
            on_delivery=delivered,
            poll_s=0.1,
        )
        self.producer.poll(0)
        return done


class _Delivery(Future[None]):
    """A dead letter's future; waiting for it makes the producer deliver (KIP-610's `Future.get()`)."""

    def __init__(self, queue: DeadLetterQueue) -> None:
        super().__init__()
        self._queue = queue

    def result(self, timeout: float | None = None) -> None:
        if not self.done() and self._queue.producer is not None:
            self._queue.producer.flush(30 if timeout is None else timeout)
        return super().result(timeout)


class ErrantRecordReporter:
    """KIP-610's `ErrantRecordReporter`: `report(record, error)` skips a record the task could not
    write, dead-lettering it as configured; the returned future completes when it was written."""

    def __init__(self, queue: DeadLetterQueue, task_class: str) -> None:
        self._queue, self._task_class = queue, task_class

    def report(self, record: SinkRecord, error: BaseException) -> Future[None]:
        return self._queue.report_record(record, error, self._task_class)


def conversion_stage(pipeline: Any, message: RawMessage, config: Mapping[str, str]) -> tuple[str, str]:
    """Which stage rejected `message` (Kafka's stage name) and the class that ran it, found by running
    the converters again (only for a failed record): the key converter, the value converter, else a
    transformation. Converters show as configured (`org.apache.kafka.connect.json.JsonConverter`)."""

    def name(setting: str, component: object) -> str:
        return config.get(setting) or f"{type(component).__module__}.{type(component).__qualname__}"

    try:
        pipeline.key_converter.to_connect_data(message.topic(), message.key())
    except Exception:
        return Stage.KEY_CONVERTER, name("key.converter", pipeline.key_converter)
    try:
        pipeline.value_converter.to_connect_data(message.topic(), message.value())
    except Exception:
        return Stage.VALUE_CONVERTER, name("value.converter", pipeline.value_converter)
    return Stage.TRANSFORMATION, "transforms"


def for_sink_task(
    worker_props: Mapping[str, Any],
    connector_props: Mapping[str, str],
    connector: str,
    task: int,
    logger: logging.LoggerAdapter | logging.Logger = log,
    metrics: TaskMetrics | None = None,
) -> DeadLetterQueue:
    """The task's queue, its producer and admin client with the worker's settings and the connector's
    `producer.override.*` / `admin.override.*` (Kafka Connect's DLQ producer uses the same)."""
    from eosconnect.storage.clients import client_config

    settings = ErrorReporting.parse(connector_props)
    producer = admin = None
    if settings.topic:
        producer = dict(client_config("producer", worker_props, connector_props).validate())
        admin = dict(client_config("admin", worker_props, connector_props).validate())
    return DeadLetterQueue(settings, producer, admin, connector, task, logger, metrics)
