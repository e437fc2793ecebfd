"""The ports handed to the servers the project starts never repeat within a process."""

from __future__ import annotations

import socket

from eosconnect.devkafka.ports import free_port


def test_free_ports_are_distinct_and_bindable():
    """The kernel hands the same port to a later bind(0) now and then (6 repeats in 500 calls here);
    a launch that takes two ports (Apicurio's HTTP and management interfaces) must get two."""
    ports = [free_port() for _ in range(500)]
    assert len(set(ports)) == len(ports)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", ports[-1]))
