"""A KIP-656 sink writer for unit tests that replace its clients with stand-ins."""

from __future__ import annotations

from eosconnect.runtime.sink_transactions import TransactionalSinkProducer


def unconnected_sink_writer() -> TransactionalSinkProducer:
    """A `TransactionalSinkProducer` whose clients are configured for a port nothing listens on and
    never started: a test sets `producer` (and `group_consumer`) to its stand-ins."""
    return TransactionalSinkProducer(
        {"bootstrap.servers": "127.0.0.1:9999"},
        {"bootstrap.servers": "127.0.0.1:9999"},
        transactional_id="g-mm-0",
        group_id="connect-mm",
        task_id="mm-0",
        timeout_remedies="",
    )
