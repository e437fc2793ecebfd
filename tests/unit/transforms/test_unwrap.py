"""ExtractNewRecordState ("unwrap") on PostgresCdcSource's envelopes: Debezium 3.7's behaviour per
`delete.tombstone.handling.mode`, its 2.x settings, `add.fields`/`add.headers`, `route.by.field`."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from eosconnect.api.data import Struct
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import SinkRecord
from eosconnect.connectors.debezium.modes import DecimalHandling, TimePrecision
from eosconnect.connectors.postgres_cdc.events import SourceInfo, TableEvents
from eosconnect.connectors.postgres_cdc.pgoutput import Column
from eosconnect.transforms.chain import resolve_transformation_class
from eosconnect.transforms.unwrap import SCHEMA_CACHE_SIZE, ExtractNewRecordState

TABLE = TableEvents(
    "srv",
    "public",
    "t",
    [Column("id", 23, -1, True), Column("name", 25, -1, False)],
    [False, True],
    ["id"],
    DecimalHandling.PRECISE,
    TimePrecision.ADAPTIVE,
)
SOURCE = SourceInfo("srv", "db", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "false", 9, 100, 90)
NOW = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)


def event(op: str, before: tuple[str, str | None] | None, after: tuple[str, str | None] | None) -> SinkRecord:
    b = None if before is None else TABLE.row(before)
    a = None if after is None else TABLE.row(after)
    return SinkRecord(
        topic="srv.public.t",
        partition=0,
        offset=1,
        key=TABLE.key(a if a is not None else b),
        value=TABLE.envelope(op, b, a, SOURCE, NOW),
        key_schema=TABLE.key_schema,
        value_schema=TABLE.envelope_schema,
    )


def tombstone() -> SinkRecord:
    return SinkRecord(
        topic="srv.public.t",
        partition=0,
        offset=2,
        key=TABLE.key(TABLE.row(("1", None))),
        value=None,
        key_schema=TABLE.key_schema,
    )


def unwrap(**config: str) -> ExtractNewRecordState[Any]:
    smt = ExtractNewRecordState[Any]()
    smt.configure(config)
    return smt


def as_dict(value: Struct) -> dict[str, Any]:
    return {f.name: value.get(f.name) for f in value.schema.fields}


def test_debeziums_class_name_resolves_to_it() -> None:
    assert (
        resolve_transformation_class("io.debezium.transforms.ExtractNewRecordState") is ExtractNewRecordState
    )


def test_default_mode_gives_rows_and_a_null_valued_delete_and_drops_tombstones() -> None:
    smt = unwrap()
    created = smt.apply(event("c", None, ("1", "ann")))
    assert created is not None and as_dict(created.value) == {"id": 1, "name": "ann"}
    assert created.value_schema is TABLE.value_schema
    updated = smt.apply(event("u", ("1", "ann"), ("1", "bob")))
    assert updated is not None and as_dict(updated.value) == {"id": 1, "name": "bob"}
    deleted = smt.apply(event("d", ("1", "bob"), None))
    assert deleted is not None and deleted.value is None and deleted.value_schema is TABLE.value_schema
    assert deleted.key == TABLE.key(TABLE.row(("1", None)))
    assert smt.apply(tombstone()) is None


@pytest.mark.parametrize(
    ("mode", "delete", "kept_tombstone"),
    [
        ("drop", None, False),
        ("delete-to-tombstone", "tombstone", False),
        ("rewrite", {"id": 1, "name": "bob", "__deleted": "true"}, False),
        ("rewrite-with-tombstone", {"id": 1, "name": "bob", "__deleted": "true"}, True),
    ],
)
def test_delete_tombstone_handling_modes(mode: str, delete: Any, kept_tombstone: bool) -> None:
    smt = unwrap(**{"delete.tombstone.handling.mode": mode})
    out = smt.apply(event("d", ("1", "bob"), None))
    if delete is None:
        assert out is None
    elif delete == "tombstone":
        assert out is not None and out.value is None and out.value_schema is None
    else:
        assert out is not None and as_dict(out.value) == delete
    assert (smt.apply(tombstone()) is not None) == kept_tombstone
    created = smt.apply(event("c", None, ("2", "cy")))
    assert created is not None
    if mode.startswith("rewrite"):
        assert as_dict(created.value)["__deleted"] == "false"
    else:
        assert "__deleted" not in as_dict(created.value)


def test_debezium_2x_settings_are_read_when_the_3x_one_is_not_set() -> None:
    legacy = unwrap(**{"drop.tombstones": "false", "delete.handling.mode": "none"})
    deleted = legacy.apply(event("d", ("1", "bob"), None))
    assert deleted is not None and deleted.value is None and deleted.value_schema is TABLE.value_schema
    assert legacy.apply(tombstone()) is not None
    assert unwrap(**{"delete.handling.mode": "drop"}).apply(event("d", ("1", "bob"), None)) is None
    both = unwrap(**{"delete.tombstone.handling.mode": "rewrite", "delete.handling.mode": "drop"})
    rewritten = both.apply(event("d", ("1", "bob"), None))
    assert rewritten is not None and as_dict(rewritten.value)["__deleted"] == "true"


def test_add_fields_and_headers_as_debezium_names_them() -> None:
    smt = unwrap(**{"add.fields": "op,lsn,source.ts_ms:commit_ms,table", "add.headers": "op,db"})
    out = smt.apply(event("u", ("1", "ann"), ("1", "bob")))
    assert out is not None
    assert as_dict(out.value) == {
        "id": 1,
        "name": "bob",
        "__op": "u",
        "__lsn": 100,
        "__commit_ms": 1704067200000,
        "__table": "t",
    }
    assert out.value_schema is not None and out.value_schema.field("__lsn").schema.optional
    assert dict(out.headers) == {"__op": "u", "__db": "db"}
    dropped_tombstone = unwrap(
        **{"add.headers": "op", "delete.tombstone.handling.mode": "rewrite-with-tombstone"}
    )
    kept = dropped_tombstone.apply(tombstone())
    assert kept is not None and dict(kept.headers) == {"__op": "d"}


def test_route_by_field_and_records_without_an_envelope() -> None:
    smt = unwrap(**{"route.by.field": "name"})
    out = smt.apply(event("c", None, ("1", "orders")))
    assert out is not None and out.topic == "orders"
    deleted = smt.apply(event("d", ("1", "gone"), None))
    assert deleted is not None and deleted.topic == "gone"
    plain = SinkRecord(topic="x", partition=0, offset=0, key=None, value={"a": 1})
    assert smt.apply(plain) is plain


def test_bad_settings_are_named() -> None:
    with pytest.raises(ConfigException) as raised:
        unwrap(**{"drop.fields.header.name": "changed"})
    assert "drop.fields.header.name" in str(raised.value.errors)
    problems = ExtractNewRecordState[Any]().config_def().validate({"delete.tombstone.handling.mode": "keep"})
    assert any(v.errors for v in problems if v.name == "delete.tombstone.handling.mode")


def test_schema_cache_is_bounded_as_debeziums() -> None:
    """`add.fields` builds one schema per (value schema, op), kept in an LRU cache of Debezium's size
    (64): a stream of ever new schemas (ALTER TABLE after ALTER TABLE) does not grow it without end,
    and a schema still in use keeps its very same output schema object."""
    smt = unwrap(**{"add.fields": "op"})

    def update_of(table: TableEvents) -> SinkRecord:
        row = table.row(("1", "x"))
        value = table.envelope("u", row, row, SOURCE, NOW)
        return SinkRecord(topic="t", partition=0, offset=0, key=None, value=value, value_schema=value.schema)

    tables = [
        TableEvents(
            "srv",
            "public",
            f"t{n}",
            [Column("id", 23, -1, True), Column("name", 25, -1, False)],
            [False, True],
            ["id"],
            DecimalHandling.PRECISE,
            TimePrecision.ADAPTIVE,
        )
        for n in range(SCHEMA_CACHE_SIZE + 10)
    ]
    first = smt.apply(update_of(tables[0]))
    second = smt.apply(update_of(tables[1]))
    assert first is not None and second is not None
    for table in tables[2:]:
        again = smt.apply(update_of(tables[0]))  # kept in use: never the least recently used
        assert again is not None and again.value_schema is first.value_schema
        smt.apply(update_of(table))
    assert len(smt._schemas) == SCHEMA_CACHE_SIZE
    rebuilt = smt.apply(update_of(tables[1]))  # the least recently used one was dropped: built anew
    assert rebuilt is not None and rebuilt.value_schema is not second.value_schema
    assert rebuilt.value_schema == second.value_schema
