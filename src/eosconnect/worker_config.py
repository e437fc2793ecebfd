"""The worker's own settings (`worker.properties`): `WorkerConfig` and its definition.

Every layer reads them: the Kafka-backed stores (storage/: topic names, group id, exactly-once
support), the task loops (runtime/), the herder (cluster/) and the REST layer. So they live here, at
the package root next to `api/` (whose `ConfigDef` they use and nothing else), below all of those
layers, and any of them may import this module without importing upwards (docs/architecture.md,
docs/architecture.md). The connectors' own framework settings (`tasks.max`, `transaction.boundary`,
`errors.tolerance`, ...) are a runtime concern and stay in runtime/config.py.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.validators import NonEmptyString, Range, ValidString

__all__ = [
    "WORKER_CONFIG_DEF",
    "ExactlyOnceSourceSupport",
    "SettingNote",
    "WorkerConfig",
    "close_match",
    "missing_required_near_misses",
    "unknown_worker_settings",
]


class ExactlyOnceSourceSupport(StrEnum):
    """Worker setting `exactly.once.source.support` (KIP-618's rolling-upgrade states)."""

    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"


WORKER_CONFIG_DEF = (
    ConfigDef()
    .define(
        "bootstrap.servers",
        ConfigType.LIST,
        importance=Importance.HIGH,
        documentation="Kafka cluster holding the worker's internal topics.",
    )
    .define(
        "group.id",
        ConfigType.STRING,
        "eosconnect",
        Importance.HIGH,
        "Names the cluster of workers; transactional ids start with it.",
        NonEmptyString(),
    )
    .define(
        "offset.storage.topic",
        ConfigType.STRING,
        "connect-offsets",
        Importance.HIGH,
        "The worker's global offsets topic.",
        NonEmptyString(),
    )
    .define(
        "offset.storage.partitions",
        ConfigType.INT,
        25,
        Importance.LOW,
        "Partitions of the offsets topic when the worker creates it.",
        Range.at_least(1),
    )
    .define(
        "offset.storage.replication.factor",
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of the offsets topic (-1: the broker default).",
        Range.at_least(-1),
    )
    .define(
        "config.storage.topic",
        ConfigType.STRING,
        "connect-configs",
        Importance.HIGH,
        "The config topic.",
        NonEmptyString(),
    )
    .define(
        "config.storage.replication.factor",
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of the config topic (-1: the broker default).",
        Range.at_least(-1),
    )
    .define(
        "status.storage.topic",
        ConfigType.STRING,
        "connect-status",
        Importance.HIGH,
        "The status topic.",
        NonEmptyString(),
    )
    .define(
        "status.storage.partitions",
        ConfigType.INT,
        5,
        Importance.LOW,
        "Partitions of the status topic when the worker creates it.",
        Range.at_least(1),
    )
    .define(
        "status.storage.replication.factor",
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of the status topic (-1: the broker default).",
        Range.at_least(-1),
    )
    .define(
        "exactly.once.source.support",
        ConfigType.STRING,
        "disabled",
        Importance.HIGH,
        "disabled, preparing (rolling upgrade step) or enabled.",
        ValidString.in_(*[s.value for s in ExactlyOnceSourceSupport], case_sensitive=False),
    )
    .define(
        "offset.flush.interval.ms",
        ConfigType.LONG,
        60_000,
        Importance.LOW,
        "How often at-least-once tasks commit offsets; default interval of interval boundaries.",
        Range.at_least(1),
    )
    .define(
        "task.shutdown.graceful.timeout.ms",
        ConfigType.LONG,
        5_000,
        Importance.LOW,
        "How long a task may take to stop before it is cancelled.",
        Range.at_least(0),
    )
    .define(
        "task.heartbeat.timeout.ms",
        ConfigType.LONG,
        5_000,
        Importance.LOW,
        "A task not heard from for this long is no longer shown RUNNING (its executor was lost, or it "
        "waits for a free Spark task slot or its next attempt); tasks report every 0.5 s.",
        Range.at_least(1000),
    )
    .define(
        "scheduled.rebalance.max.delay.ms",
        ConfigType.LONG,
        60_000,
        Importance.LOW,
        "How long a leader that lost its group membership (its group coordinator died or could not "
        "be reached) keeps its tasks running while it rejoins, instead of stopping and restarting "
        "every task. If another worker is elected meanwhile, that worker fences these tasks before "
        "it starts its own, so exactly once holds either way. 0 stops them at once. Kafka Connect "
        "uses this setting for the same purpose, with a default of 300000.",
        Range.at_least(0),
    )
    .define(
        "plugin.path",
        ConfigType.LIST,
        "",
        Importance.LOW,
        "Directories (each importable as a sys.path entry) and .zip/.whl/.egg files holding connector "
        "code. Classes load only from eosconnect's built-ins, installed packages' eosconnect entry "
        "points, these entries and PYTHONPATH; on a Spark cluster they are shipped to the executors.",
    )
)


@dataclass(frozen=True)
class WorkerConfig:
    bootstrap_servers: str
    group_id: str
    offset_storage_topic: str
    exactly_once_source_support: ExactlyOnceSourceSupport
    offset_flush_interval_ms: int
    task_shutdown_graceful_timeout_ms: int
    originals: Mapping[str, str] = field(repr=False)
    values: Mapping[str, Any] = field(repr=False)
    #: `plugin.path`: where connector code lives besides installed packages (shipped to executors).
    plugin_path: tuple[str, ...] = ()
    task_heartbeat_timeout_ms: int = 5_000

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> WorkerConfig:
        values = WORKER_CONFIG_DEF.parse(props)
        return cls(
            bootstrap_servers=",".join(values["bootstrap.servers"]),
            group_id=values["group.id"],
            offset_storage_topic=values["offset.storage.topic"],
            exactly_once_source_support=ExactlyOnceSourceSupport(
                values["exactly.once.source.support"].lower()
            ),
            offset_flush_interval_ms=values["offset.flush.interval.ms"],
            task_shutdown_graceful_timeout_ms=values["task.shutdown.graceful.timeout.ms"],
            originals={k: str(v) for k, v in props.items()},
            values=values,
            plugin_path=tuple(str(p) for p in values["plugin.path"] if str(p).strip()),
            task_heartbeat_timeout_ms=values["task.heartbeat.timeout.ms"],
        )

    @property
    def exactly_once_enabled(self) -> bool:
        return self.exactly_once_source_support is ExactlyOnceSourceSupport.ENABLED


#: Worker settings read outside WORKER_CONFIG_DEF: the REST listener (rest/server.py,
#: distributed.py), the clients' security protocol, the file and override policies, eosconnect's own.
OTHER_WORKER_SETTINGS = frozenset(
    {
        "listeners",
        "rest.port",
        "rest.advertised.host.name",
        "rest.advertised.port",
        "rest.advertised.listener",
        "rest.basic.auth.users",
        "rest.ssl.certfile",
        "rest.ssl.keyfile",
        "rest.ssl.keyfile.password",
        "rest.ssl.ca.certfile",
        "rest.ssl.client.auth",
        "security.protocol",
        "transactional.id",
        "file.allowed.dirs",
        "database.allowed.hosts",
        "connector.client.config.override.policy",
        "connector.client.config.override.allowlist",
        "config.providers",
        "eosconnect.tasks.max.limit",
        "eosconnect.zombie.cancel.timeout.ms",
        "eosconnect.tasks.per.slot",
        "eosconnect.relaunch.min.attempt.ms",
        "eosconnect.ship.environment",
    }
)
#: Prefixes of settings that go elsewhere: the worker's Kafka clients (`producer.*`, `consumer.*`,
#: `admin.*`, and the connection settings every client inherits), the SparkSession (`spark.*`), the
#: REST listener's TLS in Kafka Connect's spelling (`listeners.https.ssl.*`).
WORKER_SETTING_PREFIXES = (
    "producer.",
    "consumer.",
    "admin.",
    "sasl.",
    "ssl.",
    "spark.",
    "listeners.https.",
    "config.providers.",
)
#: Kafka Connect worker settings eosconnect has no use for, with why where it matters.
KAFKA_CONNECT_ONLY: dict[str, str] = {
    "key.converter": "set key.converter on each connector (default JsonConverter, schemas.enable=true)",
    "value.converter": "set value.converter on each connector (default JsonConverter, schemas.enable=true)",
    "header.converter": "header values pass through as bytes",
    "rest.extension.classes": "Java REST extensions do not exist here",
    "metric.reporters": "metrics are served at GET /metrics (Prometheus)",
    "plugin.discovery": "plugins are found on plugin.path and through entry points",
}
KAFKA_CONNECT_ONLY_PREFIXES = ("key.converter.", "value.converter.", "header.converter.")
#: Kafka Connect's worker-wide converter settings that say what a connector without its own gets
#: here anyway (Kafka's quickstart config/connect-standalone.properties sets exactly these): no
#: warning, since they have their effect.
KAFKA_CONNECT_DEFAULT_CONVERTERS = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "true",
    "value.converter.schemas.enable": "true",
}
KAFKA_CONNECT_IGNORED = frozenset(
    {
        "client.dns.lookup",
        "client.id",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "rebalance.timeout.ms",
        "worker.sync.timeout.ms",
        "worker.unsync.backoff.ms",
        "connect.protocol",
        "offset.flush.timeout.ms",
        "offset.storage.file.filename",
        "inter.worker.key.generation.algorithm",
        "inter.worker.key.size",
        "inter.worker.key.ttl.ms",
        "inter.worker.signature.algorithm",
        "inter.worker.verification.algorithms",
        "access.control.allow.origin",
        "access.control.allow.methods",
        "admin.listeners",
        "response.http.headers.config",
        "topic.creation.enable",
        "topic.tracking.enable",
        "topic.tracking.allow.reset",
        "auto.include.jmx.reporter",
        "metrics.sample.window.ms",
        "metrics.num.samples",
        "metrics.recording.level",
        "metadata.max.age.ms",
        "receive.buffer.bytes",
        "send.buffer.bytes",
        "reconnect.backoff.ms",
        "reconnect.backoff.max.ms",
        "retry.backoff.ms",
        "retry.backoff.max.ms",
        "request.timeout.ms",
        "connections.max.idle.ms",
        "socket.connection.setup.timeout.ms",
        "socket.connection.setup.timeout.max.ms",
        "rest.host.name",
    }
)


