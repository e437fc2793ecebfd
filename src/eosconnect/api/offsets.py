"""Reading committed source offsets, so a source task resumes where the last one stopped.

The runtime implements `OffsetStorageReader` over the offsets topic(s) (docs/architecture.md);
`InMemoryOffsetStorageReader` exists for connector unit tests and examples.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping

from eosconnect.api.records import Primitive, SourcePartition

__all__ = ["InMemoryOffsetStorageReader", "OffsetStorageReader"]


class OffsetStorageReader(ABC):
    """Committed offsets of the connector's source partitions (only committed ones: read_committed)."""

    @abstractmethod
    def offset(self, partition: Mapping[str, Primitive]) -> dict[str, Primitive] | None:
        """The last committed offset for `partition`, or None if it has none (or was deleted)."""

    def offsets(
        self, partitions: Iterable[Mapping[str, Primitive]]
    ) -> dict[SourcePartition, dict[str, Primitive] | None]:
        """Offsets for several partitions at once; every requested partition is a key (None: no offset).

        Override it when one round trip is cheaper than many.
        """
        return {SourcePartition.of(p): self.offset(p) for p in partitions}


class InMemoryOffsetStorageReader(OffsetStorageReader):
    """A fixed set of offsets, e.g. `InMemoryOffsetStorageReader([({"file": "a"}, {"line": 3})])`."""

    def __init__(
        self,
        offsets: Mapping[SourcePartition, Mapping[str, Primitive] | None]
        | Iterable[tuple[Mapping[str, Primitive], Mapping[str, Primitive] | None]] = (),
    ) -> None:
        pairs = offsets.items() if isinstance(offsets, Mapping) else offsets
        self._offsets: dict[SourcePartition, dict[str, Primitive] | None] = {
            SourcePartition.of(partition): dict(offset) if offset is not None else None
            for partition, offset in pairs
        }

    def offset(self, partition: Mapping[str, Primitive]) -> dict[str, Primitive] | None:
        found = self._offsets.get(SourcePartition.of(partition))
        return dict(found) if found is not None else None
