"""The config topic: connector and task configs, target states, task counts and the session key.

Reading: `ConfigStore.read_to_end()` reads with read_committed up to the end fixed when the call
starts (`topic_reader.read_to_end`), continuing from where the previous read stopped, and returns an
immutable `ConfigSnapshot` (rules in `config_state`).

Writing: only the leader writes (except target states, see `put_target_state`). With
`exactly.once.source.support` = `preparing` or `enabled`, it writes through a `LeaderConfigWriter`:
a transactional producer with `transactional.id = connect-cluster-<group.id>` that puts every write in
its own transaction (KIP-618 "Leader access to config topic"). A new leader's `init_transactions()`
bumps the producer epoch, so a stalled former leader that wakes up cannot append anything (for
example a task-count record after newer task configs, which would let unfenced tasks start): its
write fails with `LeaderFencedError` and its records are aborted, invisible to read_committed readers.
With `disabled`, an idempotent producer with acks=all writes, as in Kafka Connect before KIP-618.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.storage.clients import client_config
from eosconnect.storage.config_state import (
    SESSION_KEY_KEY,
    ConfigSnapshot,
    ConfigStateBuilder,
    TargetState,
    commit_key,
    connector_key,
    encode_commit,
    encode_connector_config,
    encode_session_key,
    encode_target_state,
    encode_task_config,
    encode_task_count,
    target_state_key,
    task_count_key,
    task_key,
)
from eosconnect.storage.hang_safe import HUNG_CALL_GRACE_S, CallHung, call_within, close_in_background
from eosconnect.storage.retrying_read import read_to_end_retrying
from eosconnect.storage.session_key import SessionKey
from eosconnect.storage.topic_reader import TopicReader, TopicRecord, topic_partitions
from eosconnect.storage.topics import ensure_topic
from eosconnect.worker_config import ExactlyOnceSourceSupport, WorkerConfig

__all__ = [
    "ConfigSnapshot",
    "ConfigStore",
    "ConfigWriteError",
    "FencingConflict",
    "LeaderConfigWriter",
    "LeaderFencedError",
    "PlainConfigWriter",
    "TargetState",
    "WritePrivilegeError",
    "leader_producer_config",
    "leader_transactional_id",
    "plain_producer_config",
]

log = logging.getLogger(__name__)

#: Broker error codes meaning "another producer with this transactional.id has taken over".
FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})

Record = tuple[str, bytes | None]

#: The least time a write is given, even when what came before it under the write lock (the wait
#: for the lock, a read) used up the write's timeout: a commit on a reachable broker takes
#: milliseconds.
MIN_WRITE_S = 1.0


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


def _uses_transactions(worker: WorkerConfig) -> bool:
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


Writer = LeaderConfigWriter | PlainConfigWriter


class ConfigStore:
    """Reads and writes a worker group's config topic (`config.storage.topic`).

    Thread-safe: reads are serialized with each other, writes with each other, and a guarded
    task-count write (`expected_generation`) reads and writes under the write lock so no other
    write of this store slips in between the check and the write.
    """

    def __init__(
        self,
        worker: WorkerConfig,
        *,
        topic: str | None = None,
        read_timeout_s: float = 60.0,
        write_timeout_s: float = 30.0,
    ) -> None:
        self.worker = worker
        self.topic = topic or str(worker.values["config.storage.topic"])
        self.transactional = _uses_transactions(worker)
        self.transactional_id = leader_transactional_id(worker.group_id)
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        self._consumer_config = client_config("consumer", worker.originals)
        self._builder = ConfigStateBuilder()
        self._snapshot = self._builder.snapshot()
        self._read_lock = threading.Lock()
        #: Kept across reads (the store reads after every write); used under `_read_lock`.
        self._reader = TopicReader(self._consumer_config, self.topic, group=worker.group_id)
        self._write_lock = threading.RLock()
        #: When the outermost write under `_write_lock` must be done by (`_writing`).
        self._write_deadline: float | None = None
        self._writer: Writer | None = None
        self._plain_writer: PlainConfigWriter | None = None

    # ---------------------------------------------------------------------------------- topic
    def ensure_topic(self, timeout: float = 30.0) -> bool:
        """Create the topic if missing (1 partition, compacted); fail if it has more partitions.

        One partition is what makes the config topic a log with a single order: task configs, their
        commit and the task-count record must be read in the order they were written.
        """
        admin = AdminClient(client_config("admin", self.worker.originals))
        created = ensure_topic(
            admin,
            self.topic,
            1,
            int(self.worker.values["config.storage.replication.factor"]),
            replication_setting="config.storage.replication.factor",
            require_compaction=True,
            timeout=timeout,
        )
        partitions = topic_partitions(admin, self.topic, timeout)
        if len(partitions) != 1:
            raise ConfigException.for_field(
                "config.storage.topic",
                f"topic {self.topic!r} has {len(partitions)} partitions, but the config topic must have "
                "exactly one to keep connector and task configs in order; point config.storage.topic at "
                "a single-partition compacted topic",
            )
        return created

    def start(self) -> ConfigSnapshot:
        """Create the topic if needed and read it to the end."""
        self.ensure_topic()
        return self.read_to_end()

    # ---------------------------------------------------------------------------------- reading
    @property
    def snapshot(self) -> ConfigSnapshot:
        """The snapshot of the latest `read_to_end()` (no I/O)."""
        return self._snapshot

    def read_to_end(self, timeout: float | None = None) -> ConfigSnapshot:
        """Read what was appended since the last read, up to the end as of this call.

        Waits for transactions that are open at the start; raises `ReadTimeout` after `timeout`.
        """
        with self._read_lock:
            read_to_end_retrying(
                self._reader,
                lambda: {0: self._builder.offset},
                self._apply,
                self.read_timeout_s if timeout is None else timeout,
            )
            self._snapshot = self._builder.snapshot()
            return self._snapshot

    def _apply(self, record: TopicRecord) -> None:
        self._builder.apply(record.key, record.value, record.offset)

    # ---------------------------------------------------------------------------------- privileges
    def claim_write_privileges(self) -> None:
        """Call on becoming the leader: starts the writer, fencing any previous leader's writer.

        Idempotent while the writer is healthy. Raises `LeaderFencedError` if, meanwhile, yet another
        worker claimed them, or `ConfigWriteError` if the transaction coordinator is unreachable.
        """
        with self._writing():
            if self._writer is not None:
                return
            writer: Writer
            if self.transactional:
                writer = LeaderConfigWriter(
                    leader_producer_config(self.worker), self.topic, timeout_s=self.write_timeout_s
                )
            else:
                writer = PlainConfigWriter(
                    plain_producer_config(self.worker), self.topic, timeout_s=self.write_timeout_s
                )
            try:
                writer.start()
            except LeaderFencedError:
                writer.close()
                raise
            except ConfigWriteError as exc:
                writer.close()
                # acls imports this module (leader_transactional_id): imported here, when needed
                from eosconnect.storage.acls import leader_authorization_hint

                hint = leader_authorization_hint(str(exc), self.worker.originals)
                if hint is None:
                    raise
                raise ConfigWriteError(f"{hint}\n{exc}", fatal=exc.fatal) from exc
            except BaseException:
                writer.close()
                raise
            self._writer = writer

    def relinquish_write_privileges(self) -> None:
        """Call on losing leadership: gives the writer up (its open transaction is aborted). Not
        under the write lock: a write under way must not hold up the herder's step-down; it fails
        on the closed writer, or completes first (`LeaderConfigWriter.close`)."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    @property
    def has_write_privileges(self) -> bool:
        return self._writer is not None

    def _privileged(self, records: Sequence[Record]) -> int:
        with self._writing():
            if self._writer is None:
                if self.transactional:
                    raise WritePrivilegeError(
                        f"cannot write {[k for k, _ in records][:3]} to config topic {self.topic!r}: with "
                        "exactly.once.source.support enabled or preparing only the leader writes, after "
                        "claim_write_privileges()"
                    )
                self.claim_write_privileges()
            writer = self._writer
            if writer is None:
                raise WritePrivilegeError(
                    f"the config topic writer was given up while writing to {self.topic!r}"
                )
            try:
                return writer.write(records, self._time_left())
            except ConfigWriteError as exc:
                if exc.fatal:
                    self.relinquish_write_privileges()
                raise

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """The write lock, and the deadline of what is written under it: `write_timeout_s` from the
        call, the wait for the lock included, so that a write stuck behind another that does not
        complete fails in time instead of queueing (REST requests must answer)."""
        began = time.monotonic()
        if not self._write_lock.acquire(timeout=self.write_timeout_s):
            raise ConfigWriteError(
                f"another write to config topic {self.topic!r} has not completed within "
                f"{self.write_timeout_s:.0f}s (the brokers may be unreachable); try again"
            )
        outermost = self._write_deadline is None
        if outermost:
            self._write_deadline = began + self.write_timeout_s
        try:
            yield
        finally:
            if outermost:
                self._write_deadline = None
            self._write_lock.release()

    def _time_left(self) -> float:
        """What is left of the current write's time (at least `MIN_WRITE_S`); under `_writing()`."""
        deadline = self._write_deadline
        left = self.write_timeout_s if deadline is None else deadline - time.monotonic()
        return max(MIN_WRITE_S, left)

    # ---------------------------------------------------------------------------------- writes
    def put_connector_config(
        self, connector: str, props: Mapping[str, str], target_state: TargetState | None = None
    ) -> int:
        """Create or update a connector; with `target_state`, both land in one write (KIP-980 order:
        the state first, so the connector never runs in the wrong state). Returns the last offset."""
        records: list[Record] = []
        if target_state is not None:
            records.append((target_state_key(connector), encode_target_state(target_state)))
        records.append((connector_key(connector), encode_connector_config(props)))
        return self._privileged(records)

    def delete_connector(self, connector: str) -> int:
        """Tombstones for the connector config and its target state (what Kafka Connect writes)."""
        return self._privileged([(connector_key(connector), None), (target_state_key(connector), None)])

    def put_task_configs(self, connector: str, configs: Sequence[Mapping[str, str]]) -> int:
        """Write a new generation: every task config, then `commit-<c>`.

        Transactional: all in one transaction, so readers see all or nothing. Otherwise the task
        records are acknowledged before the commit is sent, so a commit never precedes its tasks.
        """
        tasks: list[Record] = [(task_key(connector, i), encode_task_config(p)) for i, p in enumerate(configs)]
        commit: Record = (commit_key(connector), encode_commit(len(configs)))
        with self._writing():
            if self.transactional or not tasks:
                return self._privileged([*tasks, commit])
            self._privileged(tasks)
            return self._privileged([commit])

    def put_task_count_record(
        self, connector: str, task_count: int, *, expected_generation: int | None = None
    ) -> int:
        """Write `tasks-fencing-<c>`; with `expected_generation`, only if the config topic's latest
        generation of the connector still is that one (else `FencingConflict`, nothing written).

        The check reads to the end under the write lock, so new task configs written by this store
        cannot land between the check and the write; a different leader's cannot land at all, since
        its `init_transactions()` fenced this writer.
        """
        record: Record = (task_count_key(connector), encode_task_count(task_count))
        with self._writing():
            if expected_generation is not None:
                found = self.read_to_end().generation(connector)
                if found != expected_generation:
                    raise FencingConflict(connector, expected_generation, found)
            return self._privileged([record])

    def put_target_state(self, connector: str, state: TargetState | str) -> int:
        """Pause/resume/stop. Through the leader's writer when this worker holds it; otherwise with a
        non-transactional producer, as Kafka Connect lets any worker write target states."""
        return self._write_from_any_worker((target_state_key(connector), encode_target_state(state)))

    def put_logger_level(self, namespace: str, level: str) -> int:
        """KIP-976 `scope=cluster`: a `logger-cluster-<namespace>` record every worker applies. Any
        worker may write it, as a target state."""
        return self._write_from_any_worker(
            (f"logger-cluster-{namespace}", json.dumps({"level": level}).encode("utf-8"))
        )

    def _write_from_any_worker(self, record: Record) -> int:
        """Records any worker may write: through the leader's writer when this worker holds it,
        otherwise with a non-transactional producer."""
        with self._writing():
            if self._writer is not None or not self.transactional:
                return self._privileged([record])
            if self._plain_writer is None:
                self._plain_writer = PlainConfigWriter(
                    plain_producer_config(self.worker), self.topic, timeout_s=self.write_timeout_s
                )
            return self._plain_writer.write([record], self._time_left())

    def put_session_key(self, key: SessionKey) -> int:
        return self._privileged([(SESSION_KEY_KEY, encode_session_key(key))])

    def close(self) -> None:
        """Give both writers up (neither waits for the broker), then close the reader."""
        self.relinquish_write_privileges()
        plain, self._plain_writer = self._plain_writer, None
        if plain is not None:
            plain.close()
        with self._read_lock:
            self._reader.close()
