"""Where a connector's offsets live (KIP-618 "Per-connector offsets topics")."""

from __future__ import annotations

import logging

import pytest

from eosconnect.storage.offsets import offsets_topic_for, same_bootstrap

WORKER = {
    "bootstrap.servers": "main-1:9092,main-2:9092",
    "group.id": "connect",
    "offset.storage.topic": "connect-offsets",
    "exactly.once.source.support": "enabled",
}


def test_global_topic_by_default():
    p = offsets_topic_for("c", {}, WORKER)
    assert (p.topic, p.separate, p.explicit) == ("connect-offsets", False, False)
    assert p.client["bootstrap.servers"] == "main-1:9092,main-2:9092"
    assert p.consumer_config["isolation.level"] == "read_committed"
    assert p.global_topic == "connect-offsets"


def test_explicit_topic_on_the_connectors_cluster():
    connector = {"offsets.storage.topic": "c-offsets", "producer.override.bootstrap.servers": "other:9092"}
    p = offsets_topic_for("c", connector, WORKER)
    assert (p.topic, p.separate, p.explicit) == ("c-offsets", True, True)
    assert p.consumer_config["bootstrap.servers"] == "other:9092"
    assert p.admin_config["bootstrap.servers"] == "other:9092"
    # the global topic is still read and written with the worker's own settings
    assert p.global_consumer_config["bootstrap.servers"] == WORKER["bootstrap.servers"]
    assert p.global_producer_config["bootstrap.servers"] == WORKER["bootstrap.servers"]


def test_explicit_topic_applies_whatever_the_exactly_once_mode():
    for mode in ("disabled", "preparing", "enabled"):
        p = offsets_topic_for(
            "c", {"offsets.storage.topic": "mine"}, WORKER | {"exactly.once.source.support": mode}
        )
        assert (p.topic, p.separate, p.explicit) == ("mine", True, True)
        assert p.client["bootstrap.servers"] == WORKER["bootstrap.servers"]


def test_explicitly_naming_the_global_topic_on_the_same_cluster_is_the_global_topic():
    p = offsets_topic_for("c", {"offsets.storage.topic": "connect-offsets"}, WORKER)
    assert (p.topic, p.separate, p.explicit) == ("connect-offsets", False, True)


def test_implicit_separate_topic_when_exactly_once_and_another_cluster():
    connector = {"producer.override.bootstrap.servers": "PLAINTEXT://other-1:9092"}
    p = offsets_topic_for("c", connector, WORKER)
    assert (p.topic, p.separate, p.explicit) == ("connect-offsets", True, False)
    assert p.client["bootstrap.servers"] == "PLAINTEXT://other-1:9092"


def test_no_implicit_topic_without_exactly_once_or_on_the_same_cluster():
    other = {"producer.override.bootstrap.servers": "other:9092"}
    p = offsets_topic_for("c", other, WORKER | {"exactly.once.source.support": "preparing"})
    assert (p.topic, p.separate) == ("connect-offsets", False)
    assert "isolation.level" not in p.client
    same = {"producer.override.bootstrap.servers": "MAIN-2:9092"}
    assert offsets_topic_for("c", same, WORKER).separate is False


def test_cluster_comparison_can_be_replaced():
    connector = {"producer.override.bootstrap.servers": "alias-of-main:9092"}
    assert offsets_topic_for("c", connector, WORKER).separate is True
    p = offsets_topic_for("c", connector, WORKER, same_cluster=lambda a, b: True)
    assert p.separate is False


def test_same_bootstrap():
    assert same_bootstrap("a:1,b:2", " B:2 ")
    assert same_bootstrap("SASL_SSL://a:1", "a:1")
    assert not same_bootstrap("a:1", "a:2")
    assert not same_bootstrap("", "")


def test_separate_topic_clients_follow_the_producers_cluster_and_principal():
    connector = {
        "offsets.storage.topic": "c-offsets",
        "producer.override.bootstrap.servers": "other:9092",
        "producer.override.sasl.username": "tenant",
        "consumer.override.sasl.username": "tenant-reader",
        "admin.override.request.timeout.ms": "1000",
    }
    p = offsets_topic_for("c", connector, WORKER | {"sasl.username": "worker"})
    assert p.consumer_config["sasl.username"] == "tenant-reader"  # the consumer's own override wins
    assert p.admin_config["sasl.username"] == "tenant"  # else the producer's principal
    assert p.admin_config["request.timeout.ms"] == "1000"
    assert p.global_consumer_config["sasl.username"] == "worker"


def test_user_isolation_level_is_ignored_with_a_warning(caplog):
    connector = {"offsets.storage.topic": "x", "consumer.override.isolation.level": "read_uncommitted"}
    with caplog.at_level(logging.WARNING):
        p = offsets_topic_for("c", connector, WORKER | {"consumer.isolation.level": "read_uncommitted"})
    assert p.consumer_config["isolation.level"] == "read_committed"
    assert p.global_consumer_config["isolation.level"] == "read_committed"
    assert "consumer.override.isolation.level" in caplog.text
    assert "consumer.isolation.level" in caplog.text


@pytest.mark.parametrize("empty", ["", "  ", None])
def test_blank_offsets_topic_means_not_set(empty):
    assert offsets_topic_for("c", {"offsets.storage.topic": empty}, WORKER).explicit is False


def test_default_global_topic_name():
    assert offsets_topic_for("c", {}, {"bootstrap.servers": "a:1"}).topic == "connect-offsets"
