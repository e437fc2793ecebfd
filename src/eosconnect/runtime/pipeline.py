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

import logging
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE

from eosconnect.api.batch import SourceBatch
from eosconnect.api.connector import Task
from eosconnect.api.converters import Converter, converter_from_config
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import SinkRecord, SourceRecord, known_or_none
from eosconnect.api.transforms import TransformationChain
from eosconnect.runtime.dead_letter import ErrorReporting, Stage

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

    With `errors.tolerance=all` a record a transformation or converter rejects (a schema the registry
    refuses, a value its schema does not allow, ...) is skipped as Kafka Connect's source tasks skip
    it: nothing of it is sent (not its key either), its source offset still counts, and it is logged,
    with Kafka's "Error encountered in task ..." line at ERROR where `errors.log.enable=true` (the
    record itself with `errors.log.include.messages=true`), else with a warning.
    """

    def __init__(
        self,
        connector_config: Mapping[str, str],
        forbidden_topics: frozenset[str] = frozenset(),
        task_log: Any = None,
        task_id: str = "",
    ) -> None:
        super().__init__(connector_config)
        self.forbidden_topics = forbidden_topics
        self.errors = ErrorReporting.parse(connector_config)
        self._config = connector_config
        self._log = task_log if task_log is not None else log
        self._task_id = task_id
        #: Records skipped under errors.tolerance=all.
        self.skipped = 0

        self._columnar = self.transforms.columnar

    @property
    def columnar(self) -> bool:
        """Whether `SourceBatch`es can skip per-record objects: no transformation to run on them, or
        only transformations of whole batches (`Transformation.apply_columns`)."""
        return self._columnar

    def convert(self, record: SourceRecord) -> OutgoingRecord | None:
        """The record ready to send, or None if a transformation dropped it (or, with
        errors.tolerance=all, a transformation or converter rejected it)."""
        stage = Stage.TRANSFORMATION
        try:
            transformed = self.transforms.apply(record) if self.transforms.stages else record
            if transformed is None:
                return None
            topic = transformed.topic
            self._check_topic(topic)
            stage = Stage.KEY_CONVERTER
            key = self.key_converter.from_connect_data(topic, transformed.key_schema, transformed.key)
            stage = Stage.VALUE_CONVERTER
            value = self.value_converter.from_connect_data(topic, transformed.value_schema, transformed.value)
        except ForbiddenTopicError:
            raise
        except Exception as exc:
            if not self.errors.tolerate:
                raise
            self._skip(record, stage, exc)
            return None
        return OutgoingRecord(
            topic=topic,
            partition=transformed.partition,
            key=key,
            value=value,
            headers=_headers(transformed.headers),
            timestamp=transformed.timestamp,
        )

    def _skip(self, record: SourceRecord, stage: str, exc: Exception) -> None:
        self.skipped += 1
        if stage == Stage.TRANSFORMATION:
            component = "transforms"
        else:
            setting = "key.converter" if stage == Stage.KEY_CONVERTER else "value.converter"
            converter = self.key_converter if stage == Stage.KEY_CONVERTER else self.value_converter
            component = (
                self._config.get(setting) or f"{type(converter).__module__}.{type(converter).__name__}"
            )
        if self.errors.log_errors:
            detail = f", where source record is = {record!r}" if self.errors.log_messages else ""
            self._log.error(
                "Error encountered in task %s. Executing stage '%s' with class '%s'%s.",
                self._task_id,
                stage,
                component,
                detail,
                exc_info=exc,
            )
            return
        self._log.warning(
            "skipping the record of source partition %s, offset %s (errors.tolerance=all): "
            "%s rejected it: %s",
            dict(record.source_partition),
            None if record.source_offset is None else dict(record.source_offset),
            component,
            exc,
        )

    def convert_columns(self, batch: SourceBatch) -> OutgoingColumns | list[tuple[SourceRecord, Any]]:
        """A whole `SourceBatch` transformed and converted column by column (only when `columnar`).

        Where a transformation declines the batch (`Transformation.apply_columns`), its records go
        one by one instead: then the result is each `SourceRecord` of the batch with its
        `OutgoingRecord` (None: dropped), for the runner to send as on the per-record path.
        """
        original = batch
        if self.transforms.stages:
            transformed = self.transforms.apply_columns(batch)
            if transformed is None:
                return [(record, self.convert(record)) for record in batch]
            batch = transformed
        if not self.errors.tolerate:
            return self._convert_columns(batch)
        try:
            return self._convert_columns(batch)
        except ForbiddenTopicError:
            raise
        except Exception:  # record by record: only the records rejected are skipped
            return [(record, self.convert(record)) for record in original]

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
        return self.transforms.apply(record)


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
