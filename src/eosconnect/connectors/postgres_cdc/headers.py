"""The headers Debezium's PostgreSQL connector puts on its change events, which the task's records
carry too so that a consumer written against Debezium reads them the same (docs/cdc.md)."""

from __future__ import annotations

import secrets
import time
import uuid

from eosconnect.api.data import Struct
from eosconnect.api.records import Header
from eosconnect.connectors.postgres_cdc.events import CONNECTOR_NAME
from eosconnect.transforms.base import values_to_string

__all__ = ["NEWKEY", "OLDKEY", "context_headers", "pk_change_header"]

#: Debezium's headers on the two events of a primary key change (RelationalChangeRecordEmitter).
NEWKEY = "__debezium.newkey"
OLDKEY = "__debezium.oldkey"


def pk_change_header(name: str, key: Struct | None) -> tuple[Header, ...]:
    """The header naming the other key of a primary key change, as Kafka Connect's default header
    converter (SimpleHeaderConverter) writes Debezium's Struct-valued header."""
    return () if key is None else (Header(name, values_to_string(key, schema=key.schema)),)


def context_headers(prefix: str) -> tuple[Header, ...]:
    """Debezium's extended headers (`extended.headers.enabled`, on by default since 3.x, its
    DebeziumHeaderProducer) of one task run: the run id is a new time-ordered UUID (version 7)."""
    millis = time.time_ns() // 1_000_000
    bits = (millis & (2**48 - 1)) << 80 | 0x7 << 76 | secrets.randbits(12) << 64 | 0b10 << 62
    run_id = uuid.UUID(int=bits | secrets.randbits(62))
    return (  # `Header`s: records take them as they are, without checking each again
        Header("__debezium.context.connectorLogicalName", prefix),
        Header("__debezium.context.taskId", "0"),  # PostgresCdcSource runs one task, as Debezium's
        Header("__debezium.context.connectorName", CONNECTOR_NAME),
        Header("__debezium.context.runId", str(run_id)),
    )
