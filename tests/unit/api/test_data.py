"""The data model (`eosconnect.api.data`): Kafka Connect's Schema, SchemaBuilder, Struct, logical
types and SchemaProjector, with the behaviour of `org.apache.kafka.connect.data`."""

from __future__ import annotations

import datetime
import decimal
import pickle

import pytest

from eosconnect.api import (
    FLOAT32_SCHEMA,
    INT8_SCHEMA,
    INT16_SCHEMA,
    INT32_SCHEMA,
    INT64_SCHEMA,
    OPTIONAL_INT32_SCHEMA,
    OPTIONAL_STRING_SCHEMA,
    STRING_SCHEMA,
    DataException,
    Date,
    Decimal,
    Schema,
    SchemaBuilder,
    SchemaBuilderException,
    SchemaProjector,
    SchemaProjectorException,
    SinkRecord,
    SourceBatch,
    SourceRecord,
    Struct,
    Time,
    Timestamp,
    Type,
    copy_schema_basics,
    validate_value,
)

UTC = datetime.UTC


def person_schema() -> Schema:
    return (
        SchemaBuilder.struct()
        .name("com.example.Person")
        .version(2)
        .doc("a person")
        .field("id", INT64_SCHEMA)
        .field("name", STRING_SCHEMA)
        .field("nick", OPTIONAL_STRING_SCHEMA)
        .field("age", SchemaBuilder.int32().optional().default_value(18))
        .build()
    )


# --- Schema and SchemaBuilder ----------------------------------------------------------------------


def test_predefined_schemas_are_kafkas() -> None:
    assert Schema.INT32_SCHEMA is INT32_SCHEMA
    assert INT32_SCHEMA.type is Type.INT32 and not INT32_SCHEMA.optional
    assert Schema.OPTIONAL_STRING_SCHEMA.optional
    assert Schema.Type.STRING is Type.STRING and Type.STRING.value == "string"
    assert str(Type.INT64) == "INT64"
    assert Type.INT8.is_primitive and not Type.STRUCT.is_primitive


def test_builder_builds_an_equal_hashable_schema() -> None:
    a, b = person_schema(), person_schema()
    assert a == b and hash(a) == hash(b) and a is not b
    assert [f.name for f in a.fields] == ["id", "name", "nick", "age"]
    assert [f.index for f in a.fields] == [0, 1, 2, 3]
    assert a.field("age").schema.default_value == 18
    assert a.field("missing") is None
    assert (a.name, a.version, a.doc) == ("com.example.Person", 2, "a person")
    assert str(a) == "Schema{com.example.Person:STRUCT}"
    assert {a: 1}[b] == 1


def test_schemas_differ_by_any_property() -> None:
    base = SchemaBuilder.int32().build()
    assert base != SchemaBuilder.int32().optional().build()
    assert base != SchemaBuilder.int32().name("n").build()
    assert base != SchemaBuilder.int32().doc("d").build()
    assert base != SchemaBuilder.int32().version(1).build()
    assert base != SchemaBuilder.int32().parameter("k", "v").build()
    assert base != SchemaBuilder.int32().default_value(1).build()
    assert base != INT64_SCHEMA
    assert (
        SchemaBuilder.bool().default_value(True).build() != SchemaBuilder.bool().default_value(False).build()
    )


def test_builder_refuses_setting_a_property_twice() -> None:
    with pytest.raises(SchemaBuilderException, match="name has already been set"):
        SchemaBuilder.string().name("a").name("b")
    SchemaBuilder.string().name("a").name("a")  # the same value again is fine, as in Kafka
    with pytest.raises(SchemaBuilderException, match="optional has already been set"):
        SchemaBuilder.string().optional().required()


