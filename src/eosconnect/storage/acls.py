"""The Kafka ACLs the worker and each connector need, under the worker's current settings (KIP-618).

KIP-618 lists them by principal: the worker's producer (its transactional id
`connect-cluster-<group.id>`), and each source connector's producer (Write/Describe on its tasks'
transactional ids, Write on its offsets topic), consumer (Read on the offsets topic) and admin
principal (Write/Describe on the same transactional ids, to fence zombies; Describe/Create on a
connector-specific offsets topic). A principal is whoever the client settings log in as: the
connector's `<kind>.override.*` over the worker's `<kind>.*` over its top-level settings.

The same rows feed `eosconnect connectors acls <name>` (GET /connectors/<name>/acls) and the
remediation text of an authorization failure, so what the error says to grant is what the command
lists.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

from eosconnect.storage.clients import (
    ClientKind,
    admin_principal_producer_config,
    client_config,
    is_connection_key,
)
from eosconnect.storage.config_writers import leader_transactional_id
from eosconnect.storage.offsets import offsets_topic_for
from eosconnect.storage.transactional_ids import task_transactional_id

__all__ = [
    "Acl",
    "connector_acls",
    "kafka_acls_command",
    "leader_authorization_hint",
    "principal_of",
    "remediation",
    "sink_acls",
    "sink_connector_acls",
    "sink_task_authorization_hint",
    "source_acls",
    "worker_acls",
]

ResourceType = Literal["Topic", "Group", "TransactionalId", "Cluster"]
_RESOURCE_FLAG = {
    "Topic": "--topic",
    "Group": "--group",
    "TransactionalId": "--transactional-id",
    "Cluster": "--cluster",
}


@dataclass(frozen=True)
class Acl:
    """One ALLOW ACL: `principal` (User:name) may do `operation` on the resource."""

    principal: str
    operation: str  # Kafka's name: Read, Write, Describe, Create, DescribeConfigs
    resource_type: ResourceType
    resource_name: str
    pattern: Literal["LITERAL", "PREFIXED"] = "LITERAL"
    #: Which client needs it and why, in a few words.
    role: str = ""
    #: The cluster it lives on when not the worker's (a mirror's other cluster), as bootstrap servers.
    cluster: str = ""

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def principal_of(config: Mapping[str, Any]) -> str:
    """The principal a librdkafka config logs in as, as far as its settings tell.

    SASL: `User:<sasl.username>`. TLS client certificates: the broker maps the certificate's
    subject (by its `ssl.principal.mapping.rules`), which the settings alone cannot tell; without
    authentication the broker sees `User:ANONYMOUS`.
    """
    protocol = str(config.get("security.protocol") or "PLAINTEXT").upper()
    if protocol.startswith("SASL"):
        user = config.get("sasl.username")
        return f"User:{user}" if user else "User:<the SASL principal>"
    if protocol == "SSL" and config.get("ssl.certificate.location"):
        return f"User:<subject of {config['ssl.certificate.location']}>"
    return "User:ANONYMOUS"


def _principal(kind: ClientKind, worker: Mapping[str, Any], connector: Mapping[str, Any] | None) -> str:
    return principal_of(client_config(kind, worker, connector))


def _eos(worker: Mapping[str, Any]) -> str:
    return str(worker.get("exactly.once.source.support") or "disabled").strip().lower()


def worker_acls(worker: Mapping[str, Any]) -> list[Acl]:
    """What the worker's own principals need for its internal topics, group and (with exactly-once
    source support `preparing` or `enabled`) the leader's transactional id. Creating the internal
    topics needs Create besides, unless an administrator made them (then it is not needed)."""
    group = str(worker.get("group.id") or "connect-cluster")
    producer = _principal("producer", worker, None)
    consumer = _principal("consumer", worker, None)
    rows: list[Acl] = []
    for setting, default in (
        ("config.storage.topic", "connect-configs"),
        ("offset.storage.topic", "connect-offsets"),
        ("status.storage.topic", "connect-status"),
    ):
        topic = str(worker.get(setting) or default)
        rows.append(Acl(consumer, "Read", "Topic", topic, role=f"worker consumer ({setting})"))
        rows.append(Acl(producer, "Write", "Topic", topic, role=f"worker producer ({setting})"))
    rows.append(Acl(consumer, "Read", "Group", group, role="worker group membership (group.id)"))
    if _eos(worker) in ("preparing", "enabled"):
        tid = leader_transactional_id(group)
        for op in ("Write", "Describe"):
            rows.append(Acl(producer, op, "TransactionalId", tid, role="leader's config topic writer"))
    return rows


def connector_acls(
    worker: Mapping[str, Any], name: str, connector: Mapping[str, Any], *, sink: bool = False
) -> list[Acl]:
    """What connector `name`'s principals need under these worker settings (KIP-618's tables for
    an exactly-once source; a sink's consumer group and topics; a plain source's producer), as its
    connector class declares them (`required_acls`) or, by default, any connector's."""
    if sink:
        return sink_connector_acls(worker, name, connector)
    declared = _declared(name, connector, worker)
    return _unique(declared) if declared is not None else source_acls(worker, name, connector)


