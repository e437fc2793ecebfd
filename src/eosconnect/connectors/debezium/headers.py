"""The headers Debezium puts on the two events of a primary key change, which our CDC sources' records
carry too so that a consumer written against Debezium reads them the same."""

from __future__ import annotations

from eosconnect.api.data import Struct
from eosconnect.api.records import Header
from eosconnect.transforms.base import values_to_string

__all__ = ["NEWKEY", "OLDKEY", "pk_change_header"]

#: Debezium's headers on the two events of a primary key change (RelationalChangeRecordEmitter).
NEWKEY = "__debezium.newkey"
OLDKEY = "__debezium.oldkey"


def pk_change_header(name: str, key: Struct | None) -> tuple[Header, ...]:
    """The header naming the other key of a primary key change, as Kafka Connect's default header
    converter (SimpleHeaderConverter) writes Debezium's Struct-valued header."""
    return () if key is None else (Header(name, values_to_string(key, schema=key.schema)),)
