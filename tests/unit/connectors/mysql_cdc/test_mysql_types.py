"""MySQL column types -> Debezium's Connect schemas and values (connectors/mysql_cdc/types.py)."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from eosconnect.connectors.mysql_cdc.types import (
    BigintUnsignedHandling,
    BinaryHandling,
    ColumnInfo,
    DecimalHandling,
    TimePrecision,
    TypeModes,
    column_type,
)

DEFAULT = TypeModes()


def convert(info: ColumnInfo, value: object, modes: TypeModes = DEFAULT) -> object:
    return column_type(info, modes).convert(value)


def schema(info: ColumnInfo, modes: TypeModes = DEFAULT):  # type: ignore[no-untyped-def]
    return column_type(info, modes).builder().build()


@pytest.mark.parametrize(
    ("kind", "unsigned", "expected"),
    [
        ("tinyint", False, "int16"), ("tinyint", True, "int16"), ("smallint", False, "int16"),
        ("smallint", True, "int32"), ("mediumint", False, "int32"), ("mediumint", True, "int32"),
        ("int", False, "int32"), ("int", True, "int64"), ("bigint", False, "int64"),
        ("bigint", True, "int64"),
    ],
)  # fmt: skip
def test_integers_take_debezium_widths(kind: str, unsigned: bool, expected: str) -> None:
    assert schema(ColumnInfo("c", kind, unsigned=unsigned)).type.value == expected


def test_bigint_unsigned_wraps_as_long_or_is_exact_as_precise() -> None:
    info = ColumnInfo("c", "bigint", unsigned=True)
    assert convert(info, 2**64 - 1) == -1
    precise = TypeModes(bigint_unsigned=BigintUnsignedHandling.PRECISE)
    assert convert(info, 2**64 - 1, precise) == decimal.Decimal(2**64 - 1)
    assert schema(info, precise).name == "org.apache.kafka.connect.data.Decimal"


def test_decimal_modes() -> None:
    info = ColumnInfo("c", "decimal", precision=10, scale=3)
    assert convert(info, decimal.Decimal("1.5")) == decimal.Decimal("1.500")
    assert schema(info).parameters == {"scale": "3", "connect.decimal.precision": "10"}
    assert convert(info, decimal.Decimal("1.5"), TypeModes(decimal=DecimalHandling.DOUBLE)) == 1.5
    assert convert(info, decimal.Decimal("1.500"), TypeModes(decimal=DecimalHandling.STRING)) == "1.500"


def test_temporal_types_by_precision_and_mode() -> None:
    moment = dt.datetime(2024, 1, 2, 3, 4, 5, 678901)
    micros = int((moment - dt.datetime(1970, 1, 1)) / dt.timedelta(microseconds=1))
    assert convert(ColumnInfo("c", "datetime", fsp=3), moment) == micros // 1000
    assert schema(ColumnInfo("c", "datetime", fsp=6)).name == "io.debezium.time.MicroTimestamp"
    assert convert(ColumnInfo("c", "datetime", fsp=6), moment) == micros
    assert (
        convert(ColumnInfo("c", "timestamp", fsp=0), moment.replace(microsecond=0)) == "2024-01-02T03:04:05Z"
    )
    assert convert(ColumnInfo("c", "timestamp", fsp=3), moment) == "2024-01-02T03:04:05.678Z"
    assert convert(ColumnInfo("c", "date"), dt.date(1970, 1, 11)) == 10
    negative = dt.timedelta(hours=-1, minutes=30)
    assert convert(ColumnInfo("c", "time"), negative) == -30 * 60 * 1_000_000
    assert schema(ColumnInfo("c", "time")).name == "io.debezium.time.MicroTime"
    adaptive = TypeModes(time=TimePrecision.ADAPTIVE)
    assert schema(ColumnInfo("c", "time"), adaptive).name == "io.debezium.time.Time"
    connect = TypeModes(time=TimePrecision.CONNECT)
    assert schema(ColumnInfo("c", "date"), connect).name == "org.apache.kafka.connect.data.Date"
    assert convert(ColumnInfo("c", "datetime"), moment, connect) == moment.replace(tzinfo=dt.UTC)


def test_enum_set_bit_year_json() -> None:
    colours = ("red", "green", "blue")
    assert schema(ColumnInfo("c", "enum", values=colours)).parameters == {"allowed": "red,green,blue"}
    members = ColumnInfo("c", "set", values=("a", "b", "c"))
    assert convert(members, {"c", "a"}) == "a,c"  # the binlog's set of members
    assert convert(members, "c,a") == "a,c"  # the snapshot's text
    assert convert(ColumnInfo("c", "bit", bits=1), "1") is True
    twelve = ColumnInfo("c", "bit", bits=12)
    assert convert(twelve, "000100000001") == bytes([0x01, 0x01])  # little-endian, as Debezium's
    assert convert(twelve, b"\x01\x01") == bytes([0x01, 0x01])
    assert schema(twelve).parameters == {"length": "12"}
    assert convert(ColumnInfo("c", "year"), 2024) == 2024
    assert convert(ColumnInfo("c", "json"), {b"a": [1, b"x"]}) == '{"a":[1,"x"]}'


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        (BinaryHandling.BYTES, b"\xfb\xff"), (BinaryHandling.BASE64, "+/8="),
        (BinaryHandling.BASE64_URL_SAFE, "-_8="), (BinaryHandling.HEX, "fbff"),
    ],
)  # fmt: skip
def test_binary_handling_modes(mode: BinaryHandling, expected: object) -> None:
    assert convert(ColumnInfo("c", "bytes"), b"\xfb\xff", TypeModes(binary=mode)) == expected


def test_an_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown column kind"):
        ColumnInfo("c", "interval")
