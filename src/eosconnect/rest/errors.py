"""Error bodies: every failure answers Kafka Connect's `{"error_code": <int>, "message": "<text>"}`.

- `HerderError` subclasses map to their `status_code` (404, 409, 400, 403); a `BadRequestError`'s
  per-field `errors` are appended to the message, one `field: problem` line each, unless the
  message already names the field.
- Request validation (a body that is not JSON, a wrong shape, unknown top-level fields, a query
  parameter of the wrong type) answers **400**. Kafka Connect answers 500 for some of these
  (Jackson parse and mapping errors reach its generic exception mapper); eosconnect answers 400
  for all of them because the client, not the server, is at fault. A path parameter of the wrong
  type (`/connectors/c/tasks/x/status`) answers 404, as JAX-RS does.
- Unknown paths answer 404 and wrong methods 405, with the same body.
- Any other exception answers 500 with the body and a logged traceback; the response never
  contains a stack trace.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse

from eosconnect.cluster.herder_api import BadRequestError, HerderError

log = logging.getLogger("eosconnect.rest")

__all__ = [
    "error_body",
    "error_response",
    "herder_error_message",
    "http_exception_handler",
    "validation_error_message",
    "validation_exception_handler",
]


def error_body(status: int, message: str) -> dict[str, Any]:
    return {"error_code": int(status), "message": message}


def error_response(status: int, message: str, headers: Mapping[str, str] | None = None) -> JSONResponse:
    return JSONResponse(error_body(status, message), status_code=status, headers=dict(headers or {}))


def herder_error_message(exc: HerderError) -> str:
    message = str(exc) or type(exc).__name__
    if isinstance(exc, BadRequestError) and exc.errors:
        lines = [
            f"{field}: {'; '.join(problems) if problems else 'invalid value'}"
            for field, problems in exc.errors.items()
            if field not in message
        ]
        if lines:
            message = message.rstrip() + "\n" + "\n".join(lines)
    return message


def _loc_text(loc: Sequence[Any]) -> str:
    parts = [str(p) for p in loc]
    # FastAPI prefixes the source ("body", "query", "path", "header"); a plain-type union adds the
    # member type at the end, which tells the user nothing.
    if parts and parts[0] in ("body", "query", "path", "header", "cookie"):
        source, rest = parts[0], parts[1:]
        if source == "body":
            return ".".join(rest) if rest else "request body"
        return f"{source} parameter {'.'.join(rest)}" if rest else source
    return ".".join(parts)


def validation_error_message(errors: Sequence[Mapping[str, Any]]) -> str:
    problems: list[str] = []
    for err in errors:
        kind = err.get("type", "")
        if kind == "json_invalid":
            detail = (err.get("ctx") or {}).get("error") or err.get("msg") or "invalid JSON"
            return f"Malformed JSON in the request body: {detail}"
        msg = str(err.get("msg", "invalid value"))
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        if kind == "extra_forbidden":
            msg = "unknown field (not allowed here)"
        elif kind == "missing":
            msg = "field required"
        where = _loc_text(err.get("loc", ()))
        problems.append(f"{where}: {msg}" if where else msg)
    if not problems:
        return "Invalid request"
    return "Invalid request: " + "; ".join(dict.fromkeys(problems))


async def validation_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if any((e.get("loc") or ("",))[0] == "path" for e in errors):
        return error_response(404, f"Not found: {request.url.path} ({validation_error_message(errors)})")
    return error_response(400, validation_error_message(errors))


async def http_exception_handler(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    if status == 404:
        message = f"Unknown endpoint: {request.method} {request.url.path}"
    elif status == 405:
        message = f"HTTP method {request.method} is not supported by {request.url.path}"
    else:
        detail = exc.detail
        message = detail if isinstance(detail, str) else json.dumps(detail)
    return error_response(status, message, headers=getattr(exc, "headers", None))
