"""One-shot runs of an Airbyte source (`spec`, `check`, `discover`) and the files they are given.

The source's config (secrets included) is written to a private temporary directory, readable only
by the worker's user, and removed when the run ends.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.hosted.airbyte_protocol import parse_message, trace_error
from eosconnect.connectors.hosted.process import EndOfOutput, ProtocolProcess

__all__ = ["COMMAND_TIMEOUT_S", "private_files", "run_command"]

#: How long `spec`, `check` and `discover` may take (a source's `check` talks to its system).
COMMAND_TIMEOUT_S = 120.0

log = logging.getLogger(__name__)


@contextmanager
def private_files(**contents: Any) -> Iterator[dict[str, str]]:
    """Each keyword's value written as JSON to `<tmp>/<keyword>.json` (mode 0600); their paths."""
    with tempfile.TemporaryDirectory(prefix="eosconnect-hosted-") as tmp:
        os.chmod(tmp, 0o700)
        paths = {}
        for name, value in contents.items():
            path = Path(tmp) / f"{name}.json"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(value, f)
            paths[name] = str(path)
        yield paths


def run_command(
    argv: Sequence[str], what: str, wanted: str, timeout_s: float = COMMAND_TIMEOUT_S
) -> dict[str, Any]:
    """Run `argv` to its end and return its first message of type `wanted` (SPEC, CATALOG,
    CONNECTION_STATUS); a TRACE error, a crash or no such message is a `ConnectException`."""
    process = ProtocolProcess(argv, what, log)
    found: dict[str, Any] | None = None
    deadline = time.monotonic() + timeout_s
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise ConnectException(f"{what} did not finish within {timeout_s:.0f} s")
            line = process.next_line(min(left, 1.0))
            if line is None:
                continue
            if isinstance(line, EndOfOutput):
                break
            if not line.strip():
                continue
            message = parse_message(line, what)
            kind = message["type"]
            if kind == "TRACE":
                error = trace_error(message)
                if error is not None:
                    raise ConnectException(f"{what} failed: {error}")
            elif kind == "LOG":
                entry = message["log"]
                log.debug("%s: %s %s", what, entry.get("level"), entry.get("message"))
            elif kind == wanted and found is None:
                found = message
    finally:
        process.stop()
    if found is None:
        raise ConnectException(f"{what} ended without a {wanted} message")
    return found
