"""JdbcSource's values outside the row schema: timestamp columns (what kind, how they are bound in
queries, how they are stored in offsets) and numbers in keys and offsets.

Columns and rows as Kafka Connect schemas and values are in `schema`.
"""

from __future__ import annotations

import datetime as dt
import decimal
from enum import StrEnum
from typing import Any
from zoneinfo import ZoneInfo

from eosconnect.api.records import Primitive

__all__ = [
    "TEXT_TIMESTAMP_FORMAT",
    "TsKind",
    "after",
    "number",
    "read_bound",
    "timestamp_kind",
    "ts_from_offset",
    "ts_to_offset",
]

TEXT_TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


class TsKind(StrEnum):
    """How a timestamp column compares and is stored in offsets."""

    DATETIME = "datetime"  # the driver returns datetime objects; offsets hold ISO-8601 strings
    TEXT = "text"  # text compared as text (SQLite); offsets hold the stored text verbatim
    NUMBER = "number"  # epoch milliseconds


def timestamp_kind(column_type: Any, dialect: str) -> tuple[TsKind, bool]:
    """The kind of a timestamp column of this SQLAlchemy type, and whether it holds a time zone."""
    from sqlalchemy import types as sqltypes

    aware = bool(getattr(column_type, "timezone", False))
    if isinstance(column_type, sqltypes.DateTime) and dialect != "sqlite":
        return TsKind.DATETIME, aware
    if isinstance(column_type, sqltypes.Integer | sqltypes.Numeric | sqltypes.Float):
        return TsKind.NUMBER, False
    return TsKind.TEXT, False


def ts_from_offset(kind: TsKind | None, raw: Primitive) -> Any:
    """A stored offset's timestamp as the column compares with it; TypeError/ValueError if unreadable."""
    if kind is TsKind.DATETIME:
        return dt.datetime.fromisoformat(str(raw))
    if kind is TsKind.NUMBER:
        if isinstance(raw, bool) or not isinstance(raw, int | float):
            raise TypeError(f"expected a number, got {raw!r}")
        return raw
    return str(raw)


def ts_to_offset(kind: TsKind | None, value: Any) -> Primitive:
    """A timestamp read from the column, as stored in an offset."""
    if value is None:
        return None
    if kind is TsKind.DATETIME:
        return value.isoformat()
    if kind is TsKind.NUMBER:
        return number(value)
    return str(value)


def read_bound(kind: TsKind | None, aware: bool, delay: dt.timedelta, zone: ZoneInfo) -> Any:
    """now - timestamp.delay.interval.ms, in the form the timestamp column compares with."""
    now = dt.datetime.now(dt.UTC) - delay
    if kind is TsKind.NUMBER:
        return int(now.timestamp() * 1000)
    if kind is TsKind.DATETIME and aware:
        return now
    local = now.astimezone(zone).replace(tzinfo=None)
    return local if kind is TsKind.DATETIME else local.strftime(TEXT_TIMESTAMP_FORMAT)


def after(bound: Any, position: Any) -> bool:
    """Whether a read bound lies after a stored position (None: nothing read yet)."""
    if position is None:
        return True
    try:
        return bool(bound > position)
    except TypeError:  # e.g. a naive and an aware datetime after a column change
        return False


def number(value: Any) -> Primitive:
    """An id or numeric timestamp as a key or offset value (Decimals as int where integral)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return value
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return str(value)
