"""Source offsets in Kafka: where they live, how they are read, and how they are written.

KIP-618 gives a connector up to two offsets topics: the worker's global one and, when configured
(or implied by a producer pointed at another cluster), a separate one on the cluster the connector
writes to. Tasks read a combined view in which the separate topic wins partition by partition, and
committed offsets of such connectors are copied to the global topic in the background so that a
later downgrade or a switch back to the global topic loses nothing.

One module per job: `reading` (a topic's contents, a connector's combined view), `placement` (which
topic, on which cluster, with which client settings), `writing` (outside transactions, waiting for
the acks), `copier` (the background copy to the global topic) and `file` (the standalone worker's
`offset.storage.file.filename`, instead of a topic). The names below are the package's
interface; import them from here.
"""

from __future__ import annotations

from eosconnect.storage.offsets.copier import GlobalOffsetCopier
from eosconnect.storage.offsets.file import OFFSETS_FILE_SETTING, FileOffsetStore, FileOffsetView
from eosconnect.storage.offsets.placement import (
    DEFAULT_OFFSETS_TOPIC,
    OffsetsTopicPlacement,
    offsets_topic_for,
    same_bootstrap,
)
from eosconnect.storage.offsets.reading import ConnectorOffsetView, OffsetMap, OffsetsTopic, read_offsets
from eosconnect.storage.offsets.writing import (
    OffsetWriteError,
    OffsetWriter,
    PartitionOffsets,
    encode_offset_records,
    write_offsets,
)

__all__ = [
    "DEFAULT_OFFSETS_TOPIC",
    "OFFSETS_FILE_SETTING",
    "ConnectorOffsetView",
    "FileOffsetStore",
    "FileOffsetView",
    "GlobalOffsetCopier",
    "OffsetMap",
    "OffsetWriteError",
    "OffsetWriter",
    "OffsetsTopic",
    "OffsetsTopicPlacement",
    "PartitionOffsets",
    "encode_offset_records",
    "offsets_topic_for",
    "read_offsets",
    "same_bootstrap",
    "write_offsets",
]
