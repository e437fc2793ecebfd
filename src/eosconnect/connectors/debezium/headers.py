"""The headers Debezium puts on its change events - the context of the task run, and the two events
of a primary key change - which our CDC sources' records carry too, so that a consumer written
against Debezium reads them the same."""

from __future__ import annotations

import secrets
import time
import uuid

from eosconnect.api.data import Struct
from eosconnect.api.records import Header
from eosconnect.transforms.base import values_to_string

__all__ = ["NEWKEY", "OLDKEY", "context_headers", "pk_change_header"]

#: Debezium's headers on the two events of a primary key change (RelationalChangeRecordEmitter).
NEWKEY = "__debezium.newkey"
OLDKEY = "__debezium.oldkey"


def pk_change_header(name: str, key: Struct | None) -> tuple[Header, ...]:
    """The header naming the other key of a primary key change, as Kafka Connect's default header
    converter (SimpleHeaderConverter) writes Debezium's Struct-valued header."""
    return () if key is None else (Header(name, values_to_string(key, schema=key.schema)),)


def context_headers(prefix: str, connector: str) -> tuple[Header, ...]:
    """Debezium's extended headers (`extended.headers.enabled`, on by default since 3.x, its
    DebeziumHeaderProducer) of one task run of `connector` (postgresql, mysql, mariadb): the run id
    is a new time-ordered UUID (version 7)."""
    millis = time.time_ns() // 1_000_000
    bits = (millis & (2**48 - 1)) << 80 | 0x7 << 76 | secrets.randbits(12) << 64 | 0b10 << 62
    run_id = uuid.UUID(int=bits | secrets.randbits(62))
    return (  # `Header`s: records take them as they are, without checking each again
        Header("__debezium.context.connectorLogicalName", prefix),
        Header("__debezium.context.taskId", "0"),  # both CDC sources run one task, as Debezium's
        Header("__debezium.context.connectorName", connector),
        Header("__debezium.context.runId", str(run_id)),
    )