def _declared(name: str, connector: Mapping[str, Any], worker: Mapping[str, Any]) -> list[Acl] | None:
    """The rows the connector class declares (`required_acls`); None: the default rows apply."""
    from eosconnect.plugins.loading import resolve_connector_class

    try:
        cls = resolve_connector_class(str(connector.get("connector.class") or ""))
        declared: list[Acl] | None = getattr(cls(), "required_acls", lambda *_: None)(name, connector, worker)
    except Exception:  # an unloadable class fails elsewhere, visibly; the generic rows still apply
        return None
    return declared


def source_acls(
    worker: Mapping[str, Any], name: str, connector: Mapping[str, Any], topics: list[str] | None = None
) -> list[Acl]:
    """Any source connector's rows: its producer's Write on `topics` (default: those named in its
    `topic`/`topics` settings) and, with exactly-once source support enabled, KIP-618's rows."""
    group = str(worker.get("group.id") or "connect-cluster")
    producer = _principal("producer", worker, connector)
    consumer = _principal("consumer", worker, connector)
    admin = principal_of(admin_principal_producer_config(worker, connector))
    topics = _named_topics(connector) if topics is None else topics
    rows: list[Acl] = []
    for topic in topics or ["<each topic the connector writes>"]:
        rows.append(Acl(producer, "Write", "Topic", topic, role="source producer (records)"))
    if _eos(worker) != "enabled":
        return rows
    placement = offsets_topic_for(name, connector, worker)
    tasks = max(1, int(str(connector.get("tasks.max") or "1").strip() or 1))
    tids = [task_transactional_id(group, name, t) for t in range(tasks)]
    for tid in tids:
        for op in ("Write", "Describe"):
            rows.append(Acl(producer, op, "TransactionalId", tid, role="task's transactional producer"))
    rows.append(Acl(producer, "Write", "Topic", placement.topic, role="source offsets, in the transaction"))
    reader = consumer if placement.separate else _principal("consumer", worker, None)
    rows.append(Acl(reader, "Read", "Topic", placement.topic, role="offsets reader"))
    for tid in tids:
        for op in ("Write", "Describe"):
            rows.append(Acl(admin, op, "TransactionalId", tid, role="zombie fencing (admin principal)"))
    if placement.separate:
        rows.append(
            Acl(admin, "Describe", "Topic", placement.topic, role="connector offsets topic end offsets")
        )
        rows.append(
            Acl(admin, "Create", "Topic", placement.topic, role="only while the offsets topic is missing")
        )
    return _unique(rows)


