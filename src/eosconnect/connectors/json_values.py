"""A Connect value as plain JSON data, for sinks that store structs, maps and arrays as JSON text
(JdbcSink's JSON/text columns, the lake sinks' string columns): one mapping, so the same value reads
the same in every destination."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

from eosconnect.api.data import Struct

__all__ = ["json_compatible"]


def json_compatible(value: Any) -> Any:
    """Structs as objects by field, bytes as hex, dates and times as ISO text, decimals as their
    exact text; everything else as it is."""
    if isinstance(value, Struct):
        return {f.name: json_compatible(value.get(f.name)) for f in value.schema.fields}
    if isinstance(value, dict):
        return {str(k): json_compatible(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_compatible(v) for v in value]
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    return value
