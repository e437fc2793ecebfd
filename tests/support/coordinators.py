"""Where Kafka places a group or a transactional id among its coordinator partitions, for tests that
must put a coordinator on a chosen broker (or away from one)."""

from __future__ import annotations


def java_hash(text: str) -> int:
    """Java's String.hashCode() (signed 32 bits)."""
    h = 0
    for char in text:
        h = (31 * h + ord(char)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def coordinator_partition(key: str, partitions: int) -> int:
    """The partition of `__consumer_offsets` (a group id) or `__transaction_state` (a transactional
    id) that holds `key`: Kafka's `Utils.abs(key.hashCode()) % partitions` (abs of MIN_VALUE is 0)."""
    h = java_hash(key)
    return (0 if h == -(2**31) else abs(h)) % partitions
