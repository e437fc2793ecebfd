"""The status topic: the last known state of every connector and task, for the REST API.

Records are Kafka Connect's: key `status-connector-<c>` or `status-task-<c>-<i>`, value
`{"state": ..., "trace": ..., "worker_id": ..., "generation": N}` (JSON without schemas), so operators'
tools and Java workers read the same topic. The topic is compacted and multi-partition; a key always
lands in the same partition (Java-compatible murmur2 partitioning), so "latest per key" is well
defined. A null value deletes the entry (a deleted connector's statuses).

Status is advisory, written by whichever worker runs the connector or task, so it uses a plain
idempotent producer; no transaction or fencing is needed. `safe=True` writes follow Kafka's
`putSafe`: a status from an older rebalance generation does not overwrite one written by another
worker in a newer generation (a slow worker reporting a task it no longer owns).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer
from confluent_kafka.admin import AdminClient

from eosconnect.api.errors import ConnectException
from eosconnect.storage.clients import client_config
from eosconnect.storage.retrying_read import read_to_end_retrying
from eosconnect.storage.topic_reader import TopicReader, TopicRecord
from eosconnect.storage.topics import ensure_topic
from eosconnect.worker_config import WorkerConfig

__all__ = [
    "CONNECTOR_STATUS_PREFIX",
    "TASK_STATUS_PREFIX",
    "ConnectState",
    "Status",
    "StatusSnapshot",
    "StatusStateBuilder",
    "StatusStore",
    "StatusWriteError",
    "build_status_snapshot",
    "connector_status_key",
    "task_status_key",
]

log = logging.getLogger(__name__)

CONNECTOR_STATUS_PREFIX = "status-connector-"
TASK_STATUS_PREFIX = "status-task-"
#: Kafka Connect's topic-usage records (KIP-558), which eosconnect does not track; skipped quietly.
TOPIC_STATUS_PREFIX = "status-topic-"


class ConnectState(StrEnum):
    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"
    FAILED = "FAILED"
    RESTARTING = "RESTARTING"


@dataclass(frozen=True)
class Status:
    """One connector's or task's reported state. `generation` is the worker group's generation."""

    state: ConnectState
    worker_id: str
    generation: int = 0
    trace: str | None = None

    def to_value(self) -> bytes:
        value = {
            "state": ConnectState(self.state).value,
            "trace": self.trace,
            "worker_id": self.worker_id,
            "generation": self.generation,
        }
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_value(cls, raw: bytes | str) -> Status:
        """Parse a record value; raises ValueError saying what is wrong."""
        value = json.loads(raw)
        if not isinstance(value, dict):
            raise ValueError(f"value should be a JSON object but is {type(value).__name__}")
        state, worker, generation, trace = (
            value.get("state"),
            value.get("worker_id"),
            value.get("generation"),
            value.get("trace"),
        )
        if not isinstance(state, str):
            raise ValueError("'state' should be a string")
        if not isinstance(worker, str):
            raise ValueError("'worker_id' should be a string")
        if not isinstance(generation, int) or isinstance(generation, bool):
            raise ValueError("'generation' should be an integer")
        if trace is not None and not isinstance(trace, str):
            raise ValueError("'trace' should be a string or null")
        return cls(ConnectState(state), worker, generation, trace)


def connector_status_key(connector: str) -> str:
    return CONNECTOR_STATUS_PREFIX + connector


def task_status_key(connector: str, task: int) -> str:
    return f"{TASK_STATUS_PREFIX}{connector}-{task}"


@dataclass(frozen=True, eq=False)
class StatusSnapshot:
    connectors: Mapping[str, Status] = field(default_factory=dict)
    tasks: Mapping[tuple[str, int], Status] = field(default_factory=dict)
    skipped: int = 0

    def connector(self, connector: str) -> Status | None:
        return self.connectors.get(connector)

    def task(self, connector: str, task: int) -> Status | None:
        return self.tasks.get((connector, task))

    def tasks_of(self, connector: str) -> dict[int, Status]:
        return {t: s for (c, t), s in sorted(self.tasks.items()) if c == connector}


