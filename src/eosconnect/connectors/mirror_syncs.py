"""Offset syncs of the mirrors: the settings, the topic, and the records for one transaction.

Both exactly-once mirrors write MM2-format offset syncs into the transaction that copies the
records (see eosconnect.mirrormaker.translation for why that makes translation exact). They live on
the *target* cluster, in MM2's `mm2-offset-syncs.<source alias>.internal` (its naming for
`offset-syncs.topic.location=target`), one partition, kept by time rather than compacted: exact
translation of an old group offset needs the syncs around it, which compaction would drop.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka.admin import AdminClient

from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.validators import ValidString
from eosconnect.mirrormaker.formats import offset_syncs_topic
from eosconnect.storage.topics import ensure_topic

__all__ = [
    "EMIT_OFFSET_SYNCS_CONFIG",
    "define_offset_sync_settings",
    "emits_offset_syncs",
    "ensure_syncs_topic",
]

EMIT_OFFSET_SYNCS_CONFIG = "emit.offset-syncs.enabled"
SYNCS_REPLICATION_FACTOR_CONFIG = "offset-syncs.topic.replication.factor"
SYNCS_LOCATION_CONFIG = "offset-syncs.topic.location"


def define_offset_sync_settings(config_def: ConfigDef) -> ConfigDef:
    return (
        config_def.define(
            EMIT_OFFSET_SYNCS_CONFIG,
            ConfigType.BOOLEAN,
            True,
            Importance.LOW,
            "Whether the mirror writes MM2-format offset syncs (source offset -> target offset) in the "
            "transaction that copies the records, to mm2-offset-syncs.<source.cluster.alias>.internal on "
            "the target cluster; MirrorCheckpoint translates group offsets exactly from them. Only the "
            "exactly-once modes write them (transaction.producer=true, exactly.once.source.support=enabled).",
        )
        .define(
            SYNCS_REPLICATION_FACTOR_CONFIG,
            ConfigType.INT,
            -1,
            Importance.LOW,
            "Replication factor of the offset-syncs topic; -1 takes the target broker's default.",
        )
        .define(
            SYNCS_LOCATION_CONFIG,
            ConfigType.STRING,
            "target",
            Importance.LOW,
            "Where offset syncs live. Only target is possible here: they are written in the target "
            "cluster's transaction (MM2's default, source, cannot be exact).",
            ValidString.in_("target"),
        )
    )


def emits_offset_syncs(config: Mapping[str, str]) -> bool:
    return str(config.get(EMIT_OFFSET_SYNCS_CONFIG, "true")).strip().lower() == "true"


def ensure_syncs_topic(admin: AdminClient, source_alias: str, config: Mapping[str, str]) -> str:
    """Create the offset-syncs topic on the target if missing; returns its name."""
    topic = offset_syncs_topic(source_alias)
    ensure_topic(
        admin,
        topic,
        partitions=1,
        replication_factor=int(config.get(SYNCS_REPLICATION_FACTOR_CONFIG) or -1),
        compacted=False,
        replication_setting=SYNCS_REPLICATION_FACTOR_CONFIG,
    )
    return topic
