"""Records between connectors and Kafka: transformations and converters, in both directions.

Source side (`RecordPipeline`): from a `SourceRecord` to the bytes a producer sends, transformations
first, then converters. A record dropped by a transformation is not sent, but its source offset
still counts: the runtime must not poll it again (Kafka Connect behaves the same way).

Sink side (`SinkRecordPipeline`): the other way round, converters first (bytes to values), then
transformations. A dropped record is not given to `put`, but its Kafka offset is committed.

Schemas travel with the values: a record's `key_schema`/`value_schema` (a `SourceBatch`'s one
schema per column) go to the converter with the value, and what a converter reads back (its
`SchemaAndValue`) becomes the sink record's schema and value.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

from eosconnect.api.batch import SourceBatch
from eosconnect.api.connector import Task
from eosconnect.api.converter import Converter
from eosconnect.api.errors import ConnectException, RetriableException
from eosconnect.api.records import SinkRecord, SourceRecord, known_or_none
from eosconnect.converters.resolution import converter_from_config
from eosconnect.runtime.retry_tolerance import RetryWithTolerance, ToleranceSettings, log_failed_record
from eosconnect.transforms.chain import TransformationChain

log = logging.getLogger(__name__)


class ForbiddenTopicError(ConnectException):
    """A task tried to write to its own offsets topic (KIP-618 forbids it)."""


class OutgoingRecord(NamedTuple):
    """A record as the producer takes it; a tuple because one is built per record sent."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]] | None
    timestamp: int | None


class OutgoingColumns(NamedTuple):
    """A `SourceBatch` as the producer takes it: one topic and partition, converted columns."""

    topic: str
    partition: int  # -1: the producer's partitioner
    keys: Sequence[bytes | None] | None  # None: every key is null
    values: Sequence[bytes | None]
    timestamps: Sequence[int | None] | None
    headers: Sequence[Any] | None


class _Pipeline:
    """The connector's transformation chain and key/value converters, built from its config."""

    def __init__(self, connector_config: Mapping[str, str]) -> None:
        self.transforms = TransformationChain.from_config(connector_config)
        self.key_converter: Converter = converter_from_config(connector_config, is_key=True)
        self.value_converter: Converter = converter_from_config(connector_config, is_key=False)

    def close(self) -> None:
        self.transforms.close()


