"""When a source task's transaction ends (KIP-618's `transaction.boundary`): after every poll, on
an interval, or when the connector asks; each a small object the runner consults at the same five
points (`boundary_for`)."""

from __future__ import annotations

import time
from typing import Protocol

from eosconnect.api.records import SourceRecord
from eosconnect.api.transactions import RequestedTransactionContext
from eosconnect.runtime.config import TransactionBoundary

__all__ = [
    "Boundary",
    "ConnectorBoundary",
    "IntervalBoundary",
    "PollBoundary",
    "TransactionEnds",
    "boundary_for",
]


class TransactionEnds(Protocol):
    """What a boundary strategy asks of the source runner it serves."""

    @property
    def transaction_open(self) -> bool: ...

    @property
    def last_commit(self) -> float: ...

    def end_transaction(self, abort: bool) -> None: ...

    def await_commit(self) -> None: ...

    def serve_deliveries(self) -> None: ...

    def commit_offsets_heartbeat(self) -> None: ...

    def abort_on_stop(self) -> None: ...


class Boundary:
    """When a source task's transaction ends (KIP-618's `transaction.boundary`), asked at five
    points of the runner's loop. This base never ends one on its own but on pause and stop."""

    #: Whether the strategy looks at every record (then batches go record by record).
    per_record = False
    context: RequestedTransactionContext | None = None

    def __init__(self, runner: TransactionEnds) -> None:
        self.runner = runner

    def after_record(self, record: SourceRecord) -> None:
        """A record of the polled batch was sent."""

    def after_batch(self) -> None:
        """The polled batch went to the producer; its delivery reports are served here."""
        self.runner.serve_deliveries()

    def on_idle(self) -> None:
        """`poll()` returned nothing."""

    def on_pause(self) -> None:
        """The task was paused: commit what is open."""
        if self.runner.transaction_open:
            self.runner.end_transaction(abort=False)
            self.runner.await_commit()

    def on_stop(self) -> None:
        """The task stops: commit what is open (the runner then waits for the commit)."""
        if self.runner.transaction_open:
            self.runner.end_transaction(abort=False)


class PollBoundary(Boundary):
    """`transaction.boundary=poll`: one transaction per batch `poll()` returned."""

    def after_batch(self) -> None:
        self.runner.end_transaction(abort=False)  # the commit serves the batch's delivery reports


class IntervalBoundary(Boundary):
    """`transaction.boundary=interval`: commit every `interval_s`, also with no records (KIP-910)."""

    def __init__(self, runner: TransactionEnds, interval_s: float) -> None:
        super().__init__(runner)
        self.interval_s = interval_s

    def after_batch(self) -> None:
        super().after_batch()
        self._commit_if_due()

    def on_idle(self) -> None:
        self._commit_if_due()

    def _commit_if_due(self) -> None:
        runner = self.runner
        if time.monotonic() - runner.last_commit < self.interval_s:
            return
        if runner.transaction_open:
            runner.end_transaction(abort=False)
        else:
            runner.commit_offsets_heartbeat()


class ConnectorBoundary(Boundary):
    """`transaction.boundary=connector`: the task asks through its `TransactionContext`."""

    per_record = True
    context: RequestedTransactionContext

    def __init__(self, runner: TransactionEnds) -> None:
        super().__init__(runner)
        self.context = RequestedTransactionContext()

    def after_record(self, record: SourceRecord) -> None:
        if self.context.should_abort_on(record):
            self.runner.end_transaction(abort=True)
        elif self.context.should_commit_on(record):
            self.runner.end_transaction(abort=False)

    def after_batch(self) -> None:
        super().after_batch()
        self._batch_request()

    def on_idle(self) -> None:
        self.context.check()

    def on_pause(self) -> None:
        """Only the connector ends its transactions, paused or not."""

    def on_stop(self) -> None:
        if not self._batch_request() and self.runner.transaction_open:
            self.runner.abort_on_stop()  # the connector did not commit it

    def _batch_request(self) -> bool:
        """End the transaction as the connector asked for the batch; False if it asked nothing."""
        if self.context.should_abort_batch():
            self.runner.end_transaction(abort=True)
        elif self.context.should_commit_batch():
            self.runner.end_transaction(abort=False)
        else:
            return False
        return True


def boundary_for(kind: TransactionBoundary, runner: TransactionEnds, interval_s: float) -> Boundary:
    if kind is TransactionBoundary.POLL:
        return PollBoundary(runner)
    if kind is TransactionBoundary.INTERVAL:
        return IntervalBoundary(runner, interval_s)
    return ConnectorBoundary(runner)
