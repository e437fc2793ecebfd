"""The config topic's writers: the leader's transactional one (KIP-618) and the plain one.

Why apart from the store (storage/config_store.py): how a write reaches the topic - a transaction
per write whose producer epoch a new leader bumps, so a stalled former leader's records are aborted,
or an idempotent producer with acks=all when exactly-once source support is disabled - is one
concern with its own failure rules (fenced, no privilege, hung broker calls); what is written and
when is the store's.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from eosconnect.api.errors import ConnectException
from eosconnect.storage.clients import client_config
from eosconnect.storage.hang_safe import HUNG_CALL_GRACE_S, CallHung, call_within, close_in_background
from eosconnect.worker_config import ExactlyOnceSourceSupport, WorkerConfig

__all__ = [
    "FENCED_CODES",
    "ConfigWriteError",
    "FencingConflict",
    "LeaderConfigWriter",
    "LeaderFencedError",
    "PlainConfigWriter",
    "Record",
    "WritePrivilegeError",
    "leader_producer_config",
    "leader_transactional_id",
    "plain_producer_config",
    "uses_transactions",
]

log = logging.getLogger(__name__)

#: Broker error codes meaning "another producer with this transactional.id has taken over".
FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})

Record = tuple[str, bytes | None]


class ConfigWriteError(ConnectException):
    """A write to the config topic failed; nothing of it is visible to read_committed readers
    when the writer is transactional. `fatal`: the writer is unusable and must be re-claimed."""

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.fatal = fatal


class LeaderFencedError(ConfigWriteError):
    """A newer leader's writer took over `connect-cluster-<group.id>`: this worker must step down,
    re-read the config topic and rejoin; its write did not land."""

    def __init__(self, message: str) -> None:
        super().__init__(message, fatal=True)


class WritePrivilegeError(ConfigWriteError):
    """A privileged write was attempted without `claim_write_privileges()` (i.e. not as leader).

    The config store's own error: the herder asks the election who leads and raises
    `eosconnect.cluster.herder_api.NotLeaderError`, the one the REST layer forwards."""


class FencingConflict(ConnectException):
    """New task configs for the connector appeared during a fencing round (HTTP 409 CONFLICT)."""

    def __init__(self, connector: str, expected: int | None, found: int | None) -> None:
        super().__init__(
            f"task configs of connector {connector!r} changed during the zombie fencing round (generation "
            f"{expected} expected, {found} found); the round is abandoned, a new one follows the new configs"
        )
        self.connector = connector
        self.expected_generation = expected
        self.found_generation = found


def leader_transactional_id(group_id: str) -> str:
    return f"connect-cluster-{group_id}"


def uses_transactions(worker: WorkerConfig) -> bool:
    return worker.exactly_once_source_support in (
        ExactlyOnceSourceSupport.PREPARING,
        ExactlyOnceSourceSupport.ENABLED,
    )


def _force_acks_all(cfg: dict[str, Any], why: str) -> None:
    if str(cfg.get("acks", "all")).strip().lower() not in ("all", "-1"):
        log.warning("Ignoring acks=%r: %s, so acks is set to 'all' by eosconnect.", cfg["acks"], why)
    cfg["acks"] = "all"


def leader_producer_config(worker: WorkerConfig) -> dict[str, Any]:
    """Producer settings of the leader's transactional config-topic writer.

    A user `transactional.id` (top-level or `producer.transactional.id`) is ignored with a warning:
    the id must be the same on every worker of the group for a new leader to fence the old one.
    """
    tid = leader_transactional_id(worker.group_id)
    why = (
        "the leader's config topic writer must use the cluster-wide transactional id so that a new "
        "leader fences the previous one (exactly.once.source.support is "
        f"{worker.exactly_once_source_support.value})"
    )
    top = worker.originals.get("transactional.id")
    if top is not None and top != tid:
        log.warning("Ignoring transactional.id=%r: %s, so it is %r.", top, why, tid)
    cfg = client_config("producer", worker.originals)
    cfg.force("transactional.id", tid, why).force("enable.idempotence", True, why)
    _force_acks_all(cfg, why)
    cfg.setdefault("client.id", f"eosconnect-{worker.group_id}-configs-leader")
    # A missing config topic must be created compacted (ensure_topic), not by the broker's defaults.
    cfg.setdefault("allow.auto.create.topics", False)
    return cfg


def plain_producer_config(worker: WorkerConfig) -> dict[str, Any]:
    """Settings of the non-transactional writer: idempotent, acks=all, never a transactional.id."""
    cfg = client_config("producer", worker.originals)
    if "transactional.id" in cfg:
        log.warning(
            "Ignoring producer.transactional.id=%r for the config topic writer: with "
            "exactly.once.source.support=%s it is not transactional.",
            cfg.pop("transactional.id"),
            worker.exactly_once_source_support.value,
        )
    cfg["enable.idempotence"] = True
    _force_acks_all(cfg, "config topic writes must survive a broker failure")
    cfg.setdefault("client.id", f"eosconnect-{worker.group_id}-configs")
    cfg.setdefault("allow.auto.create.topics", False)
    return cfg


def _error_text(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else exc
    if isinstance(arg, KafkaError):
        return f"{arg.name()}: {arg.str()}"
    return str(arg)


class _Deliveries:
    """Collects delivery reports of one write: the last offset, and the first error."""

    def __init__(self) -> None:
        self.offsets: list[int] = []
        self.errors: list[str] = []

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(f"{msg.key()!r}: {err.name()}: {err.str()}")
        elif (offset := msg.offset()) is not None:  # a delivered record always has one
            self.offsets.append(offset)


class LeaderConfigWriter:
    """The leader's transactional writer: one transaction per write; fenced by the next leader.

    `start()` calls `init_transactions()`, which fences every earlier holder of the id (and aborts
    a transaction it left open). After `LeaderFencedError` the writer is dead: close it.

    A write returns or fails within `timeout_s` (plus `HUNG_CALL_GRACE_S` should librdkafka hang):
    a commit that has not completed by then is not aborted (an abort waits for the same unreachable
    coordinator); the writer is dead instead (`ConfigWriteError`, fatal), and the transaction it
    left is aborted by the coordinator (`transaction.timeout.ms`) or by the next `init_transactions()`
    of this id, whichever comes first. `close()` never waits for the broker.
    """

    transactional = True

    def __init__(self, producer_config: Mapping[str, Any], topic: str, *, timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.transactional_id = str(producer_config["transactional.id"])
        self.timeout_s = timeout_s
        self._producer = Producer(dict(producer_config))
        self._lock = threading.Lock()
        self._started = False
        self._dead: ConfigWriteError | None = None

    @property
    def fenced(self) -> bool:
        return isinstance(self._dead, LeaderFencedError)

    def start(self) -> None:
        with self._lock:
            try:
                call_within(
                    lambda: self._producer.init_transactions(self.timeout_s),
                    self.timeout_s + HUNG_CALL_GRACE_S,
                    name=f"init-{self.transactional_id}",
                )
            except KafkaException as exc:
                raise self._failure(exc, "initializing transactions", in_transaction=False) from exc
            except CallHung as exc:
                self._dead = ConfigWriteError(f"initializing transactions: {exc}", fatal=True)
                raise self._dead from None
            self._started = True
            log.info("claimed write privileges on config topic %r as %s", self.topic, self.transactional_id)

    def write(self, records: Sequence[Record], timeout_s: float | None = None) -> int:
        """Write `records` in one transaction within `timeout_s` (default: the writer's); the offset
        of the last one once committed."""
        with self._lock:
            if isinstance(self._dead, LeaderFencedError):
                raise LeaderFencedError(str(self._dead))
            if self._dead is not None:
                raise ConfigWriteError(f"config topic writer is unusable: {self._dead}", fatal=True)
            if not self._started:
                raise WritePrivilegeError("the leader's config writer was not started (call start())")
            deliveries = _Deliveries()
            deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
            try:
                self._producer.begin_transaction()
                for key, value in records:
                    self._producer.produce(
                        self.topic, key=key.encode("utf-8"), value=value, on_delivery=deliveries
                    )
                self._commit(deadline)
            except KafkaException as exc:
                doing = f"writing {[k for k, _ in records][:5]}"
                left = deadline - time.monotonic()
                raise self._failure(
                    exc, doing, in_transaction=left > 0, out_of_time=left <= 0, abort_s=left
                ) from exc
            except CallHung as exc:
                self._dead = ConfigWriteError(
                    f"the commit of a config topic transaction did not return within {self.timeout_s:.0f}s "
                    f"(librdkafka hangs there while the transaction coordinator is unreachable): {exc}",
                    fatal=True,
                )
                raise self._dead from None
            except BufferError as exc:  # local queue full: nothing was committed
                self._abort_quietly(deadline - time.monotonic())
                raise ConfigWriteError(f"config topic producer queue is full: {exc}") from exc
            if deliveries.errors:  # commit succeeded, so this should not happen; never hide it
                raise ConfigWriteError(f"config topic write reported errors: {deliveries.errors[:3]}")
            return max(deliveries.offsets, default=-1)

    def _commit(self, deadline: float) -> None:
        """Commit by `deadline`; `CallHung` if librdkafka does not return by then (plus the grace)."""

        def commit() -> None:
            while True:
                try:
                    self._producer.commit_transaction(max(0.1, deadline - time.monotonic()))
                    return
                except KafkaException as exc:
                    err: KafkaError = exc.args[0]
                    # librdkafka allows retrying a commit that timed out or failed retriably.
                    if err.retriable() and not err.txn_requires_abort() and time.monotonic() < deadline:
                        time.sleep(0.1)
                        continue
                    raise

        limit = max(0.1, deadline - time.monotonic()) + HUNG_CALL_GRACE_S
        call_within(commit, limit, name=f"commit-{self.transactional_id}")

    def _abort_quietly(self, timeout_s: float) -> None:
        try:
            self._abort(timeout_s)
        except (KafkaException, CallHung) as exc:
            self._dead = ConfigWriteError(
                f"could not abort a config topic transaction: {_error_text(exc)}", fatal=True
            )

    def _abort(self, timeout_s: float) -> None:
        """`abort_transaction()` within what is left of the write's time (at least a second), bounded
        as a commit is."""
        timeout_s = max(1.0, timeout_s)
        call_within(
            lambda: self._producer.abort_transaction(timeout_s),
            timeout_s + HUNG_CALL_GRACE_S,
            name=f"abort-{self.transactional_id}",
        )

    def _failure(
        self,
        exc: KafkaException,
        doing: str,
        *,
        in_transaction: bool,
        out_of_time: bool = False,
        abort_s: float = 0.0,
    ) -> ConfigWriteError:
        """Classify an error; the writer stays usable only if nothing of a transaction is left open.
        `in_transaction`: a transaction is open, to abort within `abort_s`; `out_of_time`: a write
        failed at its deadline, leaving its transaction to the coordinator and the writer dead."""
        err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
        text = _error_text(exc)
        if err is not None and err.code() in FENCED_CODES:
            self._dead = LeaderFencedError(
                f"fenced while {doing} on config topic {self.topic!r}: another worker became the leader "
                f"and took over transactional id {self.transactional_id!r}; this worker must step down, "
                f"re-read the config topic and rejoin ({text})"
            )
            return self._dead
        if err is not None and err.fatal():
            self._dead = ConfigWriteError(f"fatal producer error while {doing}: {text}", fatal=True)
            return self._dead
        if out_of_time:
            # Its transaction stays open until the coordinator, or the next init_transactions() of
            # this id, aborts it: an abort would wait for the coordinator that did not answer.
            self._dead = ConfigWriteError(
                f"could not complete {doing} on config topic {self.topic!r} within {self.timeout_s:.0f}s: "
                f"{text}",
                fatal=True,
            )
            return self._dead
        if in_transaction:
            # Abortable errors: abort, so the next write starts clean; if even that fails, the writer
            # cannot be trusted.
            try:
                self._abort(abort_s)
            except CallHung as abort_exc:
                self._dead = ConfigWriteError(f"could not abort after {text}: {abort_exc}", fatal=True)
                return self._dead
            except KafkaException as abort_exc:
                abort_err = abort_exc.args[0] if abort_exc.args else None
                if isinstance(abort_err, KafkaError) and abort_err.code() in FENCED_CODES:
                    return self._failure(abort_exc, doing, in_transaction=False)
                self._dead = ConfigWriteError(
                    f"could not abort after {text}: {_error_text(abort_exc)}", fatal=True
                )
                return self._dead
        return ConfigWriteError(f"error while {doing} on config topic {self.topic!r}: {text}")

    def close(self) -> None:
        """Give the producer up without waiting for the broker: it is closed on a thread of its own
        (its open transaction is aborted by the coordinator, if not by this close). Waits for a write
        under way only as long as a write may take."""
        acquired = self._lock.acquire(timeout=self.timeout_s + HUNG_CALL_GRACE_S)
        try:
            self._dead = self._dead or ConfigWriteError("the config topic writer was closed", fatal=True)
            producer = self._producer
            with contextlib.suppress(KafkaException, RuntimeError):
                producer.purge()
            close_in_background(
                lambda: _close_quietly(producer), name=f"config-writer-{self.transactional_id}"
            )
        finally:
            if acquired:
                self._lock.release()


def _close_quietly(producer: Producer) -> None:
    """`producer.close()` without the RuntimeWarning confluent-kafka raises when its pending
    transaction cannot be aborted (a fenced producer's: the broker already aborted it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        producer.close()


class PlainConfigWriter:
    """The writer with exactly-once support disabled: idempotent, acks=all, no transactions. A write
    fails once `timeout_s` passed without its acknowledgement; `close()` never waits for the broker."""

    transactional = False
    fenced = False

    def __init__(self, producer_config: Mapping[str, Any], topic: str, *, timeout_s: float = 30.0) -> None:
        self.topic = topic
        self.timeout_s = timeout_s
        self._producer = Producer(dict(producer_config))
        self._lock = threading.Lock()

    def start(self) -> None:
        """Nothing to claim: without transactions, any writer may write."""

    def write(self, records: Sequence[Record], timeout_s: float | None = None) -> int:
        """Send `records`; the offset of the last one once all are acknowledged within `timeout_s`
        (default: the writer's)."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        with self._lock:
            deliveries = _Deliveries()
            try:
                for key, value in records:
                    self._producer.produce(
                        self.topic, key=key.encode("utf-8"), value=value, on_delivery=deliveries
                    )
            except (KafkaException, BufferError) as exc:
                raise ConfigWriteError(f"could not send to config topic {self.topic!r}: {exc}") from exc
            remaining = self._producer.flush(timeout_s)
            if remaining:
                raise ConfigWriteError(
                    f"{remaining} config topic records were not acknowledged within {timeout_s:.0f}s"
                )
            if deliveries.errors:
                raise ConfigWriteError(f"config topic write failed: {'; '.join(deliveries.errors[:3])}")
            return max(deliveries.offsets, default=-1)

    def close(self) -> None:
        """Deliver what is still queued and close, on a thread of its own (`close_in_background`):
        both wait for the broker, which may be unreachable."""
        producer, timeout_s = self._producer, self.timeout_s

        def close() -> None:
            producer.flush(timeout_s)
            producer.close()

        close_in_background(close, name=f"config-writer-{self.topic}")
