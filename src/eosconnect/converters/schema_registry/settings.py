"""The settings every Schema Registry converter shares, the registry client, and subject names.

Names and meanings are Confluent's (`AbstractKafkaSchemaSerDeConfig`), so a Java Connect converter
config moves over unchanged: `schema.registry.url`, `auto.register.schemas`, `use.latest.version`,
`key.subject.name.strategy`/`value.subject.name.strategy` (Confluent's class names or the short ones),
`basic.auth.credentials.source` with `basic.auth.user.info`, and `schemas.cache.size`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

from confluent_kafka.schema_registry import RegisteredSchema, SchemaRegistryClient
from confluent_kafka.schema_registry import Schema as RegistrySchema

# The HTTP library the registry client raises its network errors from (httpx2 where installed,
# else httpx): catching another one's errors would catch nothing.
from confluent_kafka.schema_registry.common._httpx_compat import httpx
from confluent_kafka.schema_registry.error import SchemaRegistryError

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.data import Schema, field_changes
from eosconnect.api.errors import ConfigException, DataException, RetriableException
from eosconnect.api.validators import ValidString

__all__ = [
    "SUBJECT_NAME_STRATEGIES",
    "RegistryAccess",
    "registry_config_def",
    "subject_name",
]

_STRATEGY_PACKAGE = "io.confluent.kafka.serializers.subject."
SUBJECT_NAME_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
"""Confluent's, also accepted with their Java package (`io.confluent.kafka.serializers.subject.`)."""

#: Incompatible schema (Confluent's error code 409 for `POST /subjects/<s>/versions`).
_INCOMPATIBLE = 409

#: Seconds validation waits for the registry to answer: long enough for a busy one, short enough
#: that a URL nobody answers at does not hold a `PUT .../config/validate` for the read timeout.
VALIDATION_TIMEOUT_S = 5


def _strategy_validator(name: str, value: Any) -> None:
    short = str(value).removeprefix(_STRATEGY_PACKAGE)
    if short not in SUBJECT_NAME_STRATEGIES:
        raise ValueError(
            f"unknown subject name strategy {value!r}: use one of {', '.join(SUBJECT_NAME_STRATEGIES)} "
            f"(optionally with the Java package {_STRATEGY_PACKAGE})"
        )


def registry_config_def() -> ConfigDef:
    """The registry settings (without the `value.converter.` prefix), shared by all three formats."""
    strategy_doc = (
        "How the subject a schema is registered under is named: TopicNameStrategy (<topic>-key or "
        "<topic>-value), RecordNameStrategy (the record's full name) or TopicRecordNameStrategy "
        "(<topic>-<record full name>); Confluent's Java class names are accepted."
    )
    return (
        ConfigDef()
        .define(
            "schema.registry.url",
            ConfigType.LIST,
            [],
            Importance.HIGH,
            documentation="URL(s) of the Schema Registry (its Confluent-compatible API), comma-separated.",
        )
        .define(
            "auto.register.schemas",
            ConfigType.BOOLEAN,
            True,
            Importance.MEDIUM,
            "Register the record's schema under its subject when writing (false: it must be registered).",
        )
        .define(
            "use.latest.version",
            ConfigType.BOOLEAN,
            False,
            Importance.LOW,
            "Write with the latest registered version of the subject instead of the record's own schema; "
            "only with auto.register.schemas=false (registration wins, as in Confluent's serializers).",
        )
        .define(
            "key.subject.name.strategy",
            ConfigType.STRING,
            "TopicNameStrategy",
            Importance.MEDIUM,
            strategy_doc,
            validator=_strategy_validator,
        )
        .define(
            "value.subject.name.strategy",
            ConfigType.STRING,
            "TopicNameStrategy",
            Importance.MEDIUM,
            strategy_doc,
            validator=_strategy_validator,
        )
        .define(
            "basic.auth.credentials.source",
            ConfigType.STRING,
            "URL",
            Importance.MEDIUM,
            "Where HTTP basic auth credentials come from: URL (user:password@ in schema.registry.url) or "
            "USER_INFO (basic.auth.user.info).",
            validator=ValidString.in_("URL", "USER_INFO"),
        )
        .define(
            "basic.auth.user.info",
            ConfigType.PASSWORD,
            "",
            Importance.MEDIUM,
            "user:password for HTTP basic auth, with basic.auth.credentials.source=USER_INFO.",
        )
        .define(
            "http.read.timeout.ms",
            ConfigType.INT,
            60000,
            Importance.LOW,
            "How long a request to the registry may take before the conversion fails (Confluent's default).",
        )
        .define(
            "schemas.cache.size",
            ConfigType.INT,
            1000,
            Importance.LOW,
            "How many schemas the registry client keeps in memory.",
        )
    )


def _plain(value: Any) -> str:
    """A PASSWORD setting's clear text (the config layer may wrap it so it is never logged)."""
    return str(getattr(value, "value", value) or "")


