"""The secured test bed: a SASL_SSL broker with StandardAuthorizer, users and ACLs made per test."""

from __future__ import annotations

import subprocess
import sys

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
