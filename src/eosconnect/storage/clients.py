"""Kafka client settings built the way Kafka Connect builds them, for librdkafka.

Operators configure clients in three places, and Kafka Connect gives them a fixed precedence
(KIP-458): a connector's `<kind>.override.<key>` beats the worker's `<kind>.<key>`, which beats the
worker's top-level connection settings (`bootstrap.servers`, `security.protocol`, `sasl.*`, `ssl.*`).
Keeping that precedence means connectors can point at another cluster or use another principal
without the worker's settings leaking over theirs.

librdkafka only reports a bad setting when a client is constructed, and then names its own
(sometimes canonical, aliased) property. `validate_client_config` turns that into an error naming the
key the user actually wrote, so `producer.override.foo.bar` is what the REST validate call flags.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Collection, Iterable, Mapping
from typing import Any, Literal, TypeVar

from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from eosconnect.api.errors import ConfigException
from eosconnect.plugins.config_providers import resolve_config

__all__ = [
    "ClientConfig",
    "ClientConfigError",
    "ClientKind",
    "admin_principal_producer_config",
    "client_config",
    "forced",
    "is_connection_key",
    "kafka_logger",
    "prefixed_client_config",
    "validate_client_config",
]

log = logging.getLogger(__name__)

ClientKind = Literal["producer", "consumer", "admin"]
C = TypeVar("C", bound=dict[str, Any])
KINDS: tuple[ClientKind, ...] = ("producer", "consumer", "admin")

#: Worker top-level settings that every client inherits: where the cluster is and how to log in.
TOP_LEVEL_EXACT = frozenset({"bootstrap.servers", "security.protocol"})
TOP_LEVEL_PREFIXES = ("sasl.", "ssl.")

#: Lowest-precedence defaults. `murmur2_random` is what Java clients (and so Kafka Connect) use for
#: keyed records: with it, our records and offsets land in the partitions Java Connect would pick,
#: so both can share topics and compaction keeps working across them.
DEFAULTS: dict[ClientKind, dict[str, Any]] = {
    "producer": {"acks": "all", "partitioner": "murmur2_random"},
    "consumer": {},
    "admin": {},
}

#: Worker key for KIP-458's policy on which connector overrides are allowed.
OVERRIDE_POLICY_KEY = "connector.client.config.override.policy"
#: The `Allowlist` policy's list of client settings connectors may override (KIP-1188).
ALLOWLIST_KEY = "connector.client.config.override.allowlist"
#: Settings that the `Principal` policy lets a connector override (librdkafka's names for them).
PRINCIPAL_KEYS_EXACT = frozenset({"security.protocol"})
PRINCIPAL_PREFIXES = ("sasl.",)

#: Java client settings that people carry over from Kafka Connect, with the librdkafka way to say it.
JAVA_ONLY_HINTS: dict[str, str] = {
    "key.serializer": "the runtime sends bytes from the converters; remove it",
    "value.serializer": "the runtime sends bytes from the converters; remove it",
    "key.deserializer": "the runtime hands raw bytes to the converters; remove it",
    "value.deserializer": "the runtime hands raw bytes to the converters; remove it",
    "sasl.jaas.config": "librdkafka takes credentials as `sasl.username` and `sasl.password`",
    "ssl.truststore.location": "librdkafka takes a PEM CA file as `ssl.ca.location`",
    "ssl.truststore.password": "librdkafka reads PEM CA files, which have no password; remove it",
    "ssl.truststore.type": "librdkafka reads PEM CA files; remove it",
    "ssl.keystore.type": "librdkafka reads a PKCS#12 `ssl.keystore.location`; remove it",
    "max.request.size": "librdkafka calls it `message.max.bytes`",
    "buffer.memory": "librdkafka calls it `queue.buffering.max.kbytes` (in KiB)",
    "max.block.ms": "librdkafka never blocks on a full queue; remove it",
    "interceptor.classes": "Java interceptors do not exist in librdkafka; remove it",
    "metric.reporters": "Java metric reporters do not exist in librdkafka; remove it",
    "default.api.timeout.ms": "librdkafka has no such setting; remove it",
}


class ClientConfigError(ConfigException):
    """One or more Kafka client settings are unknown to librdkafka, invalid, or not allowed.

    A `ConfigException` (so a `ValueError`) whose `errors` are keyed by the setting the user wrote,
    e.g. `producer.override.foo.bar`, so a validate call can attach each problem to its field.
    """


class ClientConfig(dict[str, Any]):
    """A librdkafka config (a plain dict to confluent-kafka) that remembers where each key came from.

    `origin` maps config keys to the setting the user wrote (`producer.override.linger.ms`), so
    `forced()` warnings and `validate_client_config` errors speak the user's language. Copies made
    with `dict(...)` or `{**config}` are plain dicts and lose it.
    """

    def __init__(
        self,
        kind: ClientKind,
        data: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
        origin: Mapping[str, str] | Iterable[tuple[str, str]] = (),
    ) -> None:
        super().__init__(data)
        self.kind: ClientKind = kind
        self.origin: dict[str, str] = dict(origin)

    def force(self, key: str, value: Any, why: str) -> ClientConfig:
        """`forced(self, ...)`: the runtime's value wins, with a warning naming the user's setting."""
        forced(self, key, value, why)
        return self

    def validate(self) -> ClientConfig:
        """`validate_client_config(self.kind, self, self.origin)`; returns self."""
        validate_client_config(self.kind, self, self.origin)
        return self


class FencedIsNoFault(logging.Filter):
    """librdkafka logs a producer fenced by a newer instance as a fatal error (CRITICAL). Under
    KIP-618 that is how a replaced task instance learns it is a zombie, by design; the task's own
    line says whether it was a fault (INFO when the leader confirms a newer instance took over,
    ERROR otherwise, see runtime/supersession.py). So librdkafka's lines go down to WARNING. The
    same for a refused end of a transaction (INVALID_TXN_STATE, a librdkafka 2.16 race between an
    abort and a partition registration): the runtime judges it (a stopping source task goes on,
    a sink renews its producer, anything else fails the task with an ERROR of its own)."""

    MARKERS = (
        "fenced by a newer instance",
        "operation with an old epoch",
        "attempted a transactional operation in an invalid state",
    )

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno > logging.WARNING and any(m in record.getMessage() for m in self.MARKERS):
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def kafka_logger(kind: str) -> logging.Logger:
    """The Python logger librdkafka's messages go to (instead of stderr), one per client kind.

    confluent-kafka forwards them from the client's `poll()`/`flush()` calls, which is where a
    busy client already spends its time; an admin client's log lines arrive on `admin.poll(0)`.
    """
    logger = logging.getLogger(f"eosconnect.kafka.{kind}")
    if not any(isinstance(f, FencedIsNoFault) for f in logger.filters):
        logger.addFilter(FencedIsNoFault())
    return logger


def is_connection_key(key: str) -> bool:
    """Where the cluster is and who connects: `bootstrap.servers`, `security.protocol`, `sasl.*`,
    `ssl.*` (the worker's top-level settings every client inherits)."""
    return key in TOP_LEVEL_EXACT or key.startswith(TOP_LEVEL_PREFIXES)


def _override_policy(worker: Mapping[str, Any]) -> str:
    return str(worker.get(OVERRIDE_POLICY_KEY) or "All").strip()


def _check_override_policy(kind: ClientKind, worker: Mapping[str, Any], overrides: Mapping[str, Any]) -> None:
    policy = _override_policy(worker)
    # Kafka Connect accepts the short alias or the Java class name of the policy.
    short = policy.rsplit(".", 1)[-1].lower().removesuffix("connectorclientconfigoverridepolicy")
    if short == "all":
        return
    principal = short == "principal"
    # Kafka 4.2's Allowlist policy (KIP-1188): exactly the client settings the worker lists.
    allowlist = (
        {k.strip() for k in str(worker.get(ALLOWLIST_KEY) or "").split(",") if k.strip()}
        if short == "allowlist"
        else set()
    )
    errors: dict[str, list[str]] = {}
    for key in overrides:
        if principal and (key in PRINCIPAL_KEYS_EXACT or key.startswith(PRINCIPAL_PREFIXES)):
            continue
        if key in allowlist:
            continue
        if short == "allowlist":
            allowed = (
                f"only {', '.join(sorted(allowlist))} may be" if allowlist else f"{ALLOWLIST_KEY} is empty"
            )
            allowed += f"; add {key} to {ALLOWLIST_KEY} to allow it"
        else:
            allowed = "only security.protocol and sasl.* may be overridden" if principal else "nothing may be"
        errors[f"{kind}.override.{key}"] = [
            f"the worker's {OVERRIDE_POLICY_KEY}={policy} forbids it ({allowed}); remove it from the "
            f"connector, or ask the operator to relax {OVERRIDE_POLICY_KEY}"
        ]
    if errors:
        raise ClientConfigError(errors=errors)


def client_config(
    kind: ClientKind,
    worker: Mapping[str, Any],
    connector: Mapping[str, Any] | None = None,
    *,
    logger: logging.Logger | None = None,
) -> ClientConfig:
    """The librdkafka config for a `kind` client of `connector` (or of the worker itself if None).

    Precedence, highest first: connector `<kind>.override.<key>`, worker `<kind>.<key>`, worker
    top-level `bootstrap.servers`/`security.protocol`/`sasl.*`/`ssl.*`, then `DEFAULTS`. A `logger`
    entry routes librdkafka's log lines to Python logging (see `kafka_logger`). Raises
    `ClientConfigError` when the worker's `connector.client.config.override.policy` forbids one of
    the connector's overrides. Unknown librdkafka settings are found by `validate_client_config`.
    """
    if kind not in KINDS:
        raise ValueError(f"client kind must be one of {KINDS}, got {kind!r}")
    config: dict[str, Any] = dict(DEFAULTS[kind])
    origin: dict[str, str] = {}
    for key, value in worker.items():
        if is_connection_key(key) and value is not None:
            config[key], origin[key] = value, key
    prefix = f"{kind}."
    for key, value in worker.items():
        if key.startswith(prefix) and len(key) > len(prefix) and value is not None:
            config[key[len(prefix) :]], origin[key[len(prefix) :]] = value, key
    if connector:
        override = f"{kind}.override."
        overrides = {
            k[len(override) :]: v
            for k, v in connector.items()
            if k.startswith(override) and len(k) > len(override) and v is not None
        }
        _check_override_policy(kind, worker, overrides)
        for key, value in overrides.items():
            config[key], origin[key] = value, f"{override}{key}"
    config.setdefault("logger", logger or kafka_logger(kind))
    # ${provider:path:key} variables (KIP-297) are resolved here, where the client is built, so
    # that only the config topic's placeholders are ever stored, answered or logged.
    return ClientConfig(kind, resolve_config(config, worker), origin)


def admin_principal_producer_config(
    worker: Mapping[str, Any], connector: Mapping[str, Any]
) -> dict[str, Any]:
    """A producer that logs in as the connector's admin principal, to fence its zombies (KIP-618:
    the admin principal does it). The cluster is the producer's (where the tasks' transactional ids
    live); when the producer writes to another cluster and no `admin.override.*` says how to log in
    there, it is the producer's principal too."""
    producer = dict(client_config("producer", worker, connector))
    admin = client_config("admin", worker, connector)
    admin_overridden = any(
        is_connection_key(k.removeprefix("admin.override."))
        for k in connector
        if k.startswith("admin.override.")
    )
    if producer.get("bootstrap.servers") != admin.get("bootstrap.servers") and not admin_overridden:
        # The producer writes to another cluster and no admin settings say how to log in there:
        # the tasks' transactional ids live on the producer's cluster, so fence as the producer.
        return producer
    for key in [k for k in producer if is_connection_key(k)]:
        del producer[key]
    producer.update({k: v for k, v in admin.items() if is_connection_key(k)})
    return producer


def prefixed_client_config(
    kind: ClientKind,
    settings: Mapping[str, Any],
    prefix: str,
    *,
    exclude: Collection[str] = (),
    logger: logging.Logger | None = None,
) -> ClientConfig:
    """A `kind` client for another cluster, configured only by `settings` keys under `prefix`.

    A connector that talks to a second cluster (the mirror sink's `target.cluster.*`) must not
    inherit the worker's connection settings or principal, so only `DEFAULTS` apply besides its own
    keys; each key's origin is the prefixed name the user wrote, so `validate()` names it. Keys in
    `exclude` are the connector's own settings under the same prefix (`source.cluster.alias`).
    """
    config: dict[str, Any] = dict(DEFAULTS[kind])
    origin: dict[str, str] = {}
    for key, value in settings.items():
        if key.startswith(prefix) and len(key) > len(prefix) and value is not None and key not in exclude:
            config[key[len(prefix) :]], origin[key[len(prefix) :]] = value, key
    config.setdefault("logger", logger or kafka_logger(kind))
    return ClientConfig(kind, config, origin)


def forced(
    config: C,
    key: str,
    value: Any,
    why: str,
    *,
    origin: Mapping[str, str] | None = None,
    logger: logging.Logger | None = None,
) -> C:
    """Set `config[key] = value`, warning when that throws away a different value the user set.

    KIP-618 requires e.g. `transactional.id` and the offsets consumer's `isolation.level` to be the
    runtime's, and that a user value be "ignored with a warning" rather than silently or fatally.
    The warning names the user's setting from `origin` (default: `config.origin` of a
    `ClientConfig`). Returns `config` (mutated) so calls can be chained or assigned.
    """
    origins = origin if origin is not None else getattr(config, "origin", {})
    if key in config and not _same_value(config[key], value):
        where = origins.get(key, key)
        (logger or log).warning(
            "Ignoring %s=%r: %s, so %s is set to %r by eosconnect.", where, config[key], why, key, value
        )
    config[key] = value
    own_origin = getattr(config, "origin", None)
    if isinstance(own_origin, dict):
        own_origin.pop(key, None)  # the value is the runtime's now
    return config


def _same_value(a: Any, b: Any) -> bool:
    def norm(v: Any) -> str:
        return str(v).strip().lower()

    return norm(a) == norm(b)


# ----------------------------------------------------------------------------------------- validation


def _construct(kind: ClientKind, config: Mapping[str, Any]) -> None:
    """Build (and drop) a client without contacting any broker; librdkafka raises on bad settings."""
    probe = {k: v for k, v in config.items() if k not in ("bootstrap.servers", "logger")}
    probe["log_level"] = 0
    if kind == "producer":
        Producer(probe).flush(0)
    elif kind == "consumer":
        probe.setdefault("group.id", "eosconnect-config-check")
        Consumer(probe).close()
    else:
        AdminClient(probe)


def _probe(kind: ClientKind, config: Mapping[str, Any]) -> str | None:
    try:
        _construct(kind, config)
    except (KafkaException, ValueError, TypeError) as exc:
        return _reason(exc)
    return None


def _reason(exc: BaseException) -> str:
    arg = exc.args[0] if exc.args else exc
    text = arg.str() if hasattr(arg, "str") else str(arg)
    return text.removeprefix("Failed to create consumer: ").removeprefix("Failed to create producer: ")


def _fix(key: str, reason: str) -> str:
    if key in JAVA_ONLY_HINTS:
        return JAVA_ONLY_HINTS[key]
    if "No such configuration property" in reason:
        return (
            "remove it, or use the librdkafka name of the setting "
            "(https://github.com/confluentinc/librdkafka/blob/master/CONFIGURATION.md)"
        )
    if "Invalid value" in reason:
        return "give it a value librdkafka accepts (see its CONFIGURATION.md for the allowed values)"
    return "change or remove it"


def validate_client_config(kind: ClientKind, config: Mapping[str, Any], origin: Mapping[str, str]) -> None:
    """Raise `ClientConfigError` if librdkafka refuses `config` for a `kind` client.

    The client is constructed without `bootstrap.servers`, so nothing connects. librdkafka stops at
    the first problem and names it in its own terms (aliases by their canonical name, e.g. `linger.ms`
    as `queue.buffering.max.ms`), so each problem is attributed to the keys its message names, or
    else to the keys whose removal makes it go away; then those keys are set aside and the rest is
    checked again, so one call reports every problem. `origin` maps config keys to the setting the
    user wrote; keys without an origin are the runtime's own.
    """
    remaining = {k: v for k, v in config.items() if k not in ("bootstrap.servers", "logger")}
    errors: dict[str, list[str]] = {}
    while (reason := _probe(kind, remaining)) is not None:
        culprits = _culprits(kind, remaining, reason)
        if not culprits:
            errors.setdefault("<client settings>", []).append(
                f"librdkafka refuses the {kind} settings: {reason}"
            )
            break
        for key in culprits:
            if len(culprits) == 1:
                problem = f"{reason}; {_fix(key, reason)}"
            else:
                together = ", ".join(origin.get(k, k) for k in culprits)
                problem = f"librdkafka refuses {together} together: {reason}; change one of them"
            errors.setdefault(origin.get(key, key), []).append(problem)
            remaining.pop(key)
    if errors:
        raise ClientConfigError(errors=errors)


def _culprits(kind: ClientKind, config: Mapping[str, Any], reason: str) -> list[str]:
    named = [k for k in config if re.search(rf"(?<![\w.]){re.escape(k)}(?![\w.])", reason)]
    if named:
        return named
    return [k for k in config if _probe(kind, {x: v for x, v in config.items() if x != k}) != reason]
