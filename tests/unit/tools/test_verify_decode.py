"""`eosconnect verify` reads topics written through other converters (tools/verify_decode.py).

The Avro form runs against the real registry in tests/integration/test_schemas_java_connect.py; here
Kafka's LongConverter keys and JsonConverter envelopes with a Decimal show the decoding and the checks.
"""

from __future__ import annotations

import decimal

import pytest
from typer.testing import CliRunner

from eosconnect.api import INT64_SCHEMA, Decimal, SchemaBuilder, Struct
from eosconnect.api.errors import ConfigException
from eosconnect.converters.resolution import converter_from_config
from eosconnect.storage.topic_reader import TopicRecord
from eosconnect.tools.verify import check_ids, record_id, record_identity
from eosconnect.tools.verify_cli import verify_app
from eosconnect.tools.verify_decode import record_decoder

ROW = (
    SchemaBuilder.struct()
    .name("shop.orders")
    .field("id", INT64_SCHEMA)
    .field("price", Decimal.schema(2))
    .build()
)
ENVELOPES = {"value.converter": "json", "value.converter.schemas.enable": "true"}


def written(row_id: int) -> TopicRecord:
    """A record as written with LongConverter keys and JsonConverter envelopes (BASE64 decimals)."""
    key = converter_from_config({"key.converter": "LongConverter"}, is_key=True)
    value = converter_from_config(ENVELOPES, is_key=False)
    row = Struct(ROW).put("id", row_id).put("price", decimal.Decimal("1.25"))
    return TopicRecord(
        "orders",
        0,
        row_id,
        key.from_connect_data("orders", INT64_SCHEMA, row_id),
        value.from_connect_data("orders", ROW, row),
        0,
        None,
    )


def test_records_of_other_converters_read_as_json() -> None:
    decode = record_decoder("LongConverter", "json", {"schemas.enable": "true"})
    assert decode is not None
    record = decode(written(7))
    assert record.key == b"7" and record.value == b'{"id":7,"price":1.25}'
    assert record_id(record, "id") == 7 and record_identity(record, None) == 7
    assert record_identity(decode(written(8)), "price") == 1.25


def test_an_unreadable_record_is_an_anomaly_not_a_crash() -> None:
    decode = record_decoder(None, "json", {"schemas.enable": "true"})
    assert decode is not None
    broken = TopicRecord("orders", 0, 9, None, b'{"no": "envelope"}', 0, None)
    report = check_ids([record_id(decode(written(1)), "id"), record_id(decode(broken), "id")], [1])
    assert not report.ok and report.unexpected == 1


def test_no_converter_means_json_as_written() -> None:
    assert record_decoder(None, None, {}) is None
    with pytest.raises(ConfigException, match=r"value\.converter"):
        record_decoder(None, "NoSuchConverter", {})


@pytest.mark.parametrize(
    ("args", "hint"),
    [
        (["--jdbc", "sqlite://", "--table", "t", "--converter-setting", "a=b"], "--converter-setting"),
        (["--sequence", "--value-converter", "avro"], "--value-converter"),
        (["--by", "key", "--value-converter", "nope.Nope"], "--value-converter"),
        (["--by", "key", "--value-converter", "avro"], "schema.registry.url"),
    ],
)
def test_bad_converter_options_are_usage_errors(args: list[str], hint: str) -> None:
    result = CliRunner().invoke(verify_app, ["--topic", "t", "-b", "127.0.0.1:1", *args])
    assert result.exit_code == 2 and hint in result.output, result.output
