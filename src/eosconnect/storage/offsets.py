"""Source offsets in Kafka: where they live, how they are read, and how they are written.

KIP-618 gives a connector up to two offsets topics: the worker's global one and, when configured
(or implied by a producer pointed at another cluster), a separate one on the cluster the connector
writes to. Tasks read a combined view in which the separate topic wins partition by partition, and
committed offsets of such connectors are copied to the global topic in the background so that a
later downgrade or a switch back to the global topic loses nothing.

Reads go through `read_to_end` (read_committed past transactions that were open at the start), so
offsets of aborted transactions are never seen and a hanging transaction delays the read instead of
being skipped over. Records that are not Kafka Connect offset records are logged and skipped.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from eosconnect.api.errors import ConnectException
from eosconnect.api.offsets import OffsetStorageReader
from eosconnect.api.records import Primitive, SourceOffset, SourcePartition
from eosconnect.storage.clients import ClientConfig, ClientKind, client_config
from eosconnect.storage.producing import produce_waiting
from eosconnect.storage.retrying_read import read_to_end_retrying
from eosconnect.storage.serialization import (
    OffsetRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from eosconnect.storage.topic_reader import TopicReader, TopicRecord

__all__ = [
    "ConnectorOffsetView",
    "GlobalOffsetCopier",
    "OffsetWriteError",
    "OffsetWriter",
    "OffsetsTopic",
    "OffsetsTopicPlacement",
    "encode_offset_records",
    "offsets_topic_for",
    "read_offsets",
    "write_offsets",
]

log = logging.getLogger(__name__)

#: Kafka Connect's default name of the worker's global offsets topic.
DEFAULT_OFFSETS_TOPIC = "connect-offsets"
DEFAULT_BOOTSTRAP = "localhost:9092"

#: A partition's offset, or None where a tombstone deleted it.
OffsetMap = dict[SourcePartition, SourceOffset | None]
PartitionOffsets = Mapping[Mapping[str, Primitive], Mapping[str, Primitive] | None]


def encode_offset_records(connector: str, offsets: PartitionOffsets) -> list[tuple[bytes, bytes | None]]:
    """(key, value) pairs for the offsets topic; a None offset becomes a tombstone (value None).

    The runtime sends them with its own producer, e.g. inside the task's transaction. Raises
    `DataException` for partitions/offsets that are not flat maps of primitives.
    """
    return [(encode_key(connector, partition), encode_value(offset)) for partition, offset in offsets.items()]


# ------------------------------------------------------------------------------------------ reading


@dataclass
class _Entry:
    offset: SourceOffset | None
    partition: int
    timestamp: int


class OffsetsTopic:
    """Everything an offsets topic holds, kept up to date by incremental `refresh()` calls.

    Latest record wins: in offset order within a topic partition, and by timestamp across topic
    partitions (only possible when the same source partition was written with differently ordered
    key bytes, e.g. by another client). Tombstones are kept as None so a separate topic can hide an
    older value in the global topic.
    """

    def __init__(self, client_config: Mapping[str, Any], topic: str, *, timeout: float = 60.0) -> None:
        self.topic = topic
        self.timeout = timeout
        self._client_config = dict(client_config)
        self._entries: dict[str, dict[SourcePartition, _Entry]] = {}
        self._positions: dict[int, int] = {}
        self._lock = threading.Lock()
        self.loaded = False
        #: Records skipped because they are not offset records (each one was logged).
        self.skipped = 0

    def refresh(self, timeout: float | None = None) -> None:
        """Read what was appended since the last refresh, up to the topic's current end.

        Blocks while a transaction that was open at the start is unresolved; raises `ReadTimeout`
        after `timeout` (default: the constructor's) with the partitions still behind.
        """
        with self._lock:
            reader = TopicReader(self._client_config, self.topic)
            try:
                read_to_end_retrying(
                    reader,
                    lambda: dict(self._positions),
                    self._apply,
                    self.timeout if timeout is None else timeout,
                )
            finally:
                reader.close()
            self.loaded = True

    def _apply(self, record: TopicRecord) -> None:
        self._positions[record.partition] = record.offset + 1
        try:
            connector, partition = decode_key(record.key)
            offset = decode_value(record.value)
        except OffsetRecordError as exc:
            self.skipped += 1
            log.warning(
                "Skipping a record that is not a source offset in %s (partition %d, offset %d): %s",
                record.topic,
                record.partition,
                record.offset,
                exc,
            )
            return
        entries = self._entries.setdefault(connector, {})
        current = entries.get(partition)
        if (
            current is not None
            and current.partition != record.partition
            and current.timestamp > record.timestamp
        ):
            return
        entries[partition] = _Entry(offset, record.partition, record.timestamp)

    def connector_offsets(self, connector: str, *, include_deleted: bool = False) -> OffsetMap:
        """The connector's offsets by source partition; deleted ones only with `include_deleted`."""
        with self._lock:
            entries = self._entries.get(connector, {})
            return {p: e.offset for p, e in entries.items() if include_deleted or e.offset is not None}

    def all_offsets(self, *, include_deleted: bool = False) -> dict[str, OffsetMap]:
        """`{connector: {partition: offset}}` for every connector in the topic."""
        with self._lock:
            names = list(self._entries)
        result = {name: self.connector_offsets(name, include_deleted=include_deleted) for name in names}
        return {name: offsets for name, offsets in result.items() if offsets}


def read_offsets(
    client_config: Mapping[str, Any], topic: str, *, timeout: float = 60.0, include_deleted: bool = False
) -> dict[str, OffsetMap]:
    """One full read of an offsets topic: `{connector: {frozen partition: offset}}`, latest wins.

    A tombstone removes the partition, or leaves it as None with `include_deleted`.
    """
    reader = OffsetsTopic(client_config, topic, timeout=timeout)
    reader.refresh()
    return reader.all_offsets(include_deleted=include_deleted)


class ConnectorOffsetView(OffsetStorageReader):
    """What a connector's tasks see: its separate offsets topic over the worker's global topic.

    Partition by partition, a value (or a deletion) in the separate topic wins; partitions only in
    the global topic come from there (KIP-618 "Smooth migration"). Reads both topics on first use;
    `refresh()` re-reads both to their current end.
    """

    def __init__(
        self,
        connector: str,
        global_topic: OffsetsTopic,
        separate_topic: OffsetsTopic | None = None,
    ) -> None:
        self.connector = connector
        self.global_topic = global_topic
        self.separate_topic = separate_topic
        self._combined: dict[SourcePartition, SourceOffset | None] | None = None
        self._lock = threading.Lock()

    @classmethod
    def create(
        cls,
        connector: str,
        placement: OffsetsTopicPlacement,
        worker_config: Mapping[str, Any] | None = None,
        *,
        timeout: float = 60.0,
    ) -> ConnectorOffsetView:
        """The view for `placement`. `worker_config` is not needed (the placement carries the
        worker's settings) and is accepted so call sites may pass it."""
        global_topic = OffsetsTopic(placement.global_consumer_config, placement.global_topic, timeout=timeout)
        separate = (
            OffsetsTopic(placement.consumer_config, placement.topic, timeout=timeout)
            if placement.separate
            else None
        )
        return cls(connector, global_topic, separate)

    def refresh(self, timeout: float | None = None) -> None:
        """Read both topics to their end (blocking on open transactions, see `OffsetsTopic`)."""
        with self._lock:
            self.global_topic.refresh(timeout)
            if self.separate_topic is not None:
                self.separate_topic.refresh(timeout)
            combined = self.global_topic.connector_offsets(self.connector, include_deleted=True)
            if self.separate_topic is not None:
                combined.update(self.separate_topic.connector_offsets(self.connector, include_deleted=True))
            self._combined = combined

    def _view(self) -> dict[SourcePartition, SourceOffset | None]:
        if self._combined is None:
            self.refresh()
        assert self._combined is not None
        return self._combined

    def offset(self, partition: Mapping[str, Primitive]) -> dict[str, Primitive] | None:
        found = self._view().get(SourcePartition.of(partition))
        return found.to_dict() if found is not None else None

    def offsets(
        self, partitions: Iterable[Mapping[str, Primitive]]
    ) -> dict[SourcePartition, dict[str, Primitive] | None]:
        view = self._view()
        result: dict[SourcePartition, dict[str, Primitive] | None] = {}
        for p in partitions:
            key = SourcePartition.of(p)
            found = view.get(key)
            result[key] = found.to_dict() if found is not None else None
        return result

    def snapshot(self) -> dict[SourcePartition, SourceOffset]:
        """Every partition with an offset, as the tasks would see it (e.g. for a REST offsets call)."""
        return {p: o for p, o in self._view().items() if o is not None}


# ---------------------------------------------------------------------------------------- placement


def _servers(value: Any) -> frozenset[str]:
    hosts = set()
    for raw in str(value or "").split(","):
        host = raw.strip().lower()
        if "://" in host:
            host = host.split("://", 1)[1]
        if host:
            hosts.add(host)
    return frozenset(hosts)


def same_bootstrap(a: Any, b: Any) -> bool:
    """Whether two `bootstrap.servers` lists plausibly reach the same cluster (they share a host:port).

    Kafka Connect compares cluster ids, which needs a round trip to both clusters; pass
    `same_cluster=` to `offsets_topic_for` to do that instead.
    """
    return bool(_servers(a) & _servers(b))


#: Settings that say which cluster a client reaches and as whom; they follow the connector's producer.
_CONNECTION_PREFIXES = ("sasl.", "ssl.")
_CONNECTION_KEYS = frozenset({"bootstrap.servers", "security.protocol"})


def _follow_producer_cluster(
    kind: ClientKind, worker: Mapping[str, Any], connector: Mapping[str, Any], producer: ClientConfig
) -> ClientConfig:
    """A `kind` config that reaches the cluster the connector's producer writes to.

    The connector's own `<kind>.override.*` connection settings win; otherwise the producer's
    connection settings are used, since the offsets topic lives where the producer writes.
    """
    config = client_config(kind, worker, connector)
    own = f"{kind}.override."
    for key, value in producer.items():
        if key in _CONNECTION_KEYS or key.startswith(_CONNECTION_PREFIXES):
            if key != "bootstrap.servers" and config.origin.get(key, "").startswith(own):
                continue
            config[key] = value
            config.origin[key] = producer.origin.get(key, key)
    return config


@dataclass(frozen=True)
class OffsetsTopicPlacement:
    """Where a connector's offsets live, and the client settings to reach them.

    `topic` is the topic the connector's tasks write offsets to; with `separate` it is a
    per-connector topic on the connector's cluster (`explicit`: named by `offsets.storage.topic`,
    else implied by a producer targeting another cluster), otherwise the worker's global topic.
    """

    topic: str
    separate: bool
    explicit: bool
    #: Consumer settings for reading `topic` (the connector's cluster and principal).
    consumer_config: dict[str, Any] = field(repr=False)
    #: Admin settings for creating `topic` (connector `admin.override.*` > worker `admin.*` > ...).
    admin_config: dict[str, Any] = field(repr=False)
    global_topic: str = DEFAULT_OFFSETS_TOPIC
    #: The worker's own consumer settings, for reading the global topic.
    global_consumer_config: dict[str, Any] = field(default_factory=dict, repr=False)
    #: The worker's own producer settings, for copying offsets to the global topic.
    global_producer_config: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def client(self) -> dict[str, Any]:
        """The client settings for the cluster that hosts `topic` (same as `consumer_config`)."""
        return self.consumer_config

    def admin(self) -> AdminClient:
        """An admin client for the cluster that hosts `topic` (to create it if `separate`)."""
        return AdminClient(self.admin_config)


def offsets_topic_for(
    connector_name: str,
    connector_config: Mapping[str, Any],
    worker_config: Mapping[str, Any],
    *,
    same_cluster: Callable[[Any, Any], bool] = same_bootstrap,
) -> OffsetsTopicPlacement:
    """Decide where `connector_name` keeps its offsets (KIP-618 "Per-connector offsets topics").

    - `offsets.storage.topic` in the connector config: that topic on the connector's cluster
      (explicit); if it names the global topic on the worker's own cluster, it is the global topic.
    - else, with `exactly.once.source.support=enabled` and `producer.override.bootstrap.servers`
      reaching another cluster: a topic named like the worker's `offset.storage.topic` there
      (implicit), since a transactional producer can only write offsets to its own cluster.
    - else the worker's global `offset.storage.topic`.
    With exactly-once enabled, the consumers' `isolation.level` is forced to read_committed.
    """
    global_topic = str(worker_config.get("offset.storage.topic") or DEFAULT_OFFSETS_TOPIC)
    eos = str(worker_config.get("exactly.once.source.support") or "disabled").strip().lower() == "enabled"
    producer = client_config("producer", worker_config, connector_config)
    worker_servers = worker_config.get("bootstrap.servers") or DEFAULT_BOOTSTRAP
    producer.setdefault("bootstrap.servers", worker_servers)
    same = same_cluster(worker_servers, producer["bootstrap.servers"])
    explicit_topic = str(connector_config.get("offsets.storage.topic") or "").strip()

    if explicit_topic:
        topic, explicit, separate = explicit_topic, True, not (explicit_topic == global_topic and same)
    elif eos and not same:
        topic, explicit, separate = global_topic, False, True
    else:
        topic, explicit, separate = global_topic, False, False

    why = "offsets are read with read_committed when exactly.once.source.support=enabled"
    global_consumer = client_config("consumer", worker_config)
    global_consumer.setdefault("bootstrap.servers", worker_servers)
    if eos:
        global_consumer.force("isolation.level", "read_committed", why)
    if separate:
        consumer = _follow_producer_cluster("consumer", worker_config, connector_config, producer)
        admin = _follow_producer_cluster("admin", worker_config, connector_config, producer)
        if eos:
            consumer.force("isolation.level", "read_committed", why)
    else:
        consumer = ClientConfig("consumer", global_consumer, global_consumer.origin)
        admin = client_config("admin", worker_config)
        admin.setdefault("bootstrap.servers", worker_servers)
    global_producer = client_config("producer", worker_config)
    global_producer.setdefault("bootstrap.servers", worker_servers)
    placement = OffsetsTopicPlacement(
        topic=topic,
        separate=separate,
        explicit=explicit,
        consumer_config=consumer,
        admin_config=admin,
        global_topic=global_topic,
        global_consumer_config=global_consumer,
        global_producer_config=global_producer,
    )
    log.debug("offsets of connector %r: %s", connector_name, placement)
    return placement


# ------------------------------------------------------------------------------------------ writing


class OffsetWriteError(ConnectException):
    """Some offsets were not acknowledged; `failed` maps each to the reason."""

    def __init__(self, message: str, failed: Mapping[SourcePartition, str], *, fatal: bool = False) -> None:
        super().__init__(message)
        self.failed = dict(failed)
        #: The producer is unusable (a fatal librdkafka error) and must be replaced.
        self.fatal = fatal


def _non_transactional(config: Mapping[str, Any]) -> dict[str, Any]:
    cfg = dict(config)
    if "transactional.id" in cfg:
        log.warning(
            "Ignoring transactional.id=%r: offsets outside a task's transaction are written "
            "by a non-transactional producer.",
            cfg.pop("transactional.id"),
        )
    cfg.setdefault("enable.idempotence", True)
    cfg.setdefault("partitioner", "murmur2_random")  # Java's choice of partition for a key
    # A missing offsets topic must be created compacted (ensure_topic), not by the broker's defaults.
    cfg.setdefault("allow.auto.create.topics", False)
    return cfg


class OffsetWriter:
    """Writes offsets outside any transaction and waits until Kafka acknowledged each of them.

    For the at-least-once path and the global-topic copier. Given a `Producer`, it borrows it
    (and leaves it open); given a config, it owns an idempotent, non-transactional producer.
    """

    def __init__(self, producer_or_config: Producer | Mapping[str, Any], topic: str) -> None:
        self.topic = topic
        if isinstance(producer_or_config, Producer):
            self.producer, self._owned = producer_or_config, False
        else:
            self.producer, self._owned = Producer(_non_transactional(producer_or_config)), True

    def write(
        self,
        connector: str,
        offsets: PartitionOffsets,
        timeout: float | None = 30.0,
        *,
        cancel: threading.Event | None = None,
    ) -> None:
        """Produce the offsets (None: tombstone) and wait for every acknowledgement.

        Raises `OffsetWriteError` naming the partitions that failed or were not acknowledged within
        `timeout` (None: wait as long as the producer retries, i.e. `message.timeout.ms`) or
        before `cancel` was set.
        """
        records = [
            (SourcePartition.of(p), key, value)
            for (p, _), (key, value) in zip(
                offsets.items(), encode_offset_records(connector, offsets), strict=True
            )
        ]
        if not records:
            return
        deadline = None if timeout is None else time.monotonic() + timeout
        outstanding: set[SourcePartition] = set()
        failed: dict[SourcePartition, str] = {}
        fatal = False

        def delivered(partition: SourcePartition, err: KafkaError | None, _msg: Any) -> None:
            nonlocal fatal
            outstanding.discard(partition)
            if err is not None:
                failed[partition] = err.str()
                fatal = fatal or err.fatal()

        def expired() -> bool:
            return (deadline is not None and time.monotonic() > deadline) or (
                cancel is not None and cancel.is_set()
            )

        def wait_for_room() -> bool:
            """The producer's queue is full: serve deliveries and try again, unless out of time."""
            if expired():
                return False
            self.producer.poll(0.1)
            return True

        for partition, key, value in records:
            outstanding.add(partition)
            try:
                if not produce_waiting(
                    self.producer,
                    self.topic,
                    value,
                    key,
                    on_delivery=lambda err, msg, p=partition: delivered(p, err, msg),
                    while_full=wait_for_room,
                ):
                    outstanding.discard(partition)
                    failed[partition] = "the producer's queue stayed full"
            except KafkaException as exc:
                outstanding.discard(partition)
                failed[partition] = str(exc.args[0])
                fatal = fatal or (isinstance(exc.args[0], KafkaError) and exc.args[0].fatal())
            self.producer.poll(0)
        while outstanding and not expired():
            self.producer.flush(0.2)
        for partition in outstanding:
            failed[partition] = "not acknowledged in time"
        if failed:
            first = next(iter(failed.values()))
            raise OffsetWriteError(
                f"{len(failed)} of {len(records)} offsets of connector {connector!r} were not written to "
                f"{self.topic!r}: {first}",
                failed,
                fatal=fatal,
            )

    def close(self, timeout: float = 5.0) -> None:
        """Flush and drop the producer if this writer owns it."""
        if self._owned:
            self.producer.flush(timeout)
            self.producer.purge()
            self.producer.close()


def write_offsets(
    producer_or_config: Producer | Mapping[str, Any],
    topic: str,
    connector: str,
    offsets: PartitionOffsets,
    timeout: float = 30.0,
) -> None:
    """Write `offsets` non-transactionally and wait for the acks (see `OffsetWriter.write`)."""
    writer = OffsetWriter(producer_or_config, topic)
    try:
        writer.write(connector, offsets, timeout)
    finally:
        writer.close()


class GlobalOffsetCopier:
    """Copies a connector's committed offsets to the worker's global offsets topic, in the background.

    KIP-618: after each commit to a separate offsets topic, the same offsets go to the global topic
    with a non-transactional producer and the worker's principal, on a thread of their own that
    retries forever and never fails or blocks the task. Submissions coalesce (latest offset per
    partition wins), so a slow or unreachable cluster costs memory per partition, not per commit.
    """

    def __init__(
        self,
        connector: str,
        topic: str,
        producer_config: Mapping[str, Any],
        *,
        initial_backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        self.connector = connector
        self.topic = topic
        config = _non_transactional(producer_config)
        # Report failures after 30s instead of librdkafka's 5 minutes, so they are logged and retried.
        config.setdefault("message.timeout.ms", 30_000)
        self._config = config
        self._initial_backoff = initial_backoff
        self._max_backoff = max_backoff
        self._pending: dict[SourcePartition, SourceOffset | None] = {}
        self._in_flight = 0
        self._closing = False
        self._abandon = threading.Event()
        self._cond = threading.Condition()
        self._writer: OffsetWriter | None = None
        #: Offsets delivered so far, and failed attempts (for metrics and tests).
        self.delivered = 0
        self.failures = 0
        self._thread = threading.Thread(target=self._run, name=f"offset-copier-{connector}", daemon=True)
        self._thread.start()

    @classmethod
    def for_placement(cls, connector: str, placement: OffsetsTopicPlacement) -> GlobalOffsetCopier:
        return cls(connector, placement.global_topic, placement.global_producer_config)

    def submit(self, offsets: PartitionOffsets) -> None:
        """Queue committed offsets (None: deleted) for copying; returns at once."""
        frozen = {
            SourcePartition.of(p): (SourceOffset.of(o) if o is not None else None) for p, o in offsets.items()
        }
        if not frozen:
            return
        with self._cond:
            if self._closing:
                log.warning("offset copier of %r is closed; dropping %d offsets", self.connector, len(frozen))
                return
            self._pending.update(frozen)
            self._cond.notify_all()

    def flush(self, timeout: float) -> bool:
        """Wait until everything submitted so far is in the global topic; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._pending or self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
        return True

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what is pending within `timeout`, then stop; undelivered offsets are logged."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        self._thread.join(timeout)
        if self._thread.is_alive():
            self._abandon.set()
            with self._cond:
                self._cond.notify_all()
            self._thread.join(5.0)
        with self._cond:
            left = len(self._pending) + self._in_flight
        if left:
            log.warning(
                "offset copier of %r stopped with %d offsets not copied to %r; the global topic lags "
                "behind the connector's own offsets topic until the connector commits again",
                self.connector,
                left,
                self.topic,
            )
        if not self._thread.is_alive() and self._writer is not None:
            self._writer.close(0)
            self._writer = None

    def _run(self) -> None:
        backoff = self._initial_backoff
        while True:
            with self._cond:
                while not self._pending and not self._closing:
                    self._cond.wait()
                if not self._pending or self._abandon.is_set():
                    return
                batch, self._pending = self._pending, {}
                self._in_flight = len(batch)
            failed = self._copy(batch)
            with self._cond:
                for partition in failed:
                    if partition not in self._pending:  # a newer offset supersedes the failed one
                        self._pending[partition] = batch[partition]
                self._in_flight = 0
                self.delivered += len(batch) - len(failed)
                self._cond.notify_all()
                if not failed:
                    backoff = self._initial_backoff
                    continue
                if self._closing:
                    return
                self._cond.wait(backoff)  # close() cuts the back-off short
            backoff = min(backoff * 2, self._max_backoff)

    def _copy(self, batch: Mapping[SourcePartition, SourceOffset | None]) -> set[SourcePartition]:
        """Write a batch; returns the partitions that must be retried. Never raises."""
        try:
            if self._writer is None:
                self._writer = OffsetWriter(self._config, self.topic)
            self._writer.write(self.connector, batch, timeout=None, cancel=self._abandon)
            return set()
        except OffsetWriteError as exc:
            self.failures += 1
            log.warning(
                "Copying %d offsets of connector %r to the global offsets topic %r failed (%s); retrying",
                len(exc.failed),
                self.connector,
                self.topic,
                exc,
            )
            if exc.fatal:
                self._drop_writer()
            return set(exc.failed)
        except Exception as exc:
            self.failures += 1
            log.warning(
                "Copying offsets of connector %r to %r failed (%s: %s); retrying",
                self.connector,
                self.topic,
                type(exc).__name__,
                exc,
            )
            self._drop_writer()
            return set(batch)

    def _drop_writer(self) -> None:
        if self._writer is not None:
            try:
                self._writer.close(0)
            except Exception:
                log.debug("closing the copier's producer failed", exc_info=True)
            self._writer = None
