"""Kafka Connect's logical types: `Decimal`, `Date`, `Time` and `Timestamp`.

A logical type is a primitive schema with a well-known name (`org.apache.kafka.connect.data.Date`
is an INT32 counting days since the epoch). In records and structs it holds its Python type;
converters turn it into the primitive with `from_logical` and back with `to_logical`, exactly as
Java does, so a Decimal written here reads as the same `BigDecimal` in Java Connect:

=========  ==========  ===============================================  ======================
Type       Primitive   Encoded as                                       Python value
=========  ==========  ===============================================  ======================
Decimal    BYTES       unscaled two's-complement big-endian integer,    `decimal.Decimal`
                       `scale` parameter
Date       INT32       days since 1970-01-01                            `datetime.date`
Time       INT32       milliseconds since midnight (UTC)                `datetime.time`
Timestamp  INT64       milliseconds since the epoch (UTC)               `datetime.datetime`
=========  ==========  ===============================================  ======================

Naive `datetime`/`time` values are taken as UTC; values read back are UTC (`Timestamp` returns an
aware datetime). Sub-millisecond digits are dropped, as Java's `java.util.Date` has none.
"""

from __future__ import annotations

import datetime
import decimal

from eosconnect.api.data.builder import SchemaBuilder
from eosconnect.api.data.schema import (
    DATE_LOGICAL_NAME,
    DECIMAL_LOGICAL_NAME,
    TIME_LOGICAL_NAME,
    TIMESTAMP_LOGICAL_NAME,
    Schema,
)
from eosconnect.api.errors import DataException

__all__ = ["Date", "Decimal", "Time", "Timestamp"]

