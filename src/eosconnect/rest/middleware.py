"""ASGI middleware of the REST app: basic authentication, body buffering and the last-resort 500.

Plain ASGI (not `BaseHTTPMiddleware`) so bodies are read once, exceptions keep their tracebacks
and nothing runs on an extra task.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import re
from collections.abc import Iterable, Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eosconnect.rest.errors import error_body
from eosconnect.rest.forwarding import BODY_SCOPE_KEY, RAW_PATH_SCOPE_KEY

log = logging.getLogger("eosconnect.rest")

__all__ = [
    "INTERNAL_PATHS",
    "BasicAuthMiddleware",
    "RequestBufferMiddleware",
    "parse_basic_auth_users",
]

#: Internal worker-to-worker endpoints: they carry a session-key signature instead of credentials.
INTERNAL_PATHS = (
    re.compile(r"^/connectors/[^/]+/fence/?$"),
    re.compile(r"^/connectors/[^/]+/tasks/[^/]+/heartbeat/?$"),
    re.compile(r"^/internal/hosts/[^/]+/heartbeat/?$"),
)
MAX_BODY_BYTES = 16 * 1024 * 1024
_BODY_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


async def _send_json(send: Send, status: int, body: Any, headers: Iterable[tuple[bytes, bytes]] = ()) -> None:
    payload = json.dumps(body).encode("utf-8")
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode("ascii")),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


def parse_basic_auth_users(spec: str | Mapping[str, str] | None) -> dict[str, str]:
    """`"alice:secret,bob:pw"` (the `rest.basic.auth.users` setting) or a mapping -> {user: password}.

    Each entry splits at its first colon, so passwords may contain colons (not commas).
    """
    if spec is None:
        return {}
    if isinstance(spec, Mapping):
        return {str(k): str(v) for k, v in spec.items()}
    users: dict[str, str] = {}
    for entry in spec.split(","):
        entry = entry.strip()
        if not entry:
            continue
        user, sep, password = entry.partition(":")
        if not sep or not user:
            raise ValueError(f"basic auth entry {entry!r} is not of the form user:password")
        users[user] = password
    return users


class BasicAuthMiddleware:
    """HTTP basic authentication for every endpoint except the signed internal ones."""

    def __init__(self, app: ASGIApp, users: Mapping[str, str], realm: str = "eosconnect") -> None:
        self.app = app
        self.users = {u.encode("utf-8"): p.encode("utf-8") for u, p in users.items()}
        self.realm = realm

    def _authorized(self, header: bytes | None) -> bool:
        if not header:
            return False
        scheme, _, token = header.partition(b" ")
        if scheme.lower() != b"basic":
            return False
        try:
            decoded = base64.b64decode(token.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        user, sep, password = decoded.partition(b":")
        if not sep:
            return False
        ok = False
        for known_user, known_password in self.users.items():
            # Constant time over every entry: the answer's timing does not tell which user exists.
            ok |= hmac.compare_digest(known_user, user) & hmac.compare_digest(known_password, password)
        return ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not self.users:
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        if any(p.match(path) for p in INTERNAL_PATHS):
            await self.app(scope, receive, send)
            return
        header = dict(scope.get("headers") or []).get(b"authorization")
        if self._authorized(header):
            await self.app(scope, receive, send)
            return
        message = "Authentication required" if not header else "Invalid credentials"
        await _send_json(
            send,
            401,
            error_body(401, message),
            [(b"www-authenticate", f'Basic realm="{self.realm}"'.encode())],
        )


class RequestBufferMiddleware:
    """Reads the request body once (kept in the scope for signatures and forwarding), normalises
    a trailing slash, refuses non-JSON bodies with 415, and turns any unhandled exception into a
    500 with the error body (traceback logged, never sent)."""

    def __init__(self, app: ASGIApp, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []
        size = 0
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body_bytes:
                await _send_json(
                    send, 413, error_body(413, f"Request body larger than {self.max_body_bytes} bytes")
                )
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        body = b"".join(chunks)

        scope = dict(scope)
        scope[BODY_SCOPE_KEY] = body
        scope[RAW_PATH_SCOPE_KEY] = scope.get("raw_path") or scope.get("path", "").encode("utf-8")
        path = scope.get("path", "")
        if len(path) > 1 and path.endswith("/"):
            # Kafka Connect (Jersey) serves `/connectors/` like `/connectors`: no redirect.
            scope["path"] = path.rstrip("/") or "/"
            raw = scope.get("raw_path")
            if isinstance(raw, bytes) and len(raw) > 1:
                scope["raw_path"] = raw.rstrip(b"/") or b"/"

        if body and scope.get("method", "GET") in _BODY_METHODS:
            ctype = dict(scope.get("headers") or []).get(b"content-type", b"").decode("latin-1").lower()
            media = ctype.split(";", 1)[0].strip()
            if media and not (media == "application/json" or media.endswith("+json")):
                await _send_json(
                    send, 415, error_body(415, f"Unsupported Media Type {media!r}: send application/json")
                )
                return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, replay, tracking_send)
        except Exception as exc:
            log.exception("Uncaught exception in REST call to %s %s", scope.get("method"), scope.get("path"))
            if not started:
                text = str(exc)[:1000] or "no message"
                await _send_json(
                    send,
                    500,
                    error_body(
                        500, f"Internal server error ({type(exc).__name__}: {text}); see the worker log"
                    ),
                )
