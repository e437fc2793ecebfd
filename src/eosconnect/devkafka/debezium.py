"""Debezium's PostgreSQL connector on Apache Kafka Connect: the reference `PostgresCdcSource` is held to.

The differential test (tests/integration/test_postgres_cdc_debezium.py) and the side-by-side bench
(bench/vs_debezium_cdc.py) run the real `io.debezium:debezium-connector-postgres` as a Connect plugin
next to eosconnect, on the same broker and database. Its jars are fetched from Maven Central with `mvn`
like Kafka's own (`fetch_artifacts`), cached once in their own entry, and given to the Java worker by
`plugin.path`, so Debezium's classes stay in their plugin class loader as in any Connect deployment.
"""

from __future__ import annotations

import os
from pathlib import Path

from eosconnect.devkafka.kafka_connect import KafkaConnectProcess, connect_worker_defaults
from eosconnect.devkafka.maven import fetch_artifacts

__all__ = ["DEBEZIUM_VERSION", "debezium_connect", "ensure_debezium_postgres"]

#: The Debezium release the reference runs (`EOSCONNECT_DEBEZIUM_VERSION` overrides it). 3.x needs Java 17.
DEBEZIUM_VERSION = "3.7.0.Final"


def ensure_debezium_postgres(version: str | None = None, progress: bool = True) -> Path:
    """A Connect `plugin.path` entry holding Debezium's PostgreSQL connector and its dependencies."""
    pinned = version or os.environ.get("EOSCONNECT_DEBEZIUM_VERSION") or DEBEZIUM_VERSION
    # Not named connect-*: ensure_kafka_connect takes any complete connect-* entry for a full runtime.
    libs = fetch_artifacts(
        f"debezium-postgres-{pinned}",
        [f"io.debezium:debezium-connector-postgres:{pinned}"],
        progress=progress,
    )
    return libs.parent  # plugin.path: a directory whose subdirectories (libs/) are plugins


def debezium_connect(bootstrap: str, workdir: Path, group_id: str, **extra: str) -> KafkaConnectProcess:
    """A distributed Java Connect worker (not started) with Debezium's PostgreSQL connector installed;
    `extra` settings (underscores for dots) override the test-cluster defaults."""
    props = {
        **connect_worker_defaults(bootstrap, group_id),
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        "plugin.path": str(ensure_debezium_postgres()),
        **{k.replace("_", "."): v for k, v in extra.items()},
    }
    return KafkaConnectProcess(workdir, worker_props=props)
