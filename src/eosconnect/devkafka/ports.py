"""Loopback ports for the servers the project starts (brokers, registry, databases, Spark)."""

from __future__ import annotations

import socket
import threading

_handed_out: set[int] = set()
_lock = threading.Lock()


def free_port() -> int:
    """A loopback port nothing listens on now and that this process has not handed out before.

    Binding port 0 and closing the socket lets the kernel give the same port to the next bind(0),
    so two servers of one launch (a broker's two listeners, Apicurio's HTTP and management
    interfaces) could be told the same port. Quarkus then shares it between both interfaces and
    answers every other connection with the management interface's 404, which failed a CI run.
    """
    with _lock:
        while True:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind(("127.0.0.1", 0))
                port = int(sock.getsockname()[1])
            if port not in _handed_out:
                _handed_out.add(port)
                return port
