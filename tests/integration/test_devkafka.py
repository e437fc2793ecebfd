"""The three-broker cluster: brokers can be bounced one by one while the data stays available."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.storage.topic_reader import read_to_end

pytestmark = [pytest.mark.kafka, pytest.mark.cluster3]


def produce_acked(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    failures: list[str] = []
    for v in values:
        producer.produce(
            topic, str(v).encode(), on_delivery=lambda err, _m: failures.append(str(err)) if err else None
        )
    assert producer.flush(60) == 0 and not failures, failures


def test_brokers_bounce_one_by_one(kafka3: LocalKafkaCluster):
    bootstrap = kafka3.bootstrap_servers
    assert kafka3.broker_ids() == [1, 2, 3]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("bounce", 3, 3, config={"min.insync.replicas": "2"})])["bounce"].result(30)
    produce_acked(bootstrap, "bounce", range(0, 100))

    kafka3.kill_node(2)  # unclean: SIGKILL
    assert not kafka3.is_running(2)
    produce_acked(bootstrap, "bounce", range(100, 200))
    kafka3.start_node(2)
    assert kafka3.is_running(2)

    kafka3.stop_node(3)  # clean: controlled shutdown
    produce_acked(bootstrap, "bounce", range(200, 300))
    kafka3.restart_node(3)
    kafka3.restart_node(1, hard=True)
    produce_acked(bootstrap, "bounce", range(300, 400))

    values = sorted(int(r.value) for r in read_to_end({"bootstrap.servers": bootstrap}, "bounce"))
    assert values == list(range(400)), "acknowledged records were lost or duplicated across the bounces"
