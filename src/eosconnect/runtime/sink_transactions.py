"""A sink's records and its consumed positions in one Kafka transaction (KIP-656, DESIGN.md section 7).

A sink that writes into Kafka can deliver exactly once the way a Kafka Streams application does:
its records go through a transactional producer, and at the commit point the positions it has
consumed are sent *into the same transaction* for a consumer group on the cluster it writes to,
then the transaction commits. Either both become visible or neither does, so after any crash the
task resumes from the group's committed offsets there and writes nothing twice.

The group's metadata comes from a consumer built on that cluster with the group's id and never
subscribed: it only names the group (`consumer_group_metadata()`) and reads its committed offsets
back. The transactional id is the runtime's (`<group.id>-<connector>-<task>`): `init_transactions()`
fences a predecessor with the same id (a Spark retry), and the leader's fencing round fences the
ids of older generations. Errors are classified as the exactly-once source runtime does it.

The offsets and commit calls run on a helper thread and are waited for at most a little longer
than their own timeout: librdkafka's `send_offsets_to_transaction()` can block forever, past its
timeout, once the group coordinator's broker has died (librdkafka issues 5456 and 5511, open in
2.16). The task then fails saying so, instead of looking RUNNING while it copies nothing.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import OffsetAndMetadata, TopicPartition, known_or_none
from eosconnect.runtime.exactly_once import classify_transaction_error, transactional_producer_config
from eosconnect.runtime.sink_task import kafka_offsets
from eosconnect.storage.clients import forced
from eosconnect.storage.transient import retry_transient

__all__ = ["TransactionalSinkProducer"]

log = logging.getLogger(__name__)

#: How long init/commit/abort and the offsets call may take before the task fails.
CALL_TIMEOUT_S = 60.0
#: How much longer than its own timeout a transaction call is waited for before it counts as hung.
HUNG_CALL_GRACE_S = 15.0


class TransactionalSinkProducer:
    """A transactional producer plus the consumer group its commits carry offsets for.

    Records are produced inside a lazily begun transaction; `commit(offsets)` adds the offsets and
    commits (it is an `OffsetCommitter`). Not thread-safe: one task thread uses it.
    """

    def __init__(
        self,
        producer_config: Mapping[str, Any],
        consumer_config: Mapping[str, Any],
        *,
        transactional_id: str,
        group_id: str,
        task_id: str,
        timeout_remedies: str,
        offset_syncs_topic: str | None = None,
    ) -> None:
        self._producer_config, self.transaction_timeout_ms = transactional_producer_config(
            dict(producer_config), transactional_id, origin=getattr(producer_config, "origin", {})
        )
        consumer = forced(
            dict(consumer_config),
            "group.id",
            group_id,
            "offsets are committed for the connector's group",
            origin=getattr(consumer_config, "origin", {}),
        )
        consumer["enable.auto.commit"] = False
        consumer["isolation.level"] = "read_committed"
        self._consumer_config = consumer
        self.transactional_id = transactional_id
        self.group_id = group_id
        self.task_id = task_id
        self.timeout_remedies = timeout_remedies
        self.producer: Producer | None = None
        self.group_consumer: Consumer | None = None
        self._txn_started: float | None = None
        self._delivery_error: KafkaError | None = None
        self._last_committed: dict[TopicPartition, OffsetAndMetadata] = {}
        self.records_in_transaction = 0
        self._hung: str | None = None  # the call that never returned: the producer must not be used
        #: Where MM2-format offset syncs of the copied records go, in the same transaction (None: none).
        self.offset_syncs_topic = offset_syncs_topic
        #: Gives the syncs their coverage headers; the task says where it resumes each partition.
        from eosconnect.mirrormaker.translation import OffsetSyncWriter

        self.sync_writer = OffsetSyncWriter()
        #: Per record of the open transaction given an origin: (source topic, partition, offset,
        #: target topic, target partition), in produce order.
        self._origins: list[tuple[str, int, int, str, int]] = []
        #: Per target partition, the offsets of the open transaction's delivered records, in order
        #: (librdkafka reports one partition's deliveries in produce order).
        self._delivered: dict[tuple[str, int], list[int]] = {}

    # ----------------------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Create both clients; `init_transactions()` fences any predecessor with our id."""
        self.group_consumer = Consumer(self._consumer_config)  # never subscribed: it names the group
        self.producer = Producer(self._producer_config)
        producer = self.producer
        self._call(
            "initialising the transactional producer", lambda: producer.init_transactions(CALL_TIMEOUT_S)
        )
        log.info("[%s] transactional producer %s ready", self.task_id, self.transactional_id)

    def close(self) -> None:
        """Abort what is open (best effort: a fenced producer cannot) and release the clients."""
        if self._hung is not None:
            # A call is still blocked inside librdkafka: any other call could block as well, and
            # destroying the client under it is unsafe. Leave it to the helper thread that holds it;
            # the next instance of the task fences its transactional id.
            log.warning("[%s] abandoning the producer: %s never returned", self.task_id, self._hung)
            self.producer = None
        if self.producer is not None:
            if self._txn_started is not None:
                with contextlib.suppress(KafkaException):
                    self.producer.abort_transaction(10)
                self._txn_started = None
                self._origins.clear()
                self._delivered.clear()
            with contextlib.suppress(KafkaException):
                self.producer.flush(0)
            self.producer = None
        if self.group_consumer is not None:
            with contextlib.suppress(KafkaException, RuntimeError):
                self.group_consumer.close()
            self.group_consumer = None

    # ----------------------------------------------------------------------------- offsets
    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (only committed transactions count) for these partitions,
        with the leader epochs committed with them; partitions with none are left out."""
        assert self.group_consumer is not None
        wanted = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not wanted:
            return {}
        # read_committed makes librdkafka ask for stable offsets (KIP-447): an offset commit of a
        # transaction still completing is waited for, never read half done. A fresh cluster still
        # loading __consumer_offsets, or a moved coordinator, is waited for too.
        try:
            result = retry_transient(
                lambda: self.group_consumer.committed(wanted, timeout=10),
                timeout=CALL_TIMEOUT_S,
                doing=f"[{self.task_id}] reading committed offsets",
                logger=log,
                pause_s=0.5,
            )
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            raise ConnectException(
                f"{self.task_id}: could not read the committed offsets of group {self.group_id!r} on the "
                f"cluster the task writes to: {err.name()}: {err.str()}"
            ) from exc
        found = {
            TopicPartition(p.topic, p.partition): OffsetAndMetadata(
                p.offset,
                p.metadata or "",
                leader_epoch=known_or_none(p.leader_epoch),
            )
            for p in result
            if p.offset >= 0
        }
        self._last_committed.update(found)
        return found

    # ----------------------------------------------------------------------------- transactions
    def open_for_s(self) -> float:
        """How long the current transaction has been open (0 when none is)."""
        return 0.0 if self._txn_started is None else time.monotonic() - self._txn_started

    def produce(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        timestamp: int | None,
        origin: tuple[str, int, int] | None = None,
    ) -> None:
        """Produce into the open transaction; `origin` (source topic, partition, offset) makes the
        record part of the transaction's offset syncs (when the writer has an offsets-syncs topic)."""
        producer = self.producer
        assert producer is not None
        if self._delivery_error is not None:
            raise self._delivery_failure()
        if self._txn_started is None:
            self._call("beginning a transaction", producer.begin_transaction)
            self._txn_started = time.monotonic()
        extra: dict[str, Any] = {}
        if headers:
            extra["headers"] = headers
        if timestamp is not None:
            extra["timestamp"] = timestamp
        while True:
            try:
                producer.produce(topic, value, key, partition, on_delivery=self._on_delivery, **extra)
                break
            except BufferError:  # the local queue is full: serve deliveries, then try again
                producer.poll(0.1)
            except KafkaException as exc:
                raise self._classified(exc, f"sending a record to {topic!r}") from exc
        self.records_in_transaction += 1
        if origin is not None and self.offset_syncs_topic is not None:
            self._origins.append((*origin, topic, partition))

    def commit(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Send `offsets` (next offset to read, keyed by partitions of this cluster) into the open
        transaction and commit it; with no records open, offsets that moved commit on their own.

        Leader epochs are committed with the offsets (TxnOffsetCommit carries them): a mirror keeps
        the *source* partition's epoch there, so that its restart can check the position against
        the source log (KIP-320)."""
        producer, consumer = self.producer, self.group_consumer
        assert producer is not None and consumer is not None
        offsets = dict(offsets)
        if self._txn_started is None:
            if all(self._last_committed.get(tp) == om for tp, om in offsets.items()):
                return
            self._call("beginning a transaction", producer.begin_transaction)
            self._txn_started = time.monotonic()
        if self._origins:
            self._write_offset_syncs(producer)
        if offsets:
            metadata = consumer.consumer_group_metadata()
            self._bounded_call(
                "sending offsets to the transaction",
                lambda: producer.send_offsets_to_transaction(
                    kafka_offsets(offsets), metadata, CALL_TIMEOUT_S
                ),
            )
        self._bounded_call("committing the transaction", lambda: producer.commit_transaction(CALL_TIMEOUT_S))
        if self._delivery_error is not None:  # commit_transaction normally raises first
            raise self._delivery_failure()
        self._txn_started = None
        self.records_in_transaction = 0
        self._last_committed.update(offsets)

    def _write_offset_syncs(self, producer: Producer) -> None:
        """Add the offset syncs of the transaction's records to it (exact translation, see
        eosconnect.mirrormaker.translation): the records' target offsets are known once delivered."""
        assert self.offset_syncs_topic is not None
        remaining = producer.flush(CALL_TIMEOUT_S)
        if self._delivery_error is not None:
            raise self._delivery_failure()
        if remaining:
            raise ConnectException(
                f"{self.task_id}: {remaining} records were still undelivered after {CALL_TIMEOUT_S:.0f}s"
            )
        taken: dict[tuple[str, int], int] = {}
        copies = []
        for topic, partition, offset, target_topic, target_partition in self._origins:
            key = (target_topic, target_partition)
            n = taken.get(key, 0)
            taken[key] = n + 1
            copies.append((topic, partition, offset, self._delivered[key][n]))
        for sync, headers in self.sync_writer.records(copies):
            extra = {"headers": headers} if headers else {}
            try:
                producer.produce(self.offset_syncs_topic, sync.value(), sync.key(), 0, **extra)
            except KafkaException as exc:
                raise self._classified(exc, f"writing offset syncs to {self.offset_syncs_topic!r}") from exc
        self._origins.clear()
        self._delivered.clear()

    # ----------------------------------------------------------------------------- errors
    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            if self._delivery_error is None:
                self._delivery_error = err
        elif self._origins:
            self._delivered.setdefault((msg.topic(), msg.partition()), []).append(msg.offset())

    def _delivery_failure(self) -> Exception:
        err = self._delivery_error
        assert err is not None
        return self._classified(KafkaException(err), "delivering a record")

    def _call(self, doing: str, call: Any) -> Any:
        try:
            return call()
        except KafkaException as exc:
            raise self._classified(exc, doing) from exc

    def _bounded_call(self, doing: str, call: Callable[[], Any]) -> Any:
        """`_call` on the helper thread, failing the task if it outlives its own timeout."""
        future: Future[Any] = Future()

        def run() -> None:
            try:
                future.set_result(call())
            except BaseException as exc:
                future.set_exception(exc)

        # A daemon thread, not an executor's: a hung call must not hold up the process's exit.
        threading.Thread(target=run, name=f"txn-{self.task_id}", daemon=True).start()
        limit = CALL_TIMEOUT_S + HUNG_CALL_GRACE_S
        try:
            return self._call(doing, lambda: future.result(timeout=limit))
        except FutureTimeoutError:
            self._hung = doing
            raise ConnectException(
                f"{self.task_id}: {doing} did not return within {limit:.0f}s although librdkafka was "
                f"given {CALL_TIMEOUT_S:.0f}s: librdkafka can hang there after the broker coordinating "
                f"group {self.group_id!r} died (librdkafka issues 5456 and 5511). Its transaction commits "
                "with its offsets or not at all (a successor fences it); restart the task (POST "
                "/connectors/<name>/tasks/<id>/restart): it resumes from the group's committed offsets."
            ) from None

    def _classified(self, exc: KafkaException, doing: str) -> Exception:
        return classify_transaction_error(
            exc,
            doing,
            task_id=self.task_id,
            transactional_id=self.transactional_id,
            transaction_timeout_ms=self.transaction_timeout_ms,
            txn_started=self._txn_started,
            timeout_remedies=self.timeout_remedies,
        )
