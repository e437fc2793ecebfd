"""Debezium's signals: what an operator asks a running `PostgresCdcSource` to do.

A signal is a row `(id, type, data)`: inserted into the signal table (`signal.data.collection`,
read from the replication stream like any change, so it acts at its place in the WAL), sent to
the Kafka signal topic (`signal.kafka.topic`, key = topic.prefix, value `{"type", "data"}`), or
posted to the worker's REST API (`POST /connectors/<name>/signals`, which writes it to one of those
channels). `data` is JSON. A signal that cannot be understood is logged, naming the field, and
ignored: it never fails the task.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CLOSE_WINDOW",
    "OPEN_WINDOW",
    "SIGNAL_TYPES",
    "BadSignal",
    "ExecuteSnapshot",
    "Signal",
    "parse_signal",
    "signal_insert",
    "split_table",
]

EXECUTE_SNAPSHOT = "execute-snapshot"
STOP_SNAPSHOT = "stop-snapshot"
PAUSE_SNAPSHOT = "pause-snapshot"
RESUME_SNAPSHOT = "resume-snapshot"
LOG = "log"
#: The watermark rows an incremental snapshot writes to the signal table around each chunk.
OPEN_WINDOW = "snapshot-window-open"
CLOSE_WINDOW = "snapshot-window-close"
SIGNAL_TYPES = (EXECUTE_SNAPSHOT, STOP_SNAPSHOT, PAUSE_SNAPSHOT, RESUME_SNAPSHOT, LOG)


class BadSignal(ValueError):
    """A signal that cannot be acted on; the message names the field and what it should be."""


@dataclass(frozen=True)
class ExecuteSnapshot:
    """`execute-snapshot`'s data: which tables (regular expressions matched against
    `<schema>.<table>`), and per table an optional SQL condition narrowing its rows."""

    data_collections: tuple[str, ...]
    snapshot_type: str = "incremental"
    additional_conditions: Mapping[str, str] = field(default_factory=dict)

    def matches(self, name: str) -> bool:
        return any(re.fullmatch(p, name) for p in self.data_collections)


@dataclass(frozen=True)
class Signal:
    id: str
    type: str
    data: Mapping[str, Any]
    channel: str  # source, kafka

    def execute_snapshot(self) -> ExecuteSnapshot:
        """The `execute-snapshot` data, checked; `BadSignal` names the field at fault."""
        collections = self.data.get("data-collections")
        if isinstance(collections, str):
            collections = [collections]
        if (
            not isinstance(collections, list)
            or not collections
            or not all(isinstance(c, str) and c.strip() for c in collections)
        ):
            raise BadSignal(
                "data.data-collections must be a non-empty list of regular expressions matched against "
                '<schema>.<table>, such as ["public\\\\.orders"]'
            )
        for pattern in collections:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise BadSignal(
                    f"data.data-collections: {pattern!r} is not a regular expression ({exc})"
                ) from exc
        kind = str(self.data.get("type", "incremental")).lower()
        if kind not in ("incremental", "blocking"):
            raise BadSignal(f"data.type must be incremental or blocking, not {self.data.get('type')!r}")
        conditions: dict[str, str] = {}
        raw = self.data.get("additional-conditions", [])
        if not isinstance(raw, list):
            raise BadSignal(
                'data.additional-conditions must be a list of {"data-collection", "filter"} objects'
            )
        for item in raw:
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("data-collection"), str)
                or not isinstance(item.get("filter"), str)
            ):
                raise BadSignal(
                    'each of data.additional-conditions must be {"data-collection": "<schema>.<table>", '
                    f'"filter": "<SQL condition>"}}, not {item!r}'
                )
            conditions[item["data-collection"]] = item["filter"]
        return ExecuteSnapshot(tuple(c.strip() for c in collections), kind, conditions)


def parse_signal(signal_id: Any, signal_type: Any, data: Any, channel: str) -> Signal:
    """A signal from its three columns (`data` as JSON text, a mapping, or null); `BadSignal`
    naming the field when it is not one this connector knows."""
    if not isinstance(signal_type, str) or not signal_type.strip():
        raise BadSignal(f"type must be one of {', '.join(SIGNAL_TYPES)}, not {signal_type!r}")
    kind = signal_type.strip()
    if kind not in (*SIGNAL_TYPES, OPEN_WINDOW, CLOSE_WINDOW):
        raise BadSignal(f"type {kind!r} is not a signal this connector knows ({', '.join(SIGNAL_TYPES)})")
    if data is None or data == "":
        parsed: Any = {}
    elif isinstance(data, Mapping):
        parsed = dict(data)
    else:
        try:
            parsed = json.loads(str(data))
        except ValueError as exc:
            raise BadSignal(f"data is not JSON ({exc}): {str(data)[:200]!r}") from exc
    if not isinstance(parsed, dict):
        raise BadSignal(f"data must be a JSON object, not {str(data)[:200]!r}")
    if kind == LOG and not isinstance(parsed.get("message"), str):
        raise BadSignal('data.message must be a string for a log signal: {"message": "..."}')
    return Signal("" if signal_id is None else str(signal_id), kind, parsed, channel)


def split_table(name: str, field_name: str) -> tuple[str, str]:
    """`<schema>.<table>` (the schema may be left out: public)."""
    parts = [p.strip().strip('"') for p in name.split(".")]
    if len(parts) == 1 and parts[0]:
        return "public", parts[0]
    if len(parts) == 2 and all(parts):
        return parts[0], parts[1]
    if len(parts) == 3 and all(parts):  # Debezium also accepts <database>.<schema>.<table>
        return parts[1], parts[2]
    raise BadSignal(f"{field_name} must be <schema>.<table>, not {name!r}")


def signal_insert(
    table: tuple[str, str], signal_type: str, data: Mapping[str, Any] | None
) -> tuple[str, tuple[str, str, str | None]]:
    """The INSERT that sends a signal through the signal table, and its parameters (a new id)."""
    from eosconnect.connectors.postgres_cdc.catalog import qualified

    text = None if data is None else json.dumps(dict(data))
    return (
        f"INSERT INTO {qualified(*table)} (id, type, data) VALUES (%s, %s, %s)",
        (str(uuid.uuid4()), signal_type, text),
    )
