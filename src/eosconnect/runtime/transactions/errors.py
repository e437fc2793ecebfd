"""How a transactional producer's failures read: the step that failed, and the error that fails the
task (a zombie, a transaction that outlived its timeout, a call that hung, anything else).

Shared by every transactional writer of the runtime (the exactly-once source runner, the KIP-656
sink writer and the Spark sink), so a zombie and a timed-out transaction read the same everywhere.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from enum import StrEnum
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from eosconnect.api.errors import ConnectException
from eosconnect.storage.clients import C, forced

__all__ = [
    "FENCED_CODES",
    "LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS",
    "PURGED",
    "ProducerInitTimedOut",
    "Step",
    "TaskFencedError",
    "TransactionCallHung",
    "TransactionTimedOutError",
    "classify_transaction_error",
    "failure_cause",
    "fatal_cause",
    "transactional_producer_config",
]

LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000
FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})
#: Delivery errors of records an abort purged: expected, never a reason to abort again.
PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})


class Step(StrEnum):
    """A transactional call, as error messages name it ("... while <step>")."""

    INIT = "initialising the transactional producer"
    BEGIN = "beginning a transaction"
    SEND_OFFSETS = "sending offsets to the transaction"
    COMMIT = "committing the transaction"
    ABORT = "aborting the transaction"


class TaskFencedError(ConnectException):
    """A newer instance of this task took over its transactional id: this one is a zombie."""


class TransactionTimedOutError(ConnectException):
    """The transaction outlived `transaction.timeout.ms`; the message lists the remedies."""


class TransactionCallHung(ConnectException):
    """A transaction call never returned (librdkafka issues 5456 and 5511). The producer is
    re-initialised in place only when the leader confirms the instance current (a replaced instance
    doing that would fence its own successor); otherwise the task ends, quietly if a newer instance
    already replaced it (runtime/supersession.py)."""


class ProducerInitTimedOut(ConnectException):
    """A new transactional producer was not let in within `init_timeout_s`: the task fails, naming
    the setting the bound derives from."""


def transactional_producer_config(
    config: C, transactional_id: str, origin: Mapping[str, str] | None = None
) -> tuple[C, int]:
    """The runtime's settings forced onto a task's transactional producer (a user value is ignored
    with a warning, as KIP-618 asks), and its transaction timeout in ms for classifying failures.

    Shared by every task that writes inside transactions, so both use `<group.id>-<connector>-<task>`
    the same way and the fencing round finds their ids."""
    why = "exactly-once tasks use <group.id>-<connector>-<task>"
    config = forced(config, "transactional.id", transactional_id, why, origin=origin)
    config = forced(config, "enable.idempotence", True, "transactions need idempotence", origin=origin)
    return config, int(config.get("transaction.timeout.ms", LIBRDKAFKA_DEFAULT_TRANSACTION_TIMEOUT_MS))


def classify_transaction_error(
    exc: KafkaException,
    doing: str,
    *,
    task_id: str,
    transactional_id: str,
    transaction_timeout_ms: int,
    txn_started: float | None,
    timeout_remedies: str = (
        "tune the producer for throughput (producer.override.linger.ms, batch.size), raise "
        "producer.override.transaction.timeout.ms (up to the broker's transaction.max.timeout.ms), lower "
        "transaction.boundary.interval.ms, or use transaction.boundary=poll"
    ),
) -> Exception:
    """The task-failing error for a transactional producer's `exc` while `doing` something.

    Shared by every task that writes inside transactions (exactly-once sources, the KIP-656 mirror
    sink), so that a zombie and a timed-out transaction read the same everywhere. `txn_started` is
    the monotonic time the failed transaction began (None: no transaction was open); the caller
    names its own settings in `timeout_remedies`.
    """
    err: KafkaError = exc.args[0]
    open_for_ms = (time.monotonic() - txn_started) * 1000 if txn_started is not None else 0
    if txn_started is not None and open_for_ms >= transaction_timeout_ms:
        return TransactionTimedOutError(
            f"{task_id}: the transaction was open for {open_for_ms / 1000:.1f}s, longer than the "
            f"producer's transaction.timeout.ms ({transaction_timeout_ms} ms), and the broker "
            f"aborted it ({err.str()}). Remedies: {timeout_remedies}."
        )
    if err.code() in FENCED_CODES:
        return TaskFencedError(
            f"{task_id}: fenced while {doing}: another instance of this task (transactional.id "
            f"{transactional_id}) has started, so this one is a zombie and stops "
            f"without committing ({err.str()})"
        )
    return ConnectException(f"{task_id}: Kafka error while {doing}: {err.name()}: {err.str()}")


def fatal_cause(producer: Any, exc: KafkaException) -> KafkaException:
    """`produce()` on a producer that already hit a fatal error (e.g. fenced, learnt from a
    produce response) only says _FATAL; any transactional call then raises the cause itself, so
    a fenced zombie is told apart from a real failure (shared by sources and the mirror sink)."""
    if exc.args[0].code() != KafkaError._FATAL:
        return exc
    return _producer_fatal_error(producer) or exc


def failure_cause(producer: Any, exc: BaseException) -> KafkaException | None:
    """The Kafka error behind a failed `flush()`, `poll()` or pipelined commit of a transactional
    producer, to classify it (`classify_transaction_error`); None when there is none to be found.

    Those calls report a producer's fatal error (a zombie fenced by its successor) only indirectly:
    as `_FATAL`, or as a SystemError from confluent-kafka's callback machinery whose cause is the
    KafkaException, or not at all. The one way, for sources and the mirror sink alike: a linked
    KafkaException is taken (its fatal cause, `fatal_cause`); without one, a transactional call on
    the producer raises its fatal error, if it has one."""
    if isinstance(exc, KafkaException):
        return fatal_cause(producer, exc)
    linked = exc.__cause__ or exc.__context__
    if isinstance(linked, KafkaException):
        return fatal_cause(producer, linked)
    return _producer_fatal_error(producer)


def _producer_fatal_error(producer: Any) -> KafkaException | None:
    """The fatal error a producer is in, learnt from a transactional call that raises it at once
    (a healthy producer's 0.1 s abort on a failure path is no loss: the task fails either way)."""
    if producer is None:
        return None
    try:
        producer.abort_transaction(0.1)
    except KafkaException as cause:
        err: KafkaError = cause.args[0]
        if err.fatal() and err.code() != KafkaError._FATAL:
            return cause
    return None
