"""The Avro converter against a real schema registry (Apicurio Registry, Confluent's API).

What is checked is what Java's AvroConverter promises: the bytes are the Confluent wire format that
Confluent's own deserializer reads back to the same data, the id in them is the registry's id for the
subject, subjects are named by the configured strategy, and a schema the subject's compatibility rule
refuses fails the write, naming the subject and the rule. The last test runs the whole exactly-once
source path: Structs -> AvroConverter -> Kafka transactions, read back with read_committed.
"""

from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from confluent_kafka import Producer
from confluent_kafka.schema_registry import Schema as RegistrySchema
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from eosconnect.api.data import (
    INT64_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    Date,
    Decimal,
    Schema,
    SchemaBuilder,
    Struct,
    Time,
    Timestamp,
)
from eosconnect.api.errors import DataException
from eosconnect.converters.resolution import converter_from_config
from eosconnect.converters.schema_registry.avro import AvroConverter
from eosconnect.converters.schema_registry.avro_data import to_avro_schema
from eosconnect.devkafka.registry import LocalSchemaRegistry
from support.runtime_helpers import committed_offsets, wait_until
from support.schema_connectors import SCHEMA_NAME, SEQUENCE_V1

pytestmark = [pytest.mark.kafka]

ITEM = SchemaBuilder.struct().name("com.example.Item").field("sku", STRING_SCHEMA).build()
ORDER = (
    SchemaBuilder.struct()
    .name("com.example.Order")
    .version(3)
    .doc("an order")
    .field("id", INT64_SCHEMA)
    .field("note", OPTIONAL_STRING_SCHEMA)
    .field("small", SchemaBuilder.int8().build())
    .field("medium", SchemaBuilder.int16().optional().default_value(7).build())
    .field("price", Decimal.schema(2))
    .field("day", Date.SCHEMA)
    .field("time", Time.SCHEMA)
    .field("at", Timestamp.SCHEMA)
    .field("raw", SchemaBuilder.bytes().build())
    .field("items", SchemaBuilder.array(ITEM).build())
    .field("counts", SchemaBuilder.map(STRING_SCHEMA, INT64_SCHEMA).build())
    .field("by_id", SchemaBuilder.map(INT64_SCHEMA, STRING_SCHEMA).build())
    .build()
)


def order(order_id: int) -> Struct:
    return (
        Struct(ORDER)
        .put("id", order_id)
        .put("note", None)
        .put("small", -3)
        .put("medium", 300)
        .put("price", decimal.Decimal("-1234.50"))
        .put("day", datetime.date(2024, 2, 29))
        .put("time", datetime.time(23, 59, 58, 123000))
        .put("at", datetime.datetime(2024, 2, 29, 12, 0, 1, 5000, tzinfo=datetime.UTC))
        .put("raw", b"\x00\xffbytes")
        .put("items", [Struct(ITEM).put("sku", "a-1"), Struct(ITEM).put("sku", "b-2")])
        .put("counts", {"x": 1, "y": -2})
        .put("by_id", {10: "ten", 20: "twenty"})
    )


def avro_converter(url: str, is_key: bool = False, **settings: str) -> AvroConverter:
    side = "key" if is_key else "value"
    config = {f"{side}.converter": "io.confluent.connect.avro.AvroConverter"}
    config[f"{side}.converter.schema.registry.url"] = url
    config.update({f"{side}.converter.{k.replace('_', '.')}": v for k, v in settings.items()})
    converter = converter_from_config(config, is_key=is_key)
    assert isinstance(converter, AvroConverter)
    return converter


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def schema_id(data: bytes) -> int:
    assert data[0] == 0, "magic byte"
    return int.from_bytes(data[1:5], "big")


def recording_sink(name: str, topic: str, calls: Path, url: str, **settings: str) -> dict[str, str]:
    """A `StructRecordingSinkConnector` reading `topic` with AvroConverter values, logging to `calls`."""
    return {
        "name": name,
        "connector.class": "support.schema_connectors.StructRecordingSinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "record.file": str(calls),
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": url,
        **settings,
    }


def put_records(calls: Path) -> list[list[Any]]:
    """The records the recording sink was given, in order."""
    lines = calls.read_text().splitlines() if calls.exists() else []
    return [r for e in map(json.loads, lines) if e["call"] == "put" for r in e["records"]]


@pytest.fixture(scope="module")
def registry_client(schema_registry: LocalSchemaRegistry) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": schema_registry.url, "timeout": 30})


