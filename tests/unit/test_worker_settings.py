"""Which worker settings are warned as having no effect, and the one-line form of CLI errors."""

from __future__ import annotations

import json

from eosconnect.api.errors import ConfigException
from eosconnect.cli_errors import EXIT_FAILED, EXIT_USAGE, UserError, describe_error, error_text
from eosconnect.clients.rest import ConnectError
from eosconnect.worker_config import close_match, missing_required_near_misses, unknown_worker_settings

#: What the tests' workers, the docs and Kafka Connect users legitimately set.
LEGITIMATE = {
    "bootstrap.servers": "127.0.0.1:9092",
    "group.id": "g",
    "offset.storage.topic": "o",
    "offset.storage.partitions": "1",
    "offset.storage.replication.factor": "1",
    "config.storage.topic": "c",
    "config.storage.replication.factor": "1",
    "status.storage.topic": "s",
    "status.storage.partitions": "1",
    "status.storage.replication.factor": "1",
    "exactly.once.source.support": "enabled",
    "offset.flush.interval.ms": "500",
    "task.shutdown.graceful.timeout.ms": "3000",
    "task.heartbeat.timeout.ms": "5000",
    "listeners": "http://127.0.0.1:0",
    "listeners.https.ssl.certfile": "/x.pem",
    "rest.advertised.host.name": "w1",
    "rest.advertised.port": "8083",
    "rest.advertised.listener": "http",
    "rest.basic.auth.users": "a:b",
    "rest.ssl.certfile": "/x.pem",
    "spark.master": "local[8,4]",
    "spark.driver.memory": "768m",
    "plugin.path": "/plugins",
    "file.allowed.dirs": "/data",
    "connector.client.config.override.policy": "All",
    "producer.linger.ms": "5",
    "consumer.isolation.level": "read_committed",
    "admin.request.timeout.ms": "1000",
    "security.protocol": "SASL_SSL",
    "sasl.username": "u",
    "ssl.ca.location": "/ca.pem",
    "eosconnect.zombie.cancel.timeout.ms": "600000",
    "eosconnect.tasks.max.limit": "10",
    "eosconnect.ship.environment": "false",
}


def test_legitimate_settings_are_not_warned() -> None:
    assert unknown_worker_settings(LEGITIMATE) == []


def test_unknown_settings_name_their_near_miss() -> None:
    notes = unknown_worker_settings({**LEGITIMATE, "offset.flush.intervall.ms": "1", "wibble": "x"})
    assert [n.message() for n in notes] == [
        "The configuration 'offset.flush.intervall.ms' was supplied but isn't a known config; "
        "did you mean 'offset.flush.interval.ms'?",
        "The configuration 'wibble' was supplied but isn't a known config.",
    ]


def test_kafka_connect_settings_without_effect_say_so() -> None:
    notes = unknown_worker_settings(
        {
            "key.converter.schemas.enable": "false",
            "config.providers": "file",  # used: config providers (KIP-297)
            "config.providers.file.class": "FileConfigProvider",
            "session.timeout.ms": "1",
        }
    )
    assert [n.name for n in notes] == ["key.converter.schemas.enable", "session.timeout.ms"]
    assert all("Kafka Connect setting eosconnect does not use" in n.message() for n in notes)
    assert "set key.converter on each connector" in notes[0].message()


def test_a_misspelt_required_setting_is_found() -> None:
    assert missing_required_near_misses({"bootstrap.server": "x"}) == {
        "bootstrap.servers": "bootstrap.server"
    }
    assert missing_required_near_misses({"bootstrap.servers": "x", "bootstrap.server": "y"}) == {}
    assert missing_required_near_misses({"group.id": "g"}) == {}
    assert close_match("listeners", ["listeners", "rest.port"]) == "listeners"
    assert close_match("zzz", ["listeners"]) is None


def test_errors_are_one_line_with_an_exit_status() -> None:
    assert describe_error(UserError("bad")) == ("bad", EXIT_USAGE)
    assert describe_error(ConnectError(404, "Connector x not found")) == (
        "Connector x not found (HTTP 404)",
        EXIT_FAILED,
    )
    two = ConfigException(errors={"a": ["is wrong"], "b": ["too"]})
    message, code = describe_error(two)
    assert code == EXIT_USAGE and "\n" not in message and '"a": is wrong' in message
    assert describe_error(FileNotFoundError(2, "No such file or directory", "w.properties")) == (
        "w.properties: No such file or directory",
        EXIT_USAGE,
    )
    try:
        json.loads("{nope")
    except json.JSONDecodeError as exc:
        assert describe_error(exc)[1] == EXIT_USAGE
    message, code = describe_error(RuntimeError("boom\nmore"))
    assert (
        code == EXIT_FAILED and message.startswith("unexpected RuntimeError: boom") and "--debug" in message
    )


def test_kafka_errors_read_as_their_text() -> None:
    from confluent_kafka import KafkaError, KafkaException

    nested = KafkaException(
        KafkaError(
            KafkaError.UNKNOWN_TOPIC_OR_PART,
            "topic 'x': KafkaError{code=UNKNOWN_TOPIC_OR_PART,val=3,"
            'str="Broker: Unknown topic or partition"}',
        )
    )
    assert error_text(nested) == "topic 'x': Broker: Unknown topic or partition"
    assert describe_error(nested) == ("Kafka: topic 'x': Broker: Unknown topic or partition", EXIT_FAILED)


def test_client_settings_librdkafka_does_not_know_fail_before_spark() -> None:
    import pytest

    from eosconnect.preflight import check_worker_settings

    with pytest.raises(
        UserError, match=r"w\.properties: producer\.lingr\.ms: No such configuration property"
    ):
        check_worker_settings({"bootstrap.servers": "x:1", "producer.lingr.ms": "5"}, "w.properties")
    worker = check_worker_settings({"bootstrap.servers": "x:1", "producer.linger.ms": "5"}, "w.properties")
    assert worker.bootstrap_servers == "x:1"
    with pytest.raises(UserError, match=r"'bootstrap\.server' is not a worker setting; did you mean"):
        check_worker_settings({"bootstrap.server": "x:1"}, "w.properties")
