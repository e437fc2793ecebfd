"""`SourceBatch`: many records of one source partition in columnar form, the fast path of `poll()`.

A `SourceRecord` per record costs a validated object, a frozen partition and offset, a converter
call and a `produce()` call with keyword arguments: most of a Python task's time per record. Kafka
Connect's own file and mirror tasks move 100k records per second on one core; to keep up, a task
may return its records as columns instead (values, optionally keys, timestamps and headers) with
*one* source offset for the end of the batch. When the connector has no transformations, the
runtime converts each column in one call and hands it to the producer in a tight loop, and the
batch's single offset joins the transaction once.

Semantics are those of the same records returned one by one: the batch is never split across
transactions (a `poll`, `interval` or `connector` boundary falls between batches), so committing
its end offset with its records is exactly what per-record offsets would give. Where the runtime
needs record objects (transformations, `commit_record()`, connector-defined boundaries) it iterates
the batch, which yields ordinary `SourceRecord`s: each with its own offset when the batch has
`record_offsets`, else with the batch's end offset (correct as well, since the batch commits as a
whole). A `SourceBatch` is a read-only sequence of `SourceRecord`s, so code that loops over what
`poll()` returned keeps working.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from eosconnect.api.data.schema import Schema
from eosconnect.api.errors import DataException
from eosconnect.api.records import (
    Headers,
    Primitive,
    SourceOffset,
    SourcePartition,
    SourceRecord,
    _check_optional_int,
    _check_topic,
)

__all__ = ["ColumnOffsets", "LandedRecords", "SourceBatch"]


class ColumnOffsets(Sequence[Mapping[str, Primitive]]):
    """Per-record source offsets kept as columns, built into maps only when one is looked at.

    `ColumnOffsets({"position": [6, 11, 12]})[1] == {"position": 11}`. A None in a column leaves
    that field out of that record's offset (e.g. an unknown leader epoch).
    """

    __slots__ = ("_columns", "_length")

    def __init__(self, columns: Mapping[str, Sequence[Primitive]]) -> None:
        lengths = {len(column) for column in columns.values()}
        if len(lengths) > 1:
            raise DataException(f"offset columns differ in length: {sorted(lengths)}")
        self._columns = dict(columns)
        self._length = lengths.pop() if lengths else 0

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Mapping[str, Primitive]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Mapping[str, Primitive]]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        return {name: column[index] for name, column in self._columns.items() if column[index] is not None}

    def column(self, name: str) -> Sequence[Primitive] | None:
        """One field of every record's offset (None where a record lacks it); None without that column."""
        return self._columns.get(name)