def test_records_read_back_by_confluents_deserializer_with_the_registrys_id(
    schema_registry: LocalSchemaRegistry, registry_client: SchemaRegistryClient
):
    topic = unique("orders")
    converter = avro_converter(schema_registry.url)
    data = converter.from_connect_data(topic, ORDER, order(1))
    assert data is not None

    latest = registry_client.get_latest_version(f"{topic}-value")
    assert schema_id(data) == latest.schema_id
    registered = json.loads(latest.schema.schema_str)
    assert registered["connect.name"] == "com.example.Order" and registered["connect.version"] == 3
    fields = {f["name"]: f for f in registered["fields"]}
    assert fields["note"]["type"] == ["null", "string"] and fields["note"]["default"] is None
    assert fields["small"]["type"] == {"type": "int", "connect.type": "int8"}
    assert fields["price"]["type"]["logicalType"] == "decimal" and fields["price"]["type"]["scale"] == 2
    assert fields["by_id"]["type"]["items"]["name"] == "MapEntry"

    plain = AvroDeserializer(registry_client)(data, SerializationContext(topic, MessageField.VALUE))
    assert plain == {
        "id": 1,
        "note": None,
        "small": -3,
        "medium": 300,
        "price": decimal.Decimal("-1234.50"),
        "day": datetime.date(2024, 2, 29),
        "time": datetime.time(23, 59, 58, 123000),
        "at": datetime.datetime(2024, 2, 29, 12, 0, 1, 5000, tzinfo=datetime.UTC),
        "raw": b"\x00\xffbytes",
        "items": [{"sku": "a-1"}, {"sku": "b-2"}],
        "counts": {"x": 1, "y": -2},
        "by_id": [{"key": 10, "value": "ten"}, {"key": 20, "value": "twenty"}],
    }

    # A second record reuses the id; a fresh converter (another task) reads both back as Connect data.
    again = converter.from_connect_data(topic, ORDER, order(2))
    assert again is not None and schema_id(again) == schema_id(data)
    back = avro_converter(schema_registry.url).to_connect_data(topic, data)
    assert back.schema == ORDER
    assert back.value == order(1)


def test_a_batch_is_written_as_its_records_are_one_by_one(schema_registry: LocalSchemaRegistry):
    """`from_connect_batch` (one registry lookup per batch) gives each record's bytes, nulls kept."""
    topic = unique("orders")
    converter = avro_converter(schema_registry.url)
    values = [order(1), None, order(2), order(3)]
    assert converter.from_connect_batch(topic, values, ORDER) == [
        converter.from_connect_data(topic, ORDER, value) for value in values
    ]
    bad = order(4)
    bad._values[0] = "not a long"  # as a Struct filled without checks could hold
    with pytest.raises(DataException, match="AvroConverter could not write the record value"):
        converter.from_connect_batch(topic, [order(5), bad], ORDER)


