"""Launcher for local Apache Kafka KRaft brokers (tests, the demo, development)."""

from eosconnect.devkafka.cluster import ClusterError, LocalKafkaCluster
from eosconnect.devkafka.distribution import KafkaDistribution, KafkaSetupError, ensure_kafka

__all__ = ["ClusterError", "KafkaDistribution", "KafkaSetupError", "LocalKafkaCluster", "ensure_kafka"]
