"""Airbyte protocol messages as the host reads them from a source's stdout.

Each line is one `AirbyteMessage`; `parse_message` checks the parts the host relies on and names
the line when it cannot. Types the host has no use for (`CONTROL`, `TRACE` other than `ERROR`) are
returned as they are for the caller to skip; a type outside the protocol is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.hosted.process import preview

__all__ = [
    "KNOWN_TYPES",
    "StateMessage",
    "parse_message",
    "state_key",
    "stream_key",
]

KNOWN_TYPES = frozenset(
    {
        "RECORD",
        "STATE",
        "LOG",
        "TRACE",
        "SPEC",
        "CATALOG",
        "CONNECTION_STATUS",
        "CONTROL",
        "DESTINATION_CATALOG",
    }
)


def stream_key(name: str, namespace: str | None) -> str:
    """A stream's name as topics and offsets use it: `<namespace>.<name>` when it has one."""
    return f"{namespace}.{name}" if namespace else name


@dataclass(frozen=True)
class StateMessage:
    """A STATE: `kind` STREAM, GLOBAL or LEGACY; `stream` the stream key of a STREAM state;
    `body` the state as the source reads it back (`--state`), without `sourceStats`;
    `record_count` the source's own count of records since its previous state, if it gave one."""

    kind: str
    stream: str | None
    body: dict[str, Any]
    record_count: int | None


def state_key(state: StateMessage) -> str:
    return state.stream if state.kind == "STREAM" and state.stream is not None else state.kind


def parse_message(line: str, where: str) -> dict[str, Any]:
    """The message on `line`; a `ConnectException` naming `where` (the source and its current
    stream) and the line when it is not a JSON object with a known `type`."""
    try:
        message = json.loads(line)
    except ValueError as exc:
        raise ConnectException(
            f"{where} printed a line that is not JSON ({exc}): {preview(line)!r}"
        ) from None
    if not isinstance(message, dict):
        raise ConnectException(f"{where} printed a line that is not a protocol message: {preview(line)!r}")
    kind = message.get("type")
    if kind not in KNOWN_TYPES:
        raise ConnectException(
            f"{where} printed a message of unknown type {kind!r} (not an Airbyte protocol message): "
            f"{preview(line)!r}"
        )
    body_name = kind.lower() if kind != "CONNECTION_STATUS" else "connectionStatus"
    if kind in ("RECORD", "STATE", "LOG", "TRACE") and not isinstance(message.get(body_name), dict):
        raise ConnectException(
            f"{where} printed a {kind} message without its {body_name!r}: {preview(line)!r}"
        )
    if kind == "RECORD":
        record = message["record"]
        if not isinstance(record.get("stream"), str) or not isinstance(record.get("data"), dict):
            raise ConnectException(
                f"{where} printed a RECORD without a stream name and a data object: {preview(line)!r}"
            )
    return message


def parse_state(message: dict[str, Any], where: str, line: str) -> StateMessage:
    state = dict(message["state"])
    stats = state.pop("sourceStats", None)
    state.pop("destinationStats", None)
    count = None
    if isinstance(stats, dict) and isinstance(stats.get("recordCount"), int | float):
        count = int(stats["recordCount"])
    kind = state.get("type") or "LEGACY"
    if kind == "STREAM":
        stream = state.get("stream")
        descriptor = stream.get("stream_descriptor") if isinstance(stream, dict) else None
        if not isinstance(descriptor, dict) or not isinstance(descriptor.get("name"), str):
            raise ConnectException(
                f"{where} printed a STREAM state without its stream_descriptor: {preview(line)!r}"
            )
        key = stream_key(descriptor["name"], descriptor.get("namespace"))
        return StateMessage("STREAM", key, state, count)
    if kind == "GLOBAL":
        if not isinstance(state.get("global"), dict):
            raise ConnectException(f"{where} printed a GLOBAL state without 'global': {preview(line)!r}")
        return StateMessage("GLOBAL", None, state, count)
    if kind == "LEGACY":
        if "data" not in state:
            raise ConnectException(f"{where} printed a LEGACY state without 'data': {preview(line)!r}")
        return StateMessage("LEGACY", None, {"type": "LEGACY", "data": state["data"]}, count)
    raise ConnectException(f"{where} printed a state of unknown type {kind!r}: {preview(line)!r}")


def trace_error(message: dict[str, Any]) -> str | None:
    """The source's own error text of a TRACE ERROR, else None."""
    trace = message["trace"]
    if trace.get("type") != "ERROR":
        return None
    error = trace.get("error") or {}
    text = error.get("message") or error.get("internal_message") or "an error without a message"
    internal = error.get("internal_message")
    if internal and internal != text:
        text = f"{text} ({internal})"
    return str(text)
