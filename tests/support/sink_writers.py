"""A KIP-656 sink writer for unit tests that replace its clients with stand-ins."""

from __future__ import annotations

from eosconnect.runtime.transactions.sink_writer import TransactionalSinkWriter


def unconnected_sink_writer() -> TransactionalSinkWriter:
    """A `TransactionalSinkWriter` whose clients are configured for a port nothing listens on and
    never started: a test sets `session.producer` (and `offsets.consumer`) to its stand-ins."""
    return TransactionalSinkWriter(
        {"bootstrap.servers": "127.0.0.1:9999"},
        {"bootstrap.servers": "127.0.0.1:9999"},
        transactional_id="g-mm-0",
        group_id="connect-mm",
        task_id="mm-0",
        timeout_remedies="",
    )
