"""The framework settings every connector takes besides its own, checked before anything is stored.

Kafka Connect refuses a config whose converters, header converter, transformations or predicates
cannot be loaded and configured, and lists those settings (with `errors.*`, `topic.creation.*`,
...) in every ConfigInfos it answers. Stored unchecked, such a config would be accepted (201) and
fail at run time on an executor; `framework_errors` makes the same objects the task would make, on
the worker, at validation time, and names each bad setting with the fix.

`framework_definitions(kind)` is the full list of framework settings for ConfigInfos, in Kafka's
groups ("Common", "Transforms", "Predicates", "Error Handling", "Topic Creation", "Exactly Once
Support", "offsets.topic"), each key with its group and its order inside the group.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from eosconnect.api.config import ConfigDef, ConfigKey, ConfigType, Importance
from eosconnect.api.errors import ConfigException
from eosconnect.api.validators import Range, ValidString
from eosconnect.cluster.auto_restart import AUTO_RESTART_CONFIG_DEF
from eosconnect.cluster.connector_kinds import ConnectorKind
from eosconnect.converters.resolution import converter_from_config, resolve_converter_class
from eosconnect.plugins.loading import VERSION_SETTING, connector_class_of
from eosconnect.plugins.versions import VERSION_SUFFIX, select_version
from eosconnect.transforms.chain import TransformationChain

__all__ = [
    "GROUPS",
    "HEADER_CONVERTER_ALIASES",
    "framework_config_def",
    "framework_definitions",
    "framework_errors",
    "group_of",
    "topic_name_problem",
]

COMMON, TRANSFORMS, PREDICATES, ERRORS = "Common", "Transforms", "Predicates", "Error Handling"
TOPIC_CREATION, EXACTLY_ONCE, OFFSETS_TOPIC = "Topic Creation", "Exactly Once Support", "offsets.topic"
GROUPS = (COMMON, TRANSFORMS, PREDICATES, ERRORS, TOPIC_CREATION, EXACTLY_ONCE, OFFSETS_TOPIC)

_GROUP_OF = {
    "exactly.once.support": EXACTLY_ONCE,
    "transaction.boundary": EXACTLY_ONCE,
    "transaction.boundary.interval.ms": EXACTLY_ONCE,
    "offsets.storage.topic": OFFSETS_TOPIC,
    "transforms": TRANSFORMS,
    "predicates": PREDICATES,
    "topic.creation.groups": TOPIC_CREATION,
}

#: Header converters: eosconnect passes header values through as bytes, which is what each of these
#: does for the byte and string values Python connectors put in headers.
HEADER_CONVERTER_ALIASES = frozenset(
    {
        "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        "org.apache.kafka.connect.storage.StringConverter",
        "org.apache.kafka.connect.converters.ByteArrayConverter",
        "org.apache.kafka.connect.json.JsonConverter",
        "json",
        "string",
        "bytes",
    }
)

HEADER_VERSION = "header.converter" + VERSION_SUFFIX
_CONVERTER_VERSION = (
    "The converter's version to load (KIP-891): a version or a Maven range such as [1.0,2.0); the newest "
    "installed version in it is used."
)

_COMMON_EXTRA = (
    ConfigDef()
    .define(
        "connector.plugin.version",
        ConfigType.STRING,
        None,
        Importance.LOW,
        "The connector's version to load (KIP-891): a version or a Maven range such as [1.0,2.0); the "
        "newest installed version in it is used. Default: the class as it loads without (the first on "
        "plugin.path).",
    )
    .define(
        "tasks.max.enforce",
        ConfigType.BOOLEAN,
        True,
        Importance.LOW,
        "Deprecated in Kafka Connect; eosconnect always fails a connector that generates more task configs "
        "than tasks.max.",
    )
    .define("key.converter.plugin.version", ConfigType.STRING, None, Importance.LOW, _CONVERTER_VERSION)
    .define("value.converter.plugin.version", ConfigType.STRING, None, Importance.LOW, _CONVERTER_VERSION)
    .define("header.converter.plugin.version", ConfigType.STRING, None, Importance.LOW, _CONVERTER_VERSION)
    .define(
        "header.converter",
        ConfigType.STRING,
        "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        Importance.LOW,
        "Converter for record headers; header values pass through as bytes.",
    )
    .define(
        "config.action.reload",
        ConfigType.STRING,
        "restart",
        Importance.LOW,
        "What happens when an externalized config value changes (none or restart).",
        ValidString.in_("none", "restart", case_sensitive=False),
    )
    .define("transforms", ConfigType.LIST, "", Importance.LOW, "Aliases of the transformations, in order.")
    .define("predicates", ConfigType.LIST, "", Importance.LOW, "Aliases of the predicates transforms use.")
)


def _errors_def(with_tolerance: bool) -> ConfigDef:
    """`errors.*` (the sink framework defines `errors.tolerance` itself)."""
    definition = (
        ConfigDef()
        .define(
            "errors.retry.timeout",
            ConfigType.LONG,
            0,
            Importance.MEDIUM,
            "How long (ms) a record whose converter or transformation raised RetriableException is "
            "retried before it counts as failed (then errors.tolerance decides): 0 no retries, -1 "
            "forever. Waits start at 300 ms and double, up to errors.retry.delay.max.ms (Kafka Connect's "
            "RetryWithToleranceOperator).",
            Range.at_least(-1),
        )
        .define(
            "errors.retry.delay.max.ms",
            ConfigType.LONG,
            60_000,
            Importance.MEDIUM,
            "Maximum wait (ms) between two retries of errors.retry.timeout (a longer doubled wait "
            "becomes a random one below this).",
            Range.at_least(1),
        )
    )
    if with_tolerance:
        definition.define(
            "errors.tolerance",
            ConfigType.STRING,
            "none",
            Importance.MEDIUM,
            "none: a record that cannot be transformed or converted fails the task; all: it is skipped "
            "(not sent, its source offset committed; logged per errors.log.enable, counted in "
            "total-records-skipped).",
            ValidString.in_("none", "all", case_sensitive=False),
        )
    return definition.define(
        "errors.log.enable", ConfigType.BOOLEAN, False, Importance.MEDIUM, "Log each skipped record's error."
    ).define(
        "errors.log.include.messages",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Include the record itself in the logged error.",
    )


_SINK_ERRORS = (
    ConfigDef()
    .define(
        "errors.deadletterqueue.topic.name",
        ConfigType.STRING,
        "",
        Importance.MEDIUM,
        "Dead letter queue topic (KIP-298): with errors.tolerance=all, records the converters or "
        "transformations reject, and records the task reports (KIP-610), are written there as consumed "
        "(created if missing, one partition). Empty: none.",
    )
    .define(
        "errors.deadletterqueue.topic.replication.factor",
        ConfigType.INT,
        3,
        Importance.MEDIUM,
        "Replication factor of the dead letter queue topic when it is created (-1: the broker's default).",
    )
    .define(
        "errors.deadletterqueue.context.headers.enable",
        ConfigType.BOOLEAN,
        False,
        Importance.MEDIUM,
        "Add Kafka Connect's __connect.errors.* headers (original topic, partition, offset, connector, "
        "task, stage, class, exception class, message and stack trace) to dead letter records.",
    )
)

_TOPIC_CREATION = ConfigDef().define(
    "topic.creation.groups",
    ConfigType.LIST,
    "",
    Importance.LOW,
    "Groups of topic settings for topics the connector creates (accepted for compatibility).",
)


def group_of(name: str) -> str:
    if name in _GROUP_OF:
        return _GROUP_OF[name]
    if name.startswith("errors."):
        return ERRORS
    return COMMON


def framework_config_def(kind: ConnectorKind) -> ConfigDef:
    """The framework settings of `kind` as one ConfigDef: the runtime's plus the compatibility ones."""
    merged = kind.framework_config_def.merge(_COMMON_EXTRA).merge(AUTO_RESTART_CONFIG_DEF)
    if kind.is_sink:
        return merged.merge(_errors_def(with_tolerance=False)).merge(_SINK_ERRORS)
    return merged.merge(_errors_def(with_tolerance=True)).merge(_TOPIC_CREATION)


