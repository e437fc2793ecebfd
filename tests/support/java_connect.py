"""Talking to a Java Kafka Connect worker (`eosconnect.devkafka.kafka_connect.KafkaConnectProcess`) in
differential tests: create a connector, and tell a failed one from a slow one."""

from __future__ import annotations

import time

import httpx

from eosconnect.devkafka.kafka_connect import KafkaConnectProcess

__all__ = ["java_failure", "post_connector"]


def post_connector(
    worker: KafkaConnectProcess, name: str, config: dict[str, str], timeout: float = 60
) -> None:
    """Create the connector; retried while the worker answers 409 (it has no leader yet)."""
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.post(f"{worker.url}/connectors", json={"name": name, "config": config}, timeout=60)
        if response.status_code == 201:
            return
        assert response.status_code == 409 and time.monotonic() < deadline, response.text
        time.sleep(0.5)


def java_failure(worker: KafkaConnectProcess, name: str) -> str | None:
    """The stack trace of the connector or a task of it in state FAILED, or None."""
    try:
        status = httpx.get(f"{worker.url}/connectors/{name}/status", timeout=10).json()
    except (httpx.HTTPError, ValueError):
        return None
    for task in [status.get("connector", {}), *status.get("tasks", [])]:
        if task.get("state") == "FAILED":
            return str(task.get("trace", ""))[:3000]
    return None