class SourceBatch(Sequence[SourceRecord]):
    """Records of one source partition as columns, with the source offset reached after the last one.

    `values` is required; `keys`, `timestamps` (ms since the epoch, None: the producer's time) and
    `headers` (a list of header pairs or None per record) are optional columns of the same length.
    All records go to `topic` (and Kafka `partition`, None: the producer's partitioner).
    `source_offset` is the position after the batch's last record: what a restarted task resumes
    from. `record_offsets`, optional, gives each record's own offset for the per-record view.
    """

    __slots__ = (
        "headers",
        "key_schema",
        "keys",
        "partition",
        "record_offsets",
        "source_offset",
        "source_partition",
        "timestamps",
        "topic",
        "value_schema",
        "values",
    )

    def __init__(
        self,
        source_partition: Mapping[str, Primitive],
        source_offset: Mapping[str, Primitive],
        topic: str,
        values: Sequence[Any],
        keys: Sequence[Any] | None = None,
        partition: int | None = None,
        timestamps: Sequence[int | None] | None = None,
        headers: Sequence[Headers | list[tuple[str, Any]] | None] | None = None,
        record_offsets: Sequence[Mapping[str, Primitive]] | None = None,
        key_schema: Schema | None = None,
        value_schema: Schema | None = None,
    ) -> None:
        if type(topic) is not str or not topic:
            _check_topic(topic)
        _check_optional_int("partition", partition, 0)
        if source_offset is None:
            raise DataException(
                "a SourceBatch needs the source offset reached after its last record; return deletions "
                "(source_offset=None) as single SourceRecords"
            )
        count = len(values)
        columns = {"keys": keys, "timestamps": timestamps, "headers": headers}
        for name, column in {**columns, "record_offsets": record_offsets}.items():
            if column is not None and len(column) != count:
                raise DataException(f"SourceBatch {name} has {len(column)} entries for {count} values")
        self.source_partition = SourcePartition.of(source_partition)
        self.source_offset = SourceOffset.of(source_offset)
        self.topic = topic
        self.values = values
        self.keys = keys
        self.partition = partition
        self.timestamps = timestamps
        self.headers = headers
        self.record_offsets = record_offsets
        self.key_schema = key_schema
        self.value_schema = value_schema

    def __len__(self) -> int:
        return len(self.values)

    def replace(self, **changes: Any) -> SourceBatch:
        """A copy with some columns or batch-wide fields replaced (`topic`, `values`, `value_schema`,
        ...), what a transformation's `apply_columns` returns. What is kept is not checked again; a
        new column must have one entry per record."""
        clone = object.__new__(SourceBatch)
        for name in SourceBatch.__slots__:
            object.__setattr__(clone, name, changes.pop(name) if name in changes else getattr(self, name))
        if changes:
            raise TypeError(f"SourceBatch has no field {', '.join(sorted(changes))}")
        if type(clone.topic) is not str or not clone.topic:
            _check_topic(clone.topic)
        count = len(self.values)
        for name in ("values", "keys", "timestamps", "headers"):
            column = getattr(clone, name)
            if column is not None and len(column) != count:
                raise DataException(f"SourceBatch {name} has {len(column)} entries for {count} records")
        return clone

    def __bool__(self) -> bool:
        return bool(self.values)

    @overload
    def __getitem__(self, index: int) -> SourceRecord: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SourceRecord]: ...
    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self.values)))]
        if index < 0:
            index += len(self.values)
        if not 0 <= index < len(self.values):
            raise IndexError("SourceBatch index out of range")
        return self._record(index)

    def __iter__(self) -> Iterator[SourceRecord]:
        return (self._record(i) for i in range(len(self.values)))

    def __repr__(self) -> str:
        return (
            f"SourceBatch({len(self.values)} records of {dict(self.source_partition)} to {self.topic!r}, "
            f"ending at {dict(self.source_offset)})"
        )

    def _record(self, i: int) -> SourceRecord:
        last = i == len(self.values) - 1
        offset = self.source_offset if self.record_offsets is None or last else self.record_offsets[i]
        return SourceRecord(
            source_partition=self.source_partition,
            source_offset=offset,
            topic=self.topic,
            value=self.values[i],
            key=None if self.keys is None else self.keys[i],
            partition=self.partition,
            headers=None if self.headers is None else self.headers[i],
            timestamp=None if self.timestamps is None else self.timestamps[i],
            key_schema=self.key_schema,
            value_schema=self.value_schema,
        )


@dataclass(frozen=True)
class LandedRecords:
    """Records of one exactly-once transaction that went, in this order, from one source partition to
    one Kafka partition, and the offset each landed at: what a `TransactionParticipant` derives
    its own records from (the mirror's offset syncs). For a `SourceBatch` sent on the columnar path,
    `source_offsets` is its `record_offsets` and `offsets` a `range` (its records are contiguous).
    """

    source_partition: SourcePartition
    source_offsets: Sequence[Mapping[str, Primitive]]
    topic: str
    partition: int
    offsets: Sequence[int]


def expand(polled: Sequence[SourceRecord | SourceBatch]) -> list[SourceRecord]:
    """What `poll()` returned as one list of `SourceRecord`s (batches iterated record by record)."""
    if isinstance(polled, SourceBatch):
        return list(polled)
    records: list[SourceRecord] = []
    for item in polled:
        if isinstance(item, SourceBatch):
            records.extend(item)
        else:
            records.append(item)
    return records
