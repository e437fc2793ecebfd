"""The built-in transformations and predicates, schemaless versions of Kafka's.

They work on dict keys/values (what JSON sources produce). Tombstones (None) pass through
unchanged, as in Kafka; any other non-dict gives a `DataException` saying what was found.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, ClassVar

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import DataException
from eosconnect.api.records import R, SinkRecord
from eosconnect.api.transforms import Predicate, Transformation
from eosconnect.api.validators import NonEmptyString, ValidRegex

__all__ = [
    "Filter",
    "HasHeaderKey",
    "InsertField",
    "InsertFieldKey",
    "RecordIsTombstone",
    "ReplaceField",
    "ReplaceFieldKey",
    "TopicNameMatches",
]


class _MapTransformation(Transformation[R]):
    """Shared plumbing for transformations of a record's value (or key, in the `...Key` variants)."""

    target: ClassVar[str] = "value"

    def _operand(self, record: R) -> Any:
        return record.value if self.target == "value" else record.key

    def _with_operand(self, record: R, new: dict[str, Any]) -> R:
        return record.new_record(value=new) if self.target == "value" else record.new_record(key=new)

    def _require_map(self, record: R, operand: Any) -> Mapping[str, Any]:
        if not isinstance(operand, Mapping):
            raise DataException(
                f"{type(self).__name__} needs a dict record {self.target} (schemaless JSON object) on topic "
                f"{record.topic!r}, got a value of type {type(operand).__name__}. Limit it to topics with "
                "object values using a predicate, or produce dicts in the connector."
            )
        return operand


def _field_name(spec: str | None) -> str | None:
    """Kafka lets field names end in '!' (required) or '?' (optional); schemaless, both mean the same."""
    if spec is None:
        return None
    return spec[:-1] if spec.endswith(("!", "?")) else spec


class InsertField(_MapTransformation[R]):
    """Add fields: a fixed value (`static.field`/`static.value`) and/or record metadata
    (`topic.field`, `partition.field`, `offset.field` (sink records only), `timestamp.field`)."""

    def config_def(self) -> ConfigDef:
        doc = "Field name for the record's {} (leave unset to skip); a trailing ! or ? is accepted."
        return (
            ConfigDef()
            .define("topic.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("topic"))
            .define(
                "partition.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("Kafka partition")
            )
            .define(
                "offset.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("Kafka offset (sinks)")
            )
            .define(
                "timestamp.field", ConfigType.STRING, None, Importance.MEDIUM, doc.format("timestamp (ms)")
            )
            .define(
                "static.field", ConfigType.STRING, None, Importance.MEDIUM, "Field name for a static value."
            )
            .define("static.value", ConfigType.STRING, None, Importance.MEDIUM, "The static value to insert.")
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.fields = {
            name: _field_name(self.config[name])
            for name in ("topic.field", "partition.field", "offset.field", "timestamp.field", "static.field")
        }

    def apply(self, record: R) -> R | None:
        operand = self._operand(record)
        if operand is None:
            return record
        updated = dict(self._require_map(record, operand))
        fields = self.fields
        if fields["topic.field"]:
            updated[fields["topic.field"]] = record.topic
        if fields["partition.field"]:
            updated[fields["partition.field"]] = record.partition
        if fields["offset.field"]:
            if not isinstance(record, SinkRecord):
                raise DataException(
                    "InsertField offset.field needs a sink record (only those have a Kafka offset), got a "
                    f"{type(record).__name__} for topic {record.topic!r}. "
                    "Remove offset.field for source connectors."
                )
            updated[fields["offset.field"]] = record.offset
        if fields["timestamp.field"]:
            updated[fields["timestamp.field"]] = record.timestamp
        if fields["static.field"]:
            updated[fields["static.field"]] = self.config["static.value"]
        return self._with_operand(record, updated)


class InsertFieldKey(InsertField[R]):
    """`InsertField` on the record key (Kafka's `InsertField$Key`)."""

    target = "key"


def _renames(name: str, value: Any) -> None:
    bad = [item for item in value if item.count(":") != 1 or not all(item.split(":"))]
    if bad:
        raise ValueError(
            f"has entries that are not old:new pairs: {', '.join(repr(b) for b in bad)}. "
            f"Set {name} to pairs such as old_name:new_name,other:renamed."
        )


class ReplaceField(_MapTransformation[R]):
    """Keep (`include`), drop (`exclude`) and rename (`renames=old:new,...`) fields. `include` and
    `exclude` name the original fields; an empty `include` keeps everything not excluded."""

    def config_def(self) -> ConfigDef:
        return (
            ConfigDef()
            .define("exclude", ConfigType.LIST, "", Importance.MEDIUM, "Fields to drop.")
            .define("include", ConfigType.LIST, "", Importance.MEDIUM, "Fields to keep (empty: all).")
            .define("renames", ConfigType.LIST, "", Importance.MEDIUM, "Renames as old:new,...", _renames)
        )

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.exclude = set(self.config["exclude"])
        self.include = set(self.config["include"])
        self.renames = dict(item.split(":") for item in self.config["renames"])

    def apply(self, record: R) -> R | None:
        operand = self._operand(record)
        if operand is None:
            return record
        updated = {
            self.renames.get(name, name): value
            for name, value in self._require_map(record, operand).items()
            if name not in self.exclude and (not self.include or name in self.include)
        }
        return self._with_operand(record, updated)


class ReplaceFieldKey(ReplaceField[R]):
    """`ReplaceField` on the record key (Kafka's `ReplaceField$Key`)."""

    target = "key"


class Filter(Transformation[R]):
    """Drops every record it is applied to; pair it with a predicate (and `negate`)."""

    def apply(self, record: R) -> R | None:
        return None


class TopicNameMatches(Predicate[R]):
    """True when the whole topic name matches the regular expression `pattern`."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "pattern", ConfigType.STRING, importance=Importance.HIGH,
            documentation="Regular expression the whole topic name must match.", validator=ValidRegex(),
        )  # fmt: skip

    def configure(self, config: Mapping[str, Any]) -> None:
        super().configure(config)
        self.pattern = re.compile(self.config["pattern"])

    def test(self, record: R) -> bool:
        return self.pattern.fullmatch(record.topic) is not None


class HasHeaderKey(Predicate[R]):
    """True when the record has at least one header called `name`."""

    def config_def(self) -> ConfigDef:
        return ConfigDef().define(
            "name", ConfigType.STRING, importance=Importance.HIGH, documentation="The header name.",
            validator=NonEmptyString(),
        )  # fmt: skip

    def test(self, record: R) -> bool:
        return any(key == self.config["name"] for key, _ in record.headers)


class RecordIsTombstone(Predicate[R]):
    """True for records whose value is None."""

    def test(self, record: R) -> bool:
        return record.value is None
