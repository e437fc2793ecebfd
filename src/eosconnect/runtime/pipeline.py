"""From a `SourceRecord` to the bytes a producer sends: transformations, then converters.

A record dropped by a transformation is not sent, but its source offset still counts: the runtime
must not poll it again (Kafka Connect behaves the same way).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from eosconnect.api.converters import Converter, converter_from_config
from eosconnect.api.errors import ConnectException
from eosconnect.api.records import SourceRecord
from eosconnect.api.transforms import TransformationChain


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


class RecordPipeline:
    def __init__(
        self, connector_config: Mapping[str, str], forbidden_topics: frozenset[str] = frozenset()
    ) -> None:
        self.transforms = TransformationChain.from_config(connector_config)
        self.key_converter: Converter = converter_from_config(connector_config, is_key=True)
        self.value_converter: Converter = converter_from_config(connector_config, is_key=False)
        self.forbidden_topics = forbidden_topics

    def convert(self, record: SourceRecord) -> OutgoingRecord | None:
        """The record ready to send, or None if a transformation dropped it."""
        transformed = self.transforms.apply(record) if self.transforms.stages else record
        if transformed is None:
            return None
        topic = transformed.topic
        if topic in self.forbidden_topics:
            raise ForbiddenTopicError(
                f"the task produced a record to {topic!r}, which is this connector's offsets topic; a source "
                "task must not write to its own offsets topic. Change the record's topic or the connector's "
                "offsets.storage.topic."
            )
        return OutgoingRecord(
            topic=topic,
            partition=transformed.partition,
            key=self.key_converter.from_connect(topic, transformed.key),
            value=self.value_converter.from_connect(topic, transformed.value),
            headers=_headers(transformed.headers),
            timestamp=transformed.timestamp,
        )

    def close(self) -> None:
        self.transforms.close()


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
