"""Parsing Debezium's signals: each bad one names its field."""

from __future__ import annotations

import pytest

from eosconnect.connectors.postgres_cdc.signals import BadSignal, parse_signal, signal_insert, split_table


def test_execute_snapshot_with_regexes_and_additional_conditions() -> None:
    signal = parse_signal(
        "s1",
        "execute-snapshot",
        '{"data-collections": ["public\\\\.ord.*"], "type": "INCREMENTAL", '
        '"additional-conditions": [{"data-collection": "public.orders", "filter": "id > 10"}]}',
        "source",
    )
    request = signal.execute_snapshot()
    assert request.snapshot_type == "incremental"
    assert request.matches("public.orders") and not request.matches("public.customers")
    assert request.additional_conditions == {"public.orders": "id > 10"}


@pytest.mark.parametrize(
    ("signal_type", "data", "field"),
    [
        ("explode", None, "type"),
        (None, None, "type"),
        ("log", "{not json", "data is not JSON"),
        ("log", "[1]", "data must be a JSON object"),
        ("log", "{}", "data.message"),
    ],
)
def test_bad_signals_name_the_field(signal_type: object, data: object, field: str) -> None:
    with pytest.raises(BadSignal, match=field):
        parse_signal("x", signal_type, data, "source")


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ("{}", "data.data-collections"),
        ('{"data-collections": []}', "data.data-collections"),
        ('{"data-collections": ["("]}', "is not a regular expression"),
        ('{"data-collections": ["a"], "type": "sideways"}', "data.type"),
        ('{"data-collections": ["a"], "additional-conditions": {"a": 1}}', "data.additional-conditions"),
        ('{"data-collections": ["a"], "additional-conditions": [{"filter": "x"}]}', "data-collection"),
    ],
)
def test_bad_execute_snapshot_data_names_the_field(data: str, field: str) -> None:
    signal = parse_signal("x", "execute-snapshot", data, "kafka")
    with pytest.raises(BadSignal, match=field):
        signal.execute_snapshot()


def test_a_single_collection_string_and_a_mapping_as_data() -> None:
    signal = parse_signal(7, "execute-snapshot", {"data-collections": "public.t"}, "kafka")
    assert signal.id == "7" and signal.execute_snapshot().data_collections == ("public.t",)


def test_table_names_and_the_insert_that_sends_a_signal() -> None:
    assert split_table("public.orders", "f") == ("public", "orders")
    assert split_table("orders", "f") == ("public", "orders")
    assert split_table("db.s.t", "f") == ("s", "t")
    with pytest.raises(BadSignal, match="f must be"):
        split_table("a..b", "f")
    statement, (signal_id, kind, data) = signal_insert(("public", "sig"), "log", {"message": "hi"})
    assert statement == 'INSERT INTO "public"."sig" (id, type, data) VALUES (%s, %s, %s)'
    assert kind == "log" and data == '{"message": "hi"}' and len(signal_id) == 36
