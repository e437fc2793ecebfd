"""Reading the stored offsets of `PostgresCdcTask`: its own, and Debezium's (a connector switched over).

The task's own offset is `{"lsn", "txId", "event"}` plus `lsn_end` on a transaction's last event;
Debezium's has `lsn_proc`, `lsn_commit` and `lsn_events_processed` and no `event`. Both carry the
snapshot keys while a snapshot runs. `StoredPosition` is what the task needs from either to decide
between resuming the stream and taking the snapshot again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import Primitive
from eosconnect.connectors.stored_offsets import offset_int

__all__ = ["CAPTURED", "StoredPosition", "event_position", "is_debezium_offset"]


#: The key listing the captured tables (`<schema>.<table>,...`), so a restart sees which are new.
CAPTURED = "captured_tables"


def is_debezium_offset(offset: Mapping[str, Primitive]) -> bool:
    """Whether a stored offset is Debezium's (`lsn_proc`, `lsn_commit`, `ts_usec`, ...): ours has `event`."""
    return "event" not in offset and any(
        k in offset for k in ("lsn_proc", "lsn_commit", "ts_usec", "last_snapshot_record")
    )


def _int(offset: Mapping[str, Primitive], key: str) -> int:
    return offset_int(offset, key, "PostgresCdcSource")


def event_position(offset: Mapping[str, Primitive] | None) -> tuple[int, int]:
    """(commit LSN, event index) of one of the task's own records: the order records are delivered in."""
    if offset is None:
        raise ConnectException("a PostgresCdcSource change record has no source offset")
    return _int(offset, "lsn"), _int(offset, "event")


@dataclass(frozen=True, slots=True)
class StoredPosition:
    """Where a stored offset leaves the task: whether its snapshot completed, and where to resume.

    `resume` is the (lsn, event) of the task's own last delivered event; `debezium_resume` is
    Debezium's (`lsn_commit`, `lsn_proc`, `lsn_events_processed`) instead. `last_commit_lsn` is
    the end of the last transaction delivered (Debezium's lastCommitLsn), None after a heartbeat.
    """

    offset: Mapping[str, Primitive]
    snapshot_done: bool
    last_commit_lsn: int | None
    resume: tuple[int, int] | None
    debezium_resume: tuple[int, int | None, int] | None

    @classmethod
    def of(cls, stored: Mapping[str, Primitive]) -> StoredPosition:
        debezium = is_debezium_offset(stored)
        if debezium:
            snapshot_done = (
                not stored.get("snapshot")
                or stored.get("last_snapshot_record") is True
                or stored.get("snapshot_completed") is True
            )
        else:
            snapshot_done = (
                stored.get("snapshot") in (None, "last") or stored.get("snapshot_completed") is True
            )
        if not snapshot_done:
            return cls(stored, False, None, None, None)
        last_commit_lsn = None
        if "heartbeat" not in stored:
            for key in ("lsn_end", "lsn_commit"):
                if key in stored:
                    last_commit_lsn = None if stored[key] is None else _int(stored, key)
                    break
        if debezium:
            resume = (
                _int(stored, "lsn_commit") if stored.get("lsn_commit") else 0,
                None if stored.get("lsn_proc") is None else _int(stored, "lsn_proc"),
                _int(stored, "lsn_events_processed") if stored.get("lsn_events_processed") else 0,
            )
            return cls(stored, True, last_commit_lsn, None, resume)
        event = _int(stored, "event") if "event" in stored else -1
        return cls(stored, True, last_commit_lsn, (_int(stored, "lsn"), event), None)

    @property
    def lsn(self) -> int:
        """The stored offset's own LSN (the commit LSN of its transaction, or the snapshot's point)."""
        return _int(self.offset, "lsn")