class StatusStateBuilder:
    """Applies status records in order (per partition); keeps the latest per key."""

    def __init__(self) -> None:
        self.positions: dict[int, int] = {}
        self.skipped = 0
        self._connectors: dict[str, Status] = {}
        self._tasks: dict[tuple[str, int], Status] = {}

    def snapshot(self) -> StatusSnapshot:
        return StatusSnapshot(
            MappingProxyType(dict(self._connectors)), MappingProxyType(dict(self._tasks)), self.skipped
        )

    def apply(
        self, key: bytes | str | None, value: bytes | str | None, partition: int = 0, offset: int = -1
    ) -> None:
        if offset >= 0:
            self.positions[partition] = offset + 1
        try:
            self._apply(key, value)
        except (ValueError, UnicodeDecodeError) as exc:
            self.skipped += 1
            log.warning(
                "Skipping status topic record with key %r (partition %d, offset %d): %s",
                key,
                partition,
                offset,
                exc,
            )

    def _apply(self, key: bytes | str | None, value: bytes | str | None) -> None:
        if key is None:
            raise ValueError("no key")
        text = key.decode("utf-8") if isinstance(key, bytes) else key
        if text.startswith(CONNECTOR_STATUS_PREFIX):
            connector = text[len(CONNECTOR_STATUS_PREFIX) :]
            if not connector:
                raise ValueError("empty connector name")
            if value is None:
                self._connectors.pop(connector, None)
            else:
                self._connectors[connector] = Status.from_value(value)
        elif text.startswith(TASK_STATUS_PREFIX):
            connector, sep, index = text[len(TASK_STATUS_PREFIX) :].rpartition("-")
            if not sep or not connector or not index.isdigit():
                raise ValueError("not a task status key (status-task-<connector>-<number>)")
            if value is None:
                self._tasks.pop((connector, int(index)), None)
            else:
                self._tasks[(connector, int(index))] = Status.from_value(value)
        elif text.startswith(TOPIC_STATUS_PREFIX):
            return
        else:
            raise ValueError("unknown key (not a Kafka Connect status record)")

    def current(self, key: str) -> Status | None:
        if key.startswith(CONNECTOR_STATUS_PREFIX):
            return self._connectors.get(key[len(CONNECTOR_STATUS_PREFIX) :])
        connector, _, index = key[len(TASK_STATUS_PREFIX) :].rpartition("-")
        return self._tasks.get((connector, int(index)))


def build_status_snapshot(records: Iterable[tuple[bytes | str | None, bytes | str | None]]) -> StatusSnapshot:
    """A snapshot from (key, value) pairs in order (for tests and tools)."""
    builder = StatusStateBuilder()
    for key, value in records:
        builder.apply(key, value)
    return builder.snapshot()


class StatusWriteError(ConnectException):
    """A status record was not acknowledged by Kafka."""