class RecordPipeline(_Pipeline):
    """Source records to what the producer sends.

    A connector's `errors.*` settings act through one mechanism, `retry` (Kafka's
    RetryWithToleranceOperator, runtime/retry_tolerance.py; built from the connector's config when
    not given, the task runner passes one wired to its stop directive and metrics): it retries a
    record's conversion per `errors.retry.*` and, with `errors.tolerance=all`, skips a record a
    transformation or converter rejects for good (a schema the registry refuses, a value its schema
    does not allow, ...), as Kafka Connect's source tasks skip it: `convert` returns None (nothing of
    it is sent, not its key either; its source offset is committed; sources have no dead letter
    queue), a `SourceBatch` is sent without its failed records, and each is counted under Kafka's
    task-error-metrics and logged there (Kafka's "Error encountered in task ..." at ERROR with
    `errors.log.enable=true`, else a warning)."""

    def __init__(
        self,
        connector_config: Mapping[str, str],
        forbidden_topics: frozenset[str] = frozenset(),
        task_log: Any = None,
        task_id: str = "",
        retry: RetryWithTolerance | None = None,
    ) -> None:
        super().__init__(connector_config)
        self.forbidden_topics = forbidden_topics
        self.log = task_log if task_log is not None else log
        self.task_id = task_id

        self._columnar = self.transforms.columnar
        #: The last record's headers and what they became: tasks hand the same headers to many
        #: records (the CDC source's context headers), and the tuple is immutable.
        self._headers_in: Any = None
        self._headers_out: list[tuple[str, bytes | None]] | None = None
        if retry is None:
            retry = RetryWithTolerance(ToleranceSettings.parse(connector_config))
        self.retry = retry
        if retry.settings.retries or retry.settings.tolerate_all:
            self._convert_one = self.convert
            self.convert = self._convert_guarded  # type: ignore[method-assign]
            self._convert_batch = self.convert_columns
            self.convert_columns = self._convert_columns_guarded  # type: ignore[method-assign]

    @property
    def columnar(self) -> bool:
        """Whether `SourceBatch`es can skip per-record objects: no transformation to run on them, or
        only transformations of whole batches (`Transformation.apply_columns`)."""
        return self._columnar

    def convert(self, record: SourceRecord) -> OutgoingRecord | None:
        """The record ready to send, or None if a transformation dropped it (or, with
        errors.tolerance=all, a transformation or converter rejected it: see the class)."""
        transformed = self.transforms.apply(record) if self.transforms.stages else record
        if transformed is None:
            return None
        topic = transformed.topic
        self._check_topic(topic)
        key = self.key_converter.from_connect_data(topic, transformed.key_schema, transformed.key)
        value = self.value_converter.from_connect_data(topic, transformed.value_schema, transformed.value)
        return OutgoingRecord(
            topic=topic,
            partition=transformed.partition,
            key=key,
            value=value,
            headers=self._outgoing_headers(transformed.headers),
            timestamp=transformed.timestamp,
        )

    def _outgoing_headers(self, headers: Any) -> list[tuple[str, bytes | None]] | None:
        """`_headers(headers)`, converted once for a run of records sharing the same (immutable)
        headers tuple; the list is shared, and the producer only reads it."""
        if headers is self._headers_in:
            return self._headers_out
        out = _headers(headers)
        if type(headers) is tuple:  # Headers: immutable, so identity means equal
            self._headers_in, self._headers_out = headers, out
        return out

    def convert_columns(self, batch: SourceBatch) -> OutgoingColumns | list[tuple[SourceRecord, Any]]:
        """A whole `SourceBatch` transformed and converted column by column (only when `columnar`).

        Where a transformation declines the batch (`Transformation.apply_columns`), its records go
        one by one instead: then the result is each `SourceRecord` of the batch with its
        `OutgoingRecord` (None: dropped), for the runner to send as on the per-record path.
        """
        if self.transforms.stages:
            transformed = self.transforms.apply_columns(batch)
            if transformed is None:
                return [(record, self.convert(record)) for record in batch]
            batch = transformed
        return self._convert_columns(batch)

    def _convert_columns(self, batch: SourceBatch) -> OutgoingColumns:
        topic = batch.topic
        self._check_topic(topic)
        keys = batch.keys
        if keys is not None and any(key is not None for key in keys):
            keys = _convert_column(self.key_converter, topic, keys, batch.key_schema)
        else:
            keys = None  # all null: the producer's default
        headers = batch.headers
        if headers is not None:
            headers = [_headers(h) for h in headers] if any(headers) else None
        return OutgoingColumns(
            topic,
            -1 if batch.partition is None else batch.partition,
            keys,
            _convert_column(self.value_converter, topic, batch.values, batch.value_schema),
            batch.timestamps,
            headers,
        )

    # ----------------------------------------------------------------------------- errors.*
    def _convert_guarded(self, record: SourceRecord) -> OutgoingRecord | None:
        try:
            return self.retry.execute(lambda: self._convert_one(record))
        except ForbiddenTopicError:
            raise  # the task's bug, not the record's
        except Exception as exc:
            self._failed(exc, f"source record is {_preview_record(record)}")
            return None

    def _convert_columns_guarded(
        self, batch: SourceBatch
    ) -> OutgoingColumns | list[tuple[SourceRecord, Any]]:
        """The whole batch at once; if that fails, record by record, leaving out the failed ones."""
        try:
            return self.retry.execute(lambda: self._convert_batch(batch))
        except ForbiddenTopicError:
            raise
        except Exception:
            if not self.retry.settings.tolerate_all:
                raise
        kept: list[int] = []
        for i in range(len(batch)):
            single = _subset(batch, [i])
            try:
                self.retry.execute(functools.partial(self._convert_batch, single))
                kept.append(i)
            except Exception as exc:
                self._failed(exc, f"record {i} of a SourceBatch for {batch.topic!r}")
        return self._convert_batch(_subset(batch, kept))

    def _failed(self, exc: Exception, where: str) -> None:
        """A record failed for good: raise (errors.tolerance=none) or log and skip it."""
        settings = self.retry.settings
        if not self.retry.failed():
            retried = (
                f" (retried for errors.retry.timeout={settings.retry_timeout_ms} ms)"
                if isinstance(exc, RetriableException) and settings.retries
                else ""
            )
            raise ConnectException(
                f"{self.task_id}: Tolerance exceeded in error handler: a record could not be transformed or "
                f"converted{retried}: {exc}. Fix the data or the transforms/key.converter/value.converter "
                "settings, or set errors.tolerance=all to skip such records."
            ) from exc
        if settings.log_errors:
            shown = where if settings.log_messages else "a source record failed"
            log_failed_record(
                self.log, self.task_id, "TRANSFORMATION/CONVERTER", type(exc).__name__, shown, exc
            )
        else:
            self.log.warning("skipping a source record (errors.tolerance=all): %s", exc)

    def _check_topic(self, topic: str) -> None:
        if topic in self.forbidden_topics:
            raise ForbiddenTopicError(
                f"the task produced a record to {topic!r}, which is this connector's offsets topic; a source "
                "task must not write to its own offsets topic. Change the record's topic or the connector's "
                "offsets.storage.topic."
            )


