"""Kafka client settings: Kafka Connect's precedence, and librdkafka's errors in the user's words."""

from __future__ import annotations

import logging

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.storage.clients import (
    ClientConfigError,
    client_config,
    forced,
    kafka_logger,
    validate_client_config,
)

WORKER = {
    "bootstrap.servers": "worker:9092",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.username": "worker",
    "ssl.ca.location": "/etc/ca.pem",
    "group.id": "connect-cluster",
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "offset.storage.topic": "connect-offsets",
    "producer.linger.ms": "50",
    "producer.sasl.username": "worker-producer",
    "consumer.max.poll.interval.ms": "600000",
    "admin.request.timeout.ms": "9000",
}


def _without_logger(config):
    return {k: v for k, v in config.items() if k != "logger"}


def test_precedence_connector_override_then_worker_prefixed_then_top_level():
    connector = {
        "connector.class": "x.Y",
        "producer.override.linger.ms": "5",
        "producer.override.bootstrap.servers": "other:9092",
        "consumer.override.fetch.min.bytes": "1",
    }
    producer = client_config("producer", WORKER, connector)
    assert producer["linger.ms"] == "5"  # connector override beats worker producer.*
    assert producer["bootstrap.servers"] == "other:9092"  # ... and worker top-level
    assert producer["sasl.username"] == "worker-producer"  # worker producer.* beats top-level
    assert producer["security.protocol"] == "SASL_SSL"  # top-level client settings are inherited
    assert producer["ssl.ca.location"] == "/etc/ca.pem"
    assert "fetch.min.bytes" not in producer  # other kinds' overrides stay out
    assert "group.id" not in producer and "key.converter" not in producer  # non-client worker keys
    assert "offset.storage.topic" not in producer


def test_each_kind_takes_only_its_own_prefix():
    consumer = _without_logger(client_config("consumer", WORKER))
    admin = _without_logger(client_config("admin", WORKER))
    assert consumer["max.poll.interval.ms"] == "600000" and "linger.ms" not in consumer
    assert admin["request.timeout.ms"] == "9000" and "max.poll.interval.ms" not in admin
    assert consumer["sasl.username"] == "worker"


def test_producer_defaults_are_lowest_precedence():
    assert client_config("producer", {})["partitioner"] == "murmur2_random"
    assert client_config("producer", {})["acks"] == "all"
    assert client_config("producer", {"producer.acks": "1"})["acks"] == "1"
    assert client_config("producer", {}, {"producer.override.partitioner": "fnv1a"})["partitioner"] == "fnv1a"


def test_origin_names_the_setting_the_user_wrote():
    resolved = client_config("producer", WORKER, {"producer.override.linger.ms": "5"})
    assert resolved.origin["linger.ms"] == "producer.override.linger.ms"
    assert resolved.origin["sasl.username"] == "producer.sasl.username"
    assert resolved.origin["bootstrap.servers"] == "bootstrap.servers"
    assert "partitioner" not in resolved.origin  # a runtime default, not the user's


def test_librdkafka_logs_go_to_python_logging():
    assert client_config("admin", {})["logger"] is kafka_logger("admin")
    mine = logging.getLogger("mine")
    assert client_config("consumer", {}, logger=mine)["logger"] is mine


def test_unknown_property_error_names_the_user_facing_key_and_the_fix():
    resolved = client_config("producer", {"bootstrap.servers": "x:1"}, {"producer.override.foo.bar": "1"})
    with pytest.raises(ClientConfigError) as info:
        resolved.validate()
    err = info.value
    assert isinstance(err, ValueError) and isinstance(err, ConfigException)
    assert list(err.errors) == ["producer.override.foo.bar"]
    message = str(err)
    assert "producer.override.foo.bar" in message
    assert "No such configuration property" in message
    assert "remove it" in message


def test_aliased_invalid_value_is_attributed_to_the_key_the_user_wrote():
    # librdkafka reports linger.ms as queue.buffering.max.ms; the user wrote producer.linger.ms.
    resolved = client_config("producer", {"producer.linger.ms": "soon", "producer.acks": "all"})
    with pytest.raises(ClientConfigError) as info:
        validate_client_config("producer", resolved, resolved.origin)
    assert list(info.value.errors) == ["producer.linger.ms"]
    assert "Invalid value" in str(info.value)


def test_java_only_settings_get_a_librdkafka_hint():
    resolved = client_config("consumer", {"sasl.jaas.config": "org.apache...required;"})
    with pytest.raises(ClientConfigError, match=r"sasl\.username"):
        resolved.validate()


def test_conflicting_settings_are_reported_against_the_keys_involved():
    resolved = client_config(
        "producer", {}, {"producer.override.acks": "1", "producer.override.enable.idempotence": "true"}
    )
    with pytest.raises(ClientConfigError) as info:
        resolved.validate()
    assert set(info.value.errors) == {"producer.override.acks", "producer.override.enable.idempotence"}


