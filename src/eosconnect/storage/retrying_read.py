"""`read_to_end` that rides out a partition leader moving, for the config, status and offsets stores.

Right after a topic is created, or while a broker restarts, listing offsets or fetching can fail
with NOT_LEADER_FOR_PARTITION and similar retriable errors. The stores apply records one by one
and remember their position, so a failed read can simply be retried from where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from eosconnect.storage.topic_reader import TopicReader, TopicRecord
from eosconnect.storage.transient import retry_transient


def read_to_end_retrying(
    reader: TopicReader,
    positions: Callable[[], dict[int, int]],
    on_record: Callable[[TopicRecord], None],
    timeout: float,
) -> None:
    """`reader.read_to_end(start_offsets=positions())`, retried on transient errors until `timeout`
    (a failed attempt drops the reader's clients, so the retry starts with fresh ones).

    `positions` is called before every attempt, so records applied by a failed attempt are not
    read twice.
    """
    deadline = time.monotonic() + timeout

    def attempt() -> None:
        remaining = max(1.0, deadline - time.monotonic())
        reader.read_to_end(start_offsets=positions(), timeout=remaining, on_record=on_record)

    retry_transient(attempt, timeout=timeout, doing=f"reading {reader.topic!r}")