def test_builder_validates_defaults_and_fields() -> None:
    with pytest.raises(SchemaBuilderException, match="Invalid default value"):
        SchemaBuilder.int32().default_value("x")
    with pytest.raises(SchemaBuilderException, match="Invalid default value"):
        SchemaBuilder.int8().default_value(300)
    with pytest.raises(SchemaBuilderException, match="Cannot create fields on type INT32"):
        SchemaBuilder.int32().field("a", INT32_SCHEMA)
    with pytest.raises(SchemaBuilderException, match="duplication a"):
        SchemaBuilder.struct().field("a", INT32_SCHEMA).field("a", INT32_SCHEMA)
    with pytest.raises(SchemaBuilderException, match="cannot be null"):
        SchemaBuilder.array(None)  # type: ignore[arg-type]


def test_parameters_are_read_only_and_never_empty() -> None:
    schema = SchemaBuilder.string().parameters({}).build()
    assert schema.parameters is None
    schema = SchemaBuilder.string().parameter("a", "1").parameters({"b": "2"}).build()
    assert dict(schema.parameters) == {"a": "1", "b": "2"}
    with pytest.raises(TypeError):
        schema.parameters["c"] = "3"  # type: ignore[index]
    with pytest.raises(AttributeError, match="immutable"):
        schema.name = "x"  # type: ignore[misc]


def test_type_specific_accessors_raise_on_other_types() -> None:
    arr = SchemaBuilder.array(INT32_SCHEMA).build()
    mp = SchemaBuilder.map(STRING_SCHEMA, SchemaBuilder.int64()).build()
    assert (
        arr.value_schema == INT32_SCHEMA
        and mp.key_schema == STRING_SCHEMA
        and mp.value_schema == INT64_SCHEMA
    )
    with pytest.raises(DataException, match="non-struct"):
        _ = arr.fields
    with pytest.raises(DataException, match="non-map"):
        _ = arr.key_schema
    with pytest.raises(DataException, match="non-array and non-map"):
        _ = INT32_SCHEMA.value_schema


def test_copy_schema_basics() -> None:
    source = SchemaBuilder.struct().name("n").version(3).doc("d").parameter("p", "v").field("a", INT32_SCHEMA)
    copy = copy_schema_basics(source.build()).field("b", STRING_SCHEMA).build()
    assert (copy.name, copy.version, copy.doc, dict(copy.parameters)) == ("n", 3, "d", {"p": "v"})
    assert [f.name for f in copy.fields] == ["b"]


def test_schemas_pickle() -> None:
    schema = person_schema()
    assert pickle.loads(pickle.dumps(schema)) == schema


# --- validation -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "good", "bad"),
    [
        (INT8_SCHEMA, [-128, 127], [128, -129, True, 1.0, "1"]),
        (INT16_SCHEMA, [-(2**15), 2**15 - 1], [2**15]),
        (INT32_SCHEMA, [2**31 - 1], [2**31]),
        (INT64_SCHEMA, [-(2**63)], [2**63]),
        (FLOAT32_SCHEMA, [1.5, 2], [True, "1.5"]),
        (Schema.BOOLEAN_SCHEMA, [True, False], [1, "true"]),
        (STRING_SCHEMA, ["", "x"], [b"x", 1]),
        (Schema.BYTES_SCHEMA, [b"", bytearray(b"x")], ["x"]),
        (SchemaBuilder.array(INT32_SCHEMA).build(), [[], [1, 2]], [[1, None], ["a"], {"a": 1}]),
        (SchemaBuilder.map(STRING_SCHEMA, INT32_SCHEMA).build(), [{}, {"a": 1}], [{1: 1}, {"a": "b"}, [1]]),
        (Decimal.schema(2), [decimal.Decimal("1.00")], [b"\x01", 1.0]),
        (Date.SCHEMA, [datetime.date(2024, 1, 1)], [19000, datetime.datetime(2024, 1, 1)]),
        (Time.SCHEMA, [datetime.time(1, 2)], [3600]),
        (Timestamp.SCHEMA, [datetime.datetime(2024, 1, 1, tzinfo=UTC)], [1, datetime.date(2024, 1, 1)]),
    ],
)
def test_validate_value(schema: Schema, good: list, bad: list) -> None:
    for value in good:
        validate_value(schema, value)
    for value in bad:
        with pytest.raises(DataException):
            validate_value(schema, value)


