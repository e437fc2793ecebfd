"""The chaos soak on secured brokers: `EOSCONNECT_SOAK_SECURITY=sasl_ssl` (`make soak-secured`).

The same soak (tests/soak/test_chaos.py) on three SASL_SSL brokers (SCRAM-SHA-512, TLS with a CA
made for the run, StandardAuthorizer with `allow.everyone.if.no.acl.found=false`), where every
client logs in as a principal of its own holding exactly KIP-618's ACLs:

- the worker: its internal topics (made by the super user, replicated like the plaintext soak's)
  and group, and the leader's TransactionalId `connect-cluster-<group.id>`;
- the source connector's producer (`producer.override.sasl.*`: its tasks' TransactionalIds, the
  worker's offsets topic, its data topic) and admin principal (`admin.override.sasl.*`: the same
  TransactionalIds, to fence zombies), for as many tasks as the soak ever runs;
- the mirror sink's consumer (`consumer.override.sasl.*`) and its target producer (`target.cluster.*`),
  with the rows `connectors acls` lists for it (checked against KIP-618 in test_secured_sinks.py);
- the referee (the live followers and `verify`), read_committed with Read on the two topics only.

In plaintext (the default) `soak_principals` answers the super user's settings everywhere and
grants nothing, so the soak reads the same either way.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field

import pytest

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.security import Acl, SecurityMode
from eosconnect.storage.acls import connector_acls
from support.chaos import create_replicated_topic
from support.secured import internal_topics, kip618_source_acls, kip618_worker_acls, overrides

#: Modes the soak can run in: the connector principals log in by SASL user and password.
SOAK_SECURITY_MODES: tuple[SecurityMode, ...] = ("plaintext", "sasl_ssl", "sasl_plaintext")
_MODE = os.environ.get("EOSCONNECT_SOAK_SECURITY", "plaintext").strip().lower()
SECURITY = next((mode for mode in SOAK_SECURITY_MODES if mode == _MODE), None)
if SECURITY is None:
    raise ValueError(f"EOSCONNECT_SOAK_SECURITY={_MODE!r}: use one of {', '.join(SOAK_SECURITY_MODES)}")

#: Connector clients may override their SASL user and password, and the source its transaction
#: timeout (the soak's zombies outlive it), nothing else (Kafka 4.2's `Allowlist`, KIP-1188).
ALLOWLIST = {
    "connector.client.config.override.policy": "Allowlist",
    "connector.client.config.override.allowlist": "sasl.username,sasl.password,transaction.timeout.ms",
}


@pytest.fixture(scope="module")
def kafka3_security() -> SecurityMode:
    """Overrides tests/conftest.py's: the soak's brokers are as EOSCONNECT_SOAK_SECURITY says."""
    return SECURITY


@dataclass
class SoakPrincipals:
    """Who the soak's clients log in as, and the settings that say so."""

    cluster: LocalKafkaCluster
    #: The super user: topics, replication checks.
    admin: dict[str, str]
    #: The referee (followers and verify): Read on the soak's two topics only.
    reader: dict[str, str]
    #: Worker settings on top of the soak's (its principal, group and internal topics).
    worker: dict[str, str] = field(default_factory=dict)
    #: Settings on top of the source's and the mirror's configs.
    source: dict[str, str] = field(default_factory=dict)
    mirror: dict[str, str] = field(default_factory=dict)

    @property
    def secured(self) -> bool:
        return self.cluster.security.enabled

    def grant(
        self,
        source: tuple[str, dict[str, str]],
        mirror: tuple[str, dict[str, str]],
        max_tasks: int,
        read: tuple[str, ...],
    ) -> list[Acl]:
        """Grant the connectors' ACLs (the source's for `max_tasks` tasks, as many as any of its
        generations runs) and the referee's Read on the topics `read`; returns what was granted
        (nothing in plaintext)."""
        if not self.secured:
            return []
        (source_name, source_config), (mirror_name, mirror_config) = source, mirror
        group = self.worker["group.id"]
        acls = kip618_source_acls(
            group,
            source_name,
            max_tasks,
            source_config["topic"],
            producer=source_config["producer.override.sasl.username"],
            consumer=self.worker["sasl.username"],  # the worker's offsets topic: its consumer reads it
            admin=source_config["admin.override.sasl.username"],
        )
        # The mirror's rows, as `connectors acls` lists them; its "other" cluster is this one.
        acls += connector_acls(self.worker, mirror_name, mirror_config, sink=True)
        acls += [Acl(f"User:{self.reader['sasl.username']}", "Read", "Topic", topic) for topic in read]
        self.cluster.grant(acls)
        return acls


def soak_principals(cluster: LocalKafkaCluster) -> SoakPrincipals:
    """The principals (users made, worker ACLs granted, internal topics made by the super user) for
    `cluster`; in plaintext, the plain settings and nothing else."""
    admin = cluster.client_config()
    if not cluster.security.enabled:
        return SoakPrincipals(cluster, admin, admin)
    group = f"soak-{uuid.uuid4().hex[:6]}"
    topics = internal_topics(group)
    for topic in topics.values():  # a least-privilege worker has no Create: an administrator makes them
        create_replicated_topic(admin, topic, 1, compacted=True)
    # its login only: the soak's worker settings name the bootstrap servers already
    worker = {k: v for k, v in cluster.create_user(f"{group}-worker").items() if k != "bootstrap.servers"}
    cluster.grant(kip618_worker_acls(f"{group}-worker", group))
    users = {
        role: cluster.create_user(f"{group}-{role}")
        for role in ("source-producer", "source-admin", "mirror-consumer", "mirror-target", "reader")
    }
    target = {f"target.cluster.{k}": v for k, v in users["mirror-target"].items()}
    return SoakPrincipals(
        cluster,
        admin,
        users["reader"],
        worker={**worker, "group.id": group, **topics, **ALLOWLIST},
        source={
            **overrides("producer", users["source-producer"]),
            **overrides("admin", users["source-admin"]),
        },
        mirror={**overrides("consumer", users["mirror-consumer"]), **target},
    )
