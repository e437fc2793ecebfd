"""The schemas of Debezium's heartbeat records (`heartbeat.interval.ms`), the same for every connector:
a key naming the server (the topic prefix), a value with the time."""

from __future__ import annotations

from eosconnect.api.data import SchemaBuilder

__all__ = ["HEARTBEAT_KEY", "HEARTBEAT_VALUE"]

HEARTBEAT_KEY = (
    SchemaBuilder.struct()
    .name("io.debezium.connector.common.ServerNameKey")
    .field("serverName", SchemaBuilder.string().build())
    .build()
)
HEARTBEAT_VALUE = (
    SchemaBuilder.struct()
    .name("io.debezium.connector.common.Heartbeat")
    .field("ts_ms", SchemaBuilder.int64().build())
    .build()
)