def test_null_only_for_optional_schemas() -> None:
    OPTIONAL_INT32_SCHEMA.validate_value(None)
    with pytest.raises(DataException, match='null used for required field: "x", schema type: INT32'):
        validate_value(INT32_SCHEMA, None, "x")


def test_error_names_the_schema_and_the_field() -> None:
    with pytest.raises(
        DataException, match=r'schema "org.apache.kafka.connect.data.Date" with type INT32.*"d"'
    ):
        validate_value(Date.SCHEMA, 5, "d")


# --- Struct -----------------------------------------------------------------------------------------


def test_struct_put_get_defaults_and_typed_getters() -> None:
    person = Struct(person_schema()).put("id", 1).put("name", "Ada")
    person.validate()
    assert person.get("age") == 18 and person.get_without_default("age") is None
    assert person.get_int64("id") == 1 and person.get_string("name") == "Ada" and person.get("nick") is None
    with pytest.raises(DataException, match="'id' is not of type STRING"):
        person.get_string("id")
    with pytest.raises(DataException, match="missing is not a valid field name"):
        person.get("missing")
    assert repr(person) == "Struct{id=1,name=Ada}"
    assert person.to_dict() == {"id": 1, "name": "Ada", "nick": None, "age": 18}


def test_struct_put_validates_at_once() -> None:
    person = Struct(person_schema())
    with pytest.raises(DataException, match='field: "id"'):
        person.put("id", "one")
    with pytest.raises(DataException, match="Not a struct schema"):
        Struct(INT32_SCHEMA)


def test_struct_validate_requires_required_fields() -> None:
    person = Struct(person_schema()).put("id", 1)
    with pytest.raises(DataException, match='required field: "name"'):
        person.validate()


def test_struct_equality_and_nesting() -> None:
    a = Struct(person_schema()).put("id", 1).put("name", "Ada")
    b = Struct(person_schema()).put("id", 1).put("name", "Ada")
    assert a == b
    b.put("nick", "A")
    assert a != b
    outer_schema = SchemaBuilder.struct().field("p", person_schema()).build()
    outer = Struct(outer_schema).put("p", a)
    outer.validate()
    other = SchemaBuilder.struct().name("other").field("id", INT64_SCHEMA).build()
    with pytest.raises(DataException, match="Struct schemas do not match"):
        Struct(outer_schema).put("p", Struct(other).put("id", 1))
    assert pickle.loads(pickle.dumps(outer)) == outer
    with pytest.raises(TypeError):
        hash(a)


def test_struct_bool_is_not_int() -> None:
    schema = SchemaBuilder.struct().field("x", Schema.OPTIONAL_BOOLEAN_SCHEMA).build()
    assert Struct(schema).put("x", True) == Struct(schema).put("x", True)
    int_schema = SchemaBuilder.struct().field("x", INT32_SCHEMA).build()
    with pytest.raises(DataException):
        Struct(int_schema).put("x", True)


# --- logical types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "scale", "raw"),
    [
        # BigInteger.toByteArray() of the unscaled value: minimal two's complement, big-endian.
        ("0", 0, b"\x00"),
        ("1.27", 2, b"\x7f"),
        ("1.28", 2, b"\x00\x80"),
        ("-1.28", 2, b"\x80"),
        ("-1.29", 2, b"\xff\x7f"),
        ("156.00", 2, b"\x3c\xf0"),
        ("-0.001", 3, b"\xff"),
        (
            "12345678901234567890.123456789",
            9,
            (12345678901234567890123456789).to_bytes(12, "big", signed=True),
        ),
    ],
)
def test_decimal_bytes_are_kafkas(text: str, scale: int, raw: bytes) -> None:
    schema = Decimal.schema(scale)
    assert Decimal.from_logical(schema, decimal.Decimal(text)) == raw
    back = Decimal.to_logical(schema, raw)
    assert back == decimal.Decimal(text) and back.as_tuple().exponent == -scale