_EPOCH_DATE = datetime.date(1970, 1, 1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MILLIS_PER_DAY = 24 * 60 * 60 * 1000
_ONE_MS = datetime.timedelta(milliseconds=1)


def _check_name(schema: Schema, expected: str, what: str) -> None:
    if schema.name != expected:
        raise DataException(
            f"Requested conversion of {what} object but the schema does not match: {schema} is not {expected}"
        )


class Decimal:
    """Arbitrary-precision decimals with a fixed `scale` (digits after the point)."""

    LOGICAL_NAME = DECIMAL_LOGICAL_NAME
    SCALE_FIELD = "scale"

    @staticmethod
    def builder(scale: int) -> SchemaBuilder:
        return SchemaBuilder.bytes().name(DECIMAL_LOGICAL_NAME).parameter("scale", str(scale)).version(1)

    @staticmethod
    def schema(scale: int) -> Schema:
        return Decimal.builder(scale).build()

    @staticmethod
    def scale(schema: Schema) -> int:
        """The schema's `scale` parameter."""
        text = None if schema.parameters is None else schema.parameters.get("scale")
        if text is None:
            raise DataException("Invalid Decimal schema: scale parameter not found.")
        try:
            return int(text)
        except ValueError:
            raise DataException(f"Invalid scale parameter found in Decimal schema: {text!r}") from None

    @staticmethod
    def unscaled(schema: Schema, value: decimal.Decimal) -> int:
        """The integer `value * 10**scale`, refusing a value whose scale differs from the schema's
        (Kafka does too: round it first, e.g. `value.quantize(decimal.Decimal("0.01"))`)."""
        scale = Decimal.scale(schema)
        if not value.is_finite():
            raise DataException(f"Decimal value {value} cannot be stored: only finite decimals have a scale")
        sign, digits, exponent = value.as_tuple()
        if -int(exponent) != scale:
            raise DataException(
                "Decimal value has mismatching scale for given Decimal schema. "
                f"Schema has scale {scale}, value has scale {-int(exponent)}. "
                f"Quantize it first: value.quantize(decimal.Decimal(1).scaleb({-scale}))."
            )
        unscaled = int("".join(map(str, digits)) or "0")
        return -unscaled if sign else unscaled

    @staticmethod
    def from_logical(schema: Schema, value: decimal.Decimal) -> bytes:
        """The bytes Kafka stores: `BigInteger.toByteArray()` of the unscaled value."""
        unscaled = Decimal.unscaled(schema, value)
        length = (unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1
        return unscaled.to_bytes(length, "big", signed=True)

    @staticmethod
    def to_logical(schema: Schema, value: bytes) -> decimal.Decimal:
        if not value:
            raise DataException("Invalid Decimal value: zero-length bytes hold no number")
        return Decimal.from_unscaled(int.from_bytes(value, "big", signed=True), Decimal.scale(schema))

    @staticmethod
    def from_unscaled(unscaled: int, scale: int) -> decimal.Decimal:
        """`new BigDecimal(unscaled, scale)`, exactly (no context rounding)."""
        sign = 1 if unscaled < 0 else 0
        digits = tuple(int(d) for d in str(abs(unscaled)))
        return decimal.Decimal((sign, digits, -scale))


class Date:
    """A calendar date, stored as days since 1970-01-01."""

    LOGICAL_NAME = DATE_LOGICAL_NAME
    SCHEMA: Schema

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(DATE_LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: datetime.date) -> int:
        _check_name(schema, DATE_LOGICAL_NAME, "Date")
        if isinstance(value, datetime.datetime):
            utc = _as_utc(value)
            if utc.time() != datetime.time(0):
                raise DataException(
                    "Kafka Connect Date type should not have any time fields set to non-zero values."
                )
            value = utc.date()
        return (value - _EPOCH_DATE).days

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.date:
        _check_name(schema, DATE_LOGICAL_NAME, "Date")
        try:
            return _EPOCH_DATE + datetime.timedelta(days=value)
        except OverflowError:
            raise DataException(
                f"Date value {value} (days since 1970-01-01) is out of Python's range"
            ) from None


class Time:
    """A time of day, stored as milliseconds since midnight UTC."""

    LOGICAL_NAME = TIME_LOGICAL_NAME
    SCHEMA: Schema

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int32().name(TIME_LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: datetime.time) -> int:
        _check_name(schema, TIME_LOGICAL_NAME, "Time")
        millis = (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000
        offset = value.utcoffset()
        if offset:
            millis -= offset // _ONE_MS
        if not 0 <= millis < _MILLIS_PER_DAY:
            raise DataException(
                "Kafka Connect Time type should not have any date fields set to non-zero values "
                f"({value} is not within one UTC day)."
            )
        return millis

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.time:
        _check_name(schema, TIME_LOGICAL_NAME, "Time")
        if not 0 <= value < _MILLIS_PER_DAY:
            raise DataException(
                "Time values must use number of milliseconds greater than 0 and less than 86400000"
            )
        seconds, millis = divmod(value, 1000)
        minutes, second = divmod(seconds, 60)
        hour, minute = divmod(minutes, 60)
        return datetime.time(hour, minute, second, millis * 1000)


class Timestamp:
    """An instant, stored as milliseconds since the epoch (UTC)."""

    LOGICAL_NAME = TIMESTAMP_LOGICAL_NAME
    SCHEMA: Schema

    @staticmethod
    def builder() -> SchemaBuilder:
        return SchemaBuilder.int64().name(TIMESTAMP_LOGICAL_NAME).version(1)

    @staticmethod
    def from_logical(schema: Schema, value: datetime.datetime) -> int:
        _check_name(schema, TIMESTAMP_LOGICAL_NAME, "Timestamp")
        return (_as_utc(value) - _EPOCH) // _ONE_MS

    @staticmethod
    def to_logical(schema: Schema, value: int) -> datetime.datetime:
        _check_name(schema, TIMESTAMP_LOGICAL_NAME, "Timestamp")
        try:
            return _EPOCH + datetime.timedelta(milliseconds=value)
        except OverflowError:
            raise DataException(f"Timestamp value {value} ms is out of Python's datetime range") from None


def _as_utc(value: datetime.datetime) -> datetime.datetime:
    return value.replace(tzinfo=datetime.UTC) if value.tzinfo is None else value.astimezone(datetime.UTC)


Date.SCHEMA = Date.builder().build()
Time.SCHEMA = Time.builder().build()
Timestamp.SCHEMA = Timestamp.builder().build()

LOGICAL_NAMES = frozenset(
    {DECIMAL_LOGICAL_NAME, DATE_LOGICAL_NAME, TIME_LOGICAL_NAME, TIMESTAMP_LOGICAL_NAME}
)
"""The names of Kafka's logical types."""