@dataclass(frozen=True)
class SettingNote:
    """A worker setting that will have no effect: unknown (with the nearest known name, if any),
    or Kafka Connect's but without a use in eosconnect (with why)."""

    name: str
    suggestion: str | None = None
    kafka_connect_only: str | None = None

    def message(self) -> str:
        if self.kafka_connect_only is not None:
            why = f": {self.kafka_connect_only}" if self.kafka_connect_only else ""
            return f"The configuration '{self.name}' is a Kafka Connect setting eosconnect does not use{why}."
        hint = f"; did you mean '{self.suggestion}'?" if self.suggestion else "."
        return f"The configuration '{self.name}' was supplied but isn't a known config{hint}"


def known_worker_settings() -> list[str]:
    """Every exact worker setting name eosconnect reads."""
    return sorted({*WORKER_CONFIG_DEF.names(), *OTHER_WORKER_SETTINGS})


def close_match(name: str, candidates: Iterable[str]) -> str | None:
    """The candidate `name` most likely misspells (difflib ratio >= 0.85), or None."""
    matches = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.85)
    return matches[0] if matches else None


def _kafka_connect_reason(name: str) -> str | None:
    if name in KAFKA_CONNECT_ONLY:
        return KAFKA_CONNECT_ONLY[name]
    prefix = next((p for p in KAFKA_CONNECT_ONLY_PREFIXES if name.startswith(p)), None)
    if prefix is not None:
        return KAFKA_CONNECT_ONLY[prefix.rstrip(".")]
    return "" if name in KAFKA_CONNECT_IGNORED else None


