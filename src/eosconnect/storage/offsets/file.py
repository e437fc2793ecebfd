"""Source offsets in a local file: the standalone worker's `offset.storage.file.filename`.

Kafka Connect's standalone worker keeps its source offsets in one file (`FileOffsetBackingStore`):
all of it is read at start-up and rewritten whole on every flush, so the file is exactly what the
last flush committed. `FileOffsetStore` does the same with the offsets topic's record format
(storage/serialization.py): the file is a JSON list of `[key, value]` pairs, the key
`["<connector>",{<partition>}]` and the value `{<offset>}` as the offsets topic holds them, so an
entry reads the same in either store. Kafka's own file is a Java-serialized map, which no Python
reader can load: such a file is refused naming the setting, rather than overwritten.

One store serves every task of the worker (they all run in its process). A flush writes a temporary
file next to the target and renames it over it, so a crash mid-write leaves the previous flush.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from eosconnect.api.errors import ConfigException
from eosconnect.api.records import SourceOffset, SourcePartition
from eosconnect.storage.offsets.reading import ConnectorOffsetView, OffsetMap
from eosconnect.storage.offsets.writing import PartitionOffsets
from eosconnect.storage.serialization import (
    OffsetRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

__all__ = ["OFFSETS_FILE_SETTING", "FileOffsetStore", "FileOffsetView"]

OFFSETS_FILE_SETTING = "offset.storage.file.filename"


class FileOffsetStore:
    """Every connector's committed source offsets, held in memory and in the file at `path`."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._entries: dict[str, dict[SourcePartition, SourceOffset]] = self._load()

    def _load(self) -> dict[str, dict[SourcePartition, SourceOffset]]:
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise ConfigException(
                f"{OFFSETS_FILE_SETTING}={self.path}: cannot be read: {exc.strerror}"
            ) from exc
        if not raw.strip():
            return {}
        try:
            pairs = json.loads(raw)
            entries: dict[str, dict[SourcePartition, SourceOffset]] = {}
            for key, value in pairs:
                connector, partition = decode_key(json.dumps(key).encode())
                offset = decode_value(None if value is None else json.dumps(value).encode())
                if offset is not None:
                    entries.setdefault(connector, {})[partition] = offset
            return entries
        except (ValueError, TypeError, OffsetRecordError) as exc:
            raise ConfigException(
                f"{OFFSETS_FILE_SETTING}={self.path} is not an eosconnect offsets file ({exc}); a file Kafka "
                "Connect's standalone worker wrote cannot be read here: point the setting at a new file"
            ) from None

    def connector_offsets(self, connector: str) -> OffsetMap:
        """The connector's committed offsets by source partition."""
        with self._lock:
            return dict(self._entries.get(connector, {}))

    def write(self, connector: str, offsets: PartitionOffsets) -> None:
        """Commit `offsets` (None deletes a partition's offset) and rewrite the file; raises
        `OSError` when the file cannot be written (the flush then fails, as Kafka's does)."""
        with self._lock:
            mine = self._entries.setdefault(connector, {})
            for partition, offset in offsets.items():
                key = SourcePartition.of(partition)
                if offset is None:
                    mine.pop(key, None)
                else:
                    mine[key] = SourceOffset.of(offset)
            self._save()

    def _save(self) -> None:
        pairs = []
        for connector, entries in sorted(self._entries.items()):
            for partition, offset in entries.items():
                value = encode_value(offset)
                pairs.append(
                    [
                        json.loads(encode_key(connector, partition)),
                        None if value is None else json.loads(value),
                    ]
                )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps(pairs, sort_keys=True, ensure_ascii=False))
        os.replace(temporary, self.path)

    def view(self, connector: str) -> FileOffsetView:
        return FileOffsetView(connector, self)


class FileOffsetView(ConnectorOffsetView):
    """A connector's offsets as its tasks see them, from a `FileOffsetStore` rather than topics."""

    def __init__(self, connector: str, store: FileOffsetStore) -> None:
        self.connector = connector
        self.store = store
        self.separate_topic = None
        self._combined: dict[SourcePartition, SourceOffset | None] | None = None
        self._lock = threading.Lock()

    def refresh(self, timeout: float | None = None) -> None:
        with self._lock:
            self._combined = dict(self.store.connector_offsets(self.connector))
