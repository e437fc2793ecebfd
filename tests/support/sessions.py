"""A source task's `TransactionSession` for unit tests that stand in for its producer."""

from __future__ import annotations

import logging
from typing import Any

from eosconnect.runtime.transactions.replay import SourceTransaction
from eosconnect.runtime.transactions.session import TransactionSession

__all__ = ["unconnected_session"]


def unconnected_session(producer: Any, leader: Any = None) -> TransactionSession[SourceTransaction]:
    """A session whose own producer is configured for a port nothing listens on and never used:
    `producer` (a stand-in) takes its place. `leader` answers as a `CurrentInstance` (None: none)."""
    session: TransactionSession[SourceTransaction] = TransactionSession(
        {"bootstrap.servers": "127.0.0.1:9999"},
        transactional_id="g-c-0",
        task_id="c-0",
        make=SourceTransaction,
        leader=leader,
        logger=logging.getLogger("tests.sessions"),
        timeout_setting="transaction.timeout.ms",
    )
    session.producer = producer
    return session