def test_decimal_schema_and_scale_mismatch() -> None:
    schema = Decimal.schema(2)
    assert schema.name == "org.apache.kafka.connect.data.Decimal" and schema.version == 1
    assert dict(schema.parameters) == {"scale": "2"} and schema.type is Type.BYTES
    with pytest.raises(DataException, match="Schema has scale 2, value has scale 1"):
        Decimal.from_logical(schema, decimal.Decimal("1.5"))
    with pytest.raises(DataException, match="scale parameter not found"):
        Decimal.from_logical(SchemaBuilder.bytes().name(Decimal.LOGICAL_NAME).build(), decimal.Decimal(1))


def test_date_time_timestamp_conversions() -> None:
    assert Date.from_logical(Date.SCHEMA, datetime.date(1970, 1, 2)) == 1
    assert Date.from_logical(Date.SCHEMA, datetime.date(1969, 12, 31)) == -1
    assert Date.to_logical(Date.SCHEMA, 19724) == datetime.date(2024, 1, 2)
    with pytest.raises(DataException, match="time fields"):
        Date.from_logical(Date.SCHEMA, datetime.datetime(2024, 1, 1, 5, tzinfo=UTC))
    assert Time.from_logical(Time.SCHEMA, datetime.time(1, 2, 3, 4999)) == 3723004
    assert Time.to_logical(Time.SCHEMA, 3723004) == datetime.time(1, 2, 3, 4000)
    with pytest.raises(DataException):
        Time.to_logical(Time.SCHEMA, 86_400_000)
    instant = datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert Timestamp.from_logical(Timestamp.SCHEMA, instant) == 1_700_000_000_123
    assert (
        Timestamp.from_logical(Timestamp.SCHEMA, instant.replace(tzinfo=None)) == 1_700_000_000_123
    )  # naive: UTC
    assert Timestamp.to_logical(Timestamp.SCHEMA, 1_700_000_000_123) == instant
    assert Timestamp.from_logical(Timestamp.SCHEMA, datetime.datetime(1969, 12, 31, 23, 59, 59, 999000)) == -1
    with pytest.raises(DataException, match="schema does not match"):
        Timestamp.from_logical(INT64_SCHEMA, instant)


# --- SchemaProjector ----------------------------------------------------------------------------------


def test_projector_promotes_numbers_and_fills_fields() -> None:
    assert SchemaProjector.project(INT8_SCHEMA, 5, Schema.FLOAT64_SCHEMA) == 5.0
    assert type(SchemaProjector.project(INT32_SCHEMA, 5, Schema.FLOAT64_SCHEMA)) is float
    assert SchemaProjector.project(INT64_SCHEMA, 2**24 + 1, FLOAT32_SCHEMA) == float(
        2**24
    )  # float32 rounding
    with pytest.raises(SchemaProjectorException, match="type mismatch"):
        SchemaProjector.project(INT64_SCHEMA, 5, INT32_SCHEMA)
    source = SchemaBuilder.struct().field("a", INT32_SCHEMA).field("gone", STRING_SCHEMA).build()
    target = (
        SchemaBuilder.struct()
        .field("a", INT64_SCHEMA)
        .field("b", OPTIONAL_STRING_SCHEMA)
        .field("c", SchemaBuilder.int32().default_value(7))
        .build()
    )
    projected = SchemaProjector.project(source, Struct(source).put("a", 1).put("gone", "x"), target)
    assert projected == Struct(target).put("a", 1).put("c", 7)
    required = SchemaBuilder.struct().field("z", STRING_SCHEMA).build()
    with pytest.raises(SchemaProjectorException, match="Required field `z` is missing"):
        SchemaProjector.project(source, Struct(source).put("a", 1).put("gone", "x"), required)


