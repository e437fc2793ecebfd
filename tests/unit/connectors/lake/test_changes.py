"""Records to changes: append mode writes values as rows; merge mode reads the operation from a
Debezium envelope, a flattened record's `__op`/`__deleted`, a cdc field, or a tombstone."""

from __future__ import annotations

import pytest

from eosconnect.api.errors import DataException
from eosconnect.api.records import SinkRecord
from eosconnect.connectors.lake.arrow_schema import Mapper
from eosconnect.connectors.lake.changes import ChangeMaker, Operation


def record(value: object, key: object = None, offset: int = 0) -> SinkRecord:
    return SinkRecord("t", 0, offset, key, value)


def test_append_mode_writes_each_value_and_skips_tombstones() -> None:
    maker = ChangeMaker(Mapper(), merge=False)
    change = maker.change(record({"k": 1, "nested": {"a": [1]}, "none": None}))
    assert change is not None and change.operation is Operation.APPEND
    assert change.values == {"k": 1, "nested": '{"a": [1]}'}  # a null alone types no column yet
    assert maker.change(record(None, key={"k": 1})) is None


@pytest.mark.parametrize(
    ("value", "key", "operation", "values"),
    [
        (
            {"op": "c", "before": None, "after": {"k": 1, "v": "a"}},
            None,
            Operation.UPSERT,
            {"k": 1, "v": "a"},
        ),
        (
            {"op": "u", "before": {"k": 1}, "after": {"k": 1, "v": "b"}},
            None,
            Operation.UPSERT,
            {"k": 1, "v": "b"},
        ),
        (
            {"op": "d", "before": {"k": 1, "v": "b"}, "after": None},
            None,
            Operation.DELETE,
            {"k": 1, "v": "b"},
        ),
        ({"k": 2, "v": "x", "__op": "d"}, None, Operation.DELETE, {"k": 2, "v": "x", "__op": "d"}),
        ({"k": 2, "__deleted": "true"}, None, Operation.DELETE, {"k": 2, "__deleted": "true"}),
        ({"k": 2, "__op": "r"}, None, Operation.UPSERT, {"k": 2, "__op": "r"}),
        (None, {"k": 3}, Operation.DELETE, {"k": 3}),
    ],
)
def test_merge_mode_reads_the_operation_from_the_record(
    value: object, key: object, operation: Operation, values: dict[str, object]
) -> None:
    change = ChangeMaker(Mapper(), merge=True, keys=("k",)).change(record(value, key))
    assert change is not None
    assert (change.operation, change.values) == (operation, values)


def test_a_truncate_event_changes_no_row_and_a_cdc_field_decides_the_operation() -> None:
    assert ChangeMaker(Mapper(), merge=True, keys=("k",)).change(record({"op": "t", "after": None})) is None
    maker = ChangeMaker(Mapper(), merge=True, keys=("k",), cdc_field="_cdc")
    delete = maker.change(record({"k": 1, "_cdc": "D"}))
    assert delete is not None and delete.operation is Operation.DELETE


def test_a_merge_record_without_its_key_column_fails_naming_the_column() -> None:
    with pytest.raises(DataException, match=r"merge key column\(s\) \['k'\]"):
        ChangeMaker(Mapper(), merge=True, keys=("k",)).change(record({"v": 1}))


def test_a_value_with_no_columns_fails_naming_the_fix() -> None:
    with pytest.raises(DataException, match=r"schemas\.enable=true"):
        ChangeMaker(Mapper(), merge=False).change(record("plain text"))
