"""Kafka's predicates: TopicNameMatches, HasHeaderKey, RecordIsTombstone (`negate` is the chain's)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.records import R
from eosconnect.api.transforms import Predicate
from eosconnect.api.validators import NonEmptyString, ValidRegex


class TopicNameMatches(Predicate[R]):
    """True when the whole topic name matches the regular expression `pattern`."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "pattern",
            ConfigType.STRING,
            importance=Importance.MEDIUM,
            documentation="A Java regular expression for matching against the name of a record's topic.",
            validator=ValidRegex(),
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.pattern = re.compile(self.config["pattern"])

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
