"""The FastAPI application: Kafka Connect's REST API in front of a `Herder`.

    app = create_app(herder, basic_auth="admin:secret")
    server = RestServer(app, host="0.0.0.0", port=8083).start()

The routes only translate between HTTP and the `Herder` protocol (cluster/herder_api.py). Every
error answers `{"error_code", "message"}` (rest/errors.py); requests only the leader may serve are
forwarded to it (rest/forwarding.py); internal endpoints need a session-key signature
(rest/routes_internal.py); basic auth is optional (rest/middleware.py). The operator's web page,
`/console`, is served on the same listener behind the same auth (rest/routes_console.py).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from eosconnect import __version__
from eosconnect.cluster.herder_api import Herder, HerderError, NotLeaderError
from eosconnect.rest import routes_admin, routes_connectors, routes_console, routes_internal, routes_plugins
from eosconnect.rest.console_samples import ConsoleSamples
from eosconnect.rest.errors import (
    error_response,
    herder_error_message,
    http_exception_handler,
    validation_exception_handler,
)
from eosconnect.rest.forwarding import DEFAULT_MAX_HOPS, Forwarder
from eosconnect.rest.held_answers import HeldAnswers
from eosconnect.rest.loggers import LoggerLevels, parse_level
from eosconnect.rest.middleware import BasicAuthMiddleware, RequestBufferMiddleware, parse_basic_auth_users
from eosconnect.storage.session_key import DEFAULT_MAX_AGE_MS, SessionKeyError

__all__ = ["create_app", "default_commit"]

DESCRIPTION = """\
Kafka Connect-compatible REST API of an eosconnect worker.

Errors answer `{"error_code": <int>, "message": "<text>"}`. Malformed JSON, unknown fields and
values of the wrong type answer 400 (Kafka Connect answers 500 for some of these). Requests only the
leader can serve are forwarded to it (at most two hops). The `internal` endpoints need a
session-key signature and are not for clients.
"""


def default_commit() -> str:
    """The commit id shown by `GET /`: `EOSCONNECT_COMMIT` if set (build pipelines), else "unknown"."""
    return os.environ.get("EOSCONNECT_COMMIT", "unknown")


def create_app(
    herder: Herder,
    *,
    basic_auth: str | Mapping[str, str] | None = None,
    version: str | None = None,
    commit: str | None = None,
    own_url: str | None = None,
    forward_timeout: float = 90.0,
    forward_verify: bool | str = True,
    max_forward_hops: int = DEFAULT_MAX_HOPS,
    signature_max_age_ms: int = DEFAULT_MAX_AGE_MS,
) -> FastAPI:
    """Build the REST app for `herder`.

    - `basic_auth`: `"user:password,user2:password2"` (`rest.basic.auth.users`) or a mapping;
      None or empty disables authentication. The signed internal endpoints are exempt.
    - `version`, `commit`: shown by `GET /` (default: the package version, `default_commit()`).
    - `own_url`: this worker's advertised URL (default `herder.rest_url`), to refuse forwarding to itself.
    - `forward_timeout`, `forward_verify`: httpx timeout (s) and TLS verification (bool or CA file)
      for requests forwarded to the leader; `max_forward_hops`: how often a request may be forwarded.
    - `signature_max_age_ms`: how old a signed internal request may be.

    Long because it registers the app's middleware, exception handlers and routers, each a few
    lines that share the settings above; the routes themselves live in their own modules.
    """
    app = FastAPI(
        title="eosconnect REST API",
        version=version or __version__,
        description=DESCRIPTION,
        redirect_slashes=False,
    )
    app.state.herder = herder
    app.state.held_answers = HeldAnswers(herder)
    app.state.version = version or __version__
    app.state.commit = commit or default_commit()
    app.state.signature_max_age_ms = signature_max_age_ms
    app.state.logger_levels = LoggerLevels()
    app.state.console_samples = ConsoleSamples(herder)
    if hasattr(herder, "on_cluster_logger_level"):  # KIP-976: levels other workers set for the cluster

        def apply_cluster_level(namespace: str, level: str) -> None:
            parsed = parse_level(level)
            if parsed is not None:
                app.state.logger_levels.set_level(namespace, parsed)

        herder.on_cluster_logger_level = apply_cluster_level
    forwarder = Forwarder(
        own_url if own_url is not None else getattr(herder, "rest_url", None),
        max_hops=max_forward_hops,
        timeout=forward_timeout,
        verify=forward_verify,
    )
    app.state.forwarder = forwarder

    async def herder_error_handler(request: Request, exc: Exception) -> Response:
        if isinstance(exc, NotLeaderError):
            return await forwarder.forward(request, exc)
        assert isinstance(exc, HerderError)
        return error_response(exc.status_code, herder_error_message(exc))

    async def session_key_error_handler(request: Request, exc: Exception) -> Response:
        return error_response(403, str(exc))

    app.add_exception_handler(HerderError, herder_error_handler)
    app.add_exception_handler(SessionKeyError, session_key_error_handler)
    app.add_exception_handler(RequestValidationError, validation_exception_handler)
    app.add_exception_handler(StarletteHTTPException, http_exception_handler)

    app.include_router(routes_admin.router)
    app.include_router(routes_connectors.router)
    app.include_router(routes_internal.router)
    app.include_router(routes_internal.internal_router)
    app.include_router(routes_plugins.router)
    app.include_router(routes_console.router)

    # Outermost last: authentication first, then body buffering and the 500 barrier.
    app.add_middleware(RequestBufferMiddleware)
    users = parse_basic_auth_users(basic_auth)
    app.state.basic_auth_enabled = bool(users)
    if users:
        app.add_middleware(BasicAuthMiddleware, users=users)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        # FastAPI documents its own 422; this API answers 400 with the error body instead.
        for path_item in schema.get("paths", {}).values():
            for operation in path_item.values():
                responses = operation.get("responses", {})
                if "422" in responses:
                    del responses["422"]
                    responses.setdefault(
                        "400",
                        {
                            "description": "Bad request",
                            "content": {
                                "application/json": {"schema": {"$ref": "#/components/schemas/ErrorMessage"}}
                            },
                        },
                    )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components.setdefault(
            "ErrorMessage",
            {
                "type": "object",
                "title": "ErrorMessage",
                "required": ["error_code", "message"],
                "properties": {
                    "error_code": {"type": "integer", "title": "Error Code"},
                    "message": {"type": "string", "title": "Message"},
                },
            },
        )
        if users:
            schema["components"].setdefault("securitySchemes", {})["basicAuth"] = {
                "type": "http",
                "scheme": "basic",
            }
            schema["security"] = [{"basicAuth": []}]
        app.openapi_schema = schema
        return schema

    # FastAPI's documented way to customise the schema: replace the app's openapi method
    app.openapi = openapi  # type: ignore[method-assign]
    return app