def test_records_written_by_confluents_serializer_read_as_connect_data(
    schema_registry: LocalSchemaRegistry, registry_client: SchemaRegistryClient
):
    topic = unique("foreign")
    schema = {
        "type": "record",
        "name": "Reading",
        "namespace": "com.example",
        "fields": [
            {"name": "sensor", "type": "string"},
            {"name": "value", "type": ["null", "double"], "default": None},
            {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": ["HOT", "COLD"]}},
        ],
    }
    serializer = AvroSerializer(registry_client, json.dumps(schema))
    data = serializer(
        {"sensor": "s1", "value": 21.5, "kind": "COLD"}, SerializationContext(topic, MessageField.VALUE)
    )
    assert data is not None
    result = avro_converter(schema_registry.url).to_connect_data(topic, data)
    assert isinstance(result.schema, Schema) and result.schema.name == "com.example.Reading"
    assert result.value.get("sensor") == "s1" and result.value.get("value") == 21.5
    assert result.value.get("kind") == "COLD"
    assert result.schema.field("value").schema.optional


def test_general_unions_as_confluents_union_structs_both_ways(
    schema_registry: LocalSchemaRegistry, registry_client: SchemaRegistryClient
):
    """A union other than ["null", T] is Confluent's `io.confluent.connect.avro.Union` STRUCT: one
    optional field per branch (the type, or a record's simple name), the branch taken set. Records
    written by Confluent's serializer read so, and ours write the branch back for its deserializer."""
    topic = unique("unions")
    schema = {
        "type": "record",
        "name": "Event",
        "namespace": "com.example",
        "fields": [
            {"name": "id", "type": "long"},
            {
                "name": "payload",
                "type": [
                    "null",
                    "string",
                    "long",
                    {"type": "record", "name": "Point", "fields": [{"name": "x", "type": "int"}]},
                    {"type": "record", "name": "Label", "fields": [{"name": "text", "type": "string"}]},
                ],
            },
            {"name": "either", "type": ["int", "string"]},
        ],
    }
    serialize = AvroSerializer(registry_client, json.dumps(schema))
    context = SerializationContext(topic, MessageField.VALUE)
    events = [
        {"id": 1, "payload": "text", "either": 1},
        {"id": 2, "payload": 7, "either": "b"},
        {"id": 3, "payload": ("com.example.Point", {"x": 3}), "either": 2},
        {"id": 4, "payload": ("com.example.Label", {"text": "hi"}), "either": 3},
        {"id": 5, "payload": None, "either": "c"},
    ]
    converter = avro_converter(schema_registry.url)
    read = [converter.to_connect_data(topic, serialize(e, context)) for e in events]
    union = read[0].schema.field("payload").schema
    assert union.name == "io.confluent.connect.avro.Union" and union.optional
    assert [f.name for f in union.fields] == ["string", "long", "Point", "Label"]
    assert all(f.schema.optional for f in union.fields)
    either = read[0].schema.field("either").schema
    assert [f.name for f in either.fields] == ["int", "string"] and not either.optional

    def taken(struct: Struct | None) -> Any:
        if struct is None:
            return None
        [(name, value)] = [(f.name, struct.get(f)) for f in struct.schema.fields if struct.get(f) is not None]
        return name, value.to_dict() if isinstance(value, Struct) else value

    assert [taken(r.value.get("payload")) for r in read] == [
        ("string", "text"),
        ("long", 7),
        ("Point", {"x": 3}),
        ("Label", {"text": "hi"}),
        None,
    ]
    assert [taken(r.value.get("either")) for r in read] == [
        ("int", 1),
        ("string", "b"),
        ("int", 2),
        ("int", 3),
        ("string", "c"),
    ]

    # Written back by eosconnect (its own subject), read by Confluent's deserializer as the same data.
    out_topic = unique("unions-out")
    deserialize = AvroDeserializer(registry_client)
    written = [converter.from_connect_data(out_topic, r.schema, r.value) for r in read]
    back = [deserialize(w, SerializationContext(out_topic, MessageField.VALUE)) for w in written]
    assert [(b["id"], b["payload"], b["either"]) for b in back] == [
        (1, "text", 1),
        (2, 7, "b"),
        (3, {"x": 3}, 2),
        (4, {"text": "hi"}, 3),
        (5, None, "c"),
    ]
    registered = json.loads(registry_client.get_latest_version(f"{out_topic}-value").schema.schema_str)
    payload_type = next(f["type"] for f in registered["fields"] if f["name"] == "payload")
    assert [b if isinstance(b, str) else b["name"] for b in payload_type] == [
        "null",
        "string",
        "long",
        "Point",
        "Label",
    ]


def test_incompatible_change_refused_naming_subject_and_rule(
    schema_registry: LocalSchemaRegistry, registry_client: SchemaRegistryClient
):
    topic = unique("evolve")
    subject = f"{topic}-value"
    converter = avro_converter(schema_registry.url)
    v1 = SchemaBuilder.struct().name("com.example.Evolving").field("a", INT64_SCHEMA).build()
    first = converter.from_connect_data(topic, v1, Struct(v1).put("a", 1))
    schema_registry.set_compatibility("BACKWARD", subject=subject)

    # BACKWARD allows a new optional field (it has a default: readers of v2 fill it in for v1 data) ...
    v2 = (
        SchemaBuilder.struct()
        .name("com.example.Evolving")
        .field("a", INT64_SCHEMA)
        .field("b", OPTIONAL_STRING_SCHEMA)
        .build()
    )
    second = converter.from_connect_data(topic, v2, Struct(v2).put("a", 2).put("b", "x"))
    assert first is not None and second is not None and schema_id(second) != schema_id(first)

    # ... and refuses a new required field without a default.
    v3 = (
        SchemaBuilder.struct()
        .name("com.example.Evolving")
        .field("a", INT64_SCHEMA)
        .field("c", STRING_SCHEMA)
        .build()
    )
    with pytest.raises(DataException) as refused:
        converter.from_connect_data(topic, v3, Struct(v3).put("a", 3).put("c", "y"))
    message = str(refused.value)
    assert repr(subject) in message and "BACKWARD" in message and "incompatible" in message
    assert [v for v in registry_client.get_versions(subject)] == [1, 2]


@pytest.mark.parametrize(
    ("strategy", "is_key", "expected"),
    [
        ("TopicNameStrategy", True, "{topic}-key"),
        ("TopicNameStrategy", False, "{topic}-value"),
        ("io.confluent.kafka.serializers.subject.RecordNameStrategy", False, "com.example.Order"),
        ("TopicRecordNameStrategy", True, "{topic}-com.example.Order"),
    ],
)
def test_subject_name_strategies_register_under_their_subjects(
    schema_registry: LocalSchemaRegistry,
    registry_client: SchemaRegistryClient,
    strategy: str,
    is_key: bool,
    expected: str,
):
    topic = unique("strategy")
    side = "key" if is_key else "value"
    converter = avro_converter(
        schema_registry.url, is_key=is_key, **{f"{side}.subject.name.strategy": strategy}
    )
    data = converter.from_connect_data(topic, ORDER, order(5))
    assert data is not None
    subject = expected.format(topic=topic)
    assert schema_id(data) == registry_client.get_latest_version(subject).schema_id


def test_auto_register_off_and_use_latest_version(
    schema_registry: LocalSchemaRegistry, registry_client: SchemaRegistryClient
):
    topic = unique("preregistered")
    subject = f"{topic}-value"
    first = Struct(SEQUENCE_V1).put("task", 0).put("seq", 0).put("payload", "")
    plain = avro_converter(schema_registry.url, auto_register_schemas="false")
    with pytest.raises(DataException, match=r"auto\.register\.schemas=false"):
        plain.from_connect_data(topic, SEQUENCE_V1, first)

    registered_id = avro_converter(schema_registry.url).from_connect_data(topic, SEQUENCE_V1, first)
    assert registered_id is not None
    value = Struct(SEQUENCE_V1).put("task", 1).put("seq", 1).put("payload", "p")
    looked_up = avro_converter(schema_registry.url, auto_register_schemas="false").from_connect_data(
        topic, SEQUENCE_V1, value
    )
    latest = avro_converter(
        schema_registry.url, auto_register_schemas="false", use_latest_version="true"
    ).from_connect_data(topic, SEQUENCE_V1, value)
    assert looked_up is not None and latest is not None
    assert schema_id(looked_up) == schema_id(latest) == registry_client.get_latest_version(subject).schema_id
    assert registry_client.get_latest_version(subject).schema.schema_str.count(SCHEMA_NAME.split(".")[-1])

    # Both true: registration wins, as in Confluent's serializers (a fresh subject has no latest version).
    fresh = unique("both-settings")
    both = avro_converter(schema_registry.url, use_latest_version="true").from_connect_data(
        fresh, SEQUENCE_V1, value
    )
    assert (
        both is not None and schema_id(both) == registry_client.get_latest_version(f"{fresh}-value").schema_id
    )


def test_not_wire_format_is_one_clear_error(schema_registry: LocalSchemaRegistry):
    with pytest.raises(DataException, match="Unknown magic byte"):
        avro_converter(schema_registry.url).to_connect_data("t", b'{"plain": "json"}')


def test_exactly_once_source_structs_through_avro(
    schema_registry: LocalSchemaRegistry,
    registry_client: SchemaRegistryClient,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
):
    """Struct records -> AvroConverter -> Kafka transactions; then a record whose schema BACKWARD refuses
    fails the task naming subject and rule, and nothing of its transaction is visible."""
    data = create_topic(topic_name("data"))
    subject = f"{data}-value"
    connector = {
        "name": "avro-seq",
        "connector.class": "support.schema_connectors.StructSequenceConnector",
        "tasks.max": "1",
        "topic": data,
        "records.per.task": "400",
        "batch.size": "50",
        "payload.bytes": "8",
        "schema.switch.at": "300",
        "key.converter": "string",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": schema_registry.url,
    }
    # The subject exists with v1 and the BACKWARD rule before the connector starts.
    registry_client.register_schema(subject, RegistrySchema(json.dumps(to_avro_schema(SEQUENCE_V1)), "AVRO"))
    schema_registry.set_compatibility("BACKWARD", subject=subject)

    job = run_job(connector, worker_props("enabled"))
    wait_until(lambda: not job.running(), 120, "the task to fail on the refused schema")
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["FAILED"], outcomes
    assert repr(subject) in outcomes[0]["trace"] and "BACKWARD" in outcomes[0]["trace"]

    records = read_committed(data)
    deserialize = AvroDeserializer(registry_client)
    values = [deserialize(r.value, SerializationContext(data, MessageField.VALUE)) for r in records]
    assert [v["seq"] for v in values] == list(range(300)), "exactly the records before the refused one"
    assert {schema_id(r.value) for r in records} == {registry_client.get_latest_version(subject).schema_id}
    assert {r.key for r in records} == {b"task-0"}


def test_refused_schema_with_errors_tolerance_all_is_skipped_by_an_exactly_once_source(
    schema_registry: LocalSchemaRegistry,
    registry_client: SchemaRegistryClient,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
):
    """With errors.tolerance=all, the records whose schema BACKWARD refuses are skipped as Kafka's source
    tasks skip them: nothing of them is written (neither the key, whose schema the registry took, nor the
    value), the task goes on, and their offsets are committed with the records around them."""
    data = create_topic(topic_name("data"))
    subject = f"{data}-value"
    worker = worker_props("enabled")
    connector = {
        "name": "avro-tolerant",
        "connector.class": "support.schema_connectors.StructSequenceConnector",
        "tasks.max": "1",
        "topic": data,
        "records.per.task": "400",
        "batch.size": "50",
        "payload.bytes": "8",
        "schema.switch.at": "300",
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        "key.converter": "io.confluent.connect.avro.AvroConverter",
        "key.converter.schema.registry.url": schema_registry.url,
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": schema_registry.url,
    }
    registry_client.register_schema(subject, RegistrySchema(json.dumps(to_avro_schema(SEQUENCE_V1)), "AVRO"))
    schema_registry.set_compatibility("BACKWARD", subject=subject)

    job = run_job(connector, worker)
    wait_until(
        lambda: (
            committed_offsets(read_committed, worker["offset.storage.topic"], "avro-tolerant")
            == {json.dumps({"task": 0}): {"seq": 399}}
        ),
        120,
        "the offset past the last (skipped) record",
        job,
    )
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes
    assert outcomes[0]["metrics"]["source-record-filtered-total"] == 100

    records = read_committed(data)
    deserialize = AvroDeserializer(registry_client)
    values = [deserialize(r.value, SerializationContext(data, MessageField.VALUE)) for r in records]
    assert [v["seq"] for v in values] == list(range(300)), "the refused records are not written"
    assert all(r.key is not None and r.value is not None for r in records)
    assert [v for v in registry_client.get_versions(subject)] == [1], "the refused schema is not registered"


def test_sink_skips_records_the_registry_has_no_schema_for_into_the_dead_letter_queue(
    schema_registry: LocalSchemaRegistry,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
    bootstrap: str,
    tmp_path: Path,
):
    """A sink never registers schemas: what the registry refuses it is the schema of a record's id (a
    record written against another registry). With errors.tolerance=all and a dead letter queue that
    record goes to the queue as consumed, with the registry's answer in Kafka's error headers, and the
    records around it are put."""
    data = create_topic(topic_name("data"))
    dlq = topic_name("dlq")
    topic = data
    converter = avro_converter(schema_registry.url)
    good = [converter.from_connect_data(topic, ORDER, order(i)) for i in range(3)]
    unknown_id = bytes([0]) + (2**31 - 7).to_bytes(4, "big") + (good[0] or b"")[5:]
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in (good[0], unknown_id, good[1], good[2]):
        producer.produce(data, key=b"k", value=value)
    assert producer.flush(30) == 0

    calls = tmp_path / "calls.jsonl"
    connector = recording_sink(
        topic_name("sink"),
        data,
        calls,
        schema_registry.url,
        **{
            "key.converter": "string",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
        },
    )
    job = run_job(connector, worker_props("disabled"))
    wait_until(lambda: len(put_records(calls)) >= 3, 120, "3 records put", job)
    outcomes = job.stop()  # the dead letter was acknowledged before the positions past it committed
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes
    records = put_records(calls)
    assert [r[2] for r in records] == [0, 2, 3] and [r[4]["id"] for r in records] == [0, 1, 2]
    [letter] = read_committed(dlq)
    assert letter.value == unknown_id and letter.key == b"k"
    headers = {k: v.decode() for k, v in letter.headers}
    assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    assert headers["__connect.errors.class.name"] == "io.confluent.connect.avro.AvroConverter"
    assert "has no schema with id 2147483641" in headers["__connect.errors.exception.message"]


def test_sink_reads_avro_written_by_another_producer_as_structs(
    schema_registry: LocalSchemaRegistry,
    registry_client: SchemaRegistryClient,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    bootstrap: str,
    tmp_path: Path,
):
    """Avro records produced with Confluent's own serializer (as a Java producer would write them)
    reach a sink task as Structs through `value.converter=io.confluent.connect.avro.AvroConverter`."""
    data = create_topic(topic_name("data"))
    schema = {
        "type": "record",
        "name": "Payment",
        "namespace": "com.example",
        "fields": [
            {"name": "id", "type": "long"},
            {
                "name": "amount",
                "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2},
            },
            {"name": "memo", "type": ["null", "string"], "default": None},
        ],
    }
    serialize = AvroSerializer(registry_client, json.dumps(schema))
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(20):
        value = {"id": i, "amount": decimal.Decimal(f"{i}.50"), "memo": None if i % 2 else f"m{i}"}
        producer.produce(data, value=serialize(value, SerializationContext(data, MessageField.VALUE)))
    assert producer.flush(30) == 0

    calls = tmp_path / "calls.jsonl"
    job = run_job(
        recording_sink(topic_name("sink"), data, calls, schema_registry.url), worker_props("disabled")
    )
    wait_until(lambda: len(put_records(calls)) >= 20, 120, "20 records put", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes
    records = put_records(calls)
    assert [r[3] for r in records] == ["com.example.Payment"] * 20
    assert [r[4] for r in records] == [
        {"id": i, "amount": f"{i}.50", "memo": None if i % 2 else f"m{i}"} for i in range(20)
    ]


def test_basic_auth_user_info_and_url_credentials(tmp_path: Path):
    """A registry that requires HTTP basic auth: USER_INFO and user:password@ in the URL both work,
    a wrong password is one clear error naming the subject."""
    with LocalSchemaRegistry(
        tmp_path / "secured", basic_auth=("alice", "s3cret"), tie_to_parent=True
    ) as secured:
        topic = unique("auth")
        value = Struct(SEQUENCE_V1).put("task", 0).put("seq", 1).put("payload", "p")
        user_info = avro_converter(
            secured.url, basic_auth_credentials_source="USER_INFO", basic_auth_user_info="alice:s3cret"
        )
        data = user_info.from_connect_data(topic, SEQUENCE_V1, value)
        assert data is not None and user_info.to_connect_data(topic, data).value == value

        in_url = secured.url.replace("http://", "http://alice:s3cret@")
        assert avro_converter(in_url).from_connect_data(topic, SEQUENCE_V1, value) == data
        wrong_in_url = secured.url.replace("http://", "http://alice:leaked@")
        with pytest.raises(DataException) as refused:
            avro_converter(wrong_in_url).from_connect_data(unique("auth"), SEQUENCE_V1, value)
        assert "HTTP 401" in str(refused.value) and "leaked" not in str(refused.value)

        wrong = avro_converter(
            secured.url, basic_auth_credentials_source="USER_INFO", basic_auth_user_info="alice:wrong"
        )
        with pytest.raises(DataException, match=f"subject '{topic}-value'.*HTTP 401"):
            wrong.from_connect_data(topic, SEQUENCE_V1, value)


def test_jdbc_source_rows_through_avro_exactly_once(
    schema_registry: LocalSchemaRegistry,
    registry_client: SchemaRegistryClient,
    run_job: Callable[..., Any],
    worker_props: Callable[..., dict[str, str]],
    topic_name: Callable[[str], str],
    create_topic: Callable[..., str],
    read_committed: Callable[..., list[Any]],
    tmp_path: Path,
):
    """JdbcSource (a Struct per row, schema from the table) -> AvroConverter for keys and values ->
    Kafka exactly once: every row once under read_committed, readable by Confluent's deserializer."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE items (id INTEGER PRIMARY KEY AUTOINCREMENT, qty INTEGER NOT NULL, label TEXT, "
            "price NUMERIC(10,2))"
        )
        conn.execute(
            sa.text("INSERT INTO items (qty, label, price) VALUES (:qty, :label, :price)"),
            [{"qty": i, "label": f"é-{i}" if i % 3 else None, "price": i / 4} for i in range(1, 61)],
        )
    engine.dispose()
    prefix = topic_name("db") + "-"
    topic = create_topic(prefix + "items")
    registry = {"schema.registry.url": schema_registry.url}
    connector = {
        "name": "jdbc-avro",
        "connector.class": "JdbcSource",
        "tasks.max": "1",
        "connection.url": f"sqlite:///{tmp_path / 'shop.db'}",
        "tables": "items",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": prefix,
        "poll.interval.ms": "100",
        "batch.max.rows": "25",
        "key.converter": "avro",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        **{f"key.converter.{k}": v for k, v in registry.items()},
        **{f"value.converter.{k}": v for k, v in registry.items()},
    }
    job = run_job(connector, worker_props("enabled"))
    wait_until(lambda: len(read_committed(topic)) >= 60, 120, "60 rows in Kafka", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED"], outcomes

    records = read_committed(topic)
    context = SerializationContext(topic, MessageField.VALUE)
    deserialize = AvroDeserializer(registry_client)
    values = [deserialize(r.value, context) for r in records]
    assert sorted(v["id"] for v in values) == list(range(1, 61)), "every row exactly once"
    row = next(v for v in values if v["id"] == 5)
    assert row["qty"] == 5 and row["label"] == "é-5"
    value_id = registry_client.get_latest_version(f"{topic}-value").schema_id
    key_id = registry_client.get_latest_version(f"{topic}-key").schema_id
    assert {schema_id(r.value) for r in records} == {value_id}
    assert {schema_id(r.key) for r in records} == {key_id}
    back = avro_converter(schema_registry.url).to_connect_data(topic, records[0].value)
    assert back.schema is not None and back.schema.field("qty") is not None


def jdbc_task(url: str, table: str) -> Any:
    """A started JdbcSourceTask on one table, mode=incrementing on `id` (no Kafka: the test
    converts its records itself)."""
    from eosconnect.api import InMemoryOffsetStorageReader, SourceTaskContext
    from eosconnect.connectors.jdbc import JdbcSourceTask

    task = JdbcSourceTask()
    task.initialize(SourceTaskContext(offset_storage_reader=InMemoryOffsetStorageReader([])))
    task.start(
        {
            "connection.url": url,
            "tables": table,
            "mode": "incrementing",
            "incrementing.column.name": "id",
            "topic.prefix": unique("shop") + "-",
            "poll.interval.ms": "1",
        }
    )
    return task


#: What each format's compatibility check makes of a column added, then one dropped, under the
#: registry's BACKWARD rule (None: a new version; else the words the refusal names the change with).
#: Protobuf numbers fields by position, as Confluent's ProtobufData does, so a dropped column gives
#: its number to the next one with another type; JSON Schema's objects are open (Confluent's
#: `object.additional.properties=true`), and a property added to an open object is not backward
#: compatible (so the schema without `weight` is refused too: it still adds `color` to the last
#: registered version).
SCHEMA_CHANGES: dict[str, tuple[str | None, str | None]] = {
    "io.confluent.connect.avro.AvroConverter": (None, None),
    "io.confluent.connect.protobuf.ProtobufConverter": (None, "refused"),
    "io.confluent.connect.json.JsonSchemaConverter": ("refused", "refused"),
}


@pytest.mark.parametrize("converter_class", list(SCHEMA_CHANGES), ids=["avro", "protobuf", "json_schema"])
def test_jdbc_source_schema_changes_register_new_versions_or_are_refused_by_the_global_rule(
    converter_class: str,
    schema_registry: LocalSchemaRegistry,
    registry_client: SchemaRegistryClient,
    tmp_path: Path,
):
    """A column added and one dropped while JdbcSource runs: each is a new BACKWARD-compatible
    version of the subject whose values decode field by field, or is refused naming the subject,
    the rule in force (the registry's global one) and the change, as the format's rules say; a
    retyped column is refused by every format."""
    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    run = engine.begin
    with run() as conn:
        conn.exec_driver_sql("CREATE TABLE products (id INTEGER PRIMARY KEY, qty INTEGER, weight REAL)")
        conn.exec_driver_sql("INSERT INTO products VALUES (1, 5, 2.5)")
    task = jdbc_task(url, "products")
    converter = converter_from_config(
        {"value.converter": converter_class, "value.converter.schema.registry.url": schema_registry.url},
        is_key=False,
    )
    subject = f"{task.tables['products'].topic}-value"
    added_rule, dropped_rule = SCHEMA_CHANGES[converter_class]

    def written() -> list[tuple[int, dict[str, Any]]]:
        records = task.poll() or []
        out = []
        for record in records:
            data = converter.from_connect_data(record.topic, record.value_schema, record.value)
            assert data is not None
            back = converter.to_connect_data(record.topic, data)
            out.append((schema_id(data), {f.name: back.value.get(f.name) for f in back.schema.fields}))
        return out

    def refused_by_the_rule(change: str) -> None:
        with pytest.raises(DataException) as refused:
            written()
        message = str(refused.value)
        assert repr(subject) in message and "compatibility rule BACKWARD" in message, message
        assert change in message, message

    schema_registry.set_compatibility("BACKWARD")  # the global rule; the subject has none of its own
    try:
        ((v1, first),) = written()
        assert first == {"id": 1, "qty": 5, "weight": 2.5}
        versions = [v1]
        with run() as conn:
            conn.exec_driver_sql("ALTER TABLE products ADD COLUMN color TEXT")
            conn.exec_driver_sql("INSERT INTO products VALUES (2, 6, 3.5, 'red')")
        if added_rule is None:
            ((v2, added),) = written()
            assert added == {"id": 2, "qty": 6, "weight": 3.5, "color": "red"} and v2 not in versions
            versions.append(v2)
        else:
            refused_by_the_rule("color")
        with run() as conn:
            conn.exec_driver_sql("ALTER TABLE products DROP COLUMN weight")
            conn.exec_driver_sql("INSERT INTO products VALUES (3, 7, 'blue')")
        if dropped_rule is None:
            ((v3, dropped),) = written()
            assert dropped == {"id": 3, "qty": 7, "color": "blue"} and v3 not in versions
            versions.append(v3)
        else:
            refused_by_the_rule("weight")
        assert registry_client.get_versions(subject) == list(range(1, len(versions) + 1))

        with run() as conn:
            conn.exec_driver_sql("ALTER TABLE products RENAME TO old_products")
            conn.exec_driver_sql("CREATE TABLE products (id INTEGER PRIMARY KEY, qty TEXT, color TEXT)")
            conn.exec_driver_sql("INSERT INTO products VALUES (4, 'a dozen', NULL)")
        refused_by_the_rule("qty")
    finally:
        schema_registry.set_compatibility("NONE")
        task.stop()
        engine.dispose()
    assert registry_client.get_versions(subject) == list(range(1, len(versions) + 1))


def test_validation_names_an_unreachable_registry_url_and_its_setting(
    schema_registry: LocalSchemaRegistry, tmp_path: Path
):
    from eosconnect.api.errors import RetriableException
    from eosconnect.cluster.validation import config_errors, validate_connector_config
    from eosconnect.devkafka.ports import free_port
    from eosconnect.worker_config import WorkerConfig

    url = f"sqlite:///{tmp_path / 'shop.db'}"
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE products (id INTEGER PRIMARY KEY)")
    engine.dispose()
    nobody = f"http://127.0.0.1:{free_port()}"
    config = {
        "name": "products",
        "connector.class": "JdbcSource",
        "connection.url": url,
        "tables": "products",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": "shop-",
        "key.converter": "io.confluent.connect.avro.AvroConverter",
        "key.converter.schema.registry.url": schema_registry.url,
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": nobody,
    }
    worker = WorkerConfig.parse({"bootstrap.servers": "127.0.0.1:9092"})
    errors = config_errors(validate_connector_config(config, worker))
    (problem,) = errors.pop("value.converter.schema.registry.url")
    assert errors == {}, "the reachable key registry passes"
    assert f"cannot reach the schema registry at {nobody} (value.converter.schema.registry.url)" in problem
    assert "set value.converter.schema.registry.url to the URL" in problem

    # A task meeting it at run time says the same.
    record_schema = SchemaBuilder.struct().name("p").field("id", INT64_SCHEMA).build()
    with pytest.raises(RetriableException) as at_run_time:
        avro_converter(nobody).from_connect_data("t", record_schema, Struct(record_schema).put("id", 1))
    assert str(at_run_time.value) == problem
