"""MirrorHeartbeat: MM2-format heartbeats, so replication lag and topology tools keep working.

Like MirrorMaker 2's MirrorHeartbeatConnector: one task writes a `Heartbeat(source alias, target
alias, now)` to the `heartbeats` topic of the worker's cluster every
`emit.heartbeats.interval.seconds`. The mirror of the other direction copies that topic (as
`<alias>.heartbeats`), which is how MM2's `RemoteClusterUtils.replicationHops` and upstream-cluster
discovery see the replication topology.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping

from confluent_kafka.admin import AdminClient

from eosconnect import __version__
from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.records import SourceRecord
from eosconnect.api.source import ExactlyOnceSupport, SourceConnector, SourceTask
from eosconnect.api.validators import Range
from eosconnect.connectors.mirror_formats import HEARTBEATS_TOPIC, Heartbeat
from eosconnect.connectors.mirror_topics import SOURCE_ALIAS_CONFIG, connection_settings
from eosconnect.storage.topics import ensure_topic

__all__ = ["MirrorHeartbeatConnector", "MirrorHeartbeatTask"]

TARGET_ALIAS_CONFIG = "target.cluster.alias"
EMIT_ENABLED_CONFIG = "emit.heartbeats.enabled"
EMIT_INTERVAL_CONFIG = "emit.heartbeats.interval.seconds"
HEARTBEATS_RF_CONFIG = "heartbeats.topic.replication.factor"

HEARTBEAT_CONFIG_DEF = (
    ConfigDef()
    .define(SOURCE_ALIAS_CONFIG, ConfigType.STRING, "source", Importance.HIGH, "The source cluster's alias.")
    .define(TARGET_ALIAS_CONFIG, ConfigType.STRING, "target", Importance.HIGH, "The target cluster's alias.")
    .define(EMIT_ENABLED_CONFIG, ConfigType.BOOLEAN, True, Importance.LOW, "Whether heartbeats are written.")
    .define(
        EMIT_INTERVAL_CONFIG,
        ConfigType.LONG,
        1,
        Importance.LOW,
        "Seconds between heartbeats (MM2's default: 1).",
        Range.at_least(1),
    )
    .define(
        HEARTBEATS_RF_CONFIG,
        ConfigType.INT,
        -1,
        Importance.LOW,
        "Replication factor of the heartbeats topic; -1 takes the broker's default.",
    )
)


class MirrorHeartbeatConnector(SourceConnector):
    """Writes MM2 heartbeats to the worker's cluster; see the module documentation."""

    def version(self) -> str:
        return __version__

    def config_def(self) -> ConfigDef:
        return HEARTBEAT_CONFIG_DEF

    def exactly_once_support(self, config: Mapping[str, str]) -> ExactlyOnceSupport | None:
        return ExactlyOnceSupport.SUPPORTED

    def start(self, config: dict[str, str]) -> None:
        self._config = dict(config)

    def stop(self) -> None:
        pass

    def task_class(self) -> type[SourceTask]:
        return MirrorHeartbeatTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        make_config = self.context.client_config
        if make_config is not None:  # compacted, one partition, as MM2 creates it
            ensure_topic(
                AdminClient(connection_settings(make_config("admin"))),
                HEARTBEATS_TOPIC,
                partitions=1,
                replication_factor=int(self._config.get(HEARTBEATS_RF_CONFIG) or -1),
                compacted=True,
                replication_setting=HEARTBEATS_RF_CONFIG,
            )
        return [dict(self._config)]


class MirrorHeartbeatTask(SourceTask):
    raw_bytes = True

    def version(self) -> str:
        return __version__

    def start(self, config: dict[str, str]) -> None:
        self.source = str(config.get(SOURCE_ALIAS_CONFIG) or "source")
        self.target = str(config.get(TARGET_ALIAS_CONFIG) or "target")
        self.interval = float(config.get(EMIT_INTERVAL_CONFIG) or 1)
        self.enabled = str(config.get(EMIT_ENABLED_CONFIG, "true")).lower() == "true"
        self._stopped = threading.Event()
        self._next = time.monotonic()

    def poll(self) -> list[SourceRecord] | None:
        if not self.enabled:  # emit.heartbeats.enabled=false: an idle task
            self._stopped.wait(1.0)
            return None
        wait = self._next - time.monotonic()
        if (wait > 0 and self._stopped.wait(min(wait, 1.0))) or time.monotonic() < self._next:
            return None
        self._next = time.monotonic() + self.interval
        heartbeat = Heartbeat(self.source, self.target, int(time.time() * 1000))
        return [
            SourceRecord(
                source_partition={"sourceClusterAlias": self.source, "targetClusterAlias": self.target},
                source_offset={"offset": 0},
                topic=HEARTBEATS_TOPIC,
                partition=0,
                key=heartbeat.key(),
                value=heartbeat.value(),
                timestamp=heartbeat.timestamp,
            )
        ]

    def stop(self) -> None:
        self._stopped.set()
