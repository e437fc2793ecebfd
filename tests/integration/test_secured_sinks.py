"""Sinks and mirrors on SASL_SSL brokers with an authorizer: each connector client logs in as its
own principal with exactly the ACLs `eosconnect connectors acls` lists, and a missing one fails the
task with the principal, the operation, the resource and the `kafka-acls.sh` command that grants it.

The session's `secured_kafka` is the worker's cluster; a second secured cluster (module scope,
`secured_target`; EOSCONNECT_TEST_SECURED_TARGET=<dir> reuses one started by `eosconnect kafka
start --security sasl_ssl --dir <dir>`) is the mirrors' other side, with other credentials.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.security import Acl
from eosconnect.storage.acls import connector_acls
from eosconnect.storage.topic_reader import read_to_end
from eosconnect.tools.mirror_maker_process import EosMirrorMakerProcess
from support.secured import SecuredWorker, create_topics, kip618_source_acls, overrides, secured_worker

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.secured]

PARTITIONS = 2
RECORDS = 200  # per partition


@pytest.fixture(scope="module")
def secured_target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    reuse = os.environ.get("EOSCONNECT_TEST_SECURED_TARGET")
    if reuse:
        yield LocalKafkaCluster.attach(reuse)
        return
    cluster = LocalKafkaCluster(
        tmp_path_factory.mktemp("target-sasl-ssl"), tie_to_parent=True, security="sasl_ssl"
    )
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def sw(secured_kafka: LocalKafkaCluster, tmp_path_factory) -> Iterator[SecuredWorker]:
    files = tmp_path_factory.mktemp("sink-files")
    worker = secured_worker(
        secured_kafka,
        tmp_path_factory.mktemp("secured-sink-worker"),
        tmp_path_factory.mktemp("secrets"),
        **{"file.allowed.dirs": str(files)},
    )
    worker.files = files  # type: ignore[attr-defined]
    yield worker
    worker.worker.stop()


def produce_sequences(client: dict[str, str], topic: str, count: int = RECORDS) -> None:
    """`count` records per partition, values {"p": partition, "seq": 0..count-1}, as `client`."""
    producer = Producer({**client, "enable.idempotence": True, "log_level": 0})
    for seq in range(count):
        for p in range(PARTITIONS):
            producer.produce(topic, json.dumps({"p": p, "seq": seq}).encode(), f"k{seq}".encode(), p)
    assert producer.flush(30) == 0


def assert_exactly_once(records: list, count: int = RECORDS) -> None:
    by_partition: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for r in records:
        value = json.loads(r.value)
        assert value["p"] == r.partition
        by_partition[r.partition].append(value["seq"])
    for p, seqs in by_partition.items():
        assert seqs == list(range(count)), f"partition {p}: duplicates, gaps or disorder ({len(seqs)})"


def rows(acls: list[Acl]) -> set[tuple[str, str, str, str, str]]:
    return {(a.principal, a.operation, a.resource_type, a.resource_name, a.cluster) for a in acls}


def grant_listed(sw: SecuredWorker, target: LocalKafkaCluster | None, acls: list[Acl]) -> None:
    """Grant each row on the cluster it names (the worker's when none)."""
    here = [a for a in acls if not a.cluster]
    there = [a for a in acls if a.cluster]
    sw.cluster.grant(here)
    if there:
        assert target is not None and {a.cluster for a in there} == {target.bootstrap_servers}
        target.grant(there)


def failure(sw: SecuredWorker, name: str) -> str | None:
    status = sw.worker.status(name)
    traces = [t.get("trace", "") for t in status["tasks"] if t["state"] == "FAILED"]
    if status["connector"]["state"] == "FAILED":
        traces.append(status["connector"].get("trace", ""))
    return "\n".join(traces) or None


# ============================================================================ a plain sink
def test_a_sink_consumes_as_its_own_principal_with_read_on_topic_and_group(sw: SecuredWorker, topic_name):
    """FileStreamSink, at least once: its consumer principal needs Read on the topic and on the group
    connect-<name>, nothing else; every record arrives."""
    name, data = "filesink", topic_name("data")
    create_topics(sw.cluster, {data: PARTITIONS})
    produce_sequences(sw.cluster.client_config(), data)
    consumer = sw.cluster.create_user(f"{sw.group}-{name}-consumer")
    out = sw.files / "copy.txt"  # type: ignore[attr-defined]
    config = {
        "connector.class": "FileStreamSink",
        "tasks.max": "1",
        "topics": data,
        "file": str(out),
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        **overrides("consumer", consumer),
    }
    needed = connector_acls(sw.props, name, config, sink=True)
    user = f"User:{consumer['sasl.username']}"
    assert rows(needed) == {
        (user, "Read", "Topic", data, ""),
        (user, "Read", "Group", f"connect-{name}", ""),
    }
    sw.cluster.grant(needed)
    assert sw.worker.create_connector(name, config).status_code == 201

    def copied() -> bool:
        if failure(sw, name):
            raise AssertionError(failure(sw, name))
        return out.exists() and len(out.read_text().splitlines()) >= RECORDS * PARTITIONS

    sw.worker.wait_for(copied, 90, "every record in the file")
    lines = out.read_text().splitlines()
    assert {json.dumps({"p": p, "seq": s}) for p in range(PARTITIONS) for s in range(RECORDS)} == {
        json.dumps(json.loads(line)) for line in lines
    }
    assert sw.worker.request("DELETE", f"/connectors/{name}").status_code == 204


# ============================================================================ MirrorSink, KIP-656
def _mirror_sink(sw: SecuredWorker, target: LocalKafkaCluster, name: str, data: str) -> tuple[dict, dict]:
    consumer = sw.cluster.create_user(f"{sw.group}-{name}-consumer")
    there = target.create_user(f"{sw.group}-{name}-target")
    passwords = sw.secrets / f"{name}.properties"
    passwords.write_text(f"target={there['sasl.password']}\nconsumer={consumer['sasl.password']}\n")
    config = {
        "connector.class": "MirrorSink",
        "tasks.max": "2",
        "topics": data,
        "source.cluster.alias": "src",
        "transaction.producer": "true",
        "transaction.commit.interval.ms": "1000",
        "consumer.override.sasl.username": consumer["sasl.username"],
        "consumer.override.sasl.password": f"${{file:{passwords}:consumer}}",
        **{f"target.cluster.{k}": v for k, v in there.items() if k != "sasl.password"},
        "target.cluster.sasl.password": f"${{file:{passwords}:target}}",
    }
    return config, {"consumer": consumer, "target": there}


def test_exactly_once_mirror_sink_with_exactly_its_acls(
    sw: SecuredWorker, secured_target: LocalKafkaCluster, topic_name
):
    """The source side as the connector's consumer principal, the target side as another principal
    of another cluster, both with passwords from a FileConfigProvider; read_committed on the target
    by a principal that has Read only, every record once."""
    name, data = "msink", topic_name("data")
    create_topics(sw.cluster, {data: PARTITIONS})
    produce_sequences(sw.cluster.client_config(), data)
    config, users = _mirror_sink(sw, secured_target, name, data)
    needed = connector_acls(sw.props, name, config, sink=True)
    consumer, there = (f"User:{users[k]['sasl.username']}" for k in ("consumer", "target"))
    t, copy = secured_target.bootstrap_servers, f"src.{data}"
    tids = [f"{sw.group}-{name}-{n}" for n in range(2)]
    syncs = "mm2-offset-syncs.src.internal"
    assert rows(needed) == {
        (consumer, "Read", "Topic", data, ""),
        (consumer, "Read", "Group", f"connect-{name}", ""),
        (consumer, "DescribeConfigs", "Topic", data, ""),
        (there, "Write", "Topic", copy, t),
        (there, "Create", "Topic", copy, t),
        *((there, op, "TransactionalId", tid, t) for tid in tids for op in ("Write", "Describe")),
        (there, "Read", "Group", f"connect-{name}", t),
        (there, "Read", "Topic", copy, t),
        (there, "Write", "Topic", syncs, t),
        (there, "Read", "Topic", syncs, t),
        (there, "Create", "Topic", syncs, t),
    }
    grant_listed(sw, secured_target, needed)
    reader = secured_target.create_user(f"{sw.group}-{name}-reader")
    secured_target.grant([Acl(f"User:{reader['sasl.username']}", "Read", "Topic", copy)])

    assert sw.worker.create_connector(name, config).status_code == 201

    def all_copied() -> bool:
        if failure(sw, name):
            raise AssertionError(failure(sw, name))
        try:
            return len(read_to_end(reader, copy, timeout=20)) >= RECORDS * PARTITIONS
        except Exception:
            return False

    sw.worker.wait_for(all_copied, 120, "every record on the target")
    assert_exactly_once(read_to_end(reader, copy, timeout=30))
    listed = sw.worker.request("GET", f"/connectors/{name}/acls").json()["commands"]
    assert (
        f"kafka-acls.sh --bootstrap-server {t} --add --allow-principal {there} --operation Read "
        f"--group connect-{name}" in listed
    )
    assert sw.worker.request("DELETE", f"/connectors/{name}").status_code == 204


@pytest.mark.long
def test_a_mirror_sink_without_read_on_its_target_group_fails_with_the_remedy(
    sw: SecuredWorker, secured_target: LocalKafkaCluster, topic_name
):
    """KIP-656 commits the consumed offsets in the target transaction (sendOffsetsToTransaction),
    which needs Read on the group connect-<name> on the target; without it the task fails saying so,
    and nothing is visible to read_committed on the target."""
    name, data = "msink-nogroup", topic_name("data")
    create_topics(sw.cluster, {data: PARTITIONS})
    produce_sequences(sw.cluster.client_config(), data, 20)
    config, users = _mirror_sink(sw, secured_target, name, data)
    there = f"User:{users['target']['sasl.username']}"
    missing = Acl(there, "Read", "Group", f"connect-{name}")
    needed = [
        a
        for a in connector_acls(sw.props, name, config, sink=True)
        if (a.principal, a.operation, a.resource_type, a.resource_name)
        != (there, "Read", "Group", missing.resource_name)
    ]
    grant_listed(sw, secured_target, needed)
    assert sw.worker.create_connector(name, config).status_code == 201
    try:
        trace = sw.worker.wait_for(lambda: failure(sw, name), 120, "the task FAILED without its group ACL")
        assert f"{there} needs Read on Group 'connect-{name}'" in trace, trace
        command = (
            f"kafka-acls.sh --bootstrap-server {secured_target.bootstrap_servers} --add --allow-principal "
            f"{there} --operation Read --group connect-{name}"
        )
        assert command in trace, trace
        assert users["target"]["sasl.password"] not in trace
        try:
            copied = read_to_end(secured_target.client_config(), f"src.{data}", timeout=20)
        except Exception:
            copied = []  # never created: nothing copied
        assert copied == [], "records of a transaction whose offsets could not be sent were committed"
    finally:
        sw.worker.request("DELETE", f"/connectors/{name}")


# ============================================================================ MirrorSource
def test_mirror_source_between_two_secured_clusters_exactly_once(
    sw: SecuredWorker, secured_target: LocalKafkaCluster, topic_name
):
    """The other cluster is the source here, read as its own principal (Read on the topic, Describe
    on the consumer's group name);
    the worker's cluster gets the copies through KIP-618's exactly-once source path."""
    name, data = "msource", topic_name("remote")
    create_topics(secured_target, {data: PARTITIONS})
    produce_sequences(secured_target.client_config(), data)
    remote = secured_target.create_user(f"{sw.group}-{name}-remote")
    secured_target.grant(
        [
            Acl(f"User:{remote['sasl.username']}", "Read", "Topic", data),
            Acl(f"User:{remote['sasl.username']}", "DescribeConfigs", "Topic", data),
            # The consumer never joins it, but librdkafka finds its coordinator (FindCoordinator).
            Acl(f"User:{remote['sasl.username']}", "Describe", "Group", f"eosconnect-mirror-source-{name}"),
        ]
    )
    users = {k: sw.cluster.create_user(f"{sw.group}-{name}-{k}") for k in ("producer", "consumer", "admin")}
    names = {k: u["sasl.username"] for k, u in users.items()}
    copy = f"remote.{data}"
    granted = kip618_source_acls(sw.group, name, 1, copy, **names)
    granted += [Acl(f"User:{names['admin']}", op, "Topic", copy) for op in ("Create", "Describe")] + [
        Acl(f"User:{names['producer']}", "Write", "Topic", "mm2-offset-syncs.remote.internal"),
        Acl(f"User:{names['admin']}", "Create", "Topic", "mm2-offset-syncs.remote.internal"),
        Acl(f"User:{names['admin']}", "Describe", "Topic", "mm2-offset-syncs.remote.internal"),
    ]
    sw.cluster.grant(granted)
    config = {
        "connector.class": "MirrorSource",
        "tasks.max": "1",
        "topics": data,
        "source.cluster.alias": "remote",
        "exactly.once.support": "required",
        **{f"source.cluster.{k}": v for k, v in remote.items()},
    }
    for users_kind, client in users.items():
        config.update(overrides(users_kind, client))
    reader = sw.cluster.create_user(f"{sw.group}-{name}-reader")
    sw.cluster.grant([Acl(f"User:{reader['sasl.username']}", "Read", "Topic", copy)])
    assert sw.worker.create_connector(name, config).status_code == 201

    def all_copied() -> bool:
        if failure(sw, name):
            raise AssertionError(failure(sw, name))
        try:
            return len(read_to_end(reader, copy, timeout=20)) >= RECORDS * PARTITIONS
        except Exception:
            return False

    sw.worker.wait_for(all_copied, 120, "every record copied")
    assert_exactly_once(read_to_end(reader, copy, timeout=30))
    assert sw.worker.request("DELETE", f"/connectors/{name}").status_code == 204


# ============================================================================ mirror-maker
def test_mirror_maker_with_per_cluster_security_and_config_providers(
    secured_kafka: LocalKafkaCluster, secured_target: LocalKafkaCluster, tmp_path: Path, topic_name
):
    """mm2.properties with both clusters' SASL_SSL settings, the passwords behind config providers
    declared at its top level (`${file:...}` and `${env:...}`, as Kafka's MirrorMaker resolves them),
    never written to the log."""
    data = topic_name("mm")
    create_topics(secured_kafka, {data: PARTITIONS})
    produce_sequences(secured_kafka.client_config(), data)
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "a.properties").write_text(f"password={secured_kafka.client_config()['sasl.password']}\n")
    env_name = f"EOSCONNECT_TEST_B_PASSWORD_{os.getpid()}"
    os.environ[env_name] = secured_target.client_config()["sasl.password"]
    props = {
        "clusters": "A, B",
        "A->B.enabled": "true",
        "topics": data,
        "config.providers": "file,env",
        "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
        "config.providers.file.param.allowed.paths": str(secrets),
        "config.providers.env.class": "org.apache.kafka.common.config.provider.EnvVarConfigProvider",
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "status.storage.partitions": "1",
        "offset.storage.partitions": "1",
        "spark.master": "local[4,4]",
        "spark.driver.memory": "768m",
        "task.shutdown.graceful.timeout.ms": "3000",
        "B.exactly.once.source.support": "enabled",
        "B.offset.flush.interval.ms": "1000",
        "B.group.id": f"eosconnect-mm2-B-{data[-6:]}",
    }
    for alias, cluster, password in (
        ("A", secured_kafka, f"${{file:{secrets / 'a.properties'}:password}}"),
        ("B", secured_target, f"${{env:{env_name}}}"),
    ):
        for key, value in cluster.client_config().items():
            props[f"{alias}.{key}"] = password if key == "sasl.password" else value
    mirror = EosMirrorMakerProcess(tmp_path / "mm", props, ["B"])
    try:
        mirror.start()
        reader = secured_target.client_config()

        def copied() -> bool:
            try:
                return len(read_to_end(reader, f"A.{data}", timeout=15)) >= RECORDS * PARTITIONS
            except Exception:
                return False

        from support.runtime_helpers import wait_until

        wait_until(copied, 120, "every record on B")
        assert_exactly_once(read_to_end(reader, f"A.{data}", timeout=30))
    finally:
        mirror.stop()
        os.environ.pop(env_name, None)
    log = mirror.log_path.read_text(errors="replace")
    for cluster in (secured_kafka, secured_target):
        assert cluster.client_config()["sasl.password"] not in log


