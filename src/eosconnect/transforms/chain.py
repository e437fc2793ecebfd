"""Single Message Transforms: the `transforms=...`/`predicates=...` chain of Kafka Connect.

The chain is read from the connector config in Kafka's own syntax, so existing configs carry
over::

    transforms=addSource,dropDebug
    transforms.addSource.type=InsertField   # or org.apache.kafka.connect.transforms.InsertField$Value
    transforms.addSource.static.field=source
    transforms.addSource.static.value=orders-db
    transforms.dropDebug.type=Filter
    transforms.dropDebug.predicate=isDebug
    predicates=isDebug
    predicates.isDebug.type=TopicNameMatches
    predicates.isDebug.pattern=debug-.*

Every transformation's and predicate's settings are validated under their full names
(`transforms.addSource.static.field`) before anything is configured, and all problems are
reported together.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic

from eosconnect.api.config import ConfigDef, ConfigType
from eosconnect.api.errors import ConfigException
from eosconnect.api.records import R
from eosconnect.api.transforms import Predicate, Transformation
from eosconnect.plugins.loading import import_class
from eosconnect.plugins.versions import VERSION_SUFFIX, select_version

if TYPE_CHECKING:
    from eosconnect.api.batch import SourceBatch

__all__ = [
    "BUILTIN_PREDICATES",
    "BUILTIN_TRANSFORMATIONS",
    "TransformationChain",
    "TransformationStage",
    "resolve_predicate_class",
    "resolve_transformation_class",
]

log = logging.getLogger(__name__)


_BUILTINS = "eosconnect.transforms"
_KAFKA_SMT = "org.apache.kafka.connect.transforms"

#: Kafka's transformations that come as `$Key`/`$Value` pairs; the short name means `$Value`.
_KEYED = ("Cast", "ExtractField", "Flatten", "HeaderFrom", "HoistField", "InsertField", "MaskField",
          "ReplaceField", "SetSchemaMetadata", "TimestampConverter")  # fmt: skip
_UNKEYED = ("DropHeaders", "Filter", "InsertHeader", "RegexRouter", "TimestampRouter", "ValueToKey")


def _transformation_names() -> dict[str, str]:
    names: dict[str, str] = {}
    for name in _KEYED:
        for suffix, ours in (("", name), ("$Value", name), ("$Key", name + "Key")):
            names[name + suffix] = f"{_BUILTINS}.{ours}"
            if suffix:
                names[f"{_KAFKA_SMT}.{name}{suffix}"] = f"{_BUILTINS}.{ours}"
    for name in _UNKEYED:
        names[name] = names[f"{_KAFKA_SMT}.{name}"] = f"{_BUILTINS}.{name}"
    return names


_UNWRAP = "eosconnect.transforms.unwrap.ExtractNewRecordState"

BUILTIN_TRANSFORMATIONS: dict[str, str] = {
    **_transformation_names(),
    # Debezium's "unwrap" of change events, for sinks reading PostgresCdcSource's topics
    "ExtractNewRecordState": _UNWRAP,
    "io.debezium.transforms.ExtractNewRecordState": _UNWRAP,
}
"""Names accepted for `transforms.<alias>.type` besides Python class paths: Kafka's class names
(`org.apache.kafka.connect.transforms.InsertField$Value`), and the short ones (`InsertField`), and
Debezium's `io.debezium.transforms.ExtractNewRecordState`."""

BUILTIN_PREDICATES: dict[str, str] = {
    name: f"{_BUILTINS}.{short}"
    for short in ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone")
    for name in (short, f"{_KAFKA_SMT}.predicates.{short}")
}
"""Names accepted for `predicates.<alias>.type` besides Python class paths."""


def _short_names(table: Mapping[str, str]) -> str:
    return ", ".join(name for name in table if "." not in name and "$" not in name)


def _resolve(name: str, setting: str, table: Mapping[str, str], base: type, kind: str) -> type:
    value = name.strip()
    try:
        cls = import_class(table.get(value, value))
    except ImportError as exc:
        raise ConfigException(
            errors={
                setting: [
                    f"cannot load {kind} {value!r}: {exc}. Set {setting} to one of {_short_names(table)} "
                    f"(or Kafka's class names for them), or to a Python class path such as mypackage.MyClass."
                ]
            }
        ) from exc
    if not issubclass(cls, base):
        raise ConfigException(
            errors={setting: [f"{value!r} is not a {kind}: it must subclass eosconnect.api.{base.__name__}."]}
        )
    return cls


