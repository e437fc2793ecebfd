"""Run one transformation case through eosconnect's chain and through Kafka's classes (the Java harness),
and put both results in the harness's answer form so a test compares them with `==`.

A case is a harness request (see tests/support/connect_harness.py) without the converter; the Python side
reads the same record (schemaless: the JSON key/value as they are) and the same transforms/predicates,
given as Kafka's connector settings (`transforms=t0,t1`, `transforms.t0.type=<class>`, ...).
"""

from __future__ import annotations

import json
import math
from typing import Any

from eosconnect.api import ConfigException, Schema, SinkRecord, SourceRecord, TransformationChain
from support.connect_harness import ConnectHarness

#: Kafka exception classes and the eosconnect ones that mean the same.
ERROR_CLASSES = {
    "org.apache.kafka.common.config.ConfigException": "ConfigException",
    "org.apache.kafka.connect.errors.DataException": "DataException",
    # Kafka throws these for a bad field name in a schema'd record; eosconnect raises DataException.
    "java.lang.IllegalArgumentException": "DataException",
    "org.apache.kafka.connect.errors.ConnectException": "DataException",
    "org.apache.kafka.connect.errors.SchemaBuilderException": "DataException",
    "SchemaBuilderException": "DataException",
}


def connector_config(case: dict[str, Any]) -> dict[str, str]:
    """Kafka's `transforms`/`predicates` settings for the case's chain."""
    config: dict[str, str] = {}
    transforms = case.get("transforms", [])
    config["transforms"] = ",".join(f"t{i}" for i in range(len(transforms)))
    for i, stage in enumerate(transforms):
        config[f"transforms.t{i}.type"] = stage["class"]
        for key, value in stage.get("config", {}).items():
            config[f"transforms.t{i}.{key}"] = value
        if "predicate" in stage:
            config[f"transforms.t{i}.predicate"] = stage["predicate"]
        if "negate" in stage:
            config[f"transforms.t{i}.negate"] = str(stage["negate"]).lower()
    predicates = case.get("predicates", {})
    config["predicates"] = ",".join(predicates)
    for alias, predicate in predicates.items():
        config[f"predicates.{alias}.type"] = predicate["class"]
        for key, value in predicate.get("config", {}).items():
            config[f"predicates.{alias}.{key}"] = value
    return config


def run_python(
    case: dict[str, Any], key_schema: Schema | None = None, value_schema: Schema | None = None
) -> dict[str, Any]:
    """eosconnect's answer to a case, in the harness's form (key and value as they are: schemaless JSON
    unless schemas are given; the transformed record is under "record" when schemas were given)."""
    try:
        chain = TransformationChain.from_config(connector_config(case))
    except ConfigException as exc:
        return {"error": {"class": "ConfigException", "message": str(exc), "stage": "configure"}}
    headers = [(k, v) for k, v in case.get("headers", [])]
    record: SinkRecord | SourceRecord
    if "kafkaOffset" in case:
        record = SinkRecord(
            case["topic"],
            case.get("partition") or 0,
            case["kafkaOffset"],
            case.get("key"),
            case.get("value"),
            case.get("timestamp"),
            headers,
            key_schema=key_schema,
            value_schema=value_schema,
        )
    else:
        record = SourceRecord(
            {},
            {},
            case["topic"],
            case.get("value"),
            key=case.get("key"),
            partition=case.get("partition"),
            timestamp=case.get("timestamp"),
            headers=headers,
            key_schema=key_schema,
            value_schema=value_schema,
        )
    try:
        out = chain.apply(record)
    except Exception as exc:
        return {"error": {"class": type(exc).__name__, "message": str(exc), "stage": "apply"}}
    if out is None:
        return {"dropped": True}
    extra = {"record": out} if key_schema is not None or value_schema is not None else {}
    return {
        **extra,
        "topic": out.topic,
        "partition": out.partition,
        "timestamp": out.timestamp,
        "key": out.key,
        "value": out.value,
        "headers": [[k, v.decode() if isinstance(v, bytes) else v] for k, v in out.headers],
    }


def normalise(answer: dict[str, Any]) -> dict[str, Any]:
    """Errors compare by kind and stage (messages are checked by the tests that care); floats to float32
    precision, since Java prints a float32 with its own shortest digits."""
    if "error" in answer:
        error = answer["error"]
        return {"error": ERROR_CLASSES.get(error["class"], error["class"]), "stage": error["stage"]}
    return _round_floats(answer)


def _round_floats(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and value != 0:
        return float(f"{value:.7g}")
    if isinstance(value, dict):
        return {k: _round_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_round_floats(v) for v in value]
    return value


def both(harness: ConnectHarness, case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(eosconnect's answer, Kafka's answer), normalised."""
    return normalise(run_python(case)), normalise(harness.run(case))


def run_python_with_schemas(case: dict[str, Any]) -> dict[str, Any]:
    """eosconnect's answer to a case whose key and value are JsonConverter envelopes (schemas.enable=true):
    read with eosconnect's JsonConverter, transformed, written back with it, as the harness does in Java."""
    from eosconnect.api.converters import JsonConverter

    settings = {"schemas.enable": "true", **case.get("converter", {})}
    key_converter, value_converter = JsonConverter(), JsonConverter()
    key_converter.configure(settings, True)
    value_converter.configure(settings, False)
    topic = case["topic"]

    def read(converter: JsonConverter, member: str) -> tuple[Any, Any]:
        raw = case.get(member)
        decoded = converter.to_connect_data(topic, None if raw is None else json.dumps(raw).encode())
        return decoded.schema, decoded.value

    key_schema, key = read(key_converter, "key")
    value_schema, value = read(value_converter, "value")
    answer = run_python(
        {**case, "key": key, "value": value}, key_schema=key_schema, value_schema=value_schema
    )
    if "error" in answer or "dropped" in answer:
        return answer
    out = answer.pop("record")
    answer["key"] = _parse(key_converter.from_connect_data(out.topic, out.key_schema, out.key))
    answer["value"] = _parse(value_converter.from_connect_data(out.topic, out.value_schema, out.value))
    return answer


def _parse(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


def both_with_schemas(harness: ConnectHarness, case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(eosconnect's answer, Kafka's answer) for a case with schemas.enable=true, normalised."""
    java = harness.run({**case, "converter": {"schemas.enable": "true", **case.get("converter", {})}})
    return normalise(run_python_with_schemas(case)), normalise(java)