# ============================================================================ the Spark sink
def test_spark_sink_writes_exactly_once_with_sasl_options(sw: SecuredWorker, spark, topic_name):
    """`eosconnect-kafka` with kafka.security.protocol, kafka.sasl.* and kafka.ssl.ca.location, as a
    principal with Write/Describe on its transactional ids (prefixed), Write on the topic and on the
    progress topic, Read on the progress topic (the replay check) and Create while it is missing."""
    from eosconnect.spark import register

    register(spark)
    data, progress = topic_name("data"), topic_name("progress")
    create_topics(sw.cluster, {data: PARTITIONS})
    writer_user = sw.cluster.create_user(f"{sw.group}-spark")
    principal = f"User:{writer_user['sasl.username']}"
    prefix = f"{sw.group}-spark"
    sw.cluster.grant(
        [
            Acl(principal, "Write", "Topic", data),
            Acl(principal, "Write", "Topic", progress),
            Acl(principal, "Read", "Topic", progress),
            Acl(principal, "Create", "Topic", progress),
            Acl(principal, "Write", "TransactionalId", prefix, pattern="PREFIXED"),
            Acl(principal, "Describe", "TransactionalId", prefix, pattern="PREFIXED"),
        ]
    )
    df = spark.createDataFrame(
        [(f"k{i}", json.dumps({"seq": i})) for i in range(300)], "key string, value string"
    ).repartition(3)
    for _ in range(2):  # a re-run of the same job writes nothing more
        w = df.write.format("eosconnect-kafka").option("topic", data).option("job.id", f"job-{data}")
        w = w.option("progress.topic", progress).option("transactional.id.prefix", prefix)
        for key, value in writer_user.items():
            w = w.option(f"kafka.{key}", value)
        w.mode("append").save()
    records = read_to_end(sw.cluster.client_config(), data, timeout=30)
    assert sorted(json.loads(r.value)["seq"] for r in records) == list(range(300))
