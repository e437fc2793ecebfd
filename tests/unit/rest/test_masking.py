"""Secrets in REST answers: PASSWORD settings and clients' passwords as `[hidden]` (rest/masking.py)."""

from __future__ import annotations

from eosconnect.rest.masking import HIDDEN, mask_config, mask_info, mask_status, mask_trace, unmask

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


def test_failed_task_traces_are_scrubbed_of_secrets():
    """A status trace hides the config's secret values wherever they occur, and any value written
    after a secret setting's name (a provider-resolved password quoted by an error); variables and
    other settings stay readable."""
    config = {
        "connector.class": "SequenceSource",
        "producer.override.sasl.password": "inline-secret-1",
        "consumer.override.sasl.password": "${file:/s/p.properties:consumer}",
        "topic": "t",
    }
    trace = (
        "Traceback (most recent call last):\n  ...\nConnectException: login refused with "
        "inline-secret-1; settings {'sasl.username': 'bob', 'sasl.password': 'resolved-secret-2', "
        "'topic': 't'} and sasl.jaas.config=org.Plain required password=\"x9\"; "
        'target.cluster.sasl.password="resolved-3" '
        "consumer.override.sasl.password=${file:/s/p.properties:consumer}"
    )
    status = {
        "name": "c",
        "connector": {"state": "RUNNING", "trace": "sasl.password=resolved-4"},
        "tasks": [{"id": 0, "state": "FAILED", "trace": trace}, {"id": 1, "state": "RUNNING"}],
    }
    masked = mask_status(status, config)
    text = masked["tasks"][0]["trace"]
    for secret in ("inline-secret-1", "resolved-secret-2", "resolved-3", "resolved-4", "x9"):
        assert secret not in str(masked), secret
    assert f"'sasl.password': '{HIDDEN}'" in text and "'sasl.username': 'bob'" in text
    assert "consumer.override.sasl.password=${file:/s/p.properties:consumer}" in text
    assert masked["tasks"][1] == {"id": 1, "state": "RUNNING"}
    assert mask_trace("no secrets here: topic=t") == "no secrets here: topic=t"
