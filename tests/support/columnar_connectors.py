"""SequenceSource returning its records as `SourceBatch` columns, for the runtime's columnar fast
path; optionally SIGKILLs its own Python worker once (like `connectors.CrashingSequenceTask`); and a
transformation that takes every other batch whole (`AlternatingTag`)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from eosconnect.api.batch import ColumnOffsets, SourceBatch
from eosconnect.api.records import SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.api.transforms import Transformation
from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask


class ColumnarSequenceTask(SequenceSourceTask):
    """The same records, keys, values and offsets as SequenceSource, as one batch per poll."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._polls = 0
        self._crash_after = int(config.get("crash.after.polls", "-1"))
        marker_dir = config.get("crash.marker.dir")
        self._marker = Path(marker_dir) / f"crashed-{self.task_index}" if marker_dir else None

    def poll(self) -> SourceBatch | None:  # type: ignore[override]
        self._polls += 1
        if self._marker is not None and self._polls > self._crash_after and not self._marker.exists():
            self._marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        records = super().poll()
        if not records:
            return None
        return SourceBatch(
            source_partition=self.partition,
            source_offset=records[-1].source_offset,  # type: ignore[arg-type]
            topic=self.topic,
            keys=[r.key for r in records],
            values=[r.value for r in records],
            record_offsets=ColumnOffsets({"seq": [r.source_offset["seq"] for r in records]}),  # type: ignore[index]
        )


class ColumnarSequenceConnector(SequenceSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return ColumnarSequenceTask


class AlternatingTag(Transformation[SourceRecord]):
    """Adds `via` to each (dict) value: "columns" where it takes a whole batch, "records" where it
    goes record by record. It declines every other batch, so a runner meets both paths in one job."""

    def __init__(self) -> None:
        super().__init__()
        self._batches = 0

    def apply(self, record: SourceRecord) -> SourceRecord | None:
        return record.new_record(value={**record.value, "via": "records"})

    def apply_columns(self, batch: SourceBatch) -> SourceBatch | None:
        self._batches += 1
        if self._batches % 2 == 0:
            return None
        return batch.replace(values=[{**value, "via": "columns"} for value in batch.values])
