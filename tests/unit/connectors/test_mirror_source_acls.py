"""MirrorSource declares its ACL rows (`required_acls`), so `eosconnect connectors acls <name>` lists
what its principals need: KIP-618's exactly-once rows for the copies (not for the source topics its
`topics` names), the admin's Create/Describe on what it creates, the offset syncs, and the source
cluster's rows for the source principal, each with the cluster it must be granted on."""

from __future__ import annotations

from eosconnect.storage.acls import connector_acls

WORKER = {
    "bootstrap.servers": "here:9093",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "worker",
    "sasl.password": "w",
    "group.id": "g",
    "offset.storage.topic": "g-offsets",
    "exactly.once.source.support": "enabled",
}
CONFIG = {
    "connector.class": "MirrorSource",
    "name": "ms",
    "tasks.max": "2",
    "topics": "orders",
    "source.cluster.alias": "remote",
    "source.cluster.bootstrap.servers": "there:9093",
    "source.cluster.security.protocol": "SASL_SSL",
    "source.cluster.sasl.mechanism": "SCRAM-SHA-512",
    "source.cluster.sasl.username": "remote-reader",
    "source.cluster.sasl.password": "r",
    "producer.override.sasl.username": "ms-producer",
    "producer.override.sasl.password": "p",
    "admin.override.sasl.username": "ms-admin",
    "admin.override.sasl.password": "a",
}


def test_mirror_source_lists_its_rows_on_both_clusters():
    rows = {
        (a.principal, a.operation, a.resource_type, a.resource_name, a.cluster)
        for a in connector_acls(WORKER, "ms", CONFIG)
    }
    producer, admin, worker, remote = "User:ms-producer", "User:ms-admin", "User:worker", "User:remote-reader"
    syncs = "mm2-offset-syncs.remote.internal"
    tids = ["g-ms-0", "g-ms-1"]
    assert rows == {
        (producer, "Write", "Topic", "remote.orders", ""),
        *((producer, op, "TransactionalId", tid, "") for tid in tids for op in ("Write", "Describe")),
        (producer, "Write", "Topic", "g-offsets", ""),
        (worker, "Read", "Topic", "g-offsets", ""),
        *((admin, op, "TransactionalId", tid, "") for tid in tids for op in ("Write", "Describe")),
        (admin, "Create", "Topic", "remote.orders", ""),
        (admin, "Describe", "Topic", "remote.orders", ""),
        (producer, "Write", "Topic", syncs, ""),
        (admin, "Create", "Topic", syncs, ""),
        (admin, "Describe", "Topic", syncs, ""),
        (remote, "Read", "Topic", "orders", "there:9093"),
        (remote, "DescribeConfigs", "Topic", "orders", "there:9093"),
        (remote, "Describe", "Group", "eosconnect-mirror-source-ms", "there:9093"),
    }
    # The source topic is read on the other cluster, never written here.
    assert (producer, "Write", "Topic", "orders", "") not in rows
