"""Schemas pass through the record pipelines: a source record's schema reaches the converter (one
schema per `SourceBatch` column), and what a converter reads becomes the sink record's schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME

from eosconnect.api import (
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    SchemaBuilder,
    SourceBatch,
    SourceRecord,
    Struct,
)
from eosconnect.api.errors import DataException
from eosconnect.runtime.pipeline import OutgoingColumns, RecordPipeline, SinkRecordPipeline
from eosconnect.runtime.retry_tolerance import RetryWithTolerance, ToleranceSettings

SCHEMAS_ON = {
    "key.converter": "org.apache.kafka.connect.converters.LongConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}
SCHEMA = SchemaBuilder.struct().name("row").field("id", INT64_SCHEMA).field("name", STRING_SCHEMA).build()
ENVELOPE = (
    b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"},'
    b'{"type":"string","optional":false,"field":"name"}],"optional":false,"name":"row"},'
    b'"payload":{"id":1,"name":"a"}}'
)


class ConsumedMessage:
    """The accessors of a confluent-kafka Message that the sink pipeline reads."""

    def __init__(self, key: bytes | None, value: bytes | None) -> None:
        self._key, self._value = key, value

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 3

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return TIMESTAMP_CREATE_TIME, 1000

    def leader_epoch(self) -> int:
        return 0

    def headers(self) -> Any:
        return None


def row(i: int, name: str) -> Struct:
    return Struct(SCHEMA).put("id", i).put("name", name)


def test_a_source_records_schemas_reach_the_converters() -> None:
    record = SourceRecord(
        {"p": 1}, {"o": 1}, "t", row(1, "a"), key=1, key_schema=INT64_SCHEMA, value_schema=SCHEMA
    )
    out = RecordPipeline(SCHEMAS_ON).convert(record)
    assert out is not None and out.value == ENVELOPE and out.key == b"\x00" * 7 + b"\x01"


def test_a_batch_converts_its_columns_with_its_schema() -> None:
    batch = SourceBatch({"p": 1}, {"o": 2}, "t", [row(1, "a"), row(2, "b")], value_schema=SCHEMA)
    columns = RecordPipeline(SCHEMAS_ON).convert_columns(batch)
    assert columns.values[0] == ENVELOPE and b'"payload":{"id":2,"name":"b"}' in columns.values[1]


def test_sink_records_carry_what_the_converters_read() -> None:
    record = SinkRecordPipeline(SCHEMAS_ON).convert(ConsumedMessage(b"\x00" * 7 + b"\x05", ENVELOPE))
    assert record is not None
    assert record.value == row(1, "a") and record.value_schema == SCHEMA
    assert record.key == 5 and record.key_schema == SchemaBuilder.int64().optional().build()


def test_schemaless_pipelines_are_unchanged() -> None:
    config = {"value.converter": "json", "value.converter.schemas.enable": "false", "key.converter": "string"}
    out = RecordPipeline(config).convert(SourceRecord({"p": 1}, {"o": 1}, "t", {"a": 1}))
    assert out is not None and out.value == b'{"a":1}'
    record = SinkRecordPipeline(config).convert(ConsumedMessage(b"k", b'{"a":1}'))
    assert record is not None and record.value == {"a": 1} and record.value_schema is None
    assert record.key_schema == OPTIONAL_STRING_SCHEMA  # StringConverter's, as in Kafka


def test_converters_left_unset_are_kafkas_json_converter_with_schemas() -> None:
    """A connector that sets no converter gets JsonConverter with schemas.enable=true for keys and
    values, what Kafka Connect's JsonConverter does without sub-settings: the schema travels with
    each record, so a schema-aware sink downstream has one."""
    record = SourceRecord({"p": 1}, {"o": 1}, "t", row(1, "a"), key=5, value_schema=SCHEMA)
    out = RecordPipeline({}).convert(record)
    assert out is not None and out.value == ENVELOPE and out.key == b'{"schema":null,"payload":5}'
    read = SinkRecordPipeline({}).convert(ConsumedMessage(None, ENVELOPE))
    assert read is not None and read.value == row(1, "a") and read.value_schema == SCHEMA


def test_plain_json_under_the_default_converter_names_the_setting_that_reads_it() -> None:
    with pytest.raises(DataException, match=r"value\.converter\.schemas\.enable=false"):
        SinkRecordPipeline({}).convert(ConsumedMessage(None, b'{"id":1,"name":"a"}'))


SMT_CHAIN = {
    **SCHEMAS_ON,
    "transforms": "hoist,route",
    "transforms.hoist.type": "HoistField",
    "transforms.hoist.field": "line",
    "transforms.route.type": "TimestampRouter",
    "transforms.route.timestamp.format": "yyyy",
}


def lines(timestamps: list[int]) -> SourceBatch:
    return SourceBatch(
        {"p": 1},
        {"o": 2},
        "t",
        [f"line {i}" for i in range(len(timestamps))],
        timestamps=timestamps,
        value_schema=STRING_SCHEMA,
    )


def test_a_batch_goes_through_transformations_whole_as_its_records_would() -> None:
    pipeline = RecordPipeline(SMT_CHAIN)
    assert pipeline.columnar
    batch = lines([1_700_000_000_000] * 3)
    columns = pipeline.convert_columns(batch)
    assert not isinstance(columns, list)
    one_by_one = [pipeline.convert(record) for record in batch]
    assert columns.topic == "t-2023" and all(out is not None and out.topic == "t-2023" for out in one_by_one)
    assert list(columns.values) == [out.value for out in one_by_one if out is not None]


def test_a_batch_a_transformation_declines_goes_record_by_record() -> None:
    pipeline = RecordPipeline(SMT_CHAIN)
    batch = lines([1_700_000_000_000, 1_800_000_000_000])  # 2023 and 2027: two routed topics
    pairs = pipeline.convert_columns(batch)
    assert isinstance(pairs, list)
    assert [(record.source_offset, out.topic) for record, out in pairs] == [
        ({"o": 2}, "t-2023"),
        ({"o": 2}, "t-2027"),
    ]


def test_a_transformation_with_a_predicate_keeps_batches_record_by_record() -> None:
    config = {
        **SMT_CHAIN,
        "transforms.route.predicate": "always",
        "predicates": "always",
        "predicates.always.type": "TopicNameMatches",
        "predicates.always.pattern": ".*",
    }
    assert not RecordPipeline(config).columnar


def tolerant(config: dict[str, str]) -> tuple[RecordPipeline, RetryWithTolerance]:
    """A pipeline with the retrying wrapper a source task gives it (errors.* act only there)."""
    errors = RetryWithTolerance(ToleranceSettings.parse(config))
    return RecordPipeline(config, retry=errors), errors


def test_errors_tolerance_all_skips_only_the_records_a_converter_rejects() -> None:
    config = {**SCHEMAS_ON, "errors.tolerance": "all"}
    bad = Struct._of(SCHEMA, [2, 5])  # "name" holds an int: the JsonConverter refuses it
    batch = SourceBatch({"p": 1}, {"o": 3}, "t", [row(1, "a"), bad, row(3, "c")], value_schema=SCHEMA)
    pipeline, errors = tolerant(config)
    columns = pipeline.convert_columns(batch)
    assert isinstance(columns, OutgoingColumns)  # the batch without the bad record
    assert [json.loads(v)["payload"]["id"] for v in columns.values] == [1, 3]  # type: ignore[arg-type]
    assert (errors.errors, errors.skipped) == (1, 1)
    strict = RecordPipeline(SCHEMAS_ON)
    with pytest.raises(DataException):
        strict.convert_columns(batch)
    with pytest.raises(DataException):
        strict.convert(batch[1])


def test_errors_tolerance_all_writes_nothing_of_a_record_whose_value_is_rejected() -> None:
    config = {**SCHEMAS_ON, "errors.tolerance": "all"}
    record = SourceRecord({"p": 1}, {"o": 1}, "t", Struct._of(SCHEMA, [1, 2]), key=7, value_schema=SCHEMA)
    pipeline, errors = tolerant(config)
    assert pipeline.convert(record) is None  # the key converted, the record is not sent
    assert errors.skipped == 1
