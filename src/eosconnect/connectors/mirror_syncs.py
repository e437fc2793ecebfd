"""Offset syncs of the mirrors: the settings, the topic, and the records for one transaction.

Both exactly-once mirrors write MM2-format offset syncs into the transaction that copies the
records (see eosconnect.connectors.mirror_translation for why that makes translation exact). They live on
the *target* cluster, in MM2's `mm2-offset-syncs.<source alias>.internal` (its naming for
`offset-syncs.topic.location=target`), one partition, kept by time rather than compacted: exact
translation of an old group offset needs the syncs around it, which compaction would drop.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from eosconnect.api.batch import ColumnOffsets, LandedRecords
from eosconnect.api.config import ConfigDef, ConfigType, Importance
from eosconnect.api.errors import ConnectException
from eosconnect.api.transactions import TransactionRecord
from eosconnect.api.validators import ValidString
from eosconnect.connectors.mirror_formats import OffsetSync, offset_syncs_topic
from eosconnect.connectors.mirror_topics import connection_settings
from eosconnect.connectors.mirror_translation import OffsetSyncIndex, OffsetSyncWriter, covered_from
from eosconnect.storage.topic_reader import read_to_end
from eosconnect.storage.topics import ensure_topic

__all__ = [
    "EMIT_OFFSET_SYNCS_CONFIG",
    "OffsetSyncs",
    "define_offset_sync_settings",
    "emits_offset_syncs",
    "ensure_syncs_topic",
    "offset_syncs_errors",
    "read_sync_index",
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


def offset_syncs_errors(config: Mapping[str, str], exactly_once: bool, fix: str) -> dict[str, list[str]]:
    """An explicit `emit.offset-syncs.enabled=true` on a mirror that will not run exactly once
    (so writes none, and no checkpoint of its topics can ever be exact): refused, naming `fix`."""
    if exactly_once or str(config.get(EMIT_OFFSET_SYNCS_CONFIG, "")).strip().lower() != "true":
        return {}
    return {
        EMIT_OFFSET_SYNCS_CONFIG: [
            "offset syncs are written only in the transactions of an exactly-once mirror, and this one "
            f"copies at least once, so it would write none (and MirrorCheckpoint no checkpoint): {fix}, "
            f"or remove {EMIT_OFFSET_SYNCS_CONFIG}"
        ]
    }


def last_copied(client: Mapping[str, Any], source_alias: str) -> dict[tuple[str, int], int]:
    """Per source partition, the highest source offset any mirror from `source_alias` has copied
    (committed offset syncs on the target); empty if there are none. This is where a new mirror of
    the same flow resumes without a gap or a duplicate: KIP-656's migration from a source mirror to
    a sink mirror, whatever each keeps as its own offsets."""
    try:
        records = read_to_end(connection_settings(client), offset_syncs_topic(source_alias), timeout=60)
    except KafkaException:
        return {}  # no syncs topic: nothing was copied exactly once before
    last: dict[tuple[str, int], int] = {}
    for record in records:
        if record.key is not None and record.value is not None:
            sync = OffsetSync.decode(record.key, record.value)
            key = (sync.topic, sync.partition)
            last[key] = max(last.get(key, -1), sync.upstream_offset)
    return last


def read_sync_index(client: Mapping[str, Any], source_alias: str, timeout: float = 60) -> OffsetSyncIndex:
    """Every committed offset sync of the flow from `source_alias`, indexed as MirrorCheckpoint
    indexes them (empty if there is no syncs topic)."""
    index = OffsetSyncIndex()
    try:
        records = read_to_end(connection_settings(client), offset_syncs_topic(source_alias), timeout=timeout)
    except KafkaException:
        return index
    for record in records:
        if record.key is not None and record.value is not None:
            index.add(OffsetSync.decode(record.key, record.value), covered_from(record.headers))
    return index


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


class OffsetSyncs:
    """The offset syncs of one mirror task's transactions: its `TransactionParticipant`.

    Every transaction that copies records gets the MM2-format syncs of its copies, made from the
    target offsets they landed at, into the syncs topic's one partition (exact translation: see
    eosconnect.connectors.mirror_translation). A landed run's source partition names the source
    `topic` and `partition` (MirrorSource's MM2 partitions and the sink's consumed partitions both
    do); its source offsets carry the source `offset`. The task says where it resumes reading each
    partition (`resumes_at`), for the syncs' coverage headers."""

    def __init__(self, source_alias: str) -> None:
        self.topic = offset_syncs_topic(source_alias)
        self._writer = OffsetSyncWriter()

    def resumes_at(self, topic: str, partition: int, offset: int) -> None:
        """The task's consumer starts reading `topic`-`partition` at source offset `offset`."""
        self._writer.resumes_at(topic, partition, offset)

    def transaction_records(self, landed: Sequence[LandedRecords]) -> list[TransactionRecord]:
        """MM2-format offset syncs for the records of the transaction about to commit. A columnar
        batch comes as one `LandedRecords` with its source offsets as a column: no object per
        record here."""
        copies: list[tuple[str, int, int, int]] = []
        for span in landed:
            origin = span.source_partition
            topic, partition = str(origin["topic"]), int(origin["partition"])  # type: ignore[arg-type]
            offsets = span.source_offsets
            column = offsets.column("offset") if isinstance(offsets, ColumnOffsets) else None
            sources = column if column is not None else [int(offset["offset"]) for offset in offsets]  # type: ignore[arg-type]
            if len(sources) != len(span.offsets):
                raise ConnectException(
                    f"{len(sources)} source offsets for {len(span.offsets)} copies of {topic}-{partition}"
                )
            copies.extend(zip(repeat(topic), repeat(partition), sources, span.offsets))  # type: ignore[arg-type]
        return [
            TransactionRecord(self.topic, 0, sync.key(), sync.value(), headers)
            for sync, headers in self._writer.records(copies)
        ]
