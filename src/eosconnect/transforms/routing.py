"""Kafka's routing transformations: Filter (drop), RegexRouter and TimestampRouter (rename the topic)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConfigException, DataException
from eosconnect.api.records import R
from eosconnect.api.transforms import Transformation
from eosconnect.transforms.java_regex import ValidJavaRegex, compile_java, java_replacement
from eosconnect.transforms.javadate import JavaDateFormat

if TYPE_CHECKING:
    from eosconnect.api.batch import SourceBatch


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

    def apply_columns(self, batch: SourceBatch) -> SourceBatch | None:
        if self.regex.fullmatch(batch.topic) is None:
            return batch
        return batch.replace(topic=self.regex.sub(self.replacement, batch.topic, count=1))


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
        return record.new_record(topic=self._routed(record.topic, record.timestamp))

    def apply_columns(self, batch: SourceBatch) -> SourceBatch | None:
        """One routed topic for the batch, or None where its timestamps give several (or one is
        missing): its records are then routed one by one."""
        times = batch.timestamps
        if times is None or not times:
            return None if times is None and batch else batch
        distinct = set(times)
        if None in distinct:
            return None
        topics = {self._routed(batch.topic, millis) for millis in distinct if millis is not None}
        if len(topics) != 1:
            return None
        return batch.replace(topic=topics.pop())

    def _routed(self, topic: str, millis: int) -> str:
        last = self._last
        if last is not None and last[0] == topic and last[1] == millis:
            return last[2]
        formatted = self.timestamp_format.format(millis)
        routed = self.config["topic.format"].replace("${topic}", topic).replace("${timestamp}", formatted)
        self._last = (topic, millis, routed)
        return routed
