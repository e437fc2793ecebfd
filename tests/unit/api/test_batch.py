"""`SourceBatch` (columnar records) and the converters' column conversion, without Kafka."""

from __future__ import annotations

import pytest

from eosconnect.api import ColumnOffsets, DataException, SourceBatch, SourceRecord
from eosconnect.api.batch import expand
from eosconnect.converters import ByteArrayConverter, JsonConverter, StringConverter


def test_batch_is_a_sequence_of_records_with_their_own_offsets() -> None:
    batch = SourceBatch(
        {"file": "f"},
        {"pos": 30},
        "t",
        values=["a", "b", "c"],
        keys=[b"1", None, b"3"],
        timestamps=[5, None, 7],
        headers=[None, [("h", b"v")], None],
        record_offsets=ColumnOffsets({"pos": [10, 20, 30], "epoch": [1, None, 2]}),
    )
    assert len(batch) == 3 and bool(batch)
    records = list(batch)
    assert all(isinstance(r, SourceRecord) for r in records)
    expected = [("a", b"1", 5), ("b", None, None), ("c", b"3", 7)]
    assert [(r.value, r.key, r.timestamp) for r in records] == expected
    assert [dict(r.source_offset) for r in records] == [{"pos": 10, "epoch": 1}, {"pos": 20}, {"pos": 30}]
    assert records[1].headers == (("h", b"v"),)
    assert batch[-1].value == "c" and [r.value for r in batch[1:]] == ["b", "c"]
    with pytest.raises(IndexError):
        batch[3]


def test_without_record_offsets_every_record_carries_the_batch_end() -> None:
    batch = SourceBatch({"p": 1}, {"o": 9}, "t", values=[b"x", b"y"])
    assert [dict(r.source_offset) for r in batch] == [{"o": 9}, {"o": 9}]
    assert expand([batch, SourceRecord({"p": 2}, {"o": 1}, "t", "z")])[2].value == "z"


def test_bad_batches_name_the_problem() -> None:
    with pytest.raises(DataException, match="keys has 1 entries for 2 values"):
        SourceBatch({"p": 1}, {"o": 1}, "t", values=[1, 2], keys=[1])
    with pytest.raises(DataException, match="source offset reached after its last record"):
        SourceBatch({"p": 1}, None, "t", values=[1])  # type: ignore[arg-type]
    with pytest.raises(DataException, match="source_partition"):
        SourceBatch({"p": [1]}, {"o": 1}, "t", values=[1])  # type: ignore[dict-item]
    with pytest.raises(DataException, match="topic"):
        SourceBatch({"p": 1}, {"o": 1}, "", values=[1])
    assert not SourceBatch({"p": 1}, {"o": 1}, "t", values=[])


@pytest.mark.parametrize(
    ("converter", "values"),
    [
        (StringConverter(), ["plain", "é", None, 12, True]),
        (StringConverter(), ["only", "strings"]),
        (ByteArrayConverter(), [b"a", None, b"c"]),
        (ByteArrayConverter(), [b"a", bytearray(b"b")]),
        (JsonConverter(), [{"a": 1}, None, "s"]),
    ],
)
def test_column_conversion_equals_value_by_value(converter, values) -> None:
    assert list(converter.from_connect_batch("t", values)) == [converter.from_connect("t", v) for v in values]


def test_column_conversion_keeps_the_errors() -> None:
    with pytest.raises(DataException, match="ByteArrayConverter needs bytes"):
        ByteArrayConverter().from_connect_batch("t", [b"a", "text"])
    with pytest.raises(DataException, match="StringConverter cannot write a dict"):
        StringConverter().from_connect_batch("t", ["a", {"b": 1}])


class _CountingProducer:
    """A transactional producer that only counts what it was handed."""

    def __init__(self) -> None:
        self.produced = 0

    def begin_transaction(self) -> None:
        pass

    def produce(self, *_args: object, **_kwargs: object) -> None:
        self.produced += 1


def test_a_transaction_counts_the_records_of_a_batch_it_sent_not_those_skipped() -> None:
    """errors.tolerance=all leaves a record that failed conversion out of a batch's columns: the
    transaction's `sent` (the transaction-size and records-written metrics) counts what went to the
    producer, not the batch's length."""
    from eosconnect.runtime.exactly_once import ExactlyOnceSourceTaskRunner
    from eosconnect.runtime.metrics import TaskMetrics
    from eosconnect.runtime.pipeline import OutgoingColumns
    from support.sessions import unconnected_session

    producer = _CountingProducer()
    runner = ExactlyOnceSourceTaskRunner.__new__(ExactlyOnceSourceTaskRunner)  # no Spark, no broker
    runner._session = unconnected_session(producer)
    runner.metrics = TaskMetrics("c", 0)
    runner._pending, runner._participant = None, None
    batch = SourceBatch(
        source_partition={"p": 0}, source_offset={"seq": 3}, topic="t", values=["a", "b", "c"]
    )
    runner._send_batch(batch, OutgoingColumns("t", -1, None, [b"a", b"c"], None, None))  # "b" skipped
    assert runner.session.current is not None and runner.session.current.sent == producer.produced == 2
