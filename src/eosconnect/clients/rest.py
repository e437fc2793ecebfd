"""A small synchronous client of the Kafka Connect REST API (works against eosconnect and Kafka Connect)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from eosconnect.cli_errors import OperationFailed

__all__ = ["ConnectClient", "ConnectError"]


class ConnectError(OperationFailed):
    """A non-2xx answer (`status`, the server's `message`) or a connection failure (`status` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message

    def __str__(self) -> str:
        return f"{self.message} (HTTP {self.status})" if self.status else self.message


def _seg(name: str) -> str:
    return quote(name, safe="")


class ConnectClient:
    def __init__(
        self,
        url: str = "http://localhost:8083",
        *,
        auth: tuple[str, str] | None = None,
        verify: bool | str = True,
        timeout: float = 100.0,
    ) -> None:
        self.url = url.rstrip("/")
        tls = ssl.create_default_context(cafile=verify) if isinstance(verify, str) else verify
        self._client = httpx.Client(base_url=self.url, auth=auth, verify=tls, timeout=timeout)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> ConnectClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def request(
        self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None
    ) -> httpx.Response:
        try:
            response = self._client.request(method, path, json=json, params=params)
        except httpx.HTTPError as exc:
            raise ConnectError(0, f"cannot reach {self.url}: {exc}") from exc
        if response.status_code >= 400:
            message = response.text.strip() or response.reason_phrase
            try:
                body = response.json()
                if isinstance(body, dict) and "message" in body:
                    message = str(body["message"])
            except ValueError:
                pass
            raise ConnectError(response.status_code, message)
        return response

    def _json(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.request(method, path, **kwargs)
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    # ------------------------------------------------------------------ API
    def server_info(self) -> dict[str, Any]:
        return self._json("GET", "/")

    def list_connectors(self, expand: list[str] | None = None) -> Any:
        params = [("expand", e) for e in expand] if expand else None
        return self._json("GET", "/connectors", params=params)

    def create_connector(
        self, name: str, config: Mapping[str, Any], initial_state: str | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name, "config": dict(config)}
        if initial_state:
            body["initial_state"] = initial_state
        return self._json("POST", "/connectors", json=body)

    def get_connector(self, name: str) -> dict[str, Any]:
        return self._json("GET", f"/connectors/{_seg(name)}")

    def get_config(self, name: str) -> dict[str, str]:
        return self._json("GET", f"/connectors/{_seg(name)}/config")

    def get_acls(self, name: str) -> dict[str, Any]:
        return self._json("GET", f"/connectors/{_seg(name)}/acls")

    def put_config(self, name: str, config: Mapping[str, Any]) -> tuple[bool, dict[str, Any]]:
        response = self.request("PUT", f"/connectors/{_seg(name)}/config", json=dict(config))
        return response.status_code == 201, response.json()

    def patch_config(self, name: str, patch: Mapping[str, Any]) -> dict[str, Any]:
        return self._json("PATCH", f"/connectors/{_seg(name)}/config", json=dict(patch))

    def status(self, name: str) -> dict[str, Any]:
        return self._json("GET", f"/connectors/{_seg(name)}/status")

    def tasks(self, name: str) -> list[dict[str, Any]]:
        return self._json("GET", f"/connectors/{_seg(name)}/tasks")

    def topics(self, name: str) -> dict[str, Any]:
        return self._json("GET", f"/connectors/{_seg(name)}/topics")

    def pause(self, name: str) -> None:
        self.request("PUT", f"/connectors/{_seg(name)}/pause")

    def resume(self, name: str) -> None:
        self.request("PUT", f"/connectors/{_seg(name)}/resume")

    def stop(self, name: str) -> None:
        self.request("PUT", f"/connectors/{_seg(name)}/stop")

    def restart(
        self, name: str, include_tasks: bool = False, only_failed: bool = False
    ) -> dict[str, Any] | None:
        params = {"includeTasks": str(include_tasks).lower(), "onlyFailed": str(only_failed).lower()}
        return self._json("POST", f"/connectors/{_seg(name)}/restart", params=params)

    def signal(self, name: str, signal_type: str, data: dict[str, Any] | None) -> dict[str, Any]:
        body = {"type": signal_type, "data": data}
        result: dict[str, Any] = self._json("POST", f"/connectors/{_seg(name)}/signals", json=body)
        return result

    def restart_task(self, name: str, task: int) -> None:
        self.request("POST", f"/connectors/{_seg(name)}/tasks/{int(task)}/restart")

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{_seg(name)}")

    def offsets(self, name: str) -> dict[str, Any]:
        return self._json("GET", f"/connectors/{_seg(name)}/offsets")

    def alter_offsets(self, name: str, offsets: list[dict[str, Any]]) -> dict[str, Any]:
        return self._json("PATCH", f"/connectors/{_seg(name)}/offsets", json={"offsets": offsets})

    def reset_offsets(self, name: str) -> dict[str, Any]:
        return self._json("DELETE", f"/connectors/{_seg(name)}/offsets")

    def plugins(self, connectors_only: bool = True) -> list[dict[str, Any]]:
        return self._json(
            "GET", "/connector-plugins", params={"connectorsOnly": str(connectors_only).lower()}
        )

    def plugin_config(self, plugin: str) -> list[dict[str, Any]]:
        return self._json("GET", f"/connector-plugins/{_seg(plugin)}/config")

    def validate(self, plugin: str, config: Mapping[str, Any]) -> dict[str, Any]:
        return self._json("PUT", f"/connector-plugins/{_seg(plugin)}/config/validate", json=dict(config))
