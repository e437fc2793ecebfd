"""Offset syncs of an exactly-once MirrorSource from where its columnar batches landed.

The runtime learns only the first and last record's target offset of a batch (`Landing`); the
syncs derived from that must equal the ones per-record delivery reports give, and a batch whose
records did not land contiguously must be refused (so the runtime resends it record by record).
"""

from __future__ import annotations

from types import SimpleNamespace

from eosconnect.api.batch import ColumnOffsets, LandedRecords, SourceBatch
from eosconnect.api.records import SourcePartition
from eosconnect.api.transactions import TransactionRecord
from eosconnect.connectors.mirror_formats import OffsetSync
from eosconnect.connectors.mirror_source import wrap_partition
from eosconnect.connectors.mirror_syncs import OffsetSyncs
from eosconnect.connectors.mirror_translation import OffsetSyncWriter, offset_syncs
from eosconnect.runtime.landing import Landing
from eosconnect.runtime.transactions.sink_writer import landed_runs

SOURCE = wrap_partition("east", SimpleNamespace(topic="orders", partition=2))


def _batch(source_offsets: list[int]) -> SourceBatch:
    epochs: list[int | None] = [None] * len(source_offsets)
    return SourceBatch(
        source_partition=SOURCE,
        source_offset={"offset": source_offsets[-1]},
        topic="east.orders",
        partition=2,
        values=[b"v"] * len(source_offsets),
        record_offsets=ColumnOffsets({"offset": source_offsets, "leader.epoch": epochs}),
    )


def _report(partition: int, offset: int) -> SimpleNamespace:
    return SimpleNamespace(partition=lambda: partition, offset=lambda: offset)


def _syncs_of(landed: list[LandedRecords]) -> list[OffsetSync]:
    """What MirrorSource's participant writes for `landed` (its records all go to the syncs topic)."""
    participant = OffsetSyncs("east")
    records = participant.transaction_records(landed)
    assert {(r.topic, r.partition) for r in records} == {("mm2-offset-syncs.east.internal", 0)}
    return _syncs(records)


def _syncs(records: list[TransactionRecord]) -> list[OffsetSync]:
    return [OffsetSync.decode(key, value) for _, _, key, value, _headers in records]


def test_contiguous_batch_gives_the_syncs_of_per_record_reports():
    # Source offsets with gaps (transaction markers, aborted records on the source).
    sources = [10, 11, 12, 14, 15, 20, 21, 22]
    landing = Landing(_batch(sources), "east.orders")
    landing.on_first(None, _report(2, 100))
    landing.on_last(None, _report(2, 107))
    span = landing.landed()
    assert span is not None and list(span.offsets) == list(range(100, 108))
    derived = _syncs_of([span])
    per_record = offset_syncs(("orders", 2, s, 100 + i) for i, s in enumerate(sources))
    assert derived == per_record
    assert [(s.upstream_offset, s.downstream_offset) for s in derived] == [
        (10, 100),
        (12, 102),
        (14, 103),
        (15, 104),
        (20, 105),
        (22, 107),
    ]


def test_single_record_batch_and_per_record_spans():
    landing = Landing(_batch([5]), "east.orders")
    landing.on_first(None, _report(2, 40))
    landing.on_last(None, _report(2, 40))
    span = landing.landed()
    assert span is not None
    one_by_one = LandedRecords(SourcePartition.of(SOURCE), ({"offset": 6},), "east.orders", 2, (41,))
    assert _syncs_of([span, one_by_one]) == [
        OffsetSync("orders", 2, 5, 40),
        OffsetSync("orders", 2, 6, 41),
    ]


def test_interleaved_or_undelivered_batch_is_refused():
    batch = _batch([1, 2, 3, 4])
    interleaved = Landing(batch, "east.orders")
    interleaved.on_first(None, _report(2, 50))
    interleaved.on_last(None, _report(2, 54))  # 5 offsets for 4 records: another producer wrote between
    assert interleaved.landed() is None
    failed = Landing(batch, "east.orders")
    failed.on_first(None, _report(2, 50))
    failed.on_last(object(), _report(2, 53))  # the last record's delivery failed
    assert failed.landed() is None
    elsewhere = Landing(batch, "east.orders")
    elsewhere.on_first(None, _report(1, 50))
    elsewhere.on_last(None, _report(1, 53))
    assert elsewhere.landed() is None


def test_the_sink_describes_its_copies_as_runs_with_the_same_syncs() -> None:
    """The KIP-656 mirror sink hands its participant one `LandedRecords` per run of copies from one
    source partition to one target partition: the syncs equal those of the copies one by one."""
    origins = [
        ("orders", 0, 10, "east.orders", 0),
        ("orders", 1, 7, "east.orders", 1),
        ("orders", 0, 11, "east.orders", 0),
        ("orders", 0, 13, "east.orders", 0),
        ("orders", 1, 8, "east.orders", 1),
    ]
    delivered = {("east.orders", 0): [100, 101, 102], ("east.orders", 1): [50, 51]}
    runs = landed_runs(origins, delivered)
    assert [(dict(r.source_partition), list(r.offsets)) for r in runs] == [
        ({"topic": "orders", "partition": 0}, [100]),
        ({"topic": "orders", "partition": 1}, [50]),
        ({"topic": "orders", "partition": 0}, [101, 102]),
        ({"topic": "orders", "partition": 1}, [51]),
    ]
    copies = [("orders", 0, 10, 100), ("orders", 1, 7, 50), ("orders", 0, 11, 101), ("orders", 0, 13, 102)]
    copies.append(("orders", 1, 8, 51))
    expected = [(sync.key(), sync.value(), headers) for sync, headers in OffsetSyncWriter().records(copies)]
    assert [(r.key, r.value, r.headers) for r in OffsetSyncs("east").transaction_records(runs)] == expected
