"""Comparing a CDC source's events with Debezium's, field by field (the differential CDC tests).

Both sides' topics are read with Kafka's JsonConverter (schemas.enable=true) output as JSON; each
record becomes {key, value, headers} with the connector's topic prefix replaced by `P` (it differs
by construction). `strip_excluded` drops the fields a test tolerates (a table of path -> reason;
`snapshot:` scopes a path to snapshot events), and `differences` lists every path still unequal.
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["differences", "payloads", "strip_excluded"]


def payloads(records: list[Any], prefix: str) -> list[dict[str, Any]]:
    """Each record as {key, value, headers} JSON, the prefix replaced by P."""
    out = []
    for record in records:
        text = json.dumps(
            {
                "key": json.loads(record.key) if record.key else None,
                "value": json.loads(record.value) if record.value else None,
            }
        )
        event = json.loads(text.replace(f'"{prefix}.', '"P.').replace(f'"{prefix}"', '"P"'))
        event["headers"] = {
            k: None if v is None else v.decode().replace(prefix, "P") for k, v in record.headers
        }
        out.append(event)
    return out


def strip_excluded(event: dict[str, Any], excluded: dict[str, str]) -> dict[str, Any]:
    """`event` without the paths of `excluded` (`headers.<name>`, `value.<field>.<field>`,
    `snapshot:value...` for snapshot events only)."""
    for path in excluded:
        if path.startswith("headers."):
            event["headers"].pop(path.removeprefix("headers."), None)
    value = (event.get("value") or {}).get("payload")
    if isinstance(value, dict):
        snapshot = value["op"] == "r"
        for path in excluded:
            scope, _, dotted = path.rpartition(":")
            if (scope == "snapshot" and not snapshot) or not dotted.startswith("value."):
                continue
            parts = dotted.split(".")[1:]  # under value.payload
            holder: Any = value
            for part in parts[:-1]:
                holder = holder.get(part) or {}
            holder.pop(parts[-1], None)
    return event


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Every path at which Debezium's record `a` and ours `b` differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                out.append(f"{path}.{key}: only in {'debezium' if key in a else 'eosconnect'}")
            else:
                out += differences(a[key], b[key], f"{path}.{key}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: debezium {a!r} != eosconnect {b!r}"]
