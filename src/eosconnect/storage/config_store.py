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
from collections.abc import Iterator, Mapping, Sequence

from confluent_kafka.admin import AdminClient

from eosconnect.api.errors import ConfigException
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
from eosconnect.storage.config_writers import (
    ConfigWriteError,
    FencingConflict,
    LeaderConfigWriter,
    LeaderFencedError,
    PlainConfigWriter,
    Record,
    WritePrivilegeError,
    leader_producer_config,
    leader_transactional_id,
    plain_producer_config,
    uses_transactions,
)
from eosconnect.storage.retrying_read import read_to_end_retrying
from eosconnect.storage.session_key import SessionKey
from eosconnect.storage.topic_reader import TopicReader, TopicRecord, topic_partitions
from eosconnect.storage.topics import ensure_topic
from eosconnect.worker_config import WorkerConfig

__all__ = ["ConfigSnapshot", "ConfigStore", "TargetState"]

log = logging.getLogger(__name__)

#: The least time a write is given, even when what came before it under the write lock (the wait
#: for the lock, a read) used up the write's timeout: a commit on a reachable broker takes
#: milliseconds.
MIN_WRITE_S = 1.0


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
        self.transactional = uses_transactions(worker)
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
