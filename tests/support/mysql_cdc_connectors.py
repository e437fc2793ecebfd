"""MySqlCdcSource variants for fault tests."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from eosconnect.api.records import SourceRecord
from eosconnect.api.source import SourceTask
from eosconnect.connectors.mysql_cdc import MySqlCdcSourceConnector, MySqlCdcTask


class CrashingMySqlCdcTask(MySqlCdcTask):
    """SIGKILLs its own Python worker once (marker file in `crash.marker.dir`), in the poll after
    `crash.after.batches` streamed batches were returned."""

    def start(self, config: dict[str, str]) -> None:
        super().start(config)
        self._batches = 0
        self._crash_after = int(config["crash.after.batches"])
        self._marker = Path(config["crash.marker.dir"]) / "crashed"

    def poll(self) -> list[SourceRecord] | None:
        if self._batches >= self._crash_after and not self._marker.exists():
            self._marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        records = super().poll()
        if records and records[0].source_offset.get("snapshot") is None:  # type: ignore[union-attr]
            self._batches += 1
        return records


class CrashingMySqlCdcConnector(MySqlCdcSourceConnector):
    def task_class(self) -> type[SourceTask]:
        return CrashingMySqlCdcTask
