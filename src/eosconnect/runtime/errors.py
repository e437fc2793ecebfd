"""Turning Kafka client errors into messages that say what happened and what to do."""

from __future__ import annotations

from confluent_kafka import KafkaError

#: "Record too large", whether librdkafka or the broker noticed it (librdkafka uses the same code).
OVERSIZED_CODES = frozenset({KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE})

OVERSIZED_HINT = (
    "The record is larger than allowed: raise producer.override.message.max.bytes (and the topic's "
    "max.message.bytes on the broker), or make the records smaller"
)


def send_error_message(task_id: str, topic: str, err: KafkaError, where: str) -> str:
    """Why a record could not be sent; `where` says which record (source partition and offset)."""
    text = f"{task_id}: could not send a record to {topic!r} ({where}): {err.name()}: {err.str()}."
    if err.code() in OVERSIZED_CODES:
        text += " " + OVERSIZED_HINT + "."
    return text + " Its source offset was not committed, so it is polled again after a restart."
