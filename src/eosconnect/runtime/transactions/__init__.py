"""Kafka transactions as every transactional writer of the runtime uses them.

Where a transaction begins and ends is said once, in `TransactionSession` (session.py): the
exactly-once source runner (runtime/exactly_once.py) and the KIP-656 sink writer (sink_writer.py)
each write through one. Around it:

- errors.py: the forced producer settings, and a producer's failure classified into the error that
  fails the task (a zombie, a transaction that outlived its timeout, a hung call), named by `Step`;
- budget.py: bounded transactions (`TransactionBudget`, `commit_in_time`, `abort_in_time`,
  `init_in_time`, `held_records`, `warn_aborted`), by which a task aborts a transaction that cannot
  be committed in time, before the broker's `transaction.timeout.ms` would, and writes it again;
- offsets.py: what commits with the records, source offsets to the offsets topic or a consumer
  group's offsets through `send_offsets_to_transaction()`;
- replay.py: a source task's recovery, sending an aborted transaction again from memory (a sink
  rewinds its consumer instead: `TransactionRetry`, raised by sink_writer.py);
- boundaries.py: when a source task's transaction ends (KIP-618's `transaction.boundary`).
"""

from eosconnect.runtime.transactions.boundaries import Boundary, boundary_for
from eosconnect.runtime.transactions.budget import (
    ABORT_AFTER_SHARE,
    CALL_TIMEOUT_S,
    COMMIT_BY_SHARE,
    INIT_WARN_AFTER_S,
    TransactionBudget,
    abort_in_time,
    commit_in_time,
    held_records,
    init_in_time,
    init_timeout_s,
    warn_aborted,
)
from eosconnect.runtime.transactions.errors import (
    FENCED_CODES,
    PURGED,
    ProducerInitTimedOut,
    Step,
    TaskFencedError,
    TransactionCallHung,
    TransactionTimedOutError,
    classify_transaction_error,
    failure_cause,
    fatal_cause,
    transactional_producer_config,
)
from eosconnect.runtime.transactions.session import Transaction, TransactionSession

__all__ = [
    "ABORT_AFTER_SHARE",
    "CALL_TIMEOUT_S",
    "COMMIT_BY_SHARE",
    "FENCED_CODES",
    "INIT_WARN_AFTER_S",
    "PURGED",
    "Boundary",
    "ProducerInitTimedOut",
    "Step",
    "TaskFencedError",
    "Transaction",
    "TransactionBudget",
    "TransactionCallHung",
    "TransactionSession",
    "TransactionTimedOutError",
    "abort_in_time",
    "boundary_for",
    "classify_transaction_error",
    "commit_in_time",
    "failure_cause",
    "fatal_cause",
    "held_records",
    "init_in_time",
    "init_timeout_s",
    "transactional_producer_config",
    "warn_aborted",
]
