"""Launcher for local Apache Kafka KRaft brokers (tests, the demo, development)."""

from eosconnect.devkafka.cluster import CONTROLLER_NODE_ID, ClusterError, LocalKafkaCluster, NodePlacement
from eosconnect.devkafka.distribution import KafkaDistribution, KafkaSetupError, ensure_kafka

__all__ = [
    "CONTROLLER_NODE_ID",
    "ClusterError",
    "KafkaDistribution",
    "KafkaSetupError",
    "LocalKafkaCluster",
    "NodePlacement",
    "ensure_kafka",
]