def test_projector_checks_names_parameters_and_optionality() -> None:
    with pytest.raises(SchemaProjectorException, match="parameters not equal"):
        SchemaProjector.project(Decimal.schema(2), decimal.Decimal("1.00"), Decimal.schema(3))
    with pytest.raises(SchemaProjectorException, match="name mismatch"):
        SchemaProjector.project(INT32_SCHEMA, 1, Date.SCHEMA)
    with pytest.raises(SchemaProjectorException, match="does not provide a default"):
        SchemaProjector.project(OPTIONAL_INT32_SCHEMA, None, INT32_SCHEMA)
    defaulted = SchemaBuilder.int32().default_value(3).build()
    assert SchemaProjector.project(OPTIONAL_INT32_SCHEMA, None, defaulted) == 3
    assert SchemaProjector.project(OPTIONAL_INT32_SCHEMA, None, OPTIONAL_INT32_SCHEMA) is None
    arr = SchemaProjector.project(
        SchemaBuilder.array(INT8_SCHEMA).build(), [1, 2], SchemaBuilder.array(Schema.FLOAT64_SCHEMA).build()
    )
    assert arr == [1.0, 2.0]


# --- records carry schemas ----------------------------------------------------------------------------


def test_records_carry_schemas_and_default_to_schemaless() -> None:
    record = SourceRecord({"t": "x"}, {"o": 1}, "topic", "v")
    assert record.key_schema is None and record.value_schema is None
    schema = person_schema()
    value = Struct(schema).put("id", 1).put("name", "Ada")
    record = SourceRecord(
        {"t": "x"}, {"o": 1}, "topic", value, key=1, key_schema=INT64_SCHEMA, value_schema=schema
    )
    renamed = record.new_record(topic="other")
    assert renamed.value_schema is schema and renamed.key_schema is INT64_SCHEMA
    dropped = record.new_record(value="plain", value_schema=None)
    assert dropped.value_schema is None and dropped.key_schema is INT64_SCHEMA
    sink = SinkRecord("t", 0, 5, None, value, value_schema=schema)
    assert sink.value_schema == schema and sink.new_record(value=None).value_schema == schema
    assert pickle.loads(pickle.dumps(sink)).value == value


def test_a_source_batch_carries_one_schema_for_all_its_records() -> None:
    batch = SourceBatch({"t": "x"}, {"o": 2}, "topic", ["a", "b"], value_schema=STRING_SCHEMA)
    assert [r.value_schema for r in batch] == [STRING_SCHEMA, STRING_SCHEMA]
    assert batch[0].key_schema is None
    assert SourceBatch({"t": "x"}, {"o": 2}, "topic", ["a"]).value_schema is None


def test_struct_from_values() -> None:
    schema = person_schema()
    person = Struct.from_values(schema, [1, "Ada", None, None])
    assert person == Struct(schema).put("id", 1).put("name", "Ada")
    with pytest.raises(DataException, match='required field: "name"'):
        Struct.from_values(schema, [1, None, None, None])
    with pytest.raises(DataException, match="3 values for the 4 fields"):
        Struct.from_values(schema, [1, "Ada", None])


def test_field_changes_name_each_added_removed_and_retyped_field() -> None:
    from eosconnect.api.data import Decimal, SchemaBuilder, field_changes

    old = (
        SchemaBuilder.struct()
        .field("id", SchemaBuilder.int64().build())
        .field("weight", SchemaBuilder.float64().optional().build())
        .field("qty", SchemaBuilder.int32().build())
        .build()
    )
    new = (
        SchemaBuilder.struct()
        .field("id", SchemaBuilder.int64().build())
        .field("qty", SchemaBuilder.string().optional().build())
        .field("price", Decimal.builder(2).optional().build())
        .build()
    )
    assert field_changes(old, new) == [
        "field 'price' added (optional BYTES Decimal scale 2)",
        "field 'weight' removed",
        "field 'qty' changed from INT32 to optional STRING",
    ]
    assert field_changes(new, new) == []