def _without_userinfo(url: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))


def subject_name(strategy: str, topic: str, is_key: bool, record_name: str | None) -> str:
    """The subject a schema is registered under (Confluent's `SubjectNameStrategy` implementations)."""
    short = strategy.removeprefix(_STRATEGY_PACKAGE)
    if short == "TopicNameStrategy":
        return f"{topic}-{'key' if is_key else 'value'}"
    if record_name is None:
        what = "key" if is_key else "value"
        raise DataException(
            f"{short} names the subject after the record's schema name, but this {what} "
            f"schema for topic {topic!r} has none: give the schema a name or use TopicNameStrategy."
        )
    if short == "RecordNameStrategy":
        return record_name
    return f"{topic}-{record_name}"


@dataclass(frozen=True)
class RegistrySchemaId:
    """A schema as registered: its id (what the wire format carries) and its registered text."""

    schema_id: int
    schema: RegistrySchema


def schema_text(schema: RegistrySchema) -> str:
    """The text of a schema the registry holds (always there, though the client types it optional)."""
    if schema.schema_str is None:
        raise DataException(f"the schema registry returned a {schema.schema_type} schema without its text")
    return schema.schema_str


def _registered_id(schema_id: int | None, subject: str) -> int:
    if schema_id is None:
        raise DataException(f"the schema registry answered for subject {subject!r} without a schema id")
    return schema_id


