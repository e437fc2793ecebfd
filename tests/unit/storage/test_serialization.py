"""The offsets topic's record format: Kafka Connect's bytes, deterministic, leniently parsed."""

from __future__ import annotations

import pytest

from eosconnect.api.errors import DataException
from eosconnect.api.records import SourceOffset, SourcePartition
from eosconnect.converters import JsonConverter
from eosconnect.storage.config_state import encode_commit, encode_connector_config, encode_target_state
from eosconnect.storage.offsets import encode_offset_records
from eosconnect.storage.serialization import (
    OffsetRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from eosconnect.storage.status_store import ConnectState, Status


def test_key_and_value_match_kafka_connect_bytes():
    # What Kafka Connect's JsonConverter (schemas.enable=false) writes for these maps.
    assert encode_key("conn", {"a": 1}) == b'["conn",{"a":1}]'
    assert encode_value({"timestamp": "4761"}) == b'{"timestamp":"4761"}'
    assert encode_key("reddit", {"subreddit": "apachekafka"}) == b'["reddit",{"subreddit":"apachekafka"}]'
    assert encode_value({"n": 1.5, "ok": True, "none": None}) == b'{"n":1.5,"none":null,"ok":true}'


def test_internal_topics_keep_kafkas_plain_json_whatever_the_record_converters_default():
    """Kafka Connect writes its offsets, configs and status topics through an internal JsonConverter
    with schemas.enable=false, whatever key.converter/value.converter say; records' converters
    default to schemas.enable=true, and none of that reaches these bytes."""
    # An offsets record of Kafka's FileStreamSourceConnector, as its worker writes it.
    key = encode_key("local-file-source", {"filename": "/tmp/test.txt"})
    value = encode_value({"position": 1234})
    assert key == b'["local-file-source",{"filename":"/tmp/test.txt"}]'
    assert value == b'{"position":1234}'
    assert encode_offset_records(
        "local-file-source",
        {SourcePartition({"filename": "/tmp/test.txt"}): SourceOffset({"position": 1234})},
    ) == [(key, value)]
    assert decode_key(key) == ("local-file-source", {"filename": "/tmp/test.txt"})
    assert decode_value(value) == {"position": 1234}
    assert encode_connector_config({"name": "c"}) == b'{"properties":{"name":"c"}}'
    assert encode_commit(2) == b'{"tasks":2}'
    assert encode_target_state("STARTED") == b'{"state":"STARTED","state.v2":"STARTED"}'
    status = Status(ConnectState.RUNNING, "w:8083", 1).to_value()
    assert status == b'{"state":"RUNNING","trace":null,"worker_id":"w:8083","generation":1}'

    record_converter = JsonConverter()  # what a connector that sets no value.converter gets
    record_converter.configure({}, False)
    assert (
        record_converter.from_connect("t", {"position": 1234})
        == b'{"schema":null,"payload":{"position":1234}}'
    )


def test_none_offset_is_a_tombstone():
    assert encode_value(None) is None
    assert decode_value(None) is None
    assert decode_value(b"null") is None


def test_serialization_is_deterministic_whatever_the_field_order():
    a = encode_key("c", {"table": "orders", "db": "shop", "shard": 3})
    b = encode_key("c", {"shard": 3, "db": "shop", "table": "orders"})
    assert a == b == b'["c",{"db":"shop","shard":3,"table":"orders"}]'
    assert encode_value({"b": 2, "a": 1}) == encode_value({"a": 1, "b": 2}) == b'{"a":1,"b":2}'


def test_non_ascii_text_is_utf8_like_jackson():
    assert encode_key("c", {"file": "Ä.txt"}) == '["c",{"file":"Ä.txt"}]'.encode()


def test_keys_in_any_field_order_parse_to_the_same_partition():
    conn, p1 = decode_key(b'["c", {"table": "orders", "db": "shop"}]')
    _, p2 = decode_key(b'["c",{"db":"shop","table":"orders"}]')
    assert conn == "c"
    assert p1 == p2 == {"db": "shop", "table": "orders"}
    assert isinstance(p1, SourcePartition) and hash(p1) == hash(p2)
    assert decode_value(b'{"y": 2, "x": 1}') == SourceOffset({"x": 1, "y": 2})


def test_round_trip():
    key = encode_key("conn", {"a": 1, "b": "x", "c": None, "d": 0.25, "e": False})
    assert decode_key(key) == ("conn", {"a": 1, "b": "x", "c": None, "d": 0.25, "e": False})


@pytest.mark.parametrize(
    ("partition", "offset", "match"),
    [
        ({1: "a"}, {"o": 1}, "non-string key"),
        ({"a": [1, 2]}, {"o": 1}, "only str, int, float, bool or None"),
        ({"a": 1}, {"o": {"nested": 1}}, "only str, int, float, bool or None"),
        ({"a": 1}, {"o": float("nan")}, "JSON cannot store"),
        ({"a": 1}, ["not", "a", "map"], "must be a dict"),
    ],
)
def test_invalid_partitions_and_offsets_are_rejected_clearly(partition, offset, match):
    with pytest.raises(DataException, match=match):
        encode_offset_records("conn", {_Key(partition): offset})


class _Key(dict):
    """A hashable dict, to smuggle an invalid partition into an offsets mapping."""

    def __hash__(self) -> int:
        return id(self)


def test_invalid_connector_name_is_rejected():
    with pytest.raises(DataException, match="connector name"):
        encode_key("", {"a": 1})


@pytest.mark.parametrize(
    "key",
    [
        None,
        b"not json",
        b"\xff\xfe",
        b'{"c": {"a": 1}}',
        b'["c"]',
        b'["c", {"a": 1}, "extra"]',
        b'[1, {"a": 1}]',
        b'["c", ["a"]]',
        b'["c", {"a": {"nested": 1}}]',
        b'["c", {"a": [1]}]',
    ],
)
def test_garbage_keys_raise_offset_record_error(key):
    with pytest.raises(OffsetRecordError):
        decode_key(key)


@pytest.mark.parametrize("value", [b"oops", b"[1,2]", b'"text"', b'{"o": {"n": 1}}', b'{"o": NaN}'])
def test_garbage_values_raise_offset_record_error(value):
    with pytest.raises(OffsetRecordError):
        decode_value(value)


def test_encode_offset_records_pairs_keys_and_values():
    records = encode_offset_records(
        "conn", {SourcePartition({"p": 1}): {"o": 5}, SourcePartition({"p": 2}): None}
    )
    assert records == [(b'["conn",{"p":1}]', b'{"o":5}'), (b'["conn",{"p":2}]', None)]