class StatusStore:
    """Reads and writes `status.storage.topic` for one worker. Thread-safe."""

    def __init__(
        self,
        worker: WorkerConfig,
        *,
        topic: str | None = None,
        read_timeout_s: float = 60.0,
        write_timeout_s: float = 30.0,
    ) -> None:
        self.worker = worker
        self.topic = topic or str(worker.values["status.storage.topic"])
        self.read_timeout_s = read_timeout_s
        self.write_timeout_s = write_timeout_s
        self._consumer_config = client_config("consumer", worker.originals)
        self._builder = StatusStateBuilder()
        self._snapshot = self._builder.snapshot()
        self._read_lock = threading.Lock()
        #: Kept across reads; used under `_read_lock`.
        self._reader = TopicReader(self._consumer_config, self.topic, group=worker.group_id)
        self._write_lock = threading.Lock()
        self._producer: Producer | None = None

    def ensure_topic(self, timeout: float = 30.0) -> bool:
        """Create the compacted topic (`status.storage.partitions`/`.replication.factor`) if missing."""
        admin = AdminClient(client_config("admin", self.worker.originals))
        return ensure_topic(
            admin,
            self.topic,
            int(self.worker.values["status.storage.partitions"]),
            int(self.worker.values["status.storage.replication.factor"]),
            partitions_setting="status.storage.partitions",
            replication_setting="status.storage.replication.factor",
            require_compaction=True,
            timeout=timeout,
        )

    def start(self) -> StatusSnapshot:
        self.ensure_topic()
        return self.read_to_end()

    @property
    def snapshot(self) -> StatusSnapshot:
        return self._snapshot

    def read_to_end(self, timeout: float | None = None) -> StatusSnapshot:
        """Read what was appended since the last read, up to the end as of this call."""
        with self._read_lock:
            read_to_end_retrying(
                self._reader,
                lambda: dict(self._builder.positions),
                self._apply,
                self.read_timeout_s if timeout is None else timeout,
            )
            self._snapshot = self._builder.snapshot()
            return self._snapshot

    def _apply(self, record: TopicRecord) -> None:
        self._builder.apply(record.key, record.value, record.partition, record.offset)

    # ------------------------------------------------------------------------------ writes
    def put_connector_status(self, connector: str, status: Status, *, safe: bool = False) -> bool:
        """Write a connector's status; False if `safe` and a newer generation's status wins."""
        return self._put(connector_status_key(connector), status, safe)

    def put_task_status(self, connector: str, task: int, status: Status, *, safe: bool = False) -> bool:
        """Write a task's status; False if `safe` and a newer generation's status wins."""
        return self._put(task_status_key(connector, task), status, safe)

    def delete_connector_status(self, connector: str) -> None:
        self._send(connector_status_key(connector), None)

    def delete_task_status(self, connector: str, task: int) -> None:
        self._send(task_status_key(connector, task), None)

    def _put(self, key: str, status: Status, safe: bool) -> bool:
        if safe:
            with self._read_lock:
                current = self._builder.current(key)
            if (
                current is not None
                and current.worker_id != status.worker_id
                and current.generation > status.generation
            ):
                log.debug(
                    "not writing %s=%s: %s has a newer generation", key, status.state, current.worker_id
                )
                return False
        self._send(key, status.to_value())
        return True

    def _send(self, key: str, value: bytes | None) -> None:
        errors: list[str] = []

        def delivered(err: KafkaError | None, _msg: Message) -> None:
            if err is not None:
                errors.append(f"{err.name()}: {err.str()}")

        with self._write_lock:
            producer = self._ensure_producer()
            try:
                producer.produce(self.topic, key=key.encode("utf-8"), value=value, on_delivery=delivered)
            except (KafkaException, BufferError) as exc:
                raise StatusWriteError(f"could not send status {key!r}: {exc}") from exc
            remaining = producer.flush(self.write_timeout_s)
        if remaining:
            raise StatusWriteError(f"status {key!r} was not acknowledged within {self.write_timeout_s:.0f}s")
        if errors:
            raise StatusWriteError(f"status {key!r} was not written: {errors[0]}")

    def _ensure_producer(self) -> Producer:
        if self._producer is None:
            cfg: dict[str, Any] = client_config("producer", self.worker.originals)
            if "transactional.id" in cfg:
                log.warning(
                    "Ignoring transactional.id=%r: status records are not transactional",
                    cfg.pop("transactional.id"),
                )
            cfg["enable.idempotence"] = True
            cfg["acks"] = "all"
            cfg.setdefault("client.id", f"eosconnect-{self.worker.group_id}-statuses")
            cfg.setdefault("allow.auto.create.topics", False)
            self._producer = Producer(cfg)
        return self._producer

    def close(self) -> None:
        with self._write_lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.flush(self.write_timeout_s)
            producer.close()
        with self._read_lock:
            self._reader.close()