def _default_converter(name: str, props: Mapping[str, str]) -> bool:
    """Whether `name` is one of `KAFKA_CONNECT_DEFAULT_CONVERTERS`, set as there, with its converter
    (for `*.schemas.enable`) the default one too."""
    if str(props.get(name, "")).strip().lower() != KAFKA_CONNECT_DEFAULT_CONVERTERS.get(name, "").lower():
        return False
    converter = name.split(".", 2)[0] + ".converter"
    return (
        name == converter
        or str(props.get(converter, KAFKA_CONNECT_DEFAULT_CONVERTERS[converter])).strip()
        == (KAFKA_CONNECT_DEFAULT_CONVERTERS[converter])
    )


def unknown_worker_settings(props: Mapping[str, str]) -> list[SettingNote]:
    """The settings of a worker.properties that will have no effect, in file order (Kafka Connect
    logs "was supplied but isn't a known config" for the same)."""
    known = set(known_worker_settings())
    notes = []
    for name in props:
        if name in known or _default_converter(name, props):
            continue
        reason = _kafka_connect_reason(name)  # first: Kafka Connect's admin.listeners is no client setting
        if reason is not None:
            notes.append(SettingNote(name, kafka_connect_only=reason))
        elif not name.startswith(WORKER_SETTING_PREFIXES):
            notes.append(SettingNote(name, suggestion=close_match(name, known)))
    return notes


