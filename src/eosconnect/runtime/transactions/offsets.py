"""What commits with a transaction's records: the two kinds of offsets a task writes into it.

- `SourceOffsetsInTransaction` (KIP-618): a source task's offsets, as records of the connector's
  offsets topic produced into the transaction.
- `GroupOffsetsInTransaction` (KIP-447, as KIP-656 uses it): a sink task's consumed positions,
  sent into the transaction for a consumer group on the cluster it writes to.

Either commits with the records or not at all, so a task resumes from them after any crash and
writes nothing twice.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import (
    OffsetAndMetadata,
    SourceOffset,
    SourcePartition,
    TopicPartition,
    known_or_none,
)
from eosconnect.runtime.sink_consumer import kafka_offsets
from eosconnect.runtime.transactions.budget import CALL_TIMEOUT_S
from eosconnect.runtime.transactions.errors import Step
from eosconnect.runtime.transactions.session import TransactionSession
from eosconnect.storage.clients import forced
from eosconnect.storage.offsets import encode_offset_records
from eosconnect.storage.transient import retry_transient

__all__ = ["GroupOffsetsInTransaction", "SourceOffsetsInTransaction"]

#: The offsets topic's records (key -> value) that hold a set of source offsets.
OffsetRecords = dict[bytes, bytes | None]


class SourceOffsetsInTransaction:
    """A source task's offsets written into its open transaction, to the connector's offsets topic.

    Remembers the records this instance's own transactions committed (`committed`), so that an
    offset whose record would be the same is not written again (`write(skip_written=True)`)."""

    def __init__(self, session: TransactionSession[Any], connector: str, topic: str) -> None:
        self.session = session
        self.connector = connector
        self.topic = topic
        self._written: OffsetRecords = {}

    def write(
        self, offsets: Mapping[SourcePartition, SourceOffset | None], *, skip_written: bool = False
    ) -> OffsetRecords:
        """Write `offsets` into the open transaction; the offsets topic's records that hold them.

        With `skip_written`, a record equal to one this instance's own transactions committed is
        not sent again: a source that repeats its offset (MirrorHeartbeat's is always 0) would
        otherwise add the offsets topic's partition, a record and a commit marker to every
        transaction, most of what a fleet of such tasks costs the broker. Records are compared
        (not offset objects, which a task may change in place), and only this instance's commits
        count: an offset read at start-up may come from the worker's global topic, not this one."""
        records: OffsetRecords = dict(encode_offset_records(self.connector, offsets))
        written = self._written if skip_written else {}
        producer = self.session.producer
        try:
            for key, value in records.items():
                if key not in written or written[key] != value:
                    producer.produce(self.topic, key=key, value=value)
        except KafkaException as exc:
            raise self.session.classify(exc, f"writing offsets to {self.topic!r}") from exc
        return records

    def committed(self, records: OffsetRecords) -> None:
        """`records` (from `write`) committed with their transaction."""
        self._written.update(records)


class GroupOffsetsInTransaction:
    """A sink task's consumed positions, committed with its transaction for a consumer group on the
    cluster it writes to.

    The group's metadata comes from a consumer built on that cluster with the group's id and never
    subscribed: it only names the group (`consumer_group_metadata()`) and reads its committed
    offsets back (`committed`)."""

    def __init__(
        self,
        session: TransactionSession[Any],
        consumer_config: Mapping[str, Any],
        group_id: str,
        logger: logging.Logger | logging.LoggerAdapter[Any],
    ) -> None:
        consumer = forced(
            dict(consumer_config),
            "group.id",
            group_id,
            "offsets are committed for the connector's group",
            origin=getattr(consumer_config, "origin", {}),
        )
        consumer["enable.auto.commit"] = False
        consumer["isolation.level"] = "read_committed"
        self.consumer_config = consumer
        self.session = session
        self.group_id = group_id
        self.log = logger
        self.consumer = Consumer(consumer)
        #: What the group holds as far as this instance knows (read, or committed by it).
        self.last_committed: dict[TopicPartition, OffsetAndMetadata] = {}

    def unchanged(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> bool:
        """Whether the group already holds exactly `offsets` (a commit of them alone is not needed)."""
        return all(self.last_committed.get(tp) == om for tp, om in offsets.items())

    def send(self, offsets: Mapping[TopicPartition, OffsetAndMetadata], timeout_s: float) -> None:
        """`send_offsets_to_transaction()` as a bounded call (`TransactionSession.bounded`: it can
        block forever once the group coordinator's broker has died); a `KafkaException` is raised as
        it is, for the writer to tell an abortable failure from a fatal one."""
        metadata = self.consumer.consumer_group_metadata()
        producer = self.session.producer
        self.session.bounded(
            Step.SEND_OFFSETS,
            lambda: producer.send_offsets_to_transaction(kafka_offsets(offsets), metadata, timeout_s),
            timeout_s,
        )

    def committed_with_transaction(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        self.last_committed.update(offsets)

    def committed(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, OffsetAndMetadata]:
        """The group's committed offsets (only committed transactions count) for these partitions,
        with the leader epochs committed with them; partitions with none are left out."""
        wanted = [KafkaTopicPartition(tp.topic, tp.partition) for tp in partitions]
        if not wanted:
            return {}
        consumer = self.consumer
        # read_committed makes librdkafka ask for stable offsets (KIP-447): an offset commit of a
        # transaction still completing is waited for, never read half done. A fresh cluster still
        # loading __consumer_offsets, or a moved coordinator, is waited for too.
        try:
            result = retry_transient(
                lambda: consumer.committed(wanted, timeout=10),
                timeout=CALL_TIMEOUT_S,
                doing=f"[{self.session.task_id}] reading committed offsets",
                logger=self.log,
                pause_s=0.5,
            )
        except KafkaException as exc:
            err: KafkaError = exc.args[0]
            from eosconnect.storage.acls import group_access_refusal

            # A missing Read on the group only shows as a time-out here (librdkafka retries the
            # coordinator lookup): ask once more in a way that tells.
            refusal = (
                group_access_refusal(self.consumer_config, self.group_id)
                if err.code() == KafkaError._TIMED_OUT
                else None
            )
            raise ConnectException(
                f"{self.session.task_id}: could not read the committed offsets of group {self.group_id!r} "
                f"on the cluster the task writes to: {refusal or f'{err.name()}: {err.str()}'}"
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
        self.last_committed.update(found)
        return found

    def close(self) -> None:
        with contextlib.suppress(KafkaException, RuntimeError):
            self.consumer.close()
