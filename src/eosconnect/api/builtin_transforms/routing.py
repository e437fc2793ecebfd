"""Kafka's routing transformations: Filter (drop), RegexRouter and TimestampRouter (rename the topic)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from eosconnect.api.builtin_transforms.javadate import JavaDateFormat
from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.records import R
from eosconnect.api.transforms import Transformation
from eosconnect.api.validators import ValidRegex

_JAVA_GROUP = re.compile(r"\\(.)|\$(\d+|\{(\w+)\})")


def java_replacement(replacement: str) -> str:
    """Java's `Matcher.replaceFirst` replacement (`$1`, `${name}`, `\\$`) in Python's `re` syntax."""

    def convert(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return match.group(1).replace("\\", "\\\\")
        return f"\\g<{match.group(3) or match.group(2)}>"

    return _JAVA_GROUP.sub(convert, replacement)


class Filter(Transformation[R]):
    """Drops every record it is applied to; pair it with a predicate (and `negate`)."""

    def apply(self, record: R) -> R | None:
        return None


class RegexRouter(Transformation[R]):
    """When the whole topic matches `regex`, rename it to `replacement` (`$1` refers to a group)."""

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "regex",
                ConfigType.STRING,
                importance=Importance.HIGH,
                validator=ValidRegex(),
                documentation="Regular expression to use for matching.",
            )
            .define(
                "replacement",
                ConfigType.STRING,
                importance=Importance.HIGH,
                documentation="Replacement string.",
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.regex = re.compile(self.config["regex"])
        self.replacement = java_replacement(self.config["replacement"])

    def apply(self, record: R) -> R | None:
        if self.regex.fullmatch(record.topic) is None:
            return record
        return record.new_record(topic=self.regex.sub(self.replacement, record.topic, count=1))


class TimestampRouter(Transformation[R]):
    """Rename the topic to `topic.format`, with `${topic}` and `${timestamp}` (the record timestamp in
    `timestamp.format`, a SimpleDateFormat pattern, UTC) filled in."""

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define(
                "topic.format",
                ConfigType.STRING,
                "${topic}-${timestamp}",
                Importance.HIGH,
                "Format string which can contain ${topic} and ${timestamp} as placeholders for the topic and "
                "timestamp, respectively.",
            )
            .define(
                "timestamp.format",
                ConfigType.STRING,
                "yyyyMMdd",
                Importance.HIGH,
                "Format string for the timestamp that is compatible with java.text.SimpleDateFormat.",
            )
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        try:
            self.timestamp_format = JavaDateFormat(self.config["timestamp.format"])
        except ValueError as exc:
            raise ConfigException(errors={"timestamp.format": [str(exc)]}) from None

    def apply(self, record: R) -> R | None:
        if record.timestamp is None:
            raise DataException(
                f"Timestamp missing on record for topic {record.topic!r}: TimestampRouter needs the record "
                "timestamp. Set it in the connector, or limit the transformation with a predicate."
            )
        formatted = self.timestamp_format.format(record.timestamp)
        topic = (
            self.config["topic.format"].replace("${topic}", record.topic).replace("${timestamp}", formatted)
        )
        return record.new_record(topic=topic)
