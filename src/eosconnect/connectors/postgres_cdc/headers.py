"""The context headers Debezium's PostgreSQL connector puts on its change events, which the task's
records carry too so that a consumer written against Debezium reads them the same (docs/cdc.md); the
primary-key-change headers are every Debezium connector's (connectors/debezium/headers.py)."""

from __future__ import annotations

import secrets
import time
import uuid

from eosconnect.api.records import Header
from eosconnect.connectors.postgres_cdc.events import CONNECTOR_NAME

__all__ = ["context_headers"]


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