def test_valid_configs_pass_without_contacting_a_broker():
    worker = {k: v for k, v in WORKER.items() if k != "ssl.ca.location"} | {"sasl.password": "x"}
    for kind in ("producer", "consumer", "admin"):
        client_config(kind, worker).validate()  # type: ignore[arg-type]


def test_a_missing_file_is_blamed_on_its_setting_and_every_problem_is_reported_at_once(tmp_path):
    worker = WORKER | {"sasl.password": "x", "ssl.ca.location": str(tmp_path / "missing.pem")}
    resolved = client_config("consumer", worker, {"consumer.override.foo": "1"})
    with pytest.raises(ClientConfigError) as info:
        resolved.validate()
    assert set(info.value.errors) == {"ssl.ca.location", "consumer.override.foo"}


def test_override_policy_none_and_principal():
    connector = {"producer.override.linger.ms": "5", "producer.override.sasl.username": "me"}
    with pytest.raises(ClientConfigError) as info:
        client_config("producer", {"connector.client.config.override.policy": "None"}, connector)
    assert set(info.value.errors) == {"producer.override.linger.ms", "producer.override.sasl.username"}
    with pytest.raises(ClientConfigError) as info:
        client_config("producer", {"connector.client.config.override.policy": "Principal"}, connector)
    assert set(info.value.errors) == {"producer.override.linger.ms"}
    assert "connector.client.config.override.policy" in str(info.value)
    assert client_config("producer", {}, connector)["linger.ms"] == "5"  # All is the default


def test_override_policy_allowlist_kip_1188():
    """Kafka 4.2's `Allowlist`: exactly the client settings in connector.client.config.override.allowlist
    (by their unprefixed names); an empty list allows none."""
    connector = {
        "producer.override.linger.ms": "5",
        "producer.override.sasl.username": "me",
        "producer.override.sasl.password": "secret",
    }
    worker = {
        "connector.client.config.override.policy": "org.apache.kafka.connect.connector.policy."
        "AllowlistConnectorClientConfigOverridePolicy",
        "connector.client.config.override.allowlist": "sasl.username, sasl.password",
    }
    with pytest.raises(ClientConfigError) as info:
        client_config("producer", worker, connector)
    assert set(info.value.errors) == {"producer.override.linger.ms"}
    assert "add linger.ms to connector.client.config.override.allowlist" in str(info.value)
    allowed = client_config(
        "producer",
        {**worker, "connector.client.config.override.allowlist": "linger.ms,sasl.username,sasl.password"},
        connector,
    )
    assert allowed["linger.ms"] == "5" and allowed["sasl.username"] == "me"
    with pytest.raises(ClientConfigError) as info:
        client_config(
            "admin",
            {"connector.client.config.override.policy": "Allowlist"},
            {"admin.override.sasl.username": "me"},
        )
    assert "connector.client.config.override.allowlist is empty" in str(info.value)


def test_forced_warns_naming_the_ignored_user_value(caplog):
    resolved = client_config("producer", {}, {"producer.override.transactional.id": "mine"})
    with caplog.at_level(logging.WARNING):
        config = forced(
            resolved, "transactional.id", "g-c-0", "tasks use <group>-<c>-<t>", origin=resolved.origin
        )
    assert config is resolved and config["transactional.id"] == "g-c-0"
    assert "producer.override.transactional.id" in caplog.text and "'mine'" in caplog.text


def test_forced_is_silent_when_the_user_agrees_or_said_nothing(caplog):
    with caplog.at_level(logging.WARNING):
        assert forced({"isolation.level": "READ_COMMITTED"}, "isolation.level", "read_committed", "x") == {
            "isolation.level": "read_committed"
        }
        assert forced({}, "enable.idempotence", True, "x") == {"enable.idempotence": True}
        assert forced({"enable.idempotence": "true"}, "enable.idempotence", True, "x")["enable.idempotence"]
    assert caplog.text == ""


def test_librdkafka_fenced_lines_are_warnings_other_fatal_lines_stay_critical() -> None:
    """A zombie's fencing is by design (KIP-618): the task's own line says whether it was a fault."""
    logger = kafka_logger("producer")
    assert kafka_logger("producer").filters.count(logger.filters[0]) == 1  # added once
    seen: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record)

    handler = Keep()
    logger.addHandler(handler)
    try:
        logger.critical(
            "FATAL [rdkafka#producer-2]: Fatal error: This instance has been fenced by a newer instance"
        )
        logger.critical("TXNERR [rdkafka#producer-2]: Producer attempted an operation with an old epoch")
        logger.critical("FATAL [rdkafka#producer-2]: Fatal error: Broker: Cluster authorization failed")
    finally:
        logger.removeHandler(handler)
    assert [r.levelname for r in seen] == ["WARNING", "WARNING", "CRITICAL"]
