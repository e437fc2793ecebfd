"""Buffered changes to one Arrow table: the union of their columns, the last change per key."""

from __future__ import annotations

import pyarrow as pa
import pytest

from eosconnect.api.errors import DataException
from eosconnect.api.records import TopicPartition
from eosconnect.connectors.lake.batch import OPERATION_COLUMN, latest_per_key, to_arrow
from eosconnect.connectors.lake.changes import Change, Operation

TP = TopicPartition("t", 0)


def change(offset: int, op: Operation, **values: object) -> Change:
    fields = tuple(pa.field(n, pa.int64() if isinstance(v, int) else pa.string()) for n, v in values.items())
    return Change(TP, offset, op, fields, dict(values))


def test_the_table_has_every_column_first_seen_first_with_nulls_where_a_change_lacks_one() -> None:
    table = to_arrow([change(0, Operation.APPEND, k=1), change(1, Operation.APPEND, k=2, extra="x")])
    assert table.column_names == ["k", "extra"]
    assert table.to_pylist() == [{"k": 1, "extra": None}, {"k": 2, "extra": "x"}]


def test_the_last_change_per_key_wins_in_the_order_of_the_last_changes() -> None:
    changes = [
        change(0, Operation.UPSERT, k=1, v="a"),
        change(1, Operation.UPSERT, k=2, v="b"),
        change(2, Operation.DELETE, k=1, v="a"),
    ]
    latest = latest_per_key(changes, ["k"])
    assert [(c.offset, c.operation) for c in latest] == [(1, Operation.UPSERT), (2, Operation.DELETE)]
    assert to_arrow(latest, with_operation=True).column(OPERATION_COLUMN).to_pylist() == ["upsert", "delete"]


def test_a_column_with_two_types_in_one_batch_is_refused_naming_it() -> None:
    with pytest.raises(DataException, match="column 'v' is int64 in one record and string"):
        to_arrow([change(0, Operation.APPEND, v=1), change(1, Operation.APPEND, v="x")])
