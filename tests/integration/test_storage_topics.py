"""Creating internal topics on a real broker."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka.admin import ConfigResource, ResourceType

from eosconnect.storage.topics import TopicCreationError, ensure_topic

pytestmark = pytest.mark.kafka


def _config(admin, topic: str) -> dict[str, str]:
    resource = ConfigResource(ResourceType.TOPIC, topic)
    described = admin.describe_configs([resource])[resource].result(30)
    return {name: entry.value for name, entry in described.items()}


def _partitions(admin, topic: str) -> int:
    return len(admin.list_topics(topic, timeout=30).topics[topic].partitions)


def test_creates_a_compacted_topic_and_tolerates_an_existing_one(admin, topic_name):
    topic = topic_name("offsets")
    assert ensure_topic(admin, topic, partitions=3, replication_factor=1, config={"min.insync.replicas": "1"})
    config = _config(admin, topic)
    assert config["cleanup.policy"] == "compact"
    assert config["min.insync.replicas"] == "1"
    assert _partitions(admin, topic) == 3
    assert ensure_topic(admin, topic, partitions=3, replication_factor=1) is False
    assert ensure_topic(admin, topic, partitions=7, replication_factor=1) is False  # existing one is kept
    assert _partitions(admin, topic) == 3


def test_minus_one_takes_the_broker_defaults(admin, topic_name):
    topic = topic_name("defaults")
    assert ensure_topic(admin, topic, partitions=-1, replication_factor=-1, compacted=False)
    assert _partitions(admin, topic) == 1  # the dev broker's num.partitions
    assert _config(admin, topic)["cleanup.policy"] == "delete"


def test_too_large_replication_factor_names_the_setting_to_lower(admin, topic_name):
    with pytest.raises(TopicCreationError) as info:
        ensure_topic(
            admin,
            topic_name("rf"),
            partitions=1,
            replication_factor=3,
            replication_setting="offset.storage.replication.factor",
        )
    message = str(info.value)
    assert "offset.storage.replication.factor" in message
    assert "Lower" in message and "-1" in message


def test_an_existing_topic_that_is_not_compacted_is_flagged(admin, create_topic, topic_name, caplog):
    topic = create_topic(topic_name("deleting"))
    with caplog.at_level(logging.WARNING, logger="eosconnect.storage.topics"):
        assert ensure_topic(admin, topic, 1, 1) is False
    assert "cleanup.policy=delete" in caplog.text and "compact" in caplog.text
    with pytest.raises(TopicCreationError, match=r"cleanup\.policy=compact"):
        ensure_topic(admin, topic, 1, 1, require_compaction=True)
