"""Debezium's heartbeat record (`heartbeat.interval.ms`): its offset is the server's WAL position,
so committing it lets the slot move on while a database is idle or all its changes are filtered."""

from __future__ import annotations

from eosconnect.api.data import Struct
from eosconnect.api.records import SourcePartition, SourceRecord
from eosconnect.connectors.debezium.heartbeat import HEARTBEAT_KEY, HEARTBEAT_VALUE

__all__ = ["heartbeat_record"]


def heartbeat_record(
    partition: SourcePartition, topic: str, server: str, wal_end: int, now_ms: int
) -> SourceRecord:
    """The heartbeat of `server` (the topic prefix) to `topic`, at WAL position `wal_end`: no event
    of its own (`event` -1), its `lsn_end` what the slot may be confirmed to once it committed."""
    return SourceRecord(
        source_partition=partition,
        source_offset={"lsn": wal_end, "event": -1, "lsn_end": wal_end, "heartbeat": now_ms},
        topic=topic,
        key=Struct(HEARTBEAT_KEY).put("serverName", server),
        value=Struct(HEARTBEAT_VALUE).put("ts_ms", now_ms),
        key_schema=HEARTBEAT_KEY,
        value_schema=HEARTBEAT_VALUE,
    )
