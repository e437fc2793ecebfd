"""Read a topic to its end with `read_committed`, even while transactions are open.

A read_committed consumer stops at the last stable offset (LSO), which sits before any open
transaction. "The end" must therefore be fixed first, with read_uncommitted end offsets (the high
watermarks), and the consumer must keep going until it has passed them: that only happens once every
transaction open at the start has committed or aborted. This is docs/architecture.md, used by
the offsets and config stores and by the verifier alike.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from eosconnect.storage.transient import retry_transient

#: How long the broker holds a reader's empty fetch. A read whose end is a transaction's commit
#: marker (every read right after a transactional write: the config topic's, the offsets topic's)
#: pays it once: librdkafka never delivers the marker, so the end is known only from an empty fetch
#: at it (`_PARTITION_EOF`). 20 ms would put ~20 ms into each of the two config-topic reads on a
#: new connector's start-up path; 5 ms costs more fetches only while a read waits for a
#: transaction still open (about 200 a second instead of 50, for that read).
READER_FETCH_WAIT_MS = 5
#: How far a reader fetches ahead of what it has handed over (librdkafka's local queue, per
#: partition). librdkafka's defaults (100,000 messages, 64 MB) make every reader of a long topic
#: hold most of it in memory at once: with 100,000 records in the worker's offsets topic, a slot
#: host whose 28 tasks each read it at start-up grew to 776 MB (82 MB with an empty topic), 276 MB
#: with these limits (storage/offsets/reading.py also shares one reader per process). Readers
#: hand records over as fast as they come; a few fetches ahead is all they use, provided librdkafka
#: fetches again as soon as they have (`fetch.queue.backoff.ms`, default 1 s after a full queue:
#: reading 100,000 records of 1.5 kB took 30.5 s with these limits and that back-off, 0.5 s with
#: 5 ms, 0.8 s with librdkafka's defaults). An operator's `consumer.*` setting of any still wins.
READER_QUEUE_KBYTES = 2048
READER_QUEUE_MESSAGES = 10_000
READER_QUEUE_BACKOFF_MS = 5
#: One ListOffsets attempt. A request to a leader that just died waits out this timeout, not the
#: caller's whole one: the next attempt looks the leaders up again.
LIST_OFFSETS_ATTEMPT_S = 8.0
#: ListOffsets answers that say the admin client's idea of a partition's leader is out of date.
#: After a broker restart librdkafka's admin client can keep answering _NOENT ("No leaders found")
#: for a partition that broker leads again, for over a minute (its periodic metadata refresh is
#: every 5 minutes), and the leader's herder ticks fail meanwhile; asking for the topic's metadata
#: ends it at once.
STALE_LEADER_CODES = frozenset(
    {
        KafkaError._NOENT,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.FENCED_LEADER_EPOCH,
        KafkaError.UNKNOWN_LEADER_EPOCH,
    }
)


class ReadTimeout(TimeoutError):
    """The end was not reached in time, usually because a transaction stayed open."""


@dataclass(frozen=True)
class TopicRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    leader_epoch: int | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def end_offsets(
    admin: AdminClient, partitions: Iterable[TopicPartition], committed: bool = False, timeout: float = 30.0
) -> dict[tuple[str, int], int]:
    """High watermarks (default) or last stable offsets (`committed=True`) per (topic, partition).

    Transient errors (a leader moving or dead) are retried until `timeout`.
    """
    isolation = IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED
    request = {TopicPartition(tp.topic, tp.partition): OffsetSpec.latest() for tp in partitions}
    if not request:
        return {}
    deadline = time.monotonic() + timeout

    def attempt() -> dict[tuple[str, int], int]:
        attempt_s = min(LIST_OFFSETS_ATTEMPT_S, max(1.0, deadline - time.monotonic()))
        futures = admin.list_offsets(request, isolation_level=isolation, request_timeout=attempt_s)
        # librdkafka answers every future by `attempt_s`; the margin only guards against a hang.
        wait = attempt_s + 5
        try:
            return {(tp.topic, tp.partition): f.result(timeout=wait).offset for tp, f in futures.items()}
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() in STALE_LEADER_CODES:
                with contextlib.suppress(KafkaException):  # the retry asks again, refreshed or not
                    load_leaders(admin, {tp.topic for tp in request}, attempt_s)
            raise

    return retry_transient(attempt, timeout=timeout, doing="listing end offsets")


def assign_promptly(consumer: Consumer, partitions: list[TopicPartition], timeout: float = 30.0) -> None:
    """`consumer.assign(partitions)`, with the partitions' leaders known first. A fresh librdkafka
    consumer asked to start at a logical offset (beginning, end, committed) before it has metadata
    retries that offset lookup after a fixed 500 ms ("no current leader for partition"); one
    metadata request per topic first makes a short read ~0.5 s faster (task start-up, config and
    offsets reads)."""
    load_leaders(consumer, {tp.topic for tp in partitions}, timeout)
    consumer.assign(partitions)


def load_leaders(client: Consumer | AdminClient, topics: Iterable[str], timeout: float = 30.0) -> None:
    """One metadata request per topic, so that `client` knows their partitions' leaders (see
    `assign_promptly`, `end_offsets`)."""
    for topic in sorted(set(topics)):
        client.list_topics(topic, timeout=timeout)


def topic_partitions(admin: AdminClient, topic: str, timeout: float = 30.0) -> list[TopicPartition]:
    """`topic`'s partitions. The broker's refusal keeps its own code: a principal without an ACL on
    the topic gets TOPIC_AUTHORIZATION_FAILED, which fails at once (and gets its remedy, see
    storage/acls.py), where UNKNOWN_TOPIC_OR_PART would be retried as transient until the read's
    timeout."""
    md = admin.list_topics(topic, timeout=timeout)
    tmd = md.topics.get(topic)
    if tmd is None or tmd.error is not None:
        code = (
            tmd.error.code()
            if tmd is not None and tmd.error is not None
            else KafkaError.UNKNOWN_TOPIC_OR_PART
        )
        reason = tmd.error if tmd is not None else "not in metadata"
        raise KafkaException(KafkaError(code, f"topic {topic!r}: {reason}"))
    return [TopicPartition(topic, p) for p in sorted(tmd.partitions)]


def read_to_end(
    client_config: dict[str, object],
    topic: str,
    *,
    start_offsets: dict[int, int] | None = None,
    partitions: Iterable[int] | None = None,
    timeout: float = 60.0,
    on_record: Callable[[TopicRecord], None] | None = None,
) -> list[TopicRecord]:
    """Every committed record of `topic` from the beginning (or `start_offsets`) to the current end.

    `client_config` carries at least `bootstrap.servers` (plus security settings); consumer settings
    that would change the semantics (isolation level, auto commit, group) are forced here.
    `partitions` limits the read to those partitions (no metadata lookup: they must exist).
    With `on_record`, records are handed over one by one instead of being collected.
    One read with clients of its own; `TopicReader` keeps them for repeated reads.
    """
    reader = TopicReader(client_config, topic)
    try:
        return reader.read_to_end(
            start_offsets=start_offsets, partitions=partitions, timeout=timeout, on_record=on_record
        )
    finally:
        reader.close()


class TopicReader:
    """`read_to_end` of one topic, again and again, with one AdminClient and one Consumer kept
    between reads.

    A new pair of clients costs a connection, ApiVersions and metadata round trips (~50-100 ms on
    loopback) before the first fetch; the stores read their topic after every write, so on a
    connector's start-up path those costs added up to most of a second. Not thread-safe: callers
    serialize reads (the stores read under their read lock) and `close()`. A read that fails drops
    both clients, so the next one (a retry) starts from fresh ones; `close()` does the
    same, and a later read simply creates new clients.
    """

    def __init__(self, client_config: Mapping[str, Any], topic: str, *, group: str | None = None) -> None:
        """`group`: the group.id the consumer carries, one its principal may Describe (the worker's
        own group for the worker's stores). The reader never joins or commits, but librdkafka needs a
        group.id and looks its coordinator up every second for the consumer's whole life: a group the
        principal may not Describe is refused each time (a long-lived reader filled the authorizer
        log with one denial a second). None: a random group, for short reads by principals without
        any group ACL (Kafka's own readers need none)."""
        base: dict[str, Any] = {
            k: v
            for k, v in client_config.items()
            if not k.startswith(("isolation.", "group.", "enable.auto", "allow.auto.create"))
        }
        # A metadata request for a missing topic would otherwise auto-create it (with the broker's
        # defaults, i.e. not compacted) on brokers with auto.create.topics.enable=true.
        base["allow.auto.create.topics"] = False
        self.topic = topic
        self._base = base
        self._group = group
        self._admin: AdminClient | None = None
        self._consumer: Consumer | None = None
        #: The consumer has looked up the topic's leaders (`assign_promptly`).
        self._leaders_known = False
        #: The end offset of each partition the last read aimed at (partition -> high watermark).
        self.ends: dict[int, int] = {}

    def _clients(self) -> tuple[AdminClient, Consumer]:
        if self._admin is None:
            base = self._base
            self._admin = AdminClient({**base, "log_level": 0} if "log_level" not in base else base)
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    "queued.max.messages.kbytes": READER_QUEUE_KBYTES,
                    "queued.min.messages": READER_QUEUE_MESSAGES,
                    "fetch.queue.backoff.ms": READER_QUEUE_BACKOFF_MS,
                    **self._base,
                    "group.id": self._group or f"eosconnect-reader-{uuid.uuid4()}",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "enable.auto.offset.store": False,
                    "enable.partition.eof": True,
                    "auto.offset.reset": "earliest",
                    # The broker holds an empty fetch for up to this long. The default (500 ms) is
                    # paid whenever the end is a commit marker not yet written (right after a
                    # transactional write, the config store's common case).
                    "fetch.wait.max.ms": READER_FETCH_WAIT_MS,
                }
            )
        return self._admin, self._consumer

    def close(self) -> None:
        """Close the clients (a later read creates new ones)."""
        consumer, self._consumer, self._admin = self._consumer, None, None
        self._leaders_known = False
        if consumer is not None:
            consumer.close()

    def read_to_end(
        self,
        *,
        start_offsets: dict[int, int] | None = None,
        partitions: Iterable[int] | None = None,
        timeout: float = 60.0,
        on_record: Callable[[TopicRecord], None] | None = None,
    ) -> list[TopicRecord]:
        """As the module's `read_to_end`, with this reader's clients."""
        admin, consumer = self._clients()
        try:
            records = self._read(admin, consumer, start_offsets, partitions, timeout, on_record)
            # Fetching stops with the assignment; the next read assigns its own start offsets.
            consumer.unassign()
        except BaseException:
            self.close()
            raise
        return records

    def _read(
        self,
        admin: AdminClient,
        consumer: Consumer,
        start_offsets: dict[int, int] | None,
        partitions: Iterable[int] | None,
        timeout: float,
        on_record: Callable[[TopicRecord], None] | None,
    ) -> list[TopicRecord]:
        topic = self.topic
        if partitions is None:
            wanted = topic_partitions(admin, topic, timeout)
        else:
            wanted = [TopicPartition(topic, p) for p in sorted(set(partitions))]
        targets = end_offsets(admin, wanted, committed=False, timeout=timeout)
        self.ends = {p: end for (_, p), end in targets.items()}
        records: list[TopicRecord] = []
        assignment = []
        pending: set[int] = set()
        for tp in wanted:
            start = (start_offsets or {}).get(tp.partition, OFFSET_BEGINNING)
            assignment.append(TopicPartition(topic, tp.partition, start))
            target = targets[(topic, tp.partition)]
            if target > 0 and (start == OFFSET_BEGINNING or start < target):
                pending.add(tp.partition)
        if not pending:
            return records
        if self._leaders_known:
            consumer.assign(assignment)
        else:
            assign_promptly(consumer, assignment, timeout)
            self._leaders_known = True
        deadline = time.monotonic() + timeout
        while pending:
            if time.monotonic() > deadline:
                raise ReadTimeout(
                    f"read_committed reader of {topic!r} did not reach the end offsets {targets} within "
                    f"{timeout:.0f}s (partitions still behind: {sorted(pending)}); a transaction is probably "
                    "still open on them."
                )
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    end, at = msg.partition(), msg.offset()
                    assert end is not None and at is not None  # an end-of-partition event names both
                    if at >= targets[(topic, end)]:
                        pending.discard(end)
                    continue
                if err.code() == KafkaError.GROUP_AUTHORIZATION_FAILED:
                    # librdkafka needs a group.id and looks its coordinator up even for assign():
                    # the reader never joins or commits, so a principal with only Read on the
                    # topic (no Group ACL, as Kafka Connect's readers need none) reads all the same.
                    continue
                raise KafkaException(err)
            record_topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert record_topic is not None and partition is not None and offset is not None  # a record
            rec = TopicRecord(
                topic=record_topic,
                partition=partition,
                offset=offset,
                key=msg.key(),
                value=msg.value(),
                timestamp=msg.timestamp()[1],
                leader_epoch=msg.leader_epoch(),
                # librdkafka gives header values as bytes (or None); its type stubs also allow str
                headers=tuple(msg.headers() or ()),  # type: ignore[arg-type]
            )
            if on_record is not None:
                on_record(rec)
            else:
                records.append(rec)
            if offset + 1 >= targets[(topic, partition)]:
                pending.discard(partition)
        return records
