"""Debezium's connectors on Apache Kafka Connect: the references the CDC sources are held to.

The differential tests (tests/integration/test_postgres_cdc_debezium.py,
tests/integration/test_mysql_cdc_debezium.py) and the side-by-side bench (bench/vs_debezium_cdc.py)
run the real `io.debezium:debezium-connector-<plugin>` as a Connect plugin next to eosconnect, on the
same broker and database. Its jars are fetched from Maven Central with `mvn` like Kafka's own
(`fetch_artifacts`), cached once in their own entry per plugin, and given to the Java worker by
`plugin.path`, so Debezium's classes stay in their plugin class loader as in any Connect deployment.
"""

from __future__ import annotations

import os
from pathlib import Path

from eosconnect.devkafka.kafka_connect import KafkaConnectProcess, connect_worker_defaults
from eosconnect.devkafka.maven import fetch_artifacts

__all__ = [
    "DEBEZIUM_PLUGINS",
    "DEBEZIUM_VERSION",
    "MYSQL_PLUGIN",
    "debezium_connect",
    "ensure_debezium_plugin",
    "ensure_debezium_postgres",
]

#: The Debezium release the reference runs (`EOSCONNECT_DEBEZIUM_VERSION` overrides it). 3.x needs Java 17.
DEBEZIUM_VERSION = "3.7.0.Final"

#: The plugins a worker can be given (`debezium-connector-<name>` on Maven Central) -> the release of
#: each when `EOSCONNECT_DEBEZIUM_VERSION` is unset. Maven Central serves the binlog connectors' 3.7
#: jars only in part (`debezium-connector-mariadb` not at all), so the binlog reference is the MySQL
#: connector of the newest 3.x release that resolves whole; it reads MariaDB's binlog too.
DEBEZIUM_PLUGINS = {"postgres": DEBEZIUM_VERSION, "mysql": "3.6.1.Final"}

#: The plugin MySqlCdcSource is compared with.
MYSQL_PLUGIN = "mysql"


def ensure_debezium_plugin(plugin: str, version: str | None = None, progress: bool = True) -> Path:
    """A Connect `plugin.path` entry holding Debezium's `plugin` connector (one of `DEBEZIUM_PLUGINS`)
    and its dependencies."""
    if plugin not in DEBEZIUM_PLUGINS:
        raise ValueError(f"unknown Debezium plugin {plugin!r}: use one of {', '.join(DEBEZIUM_PLUGINS)}")
    pinned = version or os.environ.get("EOSCONNECT_DEBEZIUM_VERSION") or DEBEZIUM_PLUGINS[plugin]
    # Not named connect-*: ensure_kafka_connect takes any complete connect-* entry for a full runtime.
    libs = fetch_artifacts(
        f"debezium-{plugin}-{pinned}",
        [f"io.debezium:debezium-connector-{plugin}:{pinned}"],
        progress=progress,
    )
    return libs.parent  # plugin.path: a directory whose subdirectories (libs/) are plugins


def ensure_debezium_postgres(version: str | None = None, progress: bool = True) -> Path:
    """A Connect `plugin.path` entry holding Debezium's PostgreSQL connector and its dependencies."""
    return ensure_debezium_plugin("postgres", version, progress)


def debezium_connect(
    bootstrap: str, workdir: Path, group_id: str, plugin: str = "postgres", **extra: str
) -> KafkaConnectProcess:
    """A distributed Java Connect worker (not started) with Debezium's `plugin` connector installed;
    `extra` settings (underscores for dots) override the test-cluster defaults."""
    props = {
        **connect_worker_defaults(bootstrap, group_id),
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        "plugin.path": str(ensure_debezium_plugin(plugin)),
        **{k.replace("_", "."): v for k, v in extra.items()},
    }
    return KafkaConnectProcess(workdir, worker_props=props)