def missing_required_near_misses(props: Mapping[str, str]) -> dict[str, str]:
    """Required worker settings that are absent while a near miss of theirs is set
    (`bootstrap.server` for `bootstrap.servers`): required name -> the name in the file."""
    known = set(known_worker_settings())
    found = {}
    for key in WORKER_CONFIG_DEF:
        if key.required and key.name not in props:
            near = close_match(key.name, [p for p in props if p not in known])
            if near is not None:
                found[key.name] = near
    return found


#: Worker setting: connector tasks per Spark task slot (1: every task is a Spark task of its own;
#: cluster/packing.py packs them onto slot hosts above 1). Default 4 (docs/architecture.md, "Task
#: groups": why 4, and what happens on each fault).
TASKS_PER_SLOT = "eosconnect.tasks.per.slot"
DEFAULT_TASKS_PER_SLOT = 4


#: Worker setting: when Spark gives up on a task (slot host) whose attempts lived at least this long
#: on average, its connector tasks run again in a new Spark job instead of ending FAILED: Spark's
#: attempt budget (`spark.task.maxFailures`, the F of `local[N,F]`) is for the whole life of a
#: long-running task, so a Python worker lost now and then over months would otherwise fail its tasks
#: for good, where Kafka Connect reassigns a dead worker's tasks every time. 0: never (FAILED).
RELAUNCH_MIN_ATTEMPT = "eosconnect.relaunch.min.attempt.ms"
DEFAULT_RELAUNCH_MIN_ATTEMPT_MS = 60_000


#: Worker setting: how long a replaced generation's (or a drained slot host's) Spark job may run on
#: after its tasks were told to stop before the job is cancelled (docs/architecture.md).
ZOMBIE_CANCEL_TIMEOUT = "eosconnect.zombie.cancel.timeout.ms"
DEFAULT_ZOMBIE_CANCEL_TIMEOUT_MS = 60_000


def _whole_number(worker_props: Mapping[str, str], key: str, default: int, least: int, meaning: str) -> int:
    """Worker setting `key`, a whole number of at least `least`; the error names the setting, the
    bound and what the bound means (`meaning`)."""
    raw = str(worker_props.get(key, default)).strip()
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(
            f"{key}={raw!r} is not a whole number; set it to {least} or more ({meaning})"
        ) from None
    if value < least:
        raise ValueError(f"{key}={value} must be at least {least} ({meaning})")
    return value


def relaunch_min_attempt_s(worker_props: Mapping[str, str]) -> float:
    """`eosconnect.relaunch.min.attempt.ms` in seconds."""
    meaning = (
        f"milliseconds, default {DEFAULT_RELAUNCH_MIN_ATTEMPT_MS}; 0: tasks Spark gave up on stay FAILED"
    )
    return (
        _whole_number(worker_props, RELAUNCH_MIN_ATTEMPT, DEFAULT_RELAUNCH_MIN_ATTEMPT_MS, 0, meaning) / 1000
    )


def zombie_cancel_timeout_s(worker_props: Mapping[str, str]) -> float:
    """`eosconnect.zombie.cancel.timeout.ms` in seconds."""
    meaning = f"milliseconds, default {DEFAULT_ZOMBIE_CANCEL_TIMEOUT_MS}"
    return (
        _whole_number(worker_props, ZOMBIE_CANCEL_TIMEOUT, DEFAULT_ZOMBIE_CANCEL_TIMEOUT_MS, 0, meaning)
        / 1000
    )


def task_heartbeat_timeout_s(worker_props: Mapping[str, str]) -> float:
    """`task.heartbeat.timeout.ms` in seconds, as an executor reads it from the worker's settings."""
    return (
        _whole_number(worker_props, "task.heartbeat.timeout.ms", 5_000, 0, "milliseconds, default 5000")
        / 1000
    )


def tasks_per_slot(worker_props: Mapping[str, str]) -> int:
    return _whole_number(
        worker_props, TASKS_PER_SLOT, DEFAULT_TASKS_PER_SLOT, 1, "1: a Spark task slot per task"
    )
