"""Shared pieces of the route modules: the herder dependency, the signature check, OpenAPI helpers."""

from __future__ import annotations

import logging
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import Depends, Request

from eosconnect.cluster.herder_api import BadRequestError, ForbiddenError, Herder
from eosconnect.cluster.names import connector_name_errors
from eosconnect.rest.forwarding import request_body, request_raw_path
from eosconnect.rest.models import ErrorMessage
from eosconnect.storage.session_key import (
    DEFAULT_MAX_AGE_MS,
    ReplayGuard,
    SessionKeyError,
    SessionKeyFailure,
    verify_request,
)

log = logging.getLogger("eosconnect.rest")

CONNECTOR_CLASS = "connector.class"
NAME = "name"

_DESCRIPTIONS = {
    400: "Bad request: malformed JSON, unknown fields or an invalid configuration",
    401: "Authentication required (basic auth is enabled)",
    403: "Forbidden: the internal request is unsigned, badly signed or expired",
    404: "Not found: no such connector, task, plugin or logger",
    409: "Conflict: the connector exists, or a rebalance or a new generation is pending",
    500: "The request failed unexpectedly or timed out",
}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses=` entries for the error codes a route may answer."""
    return {code: {"model": ErrorMessage, "description": _DESCRIPTIONS.get(code, "Error")} for code in codes}


def get_herder(request: Request) -> Herder:
    return request.app.state.herder


HerderDep = Annotated[Herder, Depends(get_herder)]


def connector_location(name: str) -> str:
    return "/connectors/" + quote(name, safe="")


def check_connector_name(name: str) -> None:
    """Kafka Connect's `name` validator (not empty, no ISO control characters), and no name that
    could not be addressed over REST afterwards (cluster/names.py)."""
    problems = connector_name_errors(name)
    if problems:
        raise BadRequestError(f"Connector name {name!r} is invalid: {'; '.join(problems)}", {NAME: problems})


def check_and_put_name(name: str, config: dict[str, str], *, where: str = "the URL") -> None:
    """A `name` in the config must equal the connector's name; an absent one is filled in."""
    included = config.get(NAME)
    if included is None:
        config[NAME] = name
    elif included != name:
        raise BadRequestError(
            f"Connector name configuration ({included}) doesn't match connector name in {where} ({name})"
        )


def require_connector_class(config: dict[str, str]) -> None:
    if not (config.get(CONNECTOR_CLASS) or "").strip():
        raise BadRequestError(
            "Connector configuration is invalid and contains the following 1 error(s):\n"
            f'Missing required configuration "{CONNECTOR_CLASS}" which has no default value.\n'
            "You can also find the above list of errors at the endpoint "
            "`/connector-plugins/{connectorType}/config/validate`",
            {
                CONNECTOR_CLASS: [
                    f'Missing required configuration "{CONNECTOR_CLASS}" which has no default value.'
                ]
            },
        )


def _replay_guard(request: Request, max_age_ms: int) -> ReplayGuard:
    guard = getattr(request.app.state, "replay_guard", None)
    if guard is None:
        guard = request.app.state.replay_guard = ReplayGuard(max_age_ms)
    return guard


def verify_signature(request: Request, herder: HerderDep) -> None:
    """Dependency of the internal endpoints: 403 unless signed with a current or previous session key.

    The signature binds the path as sent; a path the client percent-encoded differently from
    the one it signed is tried decoded as well.
    """
    body = request_body(request)
    max_age = getattr(request.app.state, "signature_max_age_ms", DEFAULT_MAX_AGE_MS)
    raw_path = request_raw_path(request)
    keys = list(herder.session_keys() or [])
    guard = _replay_guard(request, max_age)
    try:
        verify_request(keys, request.headers, request.method, raw_path, body, max_age_ms=max_age)
        guard.check(request.headers, request.method, raw_path)
        return
    except SessionKeyError as exc:
        failure = exc
    decoded = request.url.path
    if failure.reason is SessionKeyFailure.BAD_SIGNATURE and decoded != raw_path:
        try:
            verify_request(keys, request.headers, request.method, decoded, body, max_age_ms=max_age)
            guard.check(request.headers, request.method, decoded)
            return
        except SessionKeyError as exc:
            failure = exc
    log.warning("refused internal request %s %s: %s (%s)", request.method, raw_path, failure, failure.reason)
    if failure.reason is SessionKeyFailure.UNSIGNED:
        # Kafka Connect: a missing signature is a bad request (400); a wrong one is forbidden (403).
        raise BadRequestError(str(failure))
    raise ForbiddenError(str(failure))


SignedDep = Depends(verify_signature)