def resolve_transformation_class(
    name: str, *, setting: str = "transforms.<alias>.type"
) -> type[Transformation[Any]]:
    return _resolve(name, setting, BUILTIN_TRANSFORMATIONS, Transformation, "transformation")


def resolve_predicate_class(name: str, *, setting: str = "predicates.<alias>.type") -> type[Predicate[Any]]:
    return _resolve(name, setting, BUILTIN_PREDICATES, Predicate, "predicate")


@dataclass
class TransformationStage(Generic[R]):
    """One configured transformation, with its optional predicate."""

    alias: str
    transformation: Transformation[R]
    predicate: Predicate[R] | None = None
    predicate_alias: str | None = None
    negate: bool = False

    def applies_to(self, record: R) -> bool:
        if self.predicate is None:
            return True
        return self.predicate.test(record) != self.negate


def _aliases(config: Mapping[str, Any], setting: str, errors: dict[str, list[str]]) -> list[str]:
    raw = config.get(setting) or ""
    items = [item.strip() for item in (raw.split(",") if isinstance(raw, str) else raw)]
    aliases = [item for item in items if item]
    for alias in sorted({a for a in aliases if aliases.count(a) > 1}):
        errors.setdefault(setting, []).append(
            f"lists {alias!r} more than once. Give each entry its own alias, e.g. {alias},{alias}2."
        )
    return list(dict.fromkeys(aliases))


def _sub_config(config: Mapping[str, Any], prefix: str, reserved: Sequence[str]) -> dict[str, Any]:
    return {
        key[len(prefix) :]: value
        for key, value in config.items()
        if key.startswith(prefix) and key[len(prefix) :] not in reserved
    }


def _build(
    config: Mapping[str, Any],
    prefix: str,
    reserved: Sequence[str],
    resolve: Any,
    errors: dict[str, list[str]],
    kind: str,
) -> Any | None:
    """Instantiate, validate and configure one transformation or predicate; None if it failed."""
    type_setting = prefix + "type"
    type_name = config.get(type_setting)
    if not type_name or not str(type_name).strip():
        example = "InsertField" if kind == "transformation" else "TopicNameMatches"
        errors.setdefault(type_setting, []).append(
            f"is required. Set {type_setting} to the {kind} class, e.g. {example}."
        )
        return None
    version_setting = prefix + VERSION_SUFFIX.lstrip(".")  # KIP-891 (plugins/versions.py)
    try:
        cls = resolve(str(type_name), setting=type_setting)
        instance = select_version(cls, config.get(version_setting), version_setting, str(type_name))()
    except ConfigException as exc:
        for name, messages in exc.errors.items():
            errors.setdefault(name, []).extend(messages)
        return None
    sub_config = _sub_config(config, prefix, reserved)
    problems = {
        v.name: v.errors for v in instance.config_def().validate(sub_config, prefix=prefix) if v.errors
    }
    if problems:
        for name, messages in problems.items():
            errors.setdefault(name, []).extend(messages)
        return None
    try:
        instance.configure(sub_config)
    except ConfigException as exc:
        for name, messages in (exc.errors or {type_setting: [str(exc)]}).items():
            full = name if name.startswith(prefix) else prefix + name
            errors.setdefault(full, []).extend(messages)
        return None
    except Exception as exc:
        errors.setdefault(type_setting, []).append(f"{type_name} failed to configure: {exc!r}.")
        return None
    return instance