class RegistryAccess:
    """The registry client for one converter, with Confluent's write-side rules applied.

    `schema_for_write` registers (or looks up, or takes the subject's latest version, per the settings)
    and turns the registry's refusals into one error naming the subject, the rule and the registry's
    reason; nothing is written for a record whose schema is refused.
    """

    def __init__(self, settings: Mapping[str, Any], is_key: bool, prefix: str) -> None:
        urls: list[str] = settings["schema.registry.url"]
        #: For messages: never the credentials a URL may carry.
        self.urls = ",".join(_without_userinfo(url) for url in urls)
        self.is_key = is_key
        self.prefix = prefix
        self.auto_register: bool = settings["auto.register.schemas"]
        self.use_latest: bool = settings["use.latest.version"]
        self.strategy: str = settings[
            "key.subject.name.strategy" if is_key else "value.subject.name.strategy"
        ]
        conf: dict[str, Any] = {
            "url": ",".join(urls),
            "cache.capacity": settings["schemas.cache.size"],
            "timeout": settings["http.read.timeout.ms"] / 1000,
        }
        if settings["basic.auth.credentials.source"] == "USER_INFO":
            user_info = _plain(settings["basic.auth.user.info"])
            if ":" not in user_info:
                raise ConfigException(
                    errors={
                        f"{prefix}basic.auth.user.info": [
                            "must be user:password when basic.auth.credentials.source=USER_INFO"
                        ]
                    }
                )
            # As Confluent's clients do with USER_INFO, credentials in the URL are not used.
            conf["url"] = self.urls
            conf["basic.auth.user.info"] = user_info
        self._conf = conf
        self.client = SchemaRegistryClient(conf)
        self._written: dict[tuple[str, str], RegistrySchemaId] = {}
        #: The Connect schema last written under each subject: what a refused one changed.
        self._last_written: dict[str, Schema] = {}

    def unreachable(self, exc: Exception) -> str:
        """Why the registry could not be asked, naming the URL, the setting and the fix."""
        setting = f"{self.prefix}schema.registry.url"
        return (
            f"cannot reach the schema registry at {self.urls} ({setting}): {type(exc).__name__}: {exc}. "
            f"Start the registry, or set {setting} to the URL the worker reaches it at."
        )

    def reachability_errors(self) -> dict[str, list[str]]:
        """Whether the registry answers (for validation): {} if so, else the problem on the URL setting.

        One request with no retries and a short timeout: a task would otherwise be started that
        fails at its first record."""
        probe = SchemaRegistryClient({**self._conf, "timeout": VALIDATION_TIMEOUT_S, "max.retries": 0})
        setting = f"{self.prefix}schema.registry.url"
        try:
            probe.get_compatibility()
        except (httpx.TransportError, httpx.InvalidURL) as exc:
            return {setting: [self.unreachable(exc)]}
        except SchemaRegistryError as exc:
            if exc.http_status_code in (401, 403):
                return {
                    setting: [
                        f"the schema registry at {self.urls} refused the credentials (HTTP "
                        f"{exc.http_status_code}: {exc.error_message}). Set "
                        f"{self.prefix}basic.auth.user.info (with basic.auth.credentials.source=USER_INFO) "
                        "or user:password@ in the URL."
                    ]
                }
        return {}

    def subject(self, topic: str, record_name: str | None) -> str:
        return subject_name(self.strategy, topic, self.is_key, record_name)

    def schema_for_write(
        self, subject: str, schema: RegistrySchema, connect_schema: Schema | None = None
    ) -> RegistrySchemaId:
        """The id (and the registered schema) to write a record of `schema` under `subject` with;
        `connect_schema`, the Connect schema it was made from, lets a refusal name what changed."""
        cache_key = (subject, schema_text(schema))
        found = self._written.get(cache_key)
        if found is None:
            found = self._written[cache_key] = self._ask(subject, schema, connect_schema)
        if connect_schema is not None:
            self._last_written[subject] = connect_schema
        return found

    def _ask(self, subject: str, schema: RegistrySchema, connect_schema: Schema | None) -> RegistrySchemaId:
        try:
            # Confluent's serializers check in this order: auto.register.schemas wins over
            # use.latest.version, which only applies when registration is off.
            if self.auto_register:
                found = RegistrySchemaId(self.client.register_schema(subject, schema), schema)
            elif self.use_latest:
                latest: RegisteredSchema = self.client.get_latest_version(subject)
                found = RegistrySchemaId(_registered_id(latest.schema_id, subject), latest.schema)
            else:
                registered = self.client.lookup_schema(subject, schema)
                found = RegistrySchemaId(_registered_id(registered.schema_id, subject), schema)
        except SchemaRegistryError as exc:
            raise self._refused(subject, schema, exc, connect_schema) from None
        except httpx.TransportError as exc:
            raise RetriableException(self.unreachable(exc)) from None
        return found

    def schema_by_id(self, schema_id: int, topic: str) -> RegistrySchema:
        try:
            return self.client.get_schema(schema_id)
        except httpx.TransportError as exc:
            raise RetriableException(self.unreachable(exc)) from None
        except SchemaRegistryError as exc:
            raise DataException(
                f"The schema registry at {self.urls} has no schema with id {schema_id}, which a record "
                f"{'key' if self.is_key else 'value'} from topic {topic!r} was written with: "
                f"{exc.error_message}. "
                "Check that schema.registry.url names the registry the topic's producer used."
            ) from None

    def _refused(
        self, subject: str, schema: RegistrySchema, exc: SchemaRegistryError, connect_schema: Schema | None
    ) -> DataException:
        what = f"the {schema.schema_type} schema of a record {'key' if self.is_key else 'value'}"
        if exc.http_status_code == _INCOMPATIBLE:
            rule = self._compatibility(subject)
            return DataException(
                f"The schema registry at {self.urls} refused {what} for subject {subject!r}: "
                f"{self._change(subject, connect_schema)} is incompatible with the subject's registered "
                f"versions under its compatibility rule {rule} (registry: {exc.error_message}). Make the "
                f"change {rule}-compatible (e.g. give new fields defaults), or change the subject's rule, "
                "or write to another subject."
            )
        if exc.http_status_code == 404:
            why = (
                "the subject has no registered version (use.latest.version=true)"
                if self.use_latest
                else "the schema is not registered under the subject and auto.register.schemas=false"
            )
            return DataException(
                f"The schema registry at {self.urls} has no schema for {what} under subject {subject!r}: "
                f"{why}. "
                f"Register it first, or set auto.register.schemas=true (registry: {exc.error_message})."
            )
        return DataException(
            f"The schema registry at {self.urls} refused {what} for subject {subject!r}: "
            f"HTTP {exc.http_status_code}, error {exc.error_code}: {exc.error_message}"
        )

    def _change(self, subject: str, connect_schema: Schema | None) -> str:
        """The change a refused schema makes to the last one written under the subject, in words."""
        before = self._last_written.get(subject)
        changes = field_changes(before, connect_schema) if before is not None and connect_schema else []
        if not changes:
            return "the schema"
        return f"the change ({'; '.join(changes)})"

    def _compatibility(self, subject: str) -> str:
        """The rule in force for the subject: its own, else the global one. Asked with
        `defaultToGlobal=true`: without it Apicurio answers NONE for a subject with no rule of its
        own (Confluent answers 404), which is not the rule the registry applies."""
        try:
            answer = self.client._rest_client.get(
                f"config/{quote(subject, safe='')}", query={"defaultToGlobal": "true"}
            )
            return str(answer["compatibilityLevel"])
        except (SchemaRegistryError, httpx.HTTPError, KeyError, TypeError):
            pass
        try:
            return self.client.get_compatibility()
        except (SchemaRegistryError, httpx.HTTPError):
            return "(unknown)"


def registry_settings(config_def: ConfigDef, config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Parse `config` against `config_def`, the registry URL being required (Confluent's converters
    fail at configure time without one, not at the first record)."""
    settings = config_def.parse(config, prefix=prefix)
    if not settings.get("schema.registry.url"):
        raise ConfigException(
            errors={
                f"{prefix}schema.registry.url": [
                    "is required: set it to the Schema Registry's URL, e.g. http://localhost:8081"
                ]
            }
        )
    return settings
