"""Whether the worker's principals hold the ACLs `worker_acls` lists, asked before the worker starts.

Without them a worker would hang (a consumer of its config topic that may not read retries for
ever) or fail deep inside with a traceback. The broker can say what a principal may do on a topic
or a group without any side effect: KIP-430's authorized operations, in the answer to
DescribeTopics and DescribeGroups. So for each internal topic and the group, the operations the
worker needs are compared with those the broker reports; the answer names each missing ACL with
its `kafka-acls.sh` command (KIP-618 asks for remediation instructions).

An internal topic that does not exist yet is created by the worker, which needs Create: that is
asked with a CreateTopics request that only validates (`validate_only`), which the broker
authorizes and answers without creating anything.

What cannot be asked this way is left to the moment it is used, where the failure names it too:
the leader's TransactionalId (asking would fence the current leader's producer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.storage.acls import Acl, principal_of, worker_acls
from eosconnect.storage.clients import ClientKind, client_config

__all__ = ["missing_worker_acls"]

_CLIENT_OF_OPERATION: dict[str, ClientKind] = {"Read": "consumer", "Write": "producer"}
_REFUSED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED)
_CREATE_REFUSED = (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)


def missing_worker_acls(worker: Mapping[str, Any], timeout: float = 15.0) -> list[Acl]:
    """The rows of `worker_acls(worker)` on topics and the group that the broker says the worker's
    principals lack (empty: all there, or nothing the broker would tell)."""
    missing: list[Acl] = []
    rows = [a for a in worker_acls(worker) if a.resource_type in ("Topic", "Group")]
    by_client: dict[ClientKind, list[Acl]] = {}
    for row in rows:
        by_client.setdefault(_CLIENT_OF_OPERATION.get(row.operation, "consumer"), []).append(row)
    for kind, wanted in by_client.items():
        admin = AdminClient({**_connection(client_config(kind, worker)), "log_level": 0})
        topics = sorted({a.resource_name for a in wanted if a.resource_type == "Topic"})
        groups = sorted({a.resource_name for a in wanted if a.resource_type == "Group"})
        allowed: dict[tuple[str, str], set[str] | None] = {}
        if topics:
            futures = admin.describe_topics(
                TopicCollection(topics), include_authorized_operations=True, request_timeout=timeout
            )
            for topic, future in futures.items():
                allowed[("Topic", topic)] = _operations(future, timeout)
        if groups:
            futures = admin.describe_consumer_groups(
                groups, include_authorized_operations=True, request_timeout=timeout
            )
            for group, future in futures.items():
                allowed[("Group", group)] = _operations(future, timeout)
        for row in wanted:
            ops = allowed.get((row.resource_type, row.resource_name))
            if ops is not None and row.operation.upper() not in ops:
                missing.append(row)
    return missing + _missing_create(worker, rows, timeout)


def _missing_create(worker: Mapping[str, Any], rows: list[Acl], timeout: float) -> list[Acl]:
    """Create on each internal topic that does not exist yet and that the worker's admin principal
    may not create (a CreateTopics that only validates: nothing is made)."""
    topics = sorted({a.resource_name for a in rows if a.resource_type == "Topic"})
    admin_config = _connection(client_config("admin", worker))
    admin = AdminClient({**admin_config, "log_level": 0})
    absent = [t for t in topics if _absent(admin, t, timeout)]
    if not absent:
        return []
    futures = admin.create_topics(
        [NewTopic(t, 1, -1) for t in absent], validate_only=True, request_timeout=timeout
    )
    principal = principal_of(admin_config)
    missing = []
    for topic, future in futures.items():
        try:
            future.result(timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if isinstance(err, KafkaError) and err.code() in _CREATE_REFUSED:
                missing.append(
                    Acl(
                        principal,
                        "Create",
                        "Topic",
                        topic,
                        role="worker admin (the topic does not exist yet)",
                    )
                )
    return missing


def _absent(admin: AdminClient, topic: str, timeout: float) -> bool:
    """Whether the broker says `topic` does not exist (not: refused, or no answer)."""
    future = admin.describe_topics(TopicCollection([topic]), request_timeout=timeout)[topic]
    try:
        future.result(timeout)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        return isinstance(err, KafkaError) and err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    return False


def _operations(future: Any, timeout: float) -> set[str] | None:
    """The operations the broker says the principal may do; an empty set when it refuses even to
    describe (then neither Read nor Write is granted: both imply Describe); None when it cannot
    tell (a topic that does not exist yet, a broker without an authorizer, no answer)."""
    try:
        description = future.result(timeout)
    except KafkaException as exc:
        err = exc.args[0] if exc.args else None
        if isinstance(err, KafkaError) and err.code() in _REFUSED:
            return set()
        return None
    operations = getattr(description, "authorized_operations", None)
    if not operations:
        return None
    return {str(getattr(op, "name", op)).upper() for op in operations}


def _connection(config: Mapping[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in config.items()
        if k in ("bootstrap.servers", "security.protocol", "client.id") or k.startswith(("sasl.", "ssl."))
    }
