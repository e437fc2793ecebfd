"""Helpers for the secured suite: internal topics made by the super user, a least-privilege worker,
and KIP-618's ACL tables written out by hand (so the tests check `required_acls`, not reuse it)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.security import Acl
from eosconnect.tools.worker_process import WorkerProcess
from support.workers import packing_settings


def internal_topics(group: str) -> dict[str, str]:
    return {
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
    }


def create_topics(
    cluster: LocalKafkaCluster, topics: dict[str, int], compacted: set[str] = frozenset()
) -> None:
    """As the super user: a least-privilege worker has no Create (an administrator makes them)."""
    admin = AdminClient({**cluster.client_config(), "log_level": 0})
    new = [
        NewTopic(t, n, 1, config={"cleanup.policy": "compact"} if t in compacted else {})
        for t, n in topics.items()
    ]
    for fut in admin.create_topics(new).values():
        fut.result(30)


def kip618_worker_acls(worker: str, group: str) -> list[Acl]:
    """The worker principal: its internal topics and group (what Kafka Connect's worker needs), and
    KIP-618's Write/Describe on TransactionalId connect-cluster-<group.id>."""
    topics = internal_topics(group).values()
    acls = [Acl(f"User:{worker}", op, "Topic", t) for t in topics for op in ("Read", "Write")]
    acls.append(Acl(f"User:{worker}", "Read", "Group", group))
    acls += [
        Acl(f"User:{worker}", op, "TransactionalId", f"connect-cluster-{group}")
        for op in ("Write", "Describe")
    ]
    return acls


def kip618_source_acls(
    group: str,
    connector: str,
    tasks: int,
    data: str,
    *,
    producer: str,
    consumer: str,
    admin: str,
    offsets: str | None = None,
) -> list[Acl]:
    """KIP-618's "Connector principal permissions" for an exactly-once source that uses the worker's
    offsets topic or, given `offsets`, its own offsets topic (made beforehand, so the admin principal
    needs Describe on it but not Create), plus Write on the topic its records go to."""
    own = offsets
    offsets = offsets or internal_topics(group)["offset.storage.topic"]
    tids = [f"{group}-{connector}-{t}" for t in range(tasks)]
    acls = [
        Acl(f"User:{producer}", op, "TransactionalId", tid) for tid in tids for op in ("Write", "Describe")
    ]
    acls += [
        Acl(f"User:{producer}", "Write", "Topic", offsets),
        Acl(f"User:{producer}", "Write", "Topic", data),
    ]
    acls.append(Acl(f"User:{consumer}", "Read", "Topic", offsets))
    acls += [Acl(f"User:{admin}", op, "TransactionalId", tid) for tid in tids for op in ("Write", "Describe")]
    if own:
        acls.append(Acl(f"User:{admin}", "Describe", "Topic", own))
    return acls


def worker_settings(worker_client: dict[str, str], group: str, **extra: str) -> dict[str, str]:
    return {
        **worker_client,
        "group.id": group,
        **internal_topics(group),
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "exactly.once.source.support": "enabled",
        "offset.flush.interval.ms": "500",
        "listeners": "http://127.0.0.1:0",
        "task.shutdown.graceful.timeout.ms": "3000",
        "spark.master": "local[6,4]",
        "spark.driver.memory": "768m",
        **packing_settings(),
        **extra,
    }


def start_worker(props: dict[str, str], workdir: Path) -> WorkerProcess:
    return WorkerProcess(props, workdir).start(timeout=240)  # Spark starts slowly on a loaded machine


def overrides(kind: str, client: dict[str, str]) -> dict[str, str]:
    """`<kind>.override.sasl.username/password`: a connector client logging in as another principal."""
    return {f"{kind}.override.{k}": v for k, v in client.items() if k in ("sasl.username", "sasl.password")}


@dataclass
class SecuredWorker:
    """A worker logged in as its own principal with only its KIP-618 ACLs (see `secured_worker`)."""

    cluster: LocalKafkaCluster
    worker: WorkerProcess
    group: str
    props: dict[str, str]
    secrets: Path


#: Connectors may override only their SASL user and password (Kafka 4.2's `Allowlist`, KIP-1188).
ALLOWLIST = {
    "connector.client.config.override.policy": "Allowlist",
    "connector.client.config.override.allowlist": "sasl.username,sasl.password",
}


def secured_worker(cluster: LocalKafkaCluster, workdir: Path, secrets: Path, **extra: str) -> SecuredWorker:
    """A worker as its own principal with only its KIP-618 ACLs, on internal topics the super user
    made, with a FileConfigProvider confined to `secrets`; `extra` worker settings on top."""
    group = f"sec-{uuid.uuid4().hex[:6]}"
    topics = internal_topics(group).values()
    create_topics(cluster, dict.fromkeys(topics, 1), set(topics))
    worker_client = cluster.create_user(f"{group}-worker")
    cluster.grant(kip618_worker_acls(f"{group}-worker", group))
    providers = {
        "config.providers": "file",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(secrets),
    }
    props = worker_settings(worker_client, group, **ALLOWLIST, **providers, **extra)
    return SecuredWorker(cluster, start_worker(props, workdir), group, props, secrets)