def sink_acls(worker: Mapping[str, Any], name: str, connector: Mapping[str, Any]) -> list[Acl]:
    """Any sink's consumer: Read on its topics and on its group `connect-<name>` (Kafka Connect's)."""
    consumer = _principal("consumer", worker, connector)
    rows = [
        Acl(consumer, "Read", "Topic", topic, role="sink consumer")
        for topic in _named_topics(connector) or ["<each topic in topics/topics.regex>"]
    ]
    rows.append(Acl(consumer, "Read", "Group", f"connect-{name}", role="sink consumer group"))
    return rows


def sink_connector_acls(worker: Mapping[str, Any], name: str, connector: Mapping[str, Any]) -> list[Acl]:
    """The sink's rows as its connector class says (`SinkConnector.required_acls`: a mirror sink adds
    its target cluster's); `sink_acls` when the class cannot be loaded."""
    declared = _declared(name, connector, worker)
    rows = sink_acls(worker, name, connector) if declared is None else declared
    return _unique(rows)


def _is_sink(connector: Mapping[str, Any]) -> bool:
    from eosconnect.plugins.loading import ConnectorType, connector_type, resolve_connector_class

    try:
        cls = resolve_connector_class(str(connector.get("connector.class") or ""))
    except Exception:
        return False
    return connector_type(cls) is ConnectorType.SINK


def _named_topics(connector: Mapping[str, Any]) -> list[str]:
    names: list[str] = []
    for key in ("topic", "topics"):
        names += [t.strip() for t in str(connector.get(key) or "").split(",") if t.strip()]
    return names


def _unique(rows: Iterable[Acl]) -> list[Acl]:
    seen: set[tuple[str, str, str, str, str]] = set()
    out = []
    for r in rows:
        key = (r.principal, r.operation, r.resource_type, r.resource_name, r.pattern)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


def kafka_acls_command(acl: Acl, bootstrap: str = "<bootstrap>") -> str:
    """The `kafka-acls.sh` command that grants `acl` (add `--command-config` for a secured admin)."""
    parts = [
        "kafka-acls.sh",
        "--bootstrap-server",
        bootstrap,
        "--add",
        "--allow-principal",
        acl.principal,
        "--operation",
        acl.operation,
    ]
    if acl.resource_type == "Cluster":
        parts.append("--cluster")
    else:
        parts += [_RESOURCE_FLAG[acl.resource_type], acl.resource_name]
    if acl.pattern != "LITERAL":
        parts += ["--resource-pattern-type", acl.pattern.lower()]
    return shlex.join(parts)


def _command(acl: Acl, bootstrap: str) -> str:
    return kafka_acls_command(acl, acl.cluster or bootstrap)


def remediation(acls: Iterable[Acl], bootstrap: str = "<bootstrap>") -> str:
    """ "<principal> needs <operation> on <type> '<name>' (<role>); grant it with: <command>" lines."""
    return "; ".join(
        f"{a.principal} needs {a.operation} on {a.resource_type} {a.resource_name!r} ({a.role}); grant it "
        f"with: {_command(a, bootstrap)}"
        for a in acls
    )


#: How Kafka (and librdkafka) say that an ACL of each resource type is missing.
_REFUSALS: dict[str, tuple[str, ...]] = {
    "TransactionalId": ("transactional_id_authorization_failed", "transactional id authorization failed"),
    "Topic": ("topic_authorization_failed", "topic authorization failed"),
    "Group": ("group_authorization_failed", "group authorization failed"),
    "Cluster": ("cluster_authorization_failed", "cluster authorization failed"),
}


def refused_resource_types(error_text: str) -> set[str]:
    """The resource types an error says the principal lacks an ACL on (empty: not an ACL error)."""
    text = error_text.lower()
    return {rtype for rtype, needles in _REFUSALS.items() if any(n in text for n in needles)}


def authorization_hint(error_text: str, acls: Iterable[Acl], bootstrap: str = "<bootstrap>") -> str | None:
    """If `error_text` is an authorization failure: the rows of `acls` it may be about, as
    "principal needs operation on type 'name'; grant it with: kafka-acls.sh ..." (KIP-618 asks
    for such remediation instructions); else None."""
    types = refused_resource_types(error_text)
    rows = [a for a in acls if a.resource_type in types]
    if not rows:
        return None
    return (
        f"Kafka refused an operation for lack of an ACL ({', '.join(sorted(types))}). This needs the "
        f"following ACLs; one of them is missing: {remediation(rows, bootstrap)}"
    )