class SinkRecordPipeline(_Pipeline):
    def convert(self, message: Any) -> SinkRecord | None:
        """A consumed confluent-kafka `Message` as the `SinkRecord` the task gets, or None if a
        transformation dropped it. Converter and transformation errors propagate as they are."""
        topic = message.topic()
        timestamp_type, timestamp = message.timestamp()
        epoch = message.leader_epoch()
        key = self.key_converter.to_connect_data(topic, message.key())
        value = self.value_converter.to_connect_data(topic, message.value())
        record = SinkRecord(
            topic,
            message.partition(),
            message.offset(),
            key.value,
            value.value,
            timestamp if timestamp_type != TIMESTAMP_NOT_AVAILABLE and timestamp >= 0 else None,
            message.headers(),
            known_or_none(epoch),
            key.schema,
            value.schema,
        )
        return self.transforms.apply(record) if self.transforms.stages else record


def pipeline_config(connector_config: Mapping[str, str], task: Task, task_log: Any) -> dict[str, str]:
    """The connector's converter and transform settings; raw-bytes tasks (`Task.raw_bytes`, the
    mirrors) get ByteArrayConverter for keys and values, with a warning for any other setting."""
    config = dict(connector_config)
    if type(task).raw_bytes:
        for key in ("key.converter", "value.converter"):
            if config.get(key, "ByteArrayConverter") not in ("ByteArrayConverter", "bytes"):
                task_log.warning(
                    "Ignoring %s=%s: %s copies records as bytes, so ByteArrayConverter is used",
                    key,
                    config[key],
                    type(task).__name__,
                )
            config[key] = "ByteArrayConverter"
    return config


def _convert_column(
    converter: Converter, topic: str, values: Sequence[Any], schema: Any
) -> Sequence[bytes | None]:
    # Converters written before schemas override `from_connect_batch(topic, values)`: pass a schema
    # only when there is one.
    if schema is None:
        return converter.from_connect_batch(topic, values)
    return converter.from_connect_batch(topic, values, schema)


def _headers(headers: Any) -> list[tuple[str, bytes | None]] | None:
    if not headers:
        return None
    out: list[tuple[str, bytes | None]] = []
    for header in headers:
        key, value = header[0], header[1]
        if value is None or isinstance(value, bytes):
            out.append((key, value))
        else:
            out.append((key, str(value).encode()))
    return out


def _preview_record(record: SourceRecord, limit: int = 300) -> str:
    text = repr(record)
    return text if len(text) <= limit else text[:limit] + "..."


def _subset(batch: SourceBatch, indices: list[int]) -> SourceBatch:
    """The records `indices` of `batch`, with its partition, end offset and schemas."""

    def pick(column: Sequence[Any] | None) -> list[Any] | None:
        return None if column is None else [column[i] for i in indices]

    return SourceBatch(
        dict(batch.source_partition),
        dict(batch.source_offset),
        batch.topic,
        [batch.values[i] for i in indices],
        keys=pick(batch.keys),
        partition=batch.partition,
        timestamps=pick(batch.timestamps),
        headers=pick(batch.headers),
        record_offsets=pick(batch.record_offsets),
        key_schema=batch.key_schema,
        value_schema=batch.value_schema,
    )
