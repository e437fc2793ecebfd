"""`Checkpoints`: a hosted source's states as source offsets that close Kafka transactions.

A state covers the records the source emitted before it: committing those records together with
the state, in one transaction, and restarting the source from the last committed state delivers
every record once, provided the source resumes deterministically from a state (an incremental
stream does). So a transaction may only end at a state after which no stream has records that
no state covers yet: with streams read one after another (what sources do) that is every state;
with interleaved streams it is the first state after which all of them are covered.

Offsets: a STREAM state is stored under its stream's partition `{"<prefix>.stream": <stream>}`; a
GLOBAL or LEGACY state (one for all streams) under `{"<prefix>.state": "GLOBAL"|"LEGACY"}`; the
value is `{"state": <the state as JSON text>}`, what the source is given back on restart.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from eosconnect.api.errors import ConnectException
from eosconnect.api.offsets import OffsetStorageReader
from eosconnect.api.records import Primitive, SourcePartition
from eosconnect.connectors.hosted.airbyte_protocol import StateMessage

__all__ = ["STATE_FIELD", "Checkpoints"]

STATE_FIELD = "state"
SHARED_KINDS = ("GLOBAL", "LEGACY")


class Checkpoints:
    """Counts a task's records per stream between states, checks the source's own counts, and
    says when a transaction may end and with which offsets (`close`)."""

    def __init__(self, prefix: str, streams: Iterable[str], reader: OffsetStorageReader | None) -> None:
        self.prefix = prefix
        self.streams = frozenset(streams)
        #: latest state per key (stream name, "GLOBAL" or "LEGACY"), closed or not
        self.latest: dict[str, dict[str, Any]] = {}
        #: the offsets as of the last close: what is (or is being) committed
        self.closed: dict[SourcePartition, dict[str, Primitive]] = {}
        self._unclosed: set[str] = set()  # keys with a state since the last close
        self._uncovered: set[str] = set()  # streams with records after their last state
        self._since_state: dict[str, int] = {}  # records per stream since its last state
        self._since_shared = 0  # records of any stream since the last GLOBAL/LEGACY state
        self.kind: str | None = None
        if reader is not None:
            self._load(reader)

    def partition(self, key: str) -> SourcePartition:
        if key in SHARED_KINDS:
            return SourcePartition({f"{self.prefix}.state": key})
        return SourcePartition({f"{self.prefix}.stream": key})

    def _load(self, reader: OffsetStorageReader) -> None:
        keys = [*sorted(self.streams), *SHARED_KINDS]
        stored = reader.offsets([self.partition(k) for k in keys])
        for key in keys:
            offset = stored.get(self.partition(key))
            text = offset.get(STATE_FIELD) if offset else None
            if not isinstance(text, str):
                continue
            try:
                state = json.loads(text)
            except ValueError:
                raise ConnectException(
                    f"the committed offset of {dict(self.partition(key))} is not a JSON state "
                    f"({text[:200]!r}); "
                    "reset the connector's offsets to read from the start"
                ) from None
            self.latest[key] = state
            self.closed[self.partition(key)] = dict(offset or {})
            if key in SHARED_KINDS:
                self.kind = key

    def restart_state(self) -> Any:
        """What the source is started with: the GLOBAL state, else the STREAM states as a list,
        else the LEGACY state's data; None when there is none."""
        if "GLOBAL" in self.latest:
            return [self.latest["GLOBAL"]]
        streams = [self.latest[s] for s in sorted(self.streams) if s in self.latest]
        if streams:
            return streams
        if "LEGACY" in self.latest:
            return self.latest["LEGACY"].get("data")
        return None

    def record_offset(self, stream: str) -> tuple[SourcePartition, dict[str, Primitive] | None]:
        """The partition and offset a record carries: the committed state it comes after, so a
        commit that does not end at a state moves nothing (the closing offsets come from `close`)."""
        partition = self.partition(self.kind if self.kind in SHARED_KINDS else stream)
        return partition, self.closed.get(partition)

    def record(self, stream: str, where: str) -> None:
        if stream not in self.streams:
            raise ConnectException(
                f"{where} emitted a record of stream {stream!r}, which is not among the streams of this task "
                f"({', '.join(sorted(self.streams))})"
            )
        self._since_state[stream] = self._since_state.get(stream, 0) + 1
        self._since_shared += 1
        self._uncovered.add(stream)

    def state(self, state: StateMessage, where: str) -> None:
        """Take a state: check its record count, cover the records before it."""
        if state.kind in SHARED_KINDS:
            if self.kind not in (None, state.kind):
                raise ConnectException(f"{where} emitted a {state.kind} state after {self.kind} states")
            received = self._since_shared
            if state.record_count is not None and state.record_count != received:
                raise ConnectException(
                    f"{where}: its {state.kind} state counts {state.record_count} record(s) since the "
                    f"previous state but {received} arrived (streams "
                    f"{', '.join(sorted(self._uncovered)) or 'none'}); "
                    "records were lost or repeated between the source and the task"
                )
            self.kind = state.kind
            self._since_shared = 0
            self._since_state.clear()
            self._uncovered.clear()
            key = state.kind
        else:
            assert state.stream is not None
            if self.kind in SHARED_KINDS:
                raise ConnectException(f"{where} emitted a STREAM state after {self.kind} states")
            if state.stream not in self.streams:
                raise ConnectException(
                    f"{where} emitted a state of stream {state.stream!r}, which is not among the streams of "
                    f"this task ({', '.join(sorted(self.streams))})"
                )
            received = self._since_state.get(state.stream, 0)
            if state.record_count is not None and state.record_count != received:
                raise ConnectException(
                    f"{where}: the state of stream {state.stream!r} counts {state.record_count} "
                    f"record(s) since its previous state but {received} arrived; records were lost or "
                    "repeated between the source and the task"
                )
            self.kind = "STREAM"
            self._since_state[state.stream] = 0
            self._uncovered.discard(state.stream)
            key = state.stream
        self.latest[key] = state.body
        self._unclosed.add(key)

    @property
    def covered(self) -> bool:
        """Every record so far comes before a state: a transaction may end here."""
        return not self._uncovered

    @property
    def uncovered(self) -> frozenset[str]:
        return frozenset(self._uncovered)

    def close(self) -> dict[SourcePartition, dict[str, Primitive]]:
        """The offsets of the states since the last close, which the transaction ending now commits."""
        offsets: dict[SourcePartition, dict[str, Primitive]] = {
            self.partition(key): {STATE_FIELD: json.dumps(self.latest[key], separators=(",", ":"))}
            for key in sorted(self._unclosed)
        }
        self._unclosed.clear()
        self.closed.update(offsets)
        return offsets

    def forget_uncovered(self) -> None:
        """The source ended cleanly without a state after its last records: they are committed
        with the states before them."""
        self._uncovered.clear()
        self._since_state.clear()
        self._since_shared = 0


def offsets_text(offsets: Mapping[SourcePartition, Mapping[str, Primitive]]) -> str:
    return json.dumps({json.dumps(dict(p), sort_keys=True): dict(o) for p, o in offsets.items()})