def group_access_refusal(client: Mapping[str, Any], group: str, timeout: float = 15.0) -> str | None:
    """Why `client` may not read `group`'s offsets, if an ACL is the reason ("GROUP_AUTHORIZATION_FAILED:
    ..."); None when it may or the answer says something else. A consumer's `committed()` only times
    out then (librdkafka retries the coordinator lookup); the admin API's answer names the refusal."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
    from confluent_kafka.admin import AdminClient

    settings = {k: v for k, v in client.items() if is_connection_key(k) or k.startswith(("sasl.", "ssl."))}
    try:
        admin = AdminClient({**settings, "log_level": 0})
        request = [ConsumerGroupTopicPartitions(group)]
        admin.list_consumer_group_offsets(request, request_timeout=timeout)[group].result(timeout)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        text = f"{err.name()}: {err.str()}" if err is not None and hasattr(err, "name") else str(exc)
        return text if refused_resource_types(text) else None
    except Exception:
        return None
    return None


def task_authorization_hint(
    error_text: str, worker: Mapping[str, Any], connector: str, config: Mapping[str, Any], task: int
) -> str | None:
    """`authorization_hint` for a source task: its connector's rows, of its own transactional id.
    None when the leader's fencing failed: its answer names the admin principal's ACLs itself."""
    if "fenc" in error_text and "zombie" in error_text:
        return None
    try:
        rows = connector_acls(worker, connector, config)
    except Exception:  # a hint must never hide the failure it explains
        return None
    group = str(worker.get("group.id") or "connect-cluster")
    own = task_transactional_id(group, connector, task)
    rows = [r for r in rows if r.resource_type != "TransactionalId" or r.resource_name == own]
    rows = [r for r in rows if "fencing" not in r.role]  # the leader's fencing reports its own
    servers = str(client_config("producer", worker, config).get("bootstrap.servers") or "<bootstrap>")
    return authorization_hint(error_text, rows, servers)


def sink_task_authorization_hint(
    error_text: str, worker: Mapping[str, Any], connector: str, config: Mapping[str, Any]
) -> str | None:
    """`authorization_hint` for a failed sink task: its connector's rows (a mirror sink's target
    cluster's included), each with the cluster it must be granted on."""
    try:
        rows = sink_connector_acls(worker, connector, config)
        servers = str(client_config("consumer", worker, config).get("bootstrap.servers") or "<bootstrap>")
    except Exception:  # a hint must never hide the failure it explains
        return None
    return authorization_hint(error_text, rows, servers)


def fencing_authorization_hint(
    error_text: str, worker: Mapping[str, Any], connector: str, config: Mapping[str, Any]
) -> str | None:
    """`authorization_hint` for a failed fencing round: the admin principal's TransactionalId rows."""
    try:
        rows = [
            r for r in connector_acls(worker, connector, config, sink=_is_sink(config)) if "fencing" in r.role
        ]
        servers = str(
            admin_principal_producer_config(worker, config).get("bootstrap.servers") or "<bootstrap>"
        )
    except Exception:  # a hint must never hide the failure it explains
        return None
    return authorization_hint(error_text, rows, servers)


def leader_authorization_hint(error_text: str, worker: Mapping[str, Any]) -> str | None:
    """`authorization_hint` for the leader's config topic writer: the worker producer's rows on
    the TransactionalId `connect-cluster-<group.id>` (not checked at start: asking would fence the
    current leader)."""
    try:
        rows = [r for r in worker_acls(worker) if r.resource_type == "TransactionalId"]
        servers = str(client_config("producer", worker).get("bootstrap.servers") or "<bootstrap>")
    except Exception:  # a hint must never hide the failure it explains
        return None
    return authorization_hint(error_text, rows, servers)
