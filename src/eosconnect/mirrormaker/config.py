"""An mm2.properties file, read as MirrorMaker 2 reads it, turned into workers and connector configs.

MM2's layout (MirrorMakerConfig): `clusters = A, B`; per cluster `A.bootstrap.servers` and other
client settings (`A.security.protocol`, `A.consumer.*`, `A.producer.*`, `A.admin.*`) and worker
settings (`B.exactly.once.source.support`, `B.offset.flush.interval.ms`, ...); per flow
`A->B.enabled = true` and any connector setting (`A->B.topics`, ...), which otherwise comes from the
top level. KIP-656 adds `connector.type` (source: MirrorSource, MM2's way; sink: MirrorSink) and
`transaction.producer` (exactly once for the sink type).

`plan()` gives one worker per target cluster (its internal topics on that cluster, as MM2's
herders have) running, for each enabled flow into it, the mirror, MirrorCheckpoint and
MirrorHeartbeat. Every property is either honoured or rejected with the reason and the fix; none
is silently dropped. Client settings are librdkafka's (Java-only ones, such as JKS trust stores,
are rejected by name with the librdkafka equivalent to use).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from eosconnect.api.errors import ConfigException
from eosconnect.plugins.config_providers import resolve_config, unresolvable_variables
from eosconnect.storage.clients import ClientConfigError, ClientKind, validate_client_config
from eosconnect.worker_config import WORKER_CONFIG_DEF, close_match

__all__ = ["Flow", "MirrorMakerConfigError", "MirrorMakerPlan", "TargetPlan", "plan"]

#: Connector settings accepted at the top level and per flow (`A->B.<name>`), as MM2 names them.
CONNECTOR_SETTINGS = frozenset(
    {
        "enabled",
        "topics",
        "topics.exclude",
        "groups",
        "groups.exclude",
        "replication.policy.class",
        "replication.policy.separator",
        "replication.factor",
        "tasks.max",
        "emit.checkpoints.enabled",
        "emit.checkpoints.interval.seconds",
        "sync.group.offsets.enabled",
        "sync.group.offsets.interval.seconds",
        "emit.heartbeats.enabled",
        "emit.heartbeats.interval.seconds",
        "refresh.topics.enabled",
        "refresh.topics.interval.seconds",
        "refresh.groups.enabled",
        "refresh.groups.interval.seconds",
        "sync.topic.configs.enabled",
        "sync.topic.acls.enabled",
        "config.properties.exclude",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
        "offset-syncs.topic.replication.factor",
        "offset-syncs.topic.location",
        "emit.offset-syncs.enabled",
        "offset.lag.max",
        "consumer.poll.timeout.ms",
        "connector.type",
        "transaction.producer",
        "transaction.commit.interval.ms",
        "transaction.boundary",
        "transaction.boundary.interval.ms",
        "topic.filter.class",
        "group.filter.class",
        "config.property.filter.class",
        "log.truncation.policy",
    }
)
#: Settings MM2 has whose only value we can honour, with why.
ONLY_VALUE = {
    "sync.topic.acls.enabled": ("false", "eosconnect does not copy ACLs; set it to false"),
    "offset-syncs.topic.location": (
        "target",
        "offset syncs are written in the target cluster's transaction that copies the records (that is "
        "what makes translation exact); remove the setting or set it to target",
    ),
    "topic.filter.class": (
        "org.apache.kafka.connect.mirror.DefaultTopicFilter",
        "use topics / topics.exclude",
    ),
    "group.filter.class": (
        "org.apache.kafka.connect.mirror.DefaultGroupFilter",
        "use groups / groups.exclude",
    ),
    "config.property.filter.class": (
        "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
        "use config.properties.exclude",
    ),
}
CONNECTOR_TYPES = ("source", "sink")
#: Connector client settings MM2 accepts as `<side>.<client>.<setting>` (top level or per flow).
CLIENT_PREFIXES: dict[str, tuple[str, ClientKind]] = {
    "source.consumer.": ("source", "consumer"),
    "source.admin.": ("source", "admin"),
    "target.producer.": ("target", "producer"),
    "target.consumer.": ("target", "consumer"),
    "target.admin.": ("target", "admin"),
}
#: Worker settings (top level or per target cluster): ours, plus REST and Spark.
WORKER_SETTINGS = frozenset(WORKER_CONFIG_DEF.names()) - {"bootstrap.servers"}
WORKER_PREFIXES = (
    "rest.",
    "spark.",
    "listeners",
    "admin.listeners",
    "plugin.path",
    "task.",
    "worker.",
    # KIP-297 at the top level, as MirrorMaker 2 declares them: every worker gets them and resolves
    # `${provider:path:key}` where a client is built, so the config topics keep the variables.
    "config.providers",
)
CONVERTERS_OK = ("org.apache.kafka.connect.converters.ByteArrayConverter", "ByteArrayConverter")
#: MM2 top-level settings of its own.
TOP_LEVEL_OWN = frozenset({"clusters", "dedicated.mode.enable.internal.rest"})
DEFAULT_TOPICS_EXCLUDE = r".*[\-\.]internal,.*\.replica,__.*"
INTERNAL_TOPICS = r"heartbeats"


Report = Callable[[str, str], None]


class MirrorMakerConfigError(ConfigException):
    """The mm2.properties file has settings we cannot honour; `errors` names each with the fix."""


@dataclass(frozen=True, order=True)
class Flow:
    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


@dataclass
class TargetPlan:
    """One embedded worker: its properties and the connectors it runs (name -> config)."""

    alias: str
    worker_props: dict[str, str]
    connectors: dict[str, dict[str, str]] = field(default_factory=dict)
    #: What the worker logs at start-up: settings that run but cannot do all MM2 would do.
    warnings: list[str] = field(default_factory=list)


@dataclass
class MirrorMakerPlan:
    clusters: list[str]
    flows: list[Flow]
    targets: dict[str, TargetPlan]


def _split_list(value: str) -> list[str]:
    return [item.strip() for item in value.split(",") if item.strip()]


def _true(value: str | None, default: bool) -> bool:
    return default if value is None else value.strip().lower() == "true"


def topics_regex(topics: str, exclude: str, target_alias: str, separator: str) -> str:
    """MM2's `topics` and `topics.exclude` (comma-separated regular expressions) as one regex for
    `topics.regex`, also leaving out topics that came from the target cluster (no cycles)."""
    include = "|".join(f"(?:{p})" for p in _split_list(topics)) or "(?!)"
    excluded = [*_split_list(exclude), f"{re.escape(target_alias + separator)}.*"]
    return f"(?!(?:{'|'.join(excluded)})$)(?:{include})"


def plan(props: Mapping[str, str], only: Iterable[str] | None = None) -> MirrorMakerPlan:
    """The workers and connectors for `props` (an mm2.properties), limited to the target clusters
    `only` (MM2's `--clusters`). Raises `MirrorMakerConfigError` naming every bad property."""
    errors: dict[str, list[str]] = {}

    def fail(name: str, problem: str) -> None:
        if problem not in errors.setdefault(name, []):
            errors[name].append(problem)

    clusters = _split_list(props.get("clusters", ""))
    if not clusters:
        raise MirrorMakerConfigError(errors={"clusters": ["list the cluster aliases, e.g. clusters = A, B"]})
    top: dict[str, str] = {}
    per_cluster: dict[str, dict[str, str]] = {c: {} for c in clusters}
    per_flow: dict[Flow, dict[str, str]] = {}
    for key, value in props.items():
        value = value.strip()
        if key in TOP_LEVEL_OWN:
            continue
        if "->" in key:
            pair = next(
                (Flow(a, b) for a in clusters for b in clusters if a != b and key.startswith(f"{a}->{b}.")),
                None,
            )
            if pair is None:
                fail(key, f"not <source>-><target>.<setting> for two of the clusters {', '.join(clusters)}")
                continue
            per_flow.setdefault(pair, {})[key[len(str(pair)) + 1 :]] = value
            continue
        alias = next((c for c in sorted(clusters, key=len, reverse=True) if key.startswith(c + ".")), None)
        if alias is not None:
            per_cluster[alias][key[len(alias) + 1 :]] = value
        else:
            top[key] = value
    if only is not None:
        unknown = [c for c in only if c not in clusters]
        if unknown:
            fail("--clusters", f"{', '.join(unknown)} not in clusters = {', '.join(clusters)}")
    for name in top:
        _check_top_level(name, top[name], fail)
    for flow, settings in per_flow.items():
        for name, value in settings.items():
            _check_connector_setting(f"{flow}.{name}", name, value, fail)
    for alias in clusters:
        if "bootstrap.servers" not in per_cluster[alias]:
            fail(f"{alias}.bootstrap.servers", f"every cluster needs {alias}.bootstrap.servers")
    flows = sorted(
        f for f, s in per_flow.items() if _true(s.get("enabled", top.get("enabled")), default=False)
    )
    selected = [c for c in clusters if only is None or c in only]
    targets: dict[str, TargetPlan] = {}
    for alias in selected:
        into = [f for f in flows if f.target == alias]
        if not into:
            continue
        targets[alias] = _target_plan(alias, into, top, per_cluster, per_flow, fail)
    for alias, settings in per_cluster.items():
        for kind in ("consumer", "producer", "admin"):
            _check_client(alias, kind, settings, fail, top)
    if errors:
        raise MirrorMakerConfigError(errors=errors)
    return MirrorMakerPlan(clusters, flows, targets)


def _check_top_level(name: str, value: str, report: Report) -> None:
    if name in CONNECTOR_SETTINGS or name.startswith(tuple(CLIENT_PREFIXES)):
        _check_connector_setting(name, name, value, report)
    elif name in WORKER_SETTINGS or name.startswith(WORKER_PREFIXES):
        pass
    elif name.startswith(("key.converter", "value.converter", "header.converter")):
        if value not in CONVERTERS_OK:
            report(
                name, "mirrors copy bytes as they are: only ByteArrayConverter (MM2's default) is possible"
            )
    elif name.startswith(("security.", "ssl.", "sasl.")):
        pass  # client settings for every cluster: checked per cluster below
    else:
        near = close_match(name, [*CONNECTOR_SETTINGS, *WORKER_SETTINGS, *TOP_LEVEL_OWN])
        report(
            name,
            "not a MirrorMaker 2 setting eosconnect knows"
            + (f"; did you mean {near}?" if near else "")
            + " (per-cluster settings are <alias>.<setting>, per-flow settings <source>-><target>.<setting>)",
        )


def _check_connector_setting(where: str, name: str, value: str, report: Report) -> None:
    if name.startswith(tuple(CLIENT_PREFIXES)):
        return  # checked with the connector's clients
    if name not in CONNECTOR_SETTINGS:
        near = close_match(name, CONNECTOR_SETTINGS)
        hint = f"; did you mean {near}?" if near else ""
        report(where, f"{name} is not a MirrorMaker 2 connector setting eosconnect knows{hint}")
        return
    if name in ONLY_VALUE and value != ONLY_VALUE[name][0]:
        report(where, ONLY_VALUE[name][1])
    if name == "connector.type" and value not in CONNECTOR_TYPES:
        report(where, "connector.type is source (MirrorSource, MM2's) or sink (MirrorSink, KIP-656)")


def _check_client(
    alias: str, kind: ClientKind, settings: Mapping[str, str], fail: Report, top: Mapping[str, str]
) -> None:
    """A cluster's client settings as they will be used: variables resolved by the top-level
    `config.providers` (one that cannot be is named with why, its value never)."""
    config, origin = _client_settings(alias, kind, settings)
    unresolved = unresolvable_variables(config, top)
    for key, problems in unresolved.items():
        for problem in problems:
            fail(origin.get(key, key), problem)
    if unresolved:
        return
    config = resolve_config(config, top)
    try:
        validate_client_config(kind, config, origin)
    except ClientConfigError as exc:
        for name, problems in (exc.errors or {}).items():
            for problem in problems:
                fail(name, problem)


def _client_settings(
    alias: str, kind: str, settings: Mapping[str, str]
) -> tuple[dict[str, str], dict[str, str]]:
    """A cluster's `kind` client: its common client settings, then `<alias>.<kind>.*` (MM2's order)."""
    config: dict[str, str] = {}
    origin: dict[str, str] = {}
    for key, value in settings.items():
        if key.startswith(("consumer.", "producer.", "admin.")) or _is_worker_setting(key):
            continue
        config[key], origin[key] = value, f"{alias}.{key}"
    prefix = f"{kind}."
    for key, value in settings.items():
        if key.startswith(prefix):
            config[key[len(prefix) :]], origin[key[len(prefix) :]] = value, f"{alias}.{key}"
    return config, origin


def _is_worker_setting(key: str) -> bool:
    return key in WORKER_SETTINGS or key.startswith(WORKER_PREFIXES) or key in TOP_LEVEL_OWN


_CLIENT_KINDS = ("consumer.", "producer.", "admin.")


def _target_plan(
    alias: str,
    flows: list[Flow],
    top: Mapping[str, str],
    per_cluster: Mapping[str, Mapping[str, str]],
    per_flow: Mapping[Flow, Mapping[str, str]],
    report: Report,
) -> TargetPlan:
    """The embedded worker of target cluster `alias` and the connectors of every flow into it."""
    cluster = per_cluster[alias]
    worker = _target_worker(alias, top, cluster)
    plan = TargetPlan(alias, worker)
    needs_eos = False
    syncs_checks: list[tuple[Flow, str, dict[str, str]]] = []
    for flow in flows:
        settings = {
            k: v for k, v in top.items() if k in CONNECTOR_SETTINGS or k.startswith(tuple(CLIENT_PREFIXES))
        }
        settings.update(per_flow.get(flow, {}))
        kind = settings.get("connector.type", "source")
        common = {
            "source.cluster.alias": flow.source,
            "replication.policy.class": settings.get("replication.policy.class", "default"),
            "replication.policy.separator": settings.get("replication.policy.separator", "."),
        }
        source_client = {k: v for k, v in per_cluster[flow.source].items() if not _is_worker_setting(k)}
        mirror = _mirror_connector(flow, settings, common)
        consumer_settings = _source_consumer(settings, source_client)
        if kind == "sink":
            transactional = _true(settings.get("transaction.producer"), default=False)
            needs_eos = needs_eos or transactional
            _as_mirror_sink(mirror, flow, settings, consumer_settings, cluster, transactional, report)
        else:
            _as_mirror_source(mirror, flow, settings, consumer_settings, report)
        # A connector.type other than source or sink is reported by the caller's checks.
        connector_kind = "MirrorSourceConnector" if kind == "source" else "MirrorSinkConnector"
        plan.connectors[f"{connector_kind}-{flow.source}-{flow.target}"] = mirror
        if _true(settings.get("emit.checkpoints.enabled"), True) or _true(
            settings.get("sync.group.offsets.enabled"), False
        ):
            checkpoint = _checkpoint_connector(flow, settings, common, source_client)
            plan.connectors[f"MirrorCheckpointConnector-{flow.source}-{flow.target}"] = checkpoint
        syncs_checks.append((flow, kind, settings))
        if _true(settings.get("emit.heartbeats.enabled"), True):
            heartbeat = {
                "connector.class": "MirrorHeartbeat",
                "source.cluster.alias": flow.source,
                "target.cluster.alias": flow.target,
            }
            for key in ("emit.heartbeats.interval.seconds", "heartbeats.topic.replication.factor"):
                if key in settings:
                    heartbeat[key] = settings[key]
            plan.connectors[f"MirrorHeartbeatConnector-{flow.source}-{flow.target}"] = heartbeat
    if worker.get("exactly.once.source.support", "disabled") == "enabled":
        for name, config in plan.connectors.items():
            if config["connector.class"] != "MirrorSink":
                config.setdefault(
                    "exactly.once.support", "required" if name.startswith("MirrorSource") else "requested"
                )
    if needs_eos:
        if worker.get("exactly.once.source.support", "enabled") != "enabled":
            report(
                f"{alias}.exactly.once.source.support",
                "transaction.producer=true needs exactly.once.source.support=enabled on the worker of the "
                "target cluster (zombie fencing); enable it or set transaction.producer=false",
            )
        worker["exactly.once.source.support"] = "enabled"
    for flow, kind, settings in syncs_checks:
        _check_offset_syncs(flow, kind, settings, per_flow.get(flow, {}), worker, plan, report)
    return plan


def _target_worker(alias: str, top: Mapping[str, str], cluster: Mapping[str, str]) -> dict[str, str]:
    """The embedded worker's properties: its own internal topics and group, the top-level worker
    and security settings, then every setting of the target cluster."""
    worker: dict[str, str] = {
        "group.id": f"eosconnect-mm2-{alias}",
        "config.storage.topic": f"eosconnect-mm2-configs.{alias}.internal",
        "offset.storage.topic": f"eosconnect-mm2-offsets.{alias}.internal",
        "status.storage.topic": f"eosconnect-mm2-status.{alias}.internal",
        "listeners": "http://127.0.0.1:0",  # loopback only, for the tasks' heartbeats, unless set
    }
    for key, value in top.items():  # top-level worker settings, then the cluster's own
        if _is_worker_setting(key) or key.startswith(("security.", "ssl.", "sasl.")):
            worker[key] = value
    # The cluster's client settings (bootstrap.servers, security, client-kind prefixes) as they are.
    worker.update(cluster)
    return worker


def _mirror_connector(flow: Flow, settings: Mapping[str, str], common: Mapping[str, str]) -> dict[str, str]:
    """What the mirror connector of `flow` has whichever its type: the topics and MM2's settings
    under their names here."""
    topics = topics_regex(
        settings.get("topics", ".*"),
        settings.get("topics.exclude", DEFAULT_TOPICS_EXCLUDE),
        flow.target,
        common["replication.policy.separator"],
    )
    mirror: dict[str, str] = {**common, "topics.regex": topics, "tasks.max": settings.get("tasks.max", "1")}
    for ours, theirs in (
        ("target.topic.replication.factor", "replication.factor"),
        ("refresh.topics.enabled", "refresh.topics.enabled"),
        ("refresh.topics.interval.seconds", "refresh.topics.interval.seconds"),
        ("sync.topic.configs.enabled", "sync.topic.configs.enabled"),
        ("config.properties.exclude", "config.properties.exclude"),
        ("emit.offset-syncs.enabled", "emit.offset-syncs.enabled"),
        ("offset-syncs.topic.replication.factor", "offset-syncs.topic.replication.factor"),
        ("log.truncation.policy", "log.truncation.policy"),
    ):
        if theirs in settings:
            mirror[ours] = settings[theirs]
    return mirror


def _source_consumer(settings: Mapping[str, str], source_client: Mapping[str, str]) -> dict[str, str]:
    """The source cluster's consumer settings of a flow: the cluster's common and `consumer.`
    settings, then the flow's `source.consumer.` ones."""
    return {
        **{k: v for k, v in source_client.items() if not k.startswith(_CLIENT_KINDS)},
        **{k[len("consumer.") :]: v for k, v in source_client.items() if k.startswith("consumer.")},
        **{k[len("source.consumer.") :]: v for k, v in settings.items() if k.startswith("source.consumer.")},
    }


def _as_mirror_sink(
    mirror: dict[str, str],
    flow: Flow,
    settings: Mapping[str, str],
    consumer_settings: Mapping[str, str],
    cluster: Mapping[str, str],
    transactional: bool,
    report: Report,
) -> None:
    """`mirror` as a MirrorSink: read_committed source consumer overrides, the target cluster's
    producer settings, and its own transactions if `transaction.producer=true`."""
    isolation = consumer_settings.get("isolation.level", "read_committed")
    if isolation != "read_committed":
        report(
            f"{flow}.source.consumer.isolation.level",
            "the sink type reads the source with read_committed only (records of aborted "
            "transactions must not be copied); remove the setting or use connector.type=source",
        )
    mirror.update(
        {
            "connector.class": "MirrorSink",
            "transaction.producer": "true" if transactional else "false",
            **{f"consumer.override.{k}": v for k, v in consumer_settings.items() if k != "isolation.level"},
        }
    )
    for key, value in cluster.items():
        if not _is_worker_setting(key) and not key.startswith(_CLIENT_KINDS):
            mirror[f"target.cluster.{key}"] = value
    for key, value in cluster.items():
        if key.startswith("producer."):
            mirror[f"target.cluster.{key[len('producer.') :]}"] = value
    for key, value in settings.items():
        if key.startswith("target.producer."):
            mirror[f"target.cluster.{key[len('target.producer.') :]}"] = value
    if "transaction.commit.interval.ms" in settings:
        mirror["transaction.commit.interval.ms"] = settings["transaction.commit.interval.ms"]


def _as_mirror_source(
    mirror: dict[str, str],
    flow: Flow,
    settings: Mapping[str, str],
    consumer_settings: Mapping[str, str],
    report: Report,
) -> None:
    """`mirror` as a MirrorSource: the source consumer's settings, its poll timeout and
    transaction boundary, and the target producer's settings as overrides."""
    if "transaction.producer" in settings:
        report(
            f"{flow}.transaction.producer",
            "transaction.producer belongs to connector.type=sink; the source type is exactly "
            "once with exactly.once.source.support=enabled",
        )
    mirror.update(
        {
            "connector.class": "MirrorSource",
            **{f"source.cluster.{k}": v for k, v in consumer_settings.items()},
        }
    )
    if "consumer.poll.timeout.ms" in settings:
        mirror["poll.timeout.ms"] = settings["consumer.poll.timeout.ms"]
    for key in ("transaction.boundary", "transaction.boundary.interval.ms"):
        if key in settings:
            mirror[key] = settings[key]
    for key, value in settings.items():
        if key.startswith("target.producer."):
            mirror[f"producer.override.{key[len('target.producer.') :]}"] = value


def _checkpoint_connector(
    flow: Flow, settings: Mapping[str, str], common: Mapping[str, str], source_client: Mapping[str, str]
) -> dict[str, str]:
    """The MirrorCheckpoint of `flow`, reading the source cluster's groups with its admin settings."""
    admin_settings = {
        **{k: v for k, v in source_client.items() if not k.startswith(_CLIENT_KINDS)},
        **{k[len("admin.") :]: v for k, v in source_client.items() if k.startswith("admin.")},
        **{k[len("source.admin.") :]: v for k, v in settings.items() if k.startswith("source.admin.")},
    }
    checkpoint = {
        **common,
        "connector.class": "MirrorCheckpoint",
        "target.cluster.alias": flow.target,
        **{f"source.cluster.{k}": v for k, v in admin_settings.items()},
    }
    for key in (
        "groups",
        "groups.exclude",
        "emit.checkpoints.enabled",
        "emit.checkpoints.interval.seconds",
        "sync.group.offsets.enabled",
        "sync.group.offsets.interval.seconds",
        "refresh.groups.enabled",
        "refresh.groups.interval.seconds",
        "checkpoints.topic.replication.factor",
    ):
        if key in settings:
            checkpoint[key] = settings[key]
    return checkpoint


def _check_offset_syncs(
    flow: Flow,
    kind: str,
    settings: Mapping[str, str],
    own: Mapping[str, str],
    worker: Mapping[str, str],
    plan: TargetPlan,
    report: Report,
) -> None:
    """Checkpoints need offset syncs, which only exactly-once mirrors write (in the transaction
    that copies the records). A flow that asks for checkpoints or synced group offsets outright but
    will write no syncs is refused, naming the missing setting; with checkpoints merely left at
    MM2's default (on), it runs and says loudly that it writes none."""
    if not _true(settings.get("emit.offset-syncs.enabled"), True):
        fix = f"remove {_written(flow, 'emit.offset-syncs.enabled', own)}=false"
    elif kind == "sink" and not _true(settings.get("transaction.producer"), False):
        fix = f"set {flow}.transaction.producer=true"
    elif kind == "source" and worker.get("exactly.once.source.support", "disabled").lower() != "enabled":
        fix = f"set {flow.target}.exactly.once.source.support=enabled"
    else:
        return
    why = (
        f"flow {flow} writes no offset syncs (only an exactly-once mirror writes them), so no group "
        "offset can be translated exactly"
    )
    asked = [
        name
        for name in ("sync.group.offsets.enabled", "emit.checkpoints.enabled", "emit.offset-syncs.enabled")
        if _true(settings.get(name), False)
    ]
    for name in asked:
        report(_written(flow, name, own), f"{why}: {fix}, or set {name}=false")
    if not asked and _true(settings.get("emit.checkpoints.enabled"), True):
        plan.warnings.append(
            f"flow {flow} writes no offset syncs (only an exactly-once mirror writes them): "
            f"MirrorCheckpointConnector-{flow.source}-{flow.target} will emit no checkpoints, and a "
            f"consumer group cannot fail over from {flow.source} to {flow.target} with translated "
            f"offsets. To have them, {fix}; to silence this, set emit.checkpoints.enabled=false"
        )


def _written(flow: Flow, name: str, own: Mapping[str, str]) -> str:
    """`name` as the file sets it for `flow`: per flow, or at the top level."""
    return f"{flow}.{name}" if name in own else name
