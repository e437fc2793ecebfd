"""Reading offsets topics: one topic kept up to date, and a connector's combined view (KIP-618).

Reads go through `read_to_end` (read_committed past transactions that were open at the start), so
offsets of aborted transactions are never seen and a hanging transaction delays the read instead of
being skipped over. Records that are not Kafka Connect offset records are logged and skipped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eosconnect.api.offsets import OffsetStorageReader
from eosconnect.api.records import Primitive, SourceOffset, SourcePartition
from eosconnect.storage.retrying_read import read_to_end_retrying
from eosconnect.storage.serialization import OffsetRecordError, decode_key, decode_value
from eosconnect.storage.topic_reader import TopicReader, TopicRecord

if TYPE_CHECKING:
    from eosconnect.storage.offsets.placement import OffsetsTopicPlacement

__all__ = [
    "ConnectorOffsetView",
    "OffsetMap",
    "OffsetsTopic",
    "read_offsets",
    "rewound_partitions",
    "shared_offsets_topic",
]

log = logging.getLogger(__name__)

#: A partition's offset, or None where a tombstone deleted it.
OffsetMap = dict[SourcePartition, SourceOffset | None]


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
            budget = self.timeout if timeout is None else timeout

            def read_on() -> None:
                read_to_end_retrying(reader, lambda: dict(self._positions), self._apply, budget)

            try:
                read_before = dict(self._positions)
                read_on()
                if self._forgot_a_rewound_topic(read_before, reader.ends):
                    read_on()  # the re-created topic, from its beginning
            finally:
                reader.close()
            self.loaded = True

    def _forgot_a_rewound_topic(self, read_before: Mapping[int, int], ends: Mapping[int, int]) -> bool:
        """Forget everything read (and say so) if the topic ended, when this refresh began, before
        where the last refresh had read to (`read_before`), or lost a partition it had read: it was
        deleted and created again (or lost records to an unclean leader election) since. A reader
        kept for a process's life (`shared_offsets_topic`) would otherwise keep the old topic's
        offsets and skip the new topic's records up to its old position. Only positions from before
        this refresh count: a refresh also applies records appended after it listed the ends."""
        behind = rewound_partitions(read_before, ends)
        if not behind:
            return False
        log.warning(
            "Offsets topic %s ends before what was already read from it (partition: (read up to, end) "
            "%s): it was deleted and re-created, or lost records; reading it again from the beginning",
            self.topic,
            behind,
        )
        self._entries.clear()
        self._positions.clear()
        self.skipped = 0
        return True

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


def rewound_partitions(
    read_to: Mapping[int, int], ends: Mapping[int, int]
) -> dict[int, tuple[int, int | None]]:
    """The partitions a reader had read up to `read_to` (next offsets) that now end before that, or
    are gone (end None), by the high watermarks `ends`: `{partition: (read to, end)}`. A live
    topic's high watermark never moves back, so any entry means the topic is not the one read."""
    return {p: (pos, ends.get(p)) for p, pos in read_to.items() if ends.get(p, -1) < pos}


_shared: dict[tuple[str, tuple[tuple[str, str], ...]], OffsetsTopic] = {}
_shared_lock = threading.Lock()


def shared_offsets_topic(client_config: Mapping[str, Any], topic: str, timeout: float = 60.0) -> OffsetsTopic:
    """This process's one `OffsetsTopic` for `topic` read with `client_config`.

    Why one: every source task reads its offsets topics to the end when it starts, and the tasks of
    a slot host (and the connectors of a worker's offsets API) read the same worker-wide topic. Each
    with a reader of its own read the whole topic again: with 100,000 records in it, a host of 28
    tasks decoded 2.8 million records at start-up and grew to 776 MB (82 MB with an empty topic).
    Shared, the first read takes the topic to its end and each later `refresh()` reads only what
    was appended since, which leaves the same latest-wins view a full read would (records are
    applied in order either way), as Kafka Connect's worker keeps one reader of its offsets topic.
    """
    key = (topic, tuple(sorted((k, str(v)) for k, v in client_config.items())))
    with _shared_lock:
        found = _shared.get(key)
        if found is None:
            found = _shared[key] = OffsetsTopic(client_config, topic, timeout=timeout)
        return found


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
        global_topic = shared_offsets_topic(placement.global_consumer_config, placement.global_topic, timeout)
        separate = (
            shared_offsets_topic(placement.consumer_config, placement.topic, timeout)
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
