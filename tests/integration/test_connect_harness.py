"""The Java differential harness itself: Kafka's classes answer, in order, in one JVM.

The differential tests of converters and transformations stand on it, so it is checked on cases whose
answers are known without it: an identity round trip, a drop, a transformation that changes the record,
and errors reported (not crashing the JVM) at each stage.
"""

from __future__ import annotations

from support.connect_harness import ConnectHarness

KAFKA = "org.apache.kafka.connect.transforms."


def test_identity_round_trip_schemaless(connect_harness: ConnectHarness) -> None:
    answer = connect_harness.run(
        {
            "topic": "orders",
            "partition": 2,
            "timestamp": 1_700_000_000_000,
            "key": {"id": 1},
            "value": {"a": [1, 2.5, "x", None, True], "b": {"c": "d"}},
            "headers": [["h", "text"], ["empty", None]],
        }
    )
    assert answer == {
        "topic": "orders",
        "partition": 2,
        "timestamp": 1_700_000_000_000,
        "key": {"id": 1},
        "value": {"a": [1, 2.5, "x", None, True], "b": {"c": "d"}},
        "headers": [["h", "text"], ["empty", None]],
    }


def test_identity_round_trip_with_schema(connect_harness: ConnectHarness) -> None:
    envelope = {
        "schema": {
            "type": "struct",
            "fields": [{"type": "int32", "optional": False, "field": "a"}],
            "optional": False,
            "name": "Row",
        },
        "payload": {"a": 3},
    }
    answer = connect_harness.run({"converter": {"schemas.enable": "true"}, "topic": "t", "value": envelope})
    assert answer["value"] == envelope
    assert answer["key"] is None


def test_transform_predicate_and_negate(connect_harness: ConnectHarness) -> None:
    insert = {"class": KAFKA + "InsertField$Value", "config": {"static.field": "s", "static.value": "v"}}
    predicates = {"isT": {"class": KAFKA + "predicates.TopicNameMatches", "config": {"pattern": "t.*"}}}
    applied = connect_harness.run(
        {
            "topic": "t1",
            "value": {"a": 1},
            "predicates": predicates,
            "transforms": [{**insert, "predicate": "isT"}],
        }
    )
    assert applied["value"] == {"a": 1, "s": "v"}
    skipped = connect_harness.run(
        {
            "topic": "t1",
            "value": {"a": 1},
            "predicates": predicates,
            "transforms": [{**insert, "predicate": "isT", "negate": True}],
        }
    )
    assert skipped["value"] == {"a": 1}
    dropped = connect_harness.run(
        {"topic": "t", "value": {"a": 1}, "transforms": [{"class": KAFKA + "Filter"}]}
    )
    assert dropped == {"dropped": True}


def test_errors_name_the_stage_and_the_harness_keeps_serving(connect_harness: ConnectHarness) -> None:
    extract = {"class": KAFKA + "ExtractField$Value", "config": {"field": "b"}}
    assert connect_harness.run({"topic": "t", "value": 5, "transforms": [extract]})["error"] == {
        "class": "org.apache.kafka.connect.errors.DataException",
        "message": "Only Map objects supported in absence of schema for [field extraction], "
        "found: java.lang.Long",
        "stage": "apply",
    }
    bad_config = connect_harness.run(
        {"topic": "t", "value": {}, "transforms": [{"class": KAFKA + "ExtractField$Value"}]}
    )
    assert bad_config["error"]["stage"] == "configure"
    assert bad_config["error"]["class"] == "org.apache.kafka.common.config.ConfigException"
    assert connect_harness.run({"topic": "t", "value": {"b": 1}, "transforms": [extract]})["value"] == 1
