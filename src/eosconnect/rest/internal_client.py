"""Client side of the signed internal endpoints, for tasks and workers.

    directive = send_heartbeat(worker_url, key, "orders", 0, generation=3, state="RUNNING",
                               metrics=task_metrics.snapshot())
    request_fencing(leader_url, key, "orders")

Both sign with `storage.session_key.sign_request` over the exact path sent and raise
`InternalRequestError` (with the HTTP status and the server's message) on any non-2xx answer.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from eosconnect.storage.session_key import SessionKey, sign_request

__all__ = ["InternalRequestError", "heartbeat_path", "request_fencing", "send_heartbeat", "signed_request"]


class InternalRequestError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message


def _message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text
    if isinstance(body, dict) and "message" in body:
        return str(body["message"])
    return response.text


def signed_request(
    base_url: str,
    key: SessionKey | bytes,
    method: str,
    path: str,
    body: Any = None,
    *,
    timeout: float = 30.0,
    verify: bool | str = True,
    client: httpx.Client | None = None,
) -> httpx.Response:
    """Send `method path` with a JSON `body` (None: no body), signed with `key`.

    With `client`, that httpx client (and its own timeout and TLS settings) sends the request.
    """
    content = b"" if body is None else json.dumps(body).encode("utf-8")
    headers = sign_request(key, method, path, content)
    if content:
        headers["Content-Type"] = "application/json"
    url = base_url.rstrip("/") + path
    if client is not None:
        response = client.request(method, url, content=content or None, headers=headers)
    else:
        tls = ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
        with httpx.Client(timeout=timeout, verify=tls) as own:
            response = own.request(method, url, content=content or None, headers=headers)
    if response.status_code >= 300:
        raise InternalRequestError(response.status_code, _message(response))
    return response


def heartbeat_path(connector: str, task: int) -> str:
    return f"/connectors/{quote(connector, safe='')}/tasks/{int(task)}/heartbeat"


def send_heartbeat(
    base_url: str,
    key: SessionKey | bytes,
    connector: str,
    task: int,
    *,
    generation: int,
    state: str,
    metrics: Mapping[str, Any] | None = None,
    trace: str | None = None,
    **kwargs: Any,
) -> str:
    """Report to the worker; returns its directive: "run", "pause" or "stop"."""
    body: dict[str, Any] = {"generation": generation, "state": state, "metrics": dict(metrics or {})}
    if trace is not None:
        body["trace"] = trace
    response = signed_request(base_url, key, "PUT", heartbeat_path(connector, task), body, **kwargs)
    return str(response.json()["directive"])


def request_fencing(base_url: str, key: SessionKey | bytes, connector: str, **kwargs: Any) -> None:
    """Ask the leader (any worker forwards) to fence the connector's previous generation."""
    signed_request(base_url, key, "PUT", f"/connectors/{quote(connector, safe='')}/fence", None, **kwargs)
