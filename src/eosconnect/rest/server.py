"""Serving the REST app with uvicorn in a background thread, over HTTP or HTTPS.

    config = RestServerConfig.from_properties(worker_props)
    app = create_app(herder, basic_auth=config.basic_auth_users or None, own_url=config.advertised_url)
    server = RestServer.from_config(app, config).start()   # returns once the socket listens
    ...
    server.stop()

Worker settings read by `RestServerConfig.from_properties` (Kafka Connect's names where they exist):

- `listeners` (default `http://:8083`): `http://host:port` or `https://host:port`; the first
  listener is served (an empty host means all interfaces).
- `rest.advertised.listener`, `rest.advertised.host.name`, `rest.advertised.port`: the URL other
  workers use to reach this one (default: built from the listener, `localhost` for a wildcard host).
- TLS, for an `https` listener: `rest.ssl.certfile`, `rest.ssl.keyfile`, `rest.ssl.keyfile.password`,
  `rest.ssl.ca.certfile`, and `rest.ssl.client.auth` = `none` | `requested` | `required`. The
  `listeners.https.ssl.*` spellings (`listeners.https.ssl.certfile`, ...) are accepted too.
  (PEM files: Kafka's JKS/PKCS12 keystore settings have no meaning for a Python server.)
- `rest.basic.auth.users`: `user:password,user2:password2` enables basic authentication.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import uvicorn

from eosconnect.rest.middleware import parse_basic_auth_users

log = logging.getLogger("eosconnect.rest.server")

__all__ = ["RestServer", "RestServerConfig"]

_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


@dataclass
class RestServerConfig:
    host: str = "0.0.0.0"
    port: int = 8083
    scheme: str = "http"
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_keyfile_password: str | None = None
    ssl_ca_certfile: str | None = None
    ssl_client_auth: str = "none"
    basic_auth_users: dict[str, str] = field(default_factory=dict)
    advertised_url: str | None = None

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> RestServerConfig:
        listener = (props.get("listeners") or "http://:8083").split(",")[0].strip()
        parts = urlsplit(listener)
        scheme = (parts.scheme or "http").lower()
        if scheme not in ("http", "https"):
            raise ValueError(
                f"listeners: unsupported scheme {parts.scheme!r} in {listener!r} (http or https)"
            )
        host = parts.hostname or "0.0.0.0"
        port = parts.port if parts.port is not None else 8083

        def tls(name: str) -> str | None:
            return props.get(f"rest.ssl.{name}") or props.get(f"listeners.https.ssl.{name}")

        client_auth = (tls("client.auth") or "none").lower()
        if client_auth not in _CLIENT_AUTH:
            raise ValueError(f"rest.ssl.client.auth must be none, requested or required, not {client_auth!r}")
        config = cls(
            host=host,
            port=port,
            scheme=scheme,
            ssl_certfile=tls("certfile"),
            ssl_keyfile=tls("keyfile"),
            ssl_keyfile_password=tls("keyfile.password"),
            ssl_ca_certfile=tls("ca.certfile"),
            ssl_client_auth=client_auth,
            basic_auth_users=parse_basic_auth_users(props.get("rest.basic.auth.users")),
        )
        if scheme == "https" and not config.ssl_certfile:
            raise ValueError(
                "an https listener needs rest.ssl.certfile (and rest.ssl.keyfile unless the cert has the key)"
            )
        advertised = props.get("rest.advertised.listener")
        adv_host = props.get("rest.advertised.host.name")
        adv_port = props.get("rest.advertised.port")
        if advertised or adv_host or adv_port:
            adv_scheme = (advertised or scheme).lower()
            name = adv_host or ("localhost" if host in ("0.0.0.0", "::", "") else host)
            config.advertised_url = f"{adv_scheme}://{name}:{adv_port or port}"
        return config

    def url(self, port: int | None = None) -> str:
        if self.advertised_url:
            return self.advertised_url
        host = "localhost" if self.host in ("0.0.0.0", "::", "") else self.host
        return f"{self.scheme}://{host}:{port if port is not None else self.port}"


class RestServer:
    """uvicorn serving one ASGI app from a daemon thread.

    `port=0` picks a free port (read `port`/`url` after `start()`). The socket is bound in
    `start()` itself, so a port already in use fails there with OSError, not in the thread (or
    earlier, by the caller, who passes the socket it bound as `bound_socket`).
    """

    def __init__(
        self,
        app: Any,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        ssl_certfile: str | None = None,
        ssl_keyfile: str | None = None,
        ssl_keyfile_password: str | None = None,
        ssl_ca_certfile: str | None = None,
        ssl_client_auth: str = "none",
        log_level: str = "warning",
        access_log: bool = False,
        advertised_url: str | None = None,
        bound_socket: socket.socket | None = None,
    ) -> None:
        self.app = app
        #: A socket bound ahead (the worker binds its listener before starting Spark); None: bind
        #: `host`:`port` in `start()`.
        self._bound_socket = bound_socket
        self.host = host
        self._requested_port = port
        self.tls = bool(ssl_certfile)
        self._advertised_url = advertised_url
        self._config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level=log_level,
            access_log=access_log,
            lifespan="off",
            ssl_certfile=ssl_certfile,
            ssl_keyfile=ssl_keyfile,
            ssl_keyfile_password=ssl_keyfile_password,
            ssl_ca_certs=ssl_ca_certfile,
            ssl_cert_reqs=_CLIENT_AUTH.get(ssl_client_auth, ssl.CERT_NONE),
            timeout_graceful_shutdown=5,
        )
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.port: int | None = None

    @classmethod
    def from_config(cls, app: Any, config: RestServerConfig, **kwargs: Any) -> RestServer:
        return cls(
            app,
            host=config.host,
            port=config.port,
            ssl_certfile=config.ssl_certfile,
            ssl_keyfile=config.ssl_keyfile,
            ssl_keyfile_password=config.ssl_keyfile_password,
            ssl_ca_certfile=config.ssl_ca_certfile,
            ssl_client_auth=config.ssl_client_auth,
            advertised_url=config.advertised_url,
            **kwargs,
        )

    @property
    def url(self) -> str:
        if self._advertised_url:
            return self._advertised_url
        if self.port is None:
            raise RuntimeError("the server is not started")
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else ("::1" if self.host == "::" else self.host)
        if ":" in host:
            host = f"[{host}]"
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def start(self, timeout: float = 15.0) -> RestServer:
        if self._thread is not None:
            raise RuntimeError("the server is already started")
        sock, self._bound_socket = self._bound_socket, None
        if sock is None:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((self.host, self._requested_port))
            except OSError:
                sock.close()
                raise
        sock.set_inheritable(True)
        self._socket = sock
        self.port = sock.getsockname()[1]
        server = uvicorn.Server(self._config)
        self._server = server
        failure: list[BaseException] = []

        def run() -> None:
            try:
                server.run(sockets=[sock])
            except BaseException as exc:  # SystemExit from uvicorn on a startup error, too
                failure.append(exc)
                log.exception("the REST server stopped with an error")

        self._thread = threading.Thread(target=run, name=f"eosconnect-rest-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if failure or not self._thread.is_alive():
                self._cleanup()
                raise RuntimeError(
                    f"the REST server failed to start: {failure[0] if failure else 'thread ended'}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the REST server did not start within {timeout}s")
            time.sleep(0.01)
        log.info("REST server listening on %s", self.url)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        server, thread = self._server, self._thread
        if server is not None:
            server.should_exit = True
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive() and server is not None:
                server.force_exit = True
                thread.join(timeout)
        samples = getattr(getattr(self.app, "state", None), "console_samples", None)
        if samples is not None:  # the console's sampler (rest/console_samples.py) ends with the listener
            samples.stop()
        self._cleanup()

    def _cleanup(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.close()
        self._socket = None
        self._server = None
        self._thread = None

    def __enter__(self) -> RestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
