"""A small Airbyte source for tests of the protocol host, run as a program (`write_source`).

Stream `events` is incremental: ids `last_id + 1 .. count` from the state `{"last_id": n}`, a STATE
(with `sourceStats.recordCount`) after every `every` records, so a restart from any committed
state goes on with exactly the next id. Stream `snapshot` supports only full refresh. Config keys
that make it misbehave, for the host's error paths: `garbage_after` (print a line that is not JSON
after that many records), `unknown_after` (a message of an unknown type), `crash_after` (exit 3,
saying why on stderr), `trace_after` (a TRACE error), `miscount` (a wrong recordCount),
`sleep_ms` (pause per record), `fail_check` (check answers FAILED). `state_log` (a path): each read
appends the state it was given there as one JSON line, so a test sees what a restart resumed from.
"""

from __future__ import annotations

import json
import stat
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["SPEC", "write_source"]

SPEC = {
    "connectionSpecification": {
        "type": "object",
        "required": ["count"],
        "properties": {
            "count": {"type": "integer", "minimum": 0},
            "every": {"type": "integer", "minimum": 1},
            "sleep_ms": {"type": "integer"},
        },
    }
}

EVENTS_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": ["null", "string"]},
        "amount": {"type": ["null", "number"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "extra": {"type": "object"},
    },
}


def write_source(directory: Path) -> str:
    """An executable in `directory` that runs this module's `main` with the test's Python."""
    path = directory / "source-scripted"
    path.write_text(
        f"#!{sys.executable}\nimport runpy, sys\nsys.argv[0] = {__file__!r}\n"
        f"runpy.run_path({__file__!r}, run_name='__main__')\n"
    )
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def event(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"event {i}", "amount": i * 1.25, "tags": [f"t{i % 3}"], "extra": {"n": i}}


def read(config: dict[str, Any], catalog: dict[str, Any], state: Any) -> None:
    count, every = int(config["count"]), int(config.get("every", 10))
    if config.get("state_log"):
        with open(config["state_log"], "a") as log:
            log.write(json.dumps(state) + "\n")
    streams = [s["stream"]["name"] for s in catalog["streams"]]
    emit({"type": "LOG", "log": {"level": "INFO", "message": f"reading {', '.join(streams)}"}})
    emit({"type": "TRACE", "trace": {"type": "STREAM_STATUS", "emitted_at": 1.0, "stream_status": {}}})
    if "snapshot" in streams:
        for i in range(1, 4):
            emit({"type": "RECORD", "record": {"stream": "snapshot", "data": {"id": i}, "emitted_at": 1000}})
    if "events" not in streams:
        return
    last = 0
    for entry in state or []:
        if entry.get("type") == "STREAM" and entry["stream"]["stream_descriptor"]["name"] == "events":
            last = int(entry["stream"]["stream_state"]["last_id"])
    since = 0
    for i in range(last + 1, count + 1):
        if config.get("garbage_after") == i - 1:
            sys.stdout.write("Traceback? this is not a protocol message\n")
            sys.stdout.flush()
        if config.get("unknown_after") == i - 1:
            emit({"type": "SURPRISE", "surprise": {}})
        if config.get("crash_after") == i - 1:
            sys.stderr.write("scripted source: the disk caught fire\n")
            sys.exit(3)
        if config.get("trace_after") == i - 1:
            emit(
                {
                    "type": "TRACE",
                    "trace": {
                        "type": "ERROR",
                        "emitted_at": 1.0,
                        "error": {"message": "the API refused the token"},
                    },
                }
            )
            sys.exit(1)
        emit(
            {
                "type": "RECORD",
                "record": {"stream": "events", "data": event(i), "emitted_at": 1_700_000_000_000 + i},
            }
        )
        since += 1
        if config.get("sleep_ms"):
            time.sleep(config["sleep_ms"] / 1000)
        if since == every or i == count:
            counted = since + (1 if config.get("miscount") else 0)
            emit(
                {
                    "type": "STATE",
                    "state": {
                        "type": "STREAM",
                        "stream": {"stream_descriptor": {"name": "events"}, "stream_state": {"last_id": i}},
                        "sourceStats": {"recordCount": float(counted)},
                    },
                }
            )
            since = 0


def main(argv: list[str]) -> None:
    command, options = argv[0], dict(zip(argv[1::2], argv[2::2], strict=False))

    def load(flag: str) -> Any:
        return json.loads(Path(options[flag]).read_text()) if flag in options else None

    if command == "spec":
        emit({"type": "SPEC", "spec": SPEC})
    elif command == "check":
        config = load("--config")
        ok = not config.get("fail_check")
        emit(
            {
                "type": "CONNECTION_STATUS",
                "connectionStatus": {
                    "status": "SUCCEEDED" if ok else "FAILED",
                    "message": None if ok else "cannot reach the events API",
                },
            }
        )
    elif command == "discover":
        emit(
            {
                "type": "CATALOG",
                "catalog": {
                    "streams": [
                        {
                            "name": "events",
                            "json_schema": EVENTS_SCHEMA,
                            "supported_sync_modes": ["full_refresh", "incremental"],
                            "source_defined_cursor": True,
                            "default_cursor_field": ["id"],
                            "source_defined_primary_key": [["id"]],
                        },
                        {
                            "name": "snapshot",
                            "json_schema": {"type": "object", "properties": {"id": {"type": "integer"}}},
                            "supported_sync_modes": ["full_refresh"],
                            "source_defined_primary_key": [["id"]],
                        },
                    ]
                },
            }
        )
    elif command == "read":
        read(load("--config"), load("--catalog"), load("--state"))
    else:
        sys.stderr.write(f"unknown command {command}\n")
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
