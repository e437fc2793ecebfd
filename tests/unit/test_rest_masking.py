"""Secrets in REST answers: PASSWORD settings and clients' passwords as `[hidden]` (rest/masking.py)."""

from __future__ import annotations

from eosconnect.rest.masking import HIDDEN, mask_config, mask_info, unmask

JDBC = {
    "connector.class": "JdbcSource",
    "connection.url": "postgresql://db/orders",
    "connection.password": "db-secret",
    "producer.override.sasl.password": "kafka-secret",
    "target.cluster.ssl.key.password": "key-secret",
    "consumer.override.sasl.jaas.config": "jaas-secret",
    "admin.override.sasl.password": "${file:/etc/secrets/a.properties:password}",
    "tasks.max": "2",
}


def test_password_settings_and_client_passwords_are_hidden_variables_kept():
    shown = mask_config(JDBC)
    assert shown["connection.password"] == HIDDEN  # JdbcSource types it PASSWORD
    assert shown["producer.override.sasl.password"] == HIDDEN
    assert shown["target.cluster.ssl.key.password"] == HIDDEN
    assert shown["consumer.override.sasl.jaas.config"] == HIDDEN
    assert shown["admin.override.sasl.password"] == JDBC["admin.override.sasl.password"]
    assert shown["connection.url"] == JDBC["connection.url"] and shown["tasks.max"] == "2"


def test_task_infos_are_masked_by_the_connectors_class():
    tasks = [{"id": {"connector": "c", "task": 0}, "config": {"connection.password": "db-secret", "x": "1"}}]
    masked = mask_info(tasks, JDBC)
    assert masked[0]["config"] == {"connection.password": HIDDEN, "x": "1"}
    assert mask_info({"name": "c", "config": JDBC})["config"]["producer.override.sasl.password"] == HIDDEN
    assert mask_info({"info": {"config": JDBC}})["info"]["config"]["connection.password"] == HIDDEN


def test_a_config_sent_back_with_the_mask_keeps_the_stored_secret():
    edited = {**mask_config(JDBC), "tasks.max": "3"}
    restored = unmask(edited, JDBC)
    assert restored == {**JDBC, "tasks.max": "3"}
    assert unmask({**JDBC, "connection.password": "new"}, JDBC)["connection.password"] == "new"
    assert unmask(edited, None)["connection.password"] == HIDDEN  # nothing stored to restore
