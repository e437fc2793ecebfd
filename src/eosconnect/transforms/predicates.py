"""Kafka's predicates: TopicNameMatches, HasHeaderKey, RecordIsTombstone (`negate` is the chain's)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import R
from eosconnect.api.transforms import Predicate
from eosconnect.api.validators import NonEmptyString
from eosconnect.transforms.java_regex import ValidJavaRegex, compile_java


class TopicNameMatches(Predicate[R]):
    """True when the whole topic name matches the regular expression `pattern`."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "pattern",
            ConfigType.STRING,
            importance=Importance.MEDIUM,
            documentation="A Java regular expression for matching against the name of a record's topic.",
            validator=ValidJavaRegex(),
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        if not self.config["pattern"]:
            raise ConfigException(
                errors={
                    "pattern": [
                        "String must be non-empty. Set pattern to a regular "
                        "expression for topic names, e.g. orders-.*"
                    ]
                }
            )
        self.pattern = compile_java(self.config["pattern"])

    def test(self, record: R) -> bool:
        return self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate[R]):
    """True when the record has at least one header called `name`."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "name",
            ConfigType.STRING,
            importance=Importance.MEDIUM,
            documentation="The header name.",
            validator=NonEmptyString(),
        )

    def test(self, record: R) -> bool:
        return any(key == self.config["name"] for key, _ in record.headers)


class RecordIsTombstone(Predicate[R]):
    """True for records whose value is None."""

    def test(self, record: R) -> bool:
        return record.value is None
