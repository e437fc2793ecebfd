"""The partition harness (tests/support/netns.py) on real namespaces: an echo server on one host,
clients on another host and in the test process; cuts of each kind and direction, then heal."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.netns import Cut, Host, Network, netns_available

pytestmark = pytest.mark.skipif(netns_available() is not None, reason=str(netns_available()))

TCP_PORT, UDP_PORT = 7000, 7001

#: argv: address, file, TCP port, UDP port. TCP echo; each UDP datagram is appended to the file and echoed.
SERVER = """
import socket, sys, threading
host, seen, tcp_port, udp_port = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def udp():
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((host, udp_port))
    while True:
        data, peer = u.recvfrom(100)
        with open(seen, "ab") as f:
            f.write(data + b"\\n")
        u.sendto(data, peer)
threading.Thread(target=udp, daemon=True).start()
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, tcp_port))
s.listen()
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(c.recv(100))
    c.close()
"""

#: argv: protocol (tcp|udp), address, payload, timeout, TCP port, UDP port; prints {"ok", "error", "seconds"}.
CLIENT = """
import json, socket, sys, time
proto, host, payload, timeout = sys.argv[1], sys.argv[2], sys.argv[3].encode(), float(sys.argv[4])
tcp_port, udp_port = int(sys.argv[5]), int(sys.argv[6])
began = time.monotonic()
try:
    if proto == "tcp":
        c = socket.create_connection((host, tcp_port), timeout=timeout)
        c.sendall(payload)
        answer = c.recv(100)
    else:
        c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        c.settimeout(timeout)
        c.sendto(payload, (host, udp_port))
        answer = c.recv(100)
    print(json.dumps({"ok": answer == payload, "error": None, "seconds": time.monotonic() - began}))
except OSError as exc:
    print(json.dumps({"ok": False, "error": type(exc).__name__, "seconds": time.monotonic() - began}))
"""

TIMEOUT_S = 2.0


@pytest.fixture
def network() -> Iterator[Network]:
    with Network() as net:
        yield net


@pytest.fixture
def hosts(network: Network, tmp_path: Path) -> Iterator[tuple[Host, Host, Path]]:
    """A client host, a server host running the echo server, and the file of datagrams it got."""
    client, server = network.add_host("client"), network.add_host("server")
    network.attach_test_process()
    seen = tmp_path / "seen"
    seen.touch()
    proc = subprocess.Popen(
        [
            *server.launcher(),
            sys.executable,
            "-c",
            SERVER,
            server.address,
            str(seen),
            str(TCP_PORT),
            str(UDP_PORT),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
        yield client, server, seen
    finally:
        proc.kill()
        proc.wait(10)


def attempt(source: Host, target: Host, proto: str = "tcp", payload: str = "hi") -> dict[str, object]:
    """One echo round trip from `source` (a host, or the test process) to `target`'s server."""
    out = subprocess.run(
        [
            *source.launcher(),
            sys.executable,
            "-c",
            CLIENT,
            proto,
            target.address,
            payload,
            str(TIMEOUT_S),
            str(TCP_PORT),
            str(UDP_PORT),
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    result: dict[str, object] = json.loads(out)
    return result


def test_hosts_reach_each_other_and_the_test_process_reaches_them(
    network: Network, hosts: tuple[Host, Host, Path]
) -> None:
    client, server, _ = hosts
    assert attempt(client, server)["ok"]
    assert attempt(network.attach_test_process(), server)["ok"]
    assert attempt(client, server, "udp")["ok"]


def test_blackhole_times_out_and_reject_refuses_at_once(
    network: Network, hosts: tuple[Host, Host, Path]
) -> None:
    client, server, _ = hosts
    network.cut(client, server, Cut.BLACKHOLE)
    silent = attempt(client, server)
    assert silent["error"] == "TimeoutError" and float(str(silent["seconds"])) >= TIMEOUT_S * 0.9, silent
    assert attempt(network.attach_test_process(), server)["ok"], "a cut between two hosts left others cut"

    network.cut(client, server, Cut.REJECT)  # replaces the blackhole
    refused = attempt(client, server)
    assert refused["error"] == "OSError" and float(str(refused["seconds"])) < 1.0, refused
    assert network.cuts() == {
        (client.address, server.address): Cut.REJECT,
        (server.address, client.address): Cut.REJECT,
    }

    network.heal()
    assert attempt(client, server)["ok"]
    assert network.cuts() == {}


def test_one_way_cut_delivers_requests_and_loses_answers(
    network: Network, hosts: tuple[Host, Host, Path]
) -> None:
    client, server, seen = hosts
    network.cut(server, client, Cut.BLACKHOLE, one_way=True)  # the server's answers are lost
    assert attempt(client, server, "udp", "request-1")["error"] == "TimeoutError"
    assert "request-1" in seen.read_text(), "the request did not arrive"
    assert attempt(client, server)["error"] == "TimeoutError"  # no SYN-ACK reaches the client

    network.heal(server, client)
    network.cut(client, server, Cut.BLACKHOLE, one_way=True)  # the other way: requests are lost
    assert attempt(client, server, "udp", "request-2")["error"] == "TimeoutError"
    assert "request-2" not in seen.read_text()

    network.heal(client, server)
    assert attempt(client, server, "udp", "request-3")["ok"]
    assert attempt(client, server)["ok"]


def test_close_removes_every_namespace_link_and_process(tmp_path: Path) -> None:
    network = Network()
    host = network.add_host("one")
    network.attach_test_process()
    sleeper = subprocess.Popen([*host.launcher(), "sleep", "300"])
    names = [network.router, str(host.netns)]
    network.close()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout
    assert not any(name in listed for name in names), listed
    links = subprocess.run(["ip", "-br", "link"], capture_output=True, text=True, check=True).stdout
    assert network.test_link not in links
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=True).stdout
    assert f"10.{network.octet}." not in routes
    deadline = time.monotonic() + 5
    while sleeper.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleeper.poll() is not None, "a process left in a host's namespace outlived close()"