class TransformationChain(Generic[R]):
    """The configured transformations of a connector, applied in order."""

    def __init__(self, stages: Sequence[TransformationStage[R]] = ()) -> None:
        self.stages: list[TransformationStage[R]] = list(stages)

    @classmethod
    def from_config(cls, connector_config: Mapping[str, Any]) -> TransformationChain[Any]:
        """Build the chain from Kafka Connect's `transforms`/`predicates` settings.

        Raises `ConfigException` whose `errors` name every offending setting. Annotate the result
        (`chain: TransformationChain[SourceRecord] = ...`) for precise types.
        """
        errors: dict[str, list[str]] = {}
        predicates: dict[str, Predicate[Any]] = {}
        declared_predicates = _aliases(connector_config, "predicates", errors)
        for alias in declared_predicates:
            prefix = f"predicates.{alias}."
            predicate = _build(
                connector_config,
                prefix,
                ("type", "plugin.version"),
                resolve_predicate_class,
                errors,
                "predicate",
            )
            if predicate is not None:
                predicates[alias] = predicate

        stages: list[TransformationStage[Any]] = []
        for alias in _aliases(connector_config, "transforms", errors):
            prefix = f"transforms.{alias}."
            reserved = ("type", "predicate", "negate", "plugin.version")
            transformation = _build(
                connector_config, prefix, reserved, resolve_transformation_class, errors, "transformation"
            )
            predicate_alias = str(connector_config.get(prefix + "predicate") or "").strip() or None
            negate = _parse_negate(connector_config, prefix + "negate", errors)
            if predicate_alias is not None and predicate_alias not in declared_predicates:
                errors.setdefault(prefix + "predicate", []).append(
                    f"refers to predicate {predicate_alias!r}, which is not listed in predicates. Add "
                    f"{predicate_alias} to predicates and set predicates.{predicate_alias}.type."
                )
            elif predicate_alias is None and connector_config.get(prefix + "negate") is not None:
                log.warning("%snegate is set but %spredicate is not, so it has no effect", prefix, prefix)
            if transformation is not None:
                stages.append(
                    TransformationStage(
                        alias=alias,
                        transformation=transformation,
                        predicate=predicates.get(predicate_alias) if predicate_alias else None,
                        predicate_alias=predicate_alias,
                        negate=negate,
                    )
                )
        if errors:
            _close_all([stage.transformation for stage in stages], predicates.values())
            raise ConfigException(errors=errors)
        return cls(stages)

    def apply(self, record: R) -> R | None:
        """Run the record through every stage whose predicate matches; None if one dropped it.

        An exception from a stage gets a note naming the stage's alias, and propagates: the
        runtime's error handling decides whether to fail the task.
        """
        current = record
        for stage in self.stages:
            try:
                if not stage.applies_to(current):
                    continue
                result = stage.transformation.apply(current)
            except Exception as exc:
                exc.add_note(
                    f"in transformation {stage.alias!r} ({type(stage.transformation).__name__}) "
                    f"on a record for topic {current.topic!r}"
                )
                raise
            if result is None:
                return None
            current = result
        return current

    @property
    def columnar(self) -> bool:
        """Whether `apply_columns` may transform batches: every stage overrides it and none has a
        predicate (a predicate decides record by record)."""
        return all(
            stage.predicate is None
            and type(stage.transformation).apply_columns is not Transformation.apply_columns
            for stage in self.stages
        )

    def apply_columns(self, batch: SourceBatch) -> SourceBatch | None:
        """The batch through every stage at once, or None where a stage declined it or failed: the
        caller then runs `apply` on each record, which raises the error on its record."""
        current = batch
        for stage in self.stages:
            if stage.predicate is not None:
                return None
            try:
                result = stage.transformation.apply_columns(current)
            except Exception:
                return None  # `apply` raises it again on the very record, naming the stage
            if result is None:
                return None
            current = result
        return current

    def close(self) -> None:
        """Close every transformation and predicate (each once), even if some fail."""
        _close_all(
            [stage.transformation for stage in self.stages],
            [stage.predicate for stage in self.stages if stage.predicate is not None],
        )

    def __len__(self) -> int:
        return len(self.stages)

    def __enter__(self) -> TransformationChain[R]:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _parse_negate(config: Mapping[str, Any], setting: str, errors: dict[str, list[str]]) -> bool:
    raw = config.get(setting)
    if raw is None:
        return False
    result = (
        ConfigDef().define("negate", ConfigType.BOOLEAN, False).validate({"negate": raw}, prefix=setting[:-6])
    )
    if result[0].errors:
        errors.setdefault(setting, []).extend(result[0].errors)
        return False
    return bool(result[0].value)


def _close_all(transformations: Iterable[Transformation[Any]], predicates: Iterable[Predicate[Any]]) -> None:
    unique: dict[int, Transformation[Any] | Predicate[Any]] = {id(t): t for t in transformations}
    unique.update((id(p), p) for p in predicates)
    for item in unique.values():
        try:
            item.close()
        except Exception:
            log.exception("closing %s failed", type(item).__name__)
