"""When a streaming task may try its replication connection again, as Debezium's retries do.

Debezium retries a lost database connection by itself (`errors.max.retries`, -1 by default: no
limit; `retriable.restart.connector.wait.ms` between tries) instead of failing the task, so a
PostgreSQL restart or fail-over needs no operator. The task keeps what it had read: it hands out
the transactions it finished and resumes the stream after the last of them. Only a lost connection
is tried again (`is_connection_loss`): a refused login or a missing slot fails the task.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.postgres_cdc.replication import ReplicationLost

__all__ = ["Reconnection", "is_connection_loss"]


@dataclass
class Reconnection:
    """One outage of the replication connection: its cause, the tries so far and the next one."""

    slot: str
    cause: str
    lost_reader: int  # the lost connection's server process, which may hold the slot a while longer
    max_retries: int  # -1: no limit; 0: fail at once
    wait_s: float
    lost_at: float = field(default_factory=time.monotonic)
    attempts: int = 0
    next_try: float = 0.0

    def __post_init__(self) -> None:
        self.next_try = self.lost_at  # the first try is at once (a dropped connection, a server already back)
        if self.max_retries == 0:
            raise self.exhausted()

    def due(self) -> bool:
        return time.monotonic() >= self.next_try

    def failed(self, why: str) -> None:
        """A try did not get the stream back: wait before the next, or give up."""
        self.attempts += 1
        self.cause = why
        if 0 <= self.max_retries <= self.attempts:
            raise self.exhausted()
        self.next_try = time.monotonic() + self.wait_s

    def exhausted(self) -> ConnectException:
        tries = (
            f"after {self.attempts} retr{'y' if self.attempts == 1 else 'ies'}"
            if self.attempts
            else "at once"
        )
        return ConnectException(
            f"lost the replication connection reading slot {self.slot!r} ({self.cause}) and gave up "
            f"{tries} (errors.max.retries={self.max_retries}). Once PostgreSQL is reachable, "
            "restart the task: it resumes from its committed offset; errors.max.retries=-1 retries "
            "without limit."
        )

    def outage_s(self) -> float:
        return time.monotonic() - self.lost_at


def is_connection_loss(exc: Exception) -> bool:
    """A lost replication connection, or a catalog query on a connection the server ended. A login
    PostgreSQL refused (`ConnectionRefused`: a changed password, say) is neither: no retry mends it."""
    if isinstance(exc, ReplicationLost):
        return True
    import psycopg

    return isinstance(exc, psycopg.OperationalError)
