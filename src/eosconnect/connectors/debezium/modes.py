"""Debezium's type-handling modes, the same settings for every connector: how DECIMAL/NUMERIC columns
(`decimal.handling.mode`) and time columns (`time.precision.mode`) come out."""

from __future__ import annotations

from enum import StrEnum

__all__ = ["DecimalHandling", "TimePrecision"]


class DecimalHandling(StrEnum):
    PRECISE = "precise"
    DOUBLE = "double"
    STRING = "string"


class TimePrecision(StrEnum):
    ADAPTIVE = "adaptive"
    ADAPTIVE_TIME_MICROSECONDS = "adaptive_time_microseconds"
    CONNECT = "connect"
