"""Run one transformation case through eosconnect's chain and through Kafka's classes (the Java harness),
and put both results in the harness's answer form so a test compares them with `==`.

Every source-record case also goes through the batch path (`TransformationChain.apply_columns` on a
`SourceBatch` of three copies of the record): where the chain takes the batch, each of its records must
equal what `apply` gave the record, and a record that `apply` fails or drops must make it decline. So the
columnar fast path is held to Kafka's output too.

A case is a harness request (see tests/support/connect_harness.py) without the converter; the Python side
reads the same record (schemaless: the JSON key/value as they are) and the same transforms/predicates,
given as Kafka's connector settings (`transforms=t0,t1`, `transforms.t0.type=<class>`, ...).
"""

from __future__ import annotations

import json
import math
from typing import Any

from eosconnect.api import ConfigException, Schema, SinkRecord, SourceRecord
from eosconnect.api.batch import SourceBatch
from eosconnect.transforms.chain import TransformationChain
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
        check_columns_agree(chain, record, None)
        return {"error": {"class": type(exc).__name__, "message": str(exc), "stage": "apply"}}
    check_columns_agree(chain, record, out)
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


def check_columns_agree(chain: TransformationChain[Any], record: Any, out: Any) -> None:
    """`chain.apply_columns` on a batch of three copies of a source record either declines or gives
    three records equal to `out` (what `apply` gave; None where it failed or dropped the record)."""
    if not isinstance(record, SourceRecord):
        return
    batch = SourceBatch(
        {},
        {"n": 3},
        record.topic,
        [record.value] * 3,
        keys=[record.key] * 3,
        partition=record.partition,
        timestamps=None if record.timestamp is None else [record.timestamp] * 3,
        headers=[record.headers] * 3,
        key_schema=record.key_schema,
        value_schema=record.value_schema,
    )
    result = chain.apply_columns(batch)
    if result is None:
        return
    assert out is not None, "apply_columns took a batch whose records apply() fails or drops"
    fields = ("topic", "partition", "key", "value", "timestamp", "headers", "key_schema", "value_schema")
    for got in result:
        for name in fields:
            assert getattr(got, name) == getattr(out, name), f"apply_columns gave another {name}"


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
    from eosconnect.converters.json import JsonConverter

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
    try:
        answer["key"] = _parse(key_converter.from_connect_data(out.topic, out.key_schema, out.key))
        answer["value"] = _parse(value_converter.from_connect_data(out.topic, out.value_schema, out.value))
    except Exception as exc:
        return {"error": {"class": type(exc).__name__, "message": str(exc), "stage": "convert"}}
    return answer


def _parse(data: bytes | None) -> Any:
    return None if data is None else json.loads(data)


def both_with_schemas(harness: ConnectHarness, case: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(eosconnect's answer, Kafka's answer) for a case with schemas.enable=true, normalised."""
    java = harness.run({**case, "converter": {"schemas.enable": "true", **case.get("converter", {})}})
    return normalise(run_python_with_schemas(case)), normalise(java)
