"""The secured test bed: a SASL_SSL broker with StandardAuthorizer, users and ACLs made per test."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import NewTopic

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.security import Acl
from eosconnect.storage.topic_reader import read_to_end

pytestmark = [pytest.mark.kafka, pytest.mark.secured]


def _produce(settings: dict[str, str], topic: str, value: bytes) -> KafkaError | None:
    outcome: list[KafkaError | None] = []
    producer = Producer({**settings, "log_level": 0, "message.timeout.ms": 10000})
    producer.produce(topic, value, on_delivery=lambda err, _msg: outcome.append(err))
    producer.flush(15)
    return outcome[0] if outcome else KafkaError(KafkaError._MSG_TIMED_OUT)


def test_no_acl_no_access_then_exactly_the_granted_one(secured_kafka: LocalKafkaCluster, topic_name):
    topic = topic_name("data")
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**secured_kafka.client_config(), "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    alice = secured_kafka.create_user("alice-" + topic[-6:])
    user = alice["sasl.username"]
    assert alice["security.protocol"] == "SASL_SSL" and alice["ssl.ca.location"].endswith("ca.pem")

    denied = _produce(alice, topic, b"no")
    assert denied is not None and denied.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, denied

    secured_kafka.grant([Acl(user, "Write", "Topic", topic)])
    assert _produce(alice, topic, b"yes") is None

    # Reading needs Read on the topic (and on a group only when one is used): without it, refused.
    with pytest.raises(Exception, match=r"(?i)authoriz"):
        read_to_end(alice, topic, timeout=15)
    secured_kafka.grant([Acl(user, "Read", "Topic", topic), Acl(user, "Describe", "Topic", topic)])
    assert [r.value for r in read_to_end(alice, topic, timeout=30)] == [b"yes"]

    secured_kafka.revoke([Acl(user, "Write", "Topic", topic)])
    refused_again = _produce(alice, topic, b"no")
    assert refused_again is not None and refused_again.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    wrong_password = {**alice, "sasl.password": "not-it"}
    failed = _produce(wrong_password, topic, b"no")
    assert failed is not None  # authentication fails: nothing is written


def test_kafka_status_prints_the_super_users_client_settings(secured_kafka: LocalKafkaCluster):
    out = subprocess.run(
        [sys.executable, "-m", "eosconnect.cli", "kafka", "status", "--dir", str(secured_kafka.run_dir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    lines = [line for line in out.splitlines() if "=" in line and " " not in line]
    settings = dict(line.split("=", 1) for line in lines)
    assert lines[0] == f"bootstrap.servers={secured_kafka.bootstrap_servers}"
    assert settings == secured_kafka.client_config()
    assert {
        "security.protocol",
        "sasl.mechanism",
        "sasl.username",
        "sasl.password",
        "ssl.ca.location",
    } <= set(settings)


def _cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "eosconnect.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )


def test_commands_take_a_command_config_file_as_kafkas_tools_do(
    secured_kafka: LocalKafkaCluster, topic_name, tmp_path
):
    """`--command-config FILE` on topics create/produce/consume, groups describe and verify: the
    super user's settings in a file written for Kafka's tools (sasl.jaas.config, a PEM trust store),
    the password behind a FileConfigProvider the file declares; `-X` wins over the file."""
    topic = topic_name("cc")
    settings = secured_kafka.client_config()
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "admin.properties").write_text(f"password={settings['sasl.password']}\n")
    config = tmp_path / "client.properties"
    config.write_text(
        "config.providers=file\n"
        "config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider\n"
        f"config.providers.file.param.allowed.paths={secrets}\n"
        f"security.protocol={settings['security.protocol']}\n"
        f"sasl.mechanism={settings['sasl.mechanism']}\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{settings["sasl.username"]}" password="${{file:{secrets}/admin.properties:password}}";\n'
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.location={settings['ssl.ca.location']}\n"
    )
    common = ["-b", secured_kafka.bootstrap_servers, "--command-config", str(config)]
    created = _cli("topics", "create", topic, "--partitions", "1", *common)
    assert created.returncode == 0, created.stdout + created.stderr
    produced = _cli("topics", "produce", topic, *common, stdin="".join(f'{{"n": {i}}}\n' for i in range(5)))
    assert produced.returncode == 0, produced.stdout + produced.stderr
    consumed = _cli("topics", "consume", topic, "--json", *common)
    assert (
        consumed.returncode == 0 and consumed.stdout.count('\\"n\\"') + consumed.stdout.count('"n"') >= 5
    ), consumed.stdout + consumed.stderr
    verified = _cli("verify", "-t", topic, "--key-field", "n", *common)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    described = _cli("groups", "describe", "no-such-group", *common)
    assert described.returncode == 0, described.stdout + described.stderr
    # -X wins over the file: a wrong password there is used, and refused.
    refused = _cli("topics", "consume", topic, *common, "-X", "sasl.password=wrong", "--timeout", "10")
    assert refused.returncode != 0
    for run in (created, produced, consumed, verified, described, refused):
        assert settings["sasl.password"] not in run.stdout + run.stderr


def _group_denials(cluster: LocalKafkaCluster, user: str) -> int:
    """Lines of the broker's authorizer log refusing `user` anything on a group."""
    text = cluster.log_file(cluster.broker_ids()[0]).read_text(errors="replace")
    return sum(1 for line in text.splitlines() if f"User:{user} is Denied" in line and "Group:" in line)


def test_a_long_lived_reader_in_its_principals_group_is_never_refused(
    secured_kafka: LocalKafkaCluster, topic_name
):
    """librdkafka looks up an assign-only consumer's group coordinator every second for its whole
    life: the worker's config and status readers (kept open) named a random group the worker may not
    Describe and were refused once a second. In the worker's own group (Read on it, as KIP-618's
    worker has) nothing is refused; a random group, the control, is."""
    from confluent_kafka.admin import AdminClient

    from eosconnect.storage.topic_reader import TopicReader

    topic, group = topic_name("data"), topic_name("group")
    admin = AdminClient({**secured_kafka.client_config(), "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    assert _produce(secured_kafka.client_config(), topic, b"one") is None
    user = f"reader-{topic[-6:]}"
    reader_client = secured_kafka.create_user(user)
    secured_kafka.grant([Acl(user, "Read", "Topic", topic), Acl(user, "Read", "Group", group)])

    def hold(reader: TopicReader) -> int:
        before = _group_denials(secured_kafka, user)
        try:
            assert [r.value for r in reader.read_to_end(timeout=30)] == [b"one"]
            time.sleep(5)  # the reader stays open, as a store's does
            assert [r.value for r in reader.read_to_end(timeout=30)] == [b"one"]
        finally:
            reader.close()
        time.sleep(1)  # the broker's log line follows its answer
        return _group_denials(secured_kafka, user) - before

    assert hold(TopicReader(reader_client, topic, group=group)) == 0
    assert hold(TopicReader(reader_client, topic)) > 0  # the control: the test can see refusals
