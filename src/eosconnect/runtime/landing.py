"""Where the records of a source task's transaction landed, for its `TransactionParticipant`.

A participant (eosconnect.api.transactions) derives records of its own from the Kafka offsets the
transaction's records landed at. On the per-record path every record's delivery report says where
it went; a columnar `SourceBatch` costs only its first and last record's reports (`Landing`), from
which the offsets of the records between follow when they provably landed contiguously. A batch
that did not is sent again record by record (`sent_records`), each with its report (`report_into`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, cast

from confluent_kafka import KafkaError

from eosconnect.api.batch import LandedRecords, SourceBatch
from eosconnect.api.records import RecordMetadata, SourceOffset, SourceRecord

__all__ = [
    "Landing",
    "batch_partitions",
    "derivable_from_ends",
    "landed_records",
    "report_into",
    "sent_records",
]


class Landing:
    """Where a `SourceBatch` sent on the columnar path landed, from the delivery reports of its
    first and last record only (see `landed_records`)."""

    __slots__ = ("batch", "first", "last", "topic")

    def __init__(self, batch: SourceBatch, topic: str) -> None:
        self.batch, self.topic = batch, topic
        self.first: tuple[int, int] | None = None  # (partition, offset)
        self.last: tuple[int, int] | None = None

    def on_first(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            self.first = (msg.partition(), msg.offset())

    def on_last(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            self.last = (msg.partition(), msg.offset())

    def landed(self) -> LandedRecords | None:
        """The batch's records and their offsets, or None unless they are provably contiguous: a
        transactional producer's records to one partition keep their order, so n records whose
        first and last landed n - 1 offsets apart took every offset between (had one of them failed,
        the transaction could not commit)."""
        batch, first, last = self.batch, self.first, self.last
        if first is None or last is None or first[0] != batch.partition or last[0] != batch.partition:
            return None
        if last[1] - first[1] + 1 != len(batch) or batch.record_offsets is None:
            return None
        return LandedRecords(
            batch.source_partition, batch.record_offsets, self.topic, first[0], range(first[1], last[1] + 1)
        )


def report_into(
    reports: MutableMapping[int, RecordMetadata], record: SourceRecord
) -> Callable[[KafkaError | None, Any], None]:
    """A delivery callback that keeps where `record` landed in `reports`, by `id(record)` (what
    `landed_records` and `commit_record()` read)."""
    key = id(record)

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            reports[key] = RecordMetadata(msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1])

    return on_delivery


def landed_records(
    sequence: Sequence[SourceRecord | Landing], metadata: Mapping[int, RecordMetadata]
) -> list[LandedRecords] | None:
    """What a transaction's `sequence` (records on the per-record path, batches on the columnar
    one, in send order) landed as, from `metadata` (delivery reports by `id(record)`); None when a
    batch did not land contiguously (another producer wrote into its partition meanwhile)."""
    landed: list[LandedRecords] = []
    for item in sequence:
        if isinstance(item, Landing):
            span = item.landed()
            if span is None:
                return None
            landed.append(span)
            continue
        reported = metadata.get(id(item))
        if reported is not None:  # else not delivered (the commit fails) or filtered
            landed.append(
                LandedRecords(
                    item.source_partition,
                    # An exactly-once record carries its offset (the transaction commits it).
                    (cast(SourceOffset, item.source_offset),),
                    reported.topic,
                    reported.partition,
                    (reported.offset,),
                )
            )
    return landed


def derivable_from_ends(items: Sequence[SourceRecord | SourceBatch]) -> bool:
    """Whether the offsets of what a task polled can be derived from the ends of its batches
    (`Landing`): only when each is a `SourceBatch` to one known partition with its records' offsets."""
    return all(
        isinstance(item, SourceBatch) and item.partition is not None and item.record_offsets is not None
        for item in items
    )


def batch_partitions(sequence: Sequence[SourceRecord | Landing]) -> list[str]:
    """The `topic-partition`s the columnar batches of a transaction's `sequence` went to, sorted."""
    return sorted({f"{item.topic}-{item.batch.partition}" for item in sequence if isinstance(item, Landing)})


def sent_records(sequence: Sequence[SourceRecord | Landing]) -> list[SourceRecord]:
    """Every record of a transaction's `sequence`, in send order, its batches' records expanded."""
    records: list[SourceRecord] = []
    for item in sequence:
        if isinstance(item, Landing):
            records.extend(item.batch)
        else:
            records.append(item)
    return records