def framework_definitions(kind: ConnectorKind) -> list[tuple[ConfigKey, str]]:
    """Every framework setting of `kind` with its group, in Kafka's group order."""
    keys = [(key, key.group or group_of(key.name)) for key in framework_config_def(kind)]
    return sorted(keys, key=lambda item: GROUPS.index(item[1]) if item[1] in GROUPS else len(GROUPS))


_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")


def topic_name_problem(topic: str) -> str | None:
    """Kafka's topic name rules (`Topic.validate`), or None for a legal name."""
    if not topic:
        return "a topic name must not be empty"
    if topic in (".", ".."):
        return f"{topic!r} is not a legal topic name"
    if len(topic) > 249:
        return f"topic name {topic[:30]!r}... is {len(topic)} characters long; the maximum is 249"
    if not _LEGAL_TOPIC.match(topic):
        return (
            f"{topic!r} is not a legal topic name: it may contain only ASCII letters, digits, '.', '_' "
            "and '-'"
        )
    return None


def _add(errors: dict[str, list[str]], exc: ConfigException, fallback: str) -> None:
    for name, messages in (exc.errors or {fallback: [str(exc)]}).items():
        errors.setdefault(name, []).extend(messages)


def framework_errors(config: Mapping[str, str], kind: ConnectorKind) -> dict[str, list[str]]:
    """Per-setting problems with the converters, header converter, transformations, predicates,
    error handling and topic names of `config` (empty: none)."""
    errors: dict[str, list[str]] = {}
    for is_key, setting in ((True, "key.converter"), (False, "value.converter")):
        try:
            converter = converter_from_config(config, is_key=is_key)
        except ConfigException as exc:
            _add(errors, exc, setting)
            continue
        except Exception as exc:
            errors.setdefault(setting, []).append(f"the converter failed to configure: {exc!r}")
            continue
        for name, problems in converter.preflight().items():
            errors.setdefault(name, []).extend(problems)
    if (config.get(VERSION_SETTING) or "").strip():
        try:
            connector_class_of(config)
        except ConfigException as exc:
            _add(errors, exc, VERSION_SETTING)
    header = (config.get("header.converter") or "").strip()
    if header and header not in HEADER_CONVERTER_ALIASES:
        try:
            header_class = resolve_converter_class(header, setting="header.converter")
            # KIP-891: the version is checked as the key's and value's are, so a range nothing
            # installed is in is refused naming what is (plugins/versions.py)
            select_version(header_class, config.get(HEADER_VERSION), HEADER_VERSION, header)
        except ConfigException as exc:
            _add(errors, exc, "header.converter")
    try:
        TransformationChain.from_config(config).close()
    except ConfigException as exc:
        _add(errors, exc, "transforms")
    except Exception as exc:
        errors.setdefault("transforms", []).append(f"the transformations failed to configure: {exc!r}")
    topic_settings = ["offsets.storage.topic"] if not kind.is_sink else []
    if not kind.is_sink:
        topic_settings.append("topic")  # FileStreamSource's, SequenceSource's: the topic it writes to
    for setting in topic_settings:
        value = config.get(setting)
        if value is not None and value.strip():
            problem = topic_name_problem(value.strip())
            if problem:
                errors.setdefault(setting, []).append(problem)
    if kind.is_sink and config.get("topics"):
        for topic in (t.strip() for t in config["topics"].split(",")):
            if topic and (problem := topic_name_problem(topic)):
                errors.setdefault("topics", []).append(problem)
    return errors
