"""Forwarding requests that only the leader may serve.

When the herder raises `NotLeaderError(leader_url)`, the worker that received the request sends
the same request (method, raw path, query string, body, `Authorization`, content type and the
internal-request signature headers) to the leader with httpx and relays the leader's answer.

`X-Eosconnect-Forwarded: <hops>` counts how often a request was forwarded. A worker forwards only
while `hops < max_hops` (2, like Kafka Connect's `forward=true/false` query parameter, which we
honour too); past that, or when no leader is known, or when the "leader" is this worker itself,
it answers 409 with the error body, so a stale view of leadership cannot loop a request forever.
A leader that cannot be reached answers 500 ("IO Error trying to forward REST request", as Kafka
Connect does).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Mapping

import httpx
from starlette.requests import Request
from starlette.responses import Response

from eosconnect.cluster.herder_api import NotLeaderError
from eosconnect.rest.errors import error_response
from eosconnect.storage.session_key import NONCE_HEADER

log = logging.getLogger("eosconnect.rest.forwarding")

FORWARDED_HEADER = "X-Eosconnect-Forwarded"
DEFAULT_MAX_HOPS = 2
BODY_SCOPE_KEY = "eosconnect.body"
RAW_PATH_SCOPE_KEY = "eosconnect.raw_path"

#: Request headers passed on to the leader (everything else is hop-by-hop or recomputed).
_PASS_REQUEST_HEADERS = {
    "authorization",
    "content-type",
    "accept",
    "user-agent",
    "x-connect-authorization",
    "x-connect-request-signature-algorithm",
    "x-connect-request-signature-timestamp",
    NONCE_HEADER.lower(),  # part of the signature: without it the leader sees a wrong signature
}
#: Response headers relayed back to the client.
_PASS_RESPONSE_HEADERS = {"content-type", "location", "www-authenticate"}


def forwarded_hops(headers: Mapping[str, str]) -> int:
    value = headers.get(FORWARDED_HEADER.lower()) or headers.get(FORWARDED_HEADER)
    try:
        return max(int(value), 0) if value is not None else 0
    except ValueError:
        return DEFAULT_MAX_HOPS  # garbage: treat as exhausted rather than forward blindly


def request_raw_path(request: Request) -> str:
    """The path as the client sent it (percent-encoding kept), before any rewriting."""
    raw = request.scope.get(RAW_PATH_SCOPE_KEY) or request.scope.get("raw_path")
    if isinstance(raw, bytes | bytearray):
        return bytes(raw).decode("latin-1")
    if isinstance(raw, str):
        return raw
    return request.url.path


def request_body(request: Request) -> bytes:
    body = request.scope.get(BODY_SCOPE_KEY)
    return body if isinstance(body, bytes) else b""


def _same_worker(a: str, b: str | None) -> bool:
    if not b:
        return False
    return a.rstrip("/").lower() == b.rstrip("/").lower()


class Forwarder:
    def __init__(
        self,
        own_url: str | None = None,
        *,
        max_hops: int = DEFAULT_MAX_HOPS,
        timeout: float = 90.0,
        verify: bool | str = True,
    ) -> None:
        self.own_url = own_url
        self.max_hops = max_hops
        self.timeout = timeout
        # A CA file becomes an SSLContext (httpx deprecates verify=<path>).
        self.verify: bool | ssl.SSLContext = (
            ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
        )

    async def forward(self, request: Request, exc: NotLeaderError) -> Response:
        hops = forwarded_hops(request.headers)
        leader = exc.leader_url
        forward_param = request.query_params.get("forward")
        if leader is None:
            return error_response(409, str(exc))
        if forward_param is not None and forward_param.lower() == "false":
            return error_response(409, f"{exc} (forwarding disabled by forward=false)")
        if hops >= self.max_hops:
            return error_response(
                409,
                f"{exc}; the request was already forwarded {hops} time(s), the limit is {self.max_hops} "
                "(leadership is changing; retry in a few seconds)",
            )
        if self.own_url and _same_worker(self.own_url, leader):
            # The group last named this worker its leader, but its membership is in doubt (it is
            # rejoining, e.g. after its group coordinator died): "the leader is <this worker>" would
            # read as a contradiction, so say what is going on instead.
            return error_response(
                409,
                "this worker was the leader when its group last settled, but it is rejoining the group "
                "and cannot act as the leader until it has; retry in a few seconds",
            )

        url = leader.rstrip("/") + request_raw_path(request)
        query = request.scope.get("query_string", b"")
        if query:
            url += "?" + query.decode("latin-1")
        headers = {k: v for k, v in request.headers.items() if k.lower() in _PASS_REQUEST_HEADERS}
        headers[FORWARDED_HEADER] = str(hops + 1)
        body = request_body(request)
        log.debug("forwarding %s %s to the leader at %s (hop %d)", request.method, url, leader, hops + 1)
        try:
            async with httpx.AsyncClient(timeout=self.timeout, verify=self.verify) as client:
                answer = await client.request(request.method, url, content=body or None, headers=headers)
        except httpx.HTTPError as err:
            log.warning("could not forward %s %s to the leader at %s: %s", request.method, url, leader, err)
            return error_response(
                500, f"IO Error trying to forward REST request to the leader at {leader}: {err}"
            )
        out_headers = {k: v for k, v in answer.headers.items() if k.lower() in _PASS_RESPONSE_HEADERS}
        return Response(content=answer.content, status_code=answer.status_code, headers=out_headers)
