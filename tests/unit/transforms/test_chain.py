"""The transformation chain, built from Kafka Connect's `transforms`/`predicates` syntax."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from eosconnect.api import (
    ConfigDef,
    ConfigException,
    ConfigType,
    DataException,
    Predicate,
    SinkRecord,
    SourceRecord,
    Transformation,
)
from eosconnect.transforms import Filter, InsertField, ReplaceField
from eosconnect.transforms.chain import (
    TransformationChain,
    resolve_predicate_class,
    resolve_transformation_class,
)


def rec(topic: str = "orders", value: Any = None, **kw: Any) -> SourceRecord:
    if value is None and "value" not in kw:
        value = {"id": 7, "secret": "s", "n": 1}
    return SourceRecord({"db": "a"}, {"pos": 1}, topic, value, **kw)


KAFKA_STYLE = {
    "transforms": "addSource, rename ,dropDebug,onlyOrders",
    "transforms.addSource.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.addSource.static.field": "source",
    "transforms.addSource.static.value": "db1",
    "transforms.addSource.topic.field": "topic!",
    "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.rename.renames": "id:order_id",
    "transforms.rename.exclude": "secret",
    "transforms.dropDebug.type": "Filter",
    "transforms.dropDebug.predicate": "isDebug",
    "transforms.onlyOrders.type": "org.apache.kafka.connect.transforms.Filter",
    "transforms.onlyOrders.predicate": "isOrders",
    "transforms.onlyOrders.negate": "true",
    "predicates": "isDebug,isOrders",
    "predicates.isDebug.type": "HasHeaderKey",
    "predicates.isDebug.name": "debug",
    "predicates.isOrders.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
    "predicates.isOrders.pattern": "orders(-.*)?",
}


def test_kafka_style_chain_inserts_renames_and_keeps_position() -> None:
    chain = TransformationChain.from_config(KAFKA_STYLE)
    assert [s.alias for s in chain.stages] == ["addSource", "rename", "dropDebug", "onlyOrders"]
    original = rec()
    out = chain.apply(original)
    assert out is not None
    assert out.value == {"order_id": 7, "n": 1, "topic": "orders", "source": "db1"}
    assert out.source_offset == {"pos": 1}
    assert original.value == {"id": 7, "secret": "s", "n": 1}  # not mutated


def test_filter_with_predicate_and_negate() -> None:
    chain = TransformationChain.from_config(KAFKA_STYLE)
    assert chain.apply(rec(headers={"debug": b"1"})) is None  # HasHeaderKey matched -> dropped
    assert chain.apply(rec(topic="payments")) is None  # negated TopicNameMatches -> dropped
    assert chain.apply(rec(topic="orders-eu")) is not None  # full match only


def test_tombstones_pass_and_non_dicts_are_rejected_with_the_stage_named() -> None:
    chain = TransformationChain.from_config(KAFKA_STYLE)
    tombstone = SourceRecord({"db": "a"}, {"pos": 1}, "orders", None)
    assert chain.apply(tombstone) is tombstone
    with pytest.raises(
        DataException, match=r"(?s)Only Map objects supported .*\[field insertion\].*topic 'orders'"
    ) as info:
        chain.apply(rec(value=5))
    assert any("addSource" in note for note in info.value.__notes__)


def test_no_transforms_is_an_empty_chain() -> None:
    chain = TransformationChain.from_config({"name": "x"})
    r = rec()
    assert len(chain) == 0 and chain.apply(r) is r


def test_every_config_problem_is_reported_with_its_full_name() -> None:
    bad = {
        "transforms": "a,b,c,d,a",
        "transforms.a.type": "InsertField",
        "transforms.b.type": "NoSuchTransform",
        "transforms.c.type": "ReplaceField",
        "transforms.c.renames": "x,y:z",
        "transforms.c.predicate": "missing",
        "transforms.c.negate": "maybe",
        "predicates": "p",
        "predicates.p.type": "TopicNameMatches",
        "predicates.p.pattern": "(",
    }
    with pytest.raises(ConfigException) as info:
        TransformationChain.from_config(bad)
    errors = info.value.errors
    assert set(errors) == {
        "transforms",
        "transforms.b.type",
        "transforms.c.renames",
        "transforms.c.predicate",
        "transforms.c.negate",
        "transforms.d.type",
        "predicates.p.pattern",
    }
    assert "lists 'a' more than once" in errors["transforms"][0]
    assert "Set transforms.b.type to one of Cast, ExtractField, Flatten" in errors["transforms.b.type"][0]
    assert "Set transforms.c.renames to pairs such as old_name:new_name" in errors["transforms.c.renames"][0]
    assert "Add missing to predicates and set predicates.missing.type" in errors["transforms.c.predicate"][0]
    assert "Set transforms.c.negate to true or false" in errors["transforms.c.negate"][0]
    assert "Set transforms.d.type to the transformation class" in errors["transforms.d.type"][0]
    assert "must be a valid regular expression, got '('" in errors["predicates.p.pattern"][0]


def test_required_predicate_settings_are_named() -> None:
    with pytest.raises(ConfigException) as info:
        TransformationChain.from_config({"predicates": "h", "predicates.h.type": "HasHeaderKey"})
    assert list(info.value.errors) == ["predicates.h.name"]


def test_replace_field_include_and_key_variant() -> None:
    chain = TransformationChain.from_config(
        {
            "transforms": "keep,keyRename",
            "transforms.keep.type": "ReplaceField",
            "transforms.keep.include": "id,n",
            "transforms.keyRename.type": "ReplaceField$Key",
            "transforms.keyRename.renames": "k:key_id",
        }
    )
    out = chain.apply(rec(key={"k": 1}))
    assert out is not None and out.value == {"id": 7, "n": 1} and out.key == {"key_id": 1}


def test_insert_field_metadata_on_sink_records() -> None:
    transform = InsertField[SinkRecord]()
    transform.configure({"offset.field": "off", "partition.field": "part", "timestamp.field": "ts"})
    out = transform.apply(SinkRecord("t", 2, 99, None, {"a": 1}, timestamp=1000))
    assert out is not None and out.value == {"a": 1, "off": 99, "part": 2, "ts": 1000}
    with pytest.raises(DataException, match=r"Only SinkRecord supported for \[field insertion\].*offset"):
        transform.apply(rec())  # type: ignore[arg-type]


def test_builtins_resolve_by_short_and_kafka_names() -> None:
    assert resolve_transformation_class("InsertField") is InsertField
    assert (
        resolve_transformation_class("org.apache.kafka.connect.transforms.ReplaceField$Value") is ReplaceField
    )
    assert resolve_transformation_class("org.apache.kafka.connect.transforms.Filter") is Filter
    assert resolve_predicate_class("RecordIsTombstone").__name__ == "RecordIsTombstone"
    with pytest.raises(ConfigException, match="is not a transformation"):
        resolve_transformation_class("eosconnect.api.ConfigDef")


class Uppercase(Transformation[SourceRecord]):
    """A custom transformation loaded by Python class path."""

    closed = 0

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("field", ConfigType.STRING)

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        value = dict(record.value)
        value[self.config["field"]] = str(value[self.config["field"]]).upper()
        return record.new_record(value=value)

    def close(self) -> None:
        Uppercase.closed += 1


class IsBig(Predicate[SourceRecord]):
    def configure(self, config: Mapping[str, Any]) -> None:
        self.limit = int(config.get("limit", 10))

    def test(self, record: SourceRecord) -> bool:
        return bool(record.value["n"] > self.limit)


def test_custom_classes_by_python_path_and_close(monkeypatch: pytest.MonkeyPatch) -> None:
    config = {
        "transforms": "up",
        "transforms.up.type": f"{__name__}.Uppercase",
        "transforms.up.field": "secret",
        "transforms.up.predicate": "big",
        "predicates": "big",
        "predicates.big.type": f"{__name__}:IsBig",
        "predicates.big.limit": "0",
    }
    Uppercase.closed = 0
    with TransformationChain.from_config(config) as chain:
        out = chain.apply(rec())
        assert out is not None and out.value["secret"] == "S"
        small = rec(value={"id": 1, "secret": "s", "n": 0})
        assert chain.apply(small) is small
    assert Uppercase.closed == 1
    with pytest.raises(ConfigException, match=r'"transforms.up.field": is required'):
        TransformationChain.from_config({**config, "transforms.up.field": None})
