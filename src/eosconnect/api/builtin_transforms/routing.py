"""Kafka's routing transformations: Filter (drop), RegexRouter and TimestampRouter (rename the topic)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eosconnect.api.builtin_transforms.java_regex import ValidJavaRegex, compile_java, java_replacement
from eosconnect.api.builtin_transforms.javadate import JavaDateFormat
from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.records import R
from eosconnect.api.transforms import Transformation


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
                validator=ValidJavaRegex(),
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
        self.regex = compile_java(self.config["regex"])
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
            self._last: tuple[str, int, str] | None = None  # (topic, timestamp, routed topic)
        except ValueError as exc:
            raise ConfigException(errors={"timestamp.format": [str(exc)]}) from None

    def apply(self, record: R) -> R | None:
        if record.timestamp is None:
            raise DataException(
                f"Timestamp missing on record for topic {record.topic!r}: TimestampRouter needs the record "
                "timestamp. Set it in the connector, or limit the transformation with a predicate."
            )
        # Records of one poll share topic and timestamp: the last name is reused for them.
        last = self._last
        if last is not None and last[0] == record.topic and last[1] == record.timestamp:
            return record.new_record(topic=last[2])
        formatted = self.timestamp_format.format(record.timestamp)
        topic = (
            self.config["topic.format"].replace("${topic}", record.topic).replace("${timestamp}", formatted)
        )
        self._last = (record.topic, record.timestamp, topic)
        return record.new_record(topic=topic)
