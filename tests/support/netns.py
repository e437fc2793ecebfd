"""Network partitions between test hosts: each host in a network namespace of its own, all joined
through a router namespace where links are cut and healed.

Topology (everything created by `Network`, named after `Network.tag`):

    host namespace  <veth>  router namespace  <veth>  host namespace ...
    10.N.i.2/24             10.N.i.1/24 (one per host, IPv4 forwarding on)

Host `i` gets subnet 10.N.i.0/24 with the default route through the router, so every packet
between two hosts crosses the router. A cut is a policy rule in the router (`ip rule ... from A to
B blackhole|prohibit`): it affects forwarded packets only, so a blackhole drops them silently (a
TCP connect times out, an open connection stops hearing from its peer) and a reject (`prohibit`)
answers with ICMP "administratively prohibited" (a connect fails at once with EHOSTUNREACH; an open
connection treats it as a soft error and keeps retransmitting until its own timeout). A rule
matches one direction: cutting A -> B alone lets A's packets reach B while B's answers are lost,
the one-way partition. Routes in the hosts' own namespaces would not do: a local blackhole route
fails the sender's `connect()` at once with EINVAL instead of dropping silently.

The test process stays in the root namespace. `attach_test_process()` gives it one veth into the
router (address 10.N.0.2, one route to 10.N.0.0/16 through it), so the test's own clients (the
read_committed verifier, REST calls) reach every host; links to it can be cut like any other.

Everything is removed by `close()`, also after a failure: the processes still inside the
namespaces (started by the test: a host's namespace holds nothing else) are killed by pid, then the
namespaces and the test process's veth are deleted by name. Namespace names carry the pid of the
process that made them, so a later `Network` deletes what a killed test run left behind.

Latency, jitter and loss are not offered: this machine's kernel has no `netem` qdisc (of those tried,
only tbf, htb and pfifo exist, which shape bandwidth but add no delay or loss), so they need a
userspace proxy between hosts.
"""

from __future__ import annotations

import contextlib
import enum
import ipaddress
import os
import re
import secrets
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Cut", "Host", "Network", "NetworkError", "netns_available", "remove_stale"]

#: Every namespace a `Network` makes is named `<NAME_PREFIX><creator pid>x<tag>-<host>`.
NAME_PREFIX = "eosnp"
_NAME_RE = re.compile(rf"^{NAME_PREFIX}(\d+)x([0-9a-f]+)-")
#: Rule priorities of the cuts: below the main table's rule (32766), above the local table's (0).
_FIRST_RULE_PREF = 1000


class NetworkError(RuntimeError):
    """An `ip` command failed; the message holds the command and its output."""


class Cut(enum.Enum):
    """How a cut link treats the packets it stops."""

    #: Dropped without an answer: the sender learns nothing until its own timeouts.
    BLACKHOLE = "blackhole"
    #: Refused with ICMP "administratively prohibited": a new connection fails at once.
    REJECT = "prohibit"


@dataclass(frozen=True)
class Host:
    """One host of a `Network`: its namespace (None for the test process, which stays in the root
    namespace) and its address, the only one it has besides loopback."""

    name: str
    netns: str | None
    address: str

    def launcher(self) -> list[str]:
        """The command prefix that runs a program on this host (`ip netns exec <netns>`); the
        program keeps its pid (ip execs it), so it can be signalled and tied to its parent as usual."""
        return ["ip", "netns", "exec", self.netns] if self.netns else []


def _ip(*args: str, check: bool = True) -> str:
    result = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30, check=False)
    if check and result.returncode != 0:
        raise NetworkError(f"ip {' '.join(args)} failed ({result.returncode}): {result.stderr.strip()}")
    return result.stdout


def netns_available() -> str | None:
    """None where this process may make network namespaces, else why not (for a skip)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    probe = f"{NAME_PREFIX}{os.getpid()}xprobe-{secrets.token_hex(2)}"
    try:
        _ip("netns", "add", probe)
    except (OSError, NetworkError) as exc:
        return f"`ip netns add` does not work here: {exc}"
    _ip("netns", "del", probe, check=False)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_netns_processes(netns: str) -> None:
    """SIGKILL every process in `netns` (ours: a namespace of this harness holds only what a test
    started in it) and wait until they are gone, so that the namespace can be deleted for good."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = [int(p) for p in _ip("netns", "pids", netns, check=False).split()]
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)


def _delete_netns(netns: str) -> None:
    _kill_netns_processes(netns)
    _ip("netns", "del", netns, check=False)


def remove_stale() -> list[str]:
    """Delete the namespaces of `Network`s whose creating process is gone (a killed test run);
    returns their names. The test process's veth went with its router namespace."""
    removed = []
    for line in _ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NAME_RE.match(name)
        if match and not _pid_alive(int(match.group(1))):
            _delete_netns(name)
            removed.append(name)
    return removed


def _free_octet() -> int:
    """A second octet N such that 10.N.0.0/16 meets no address or route of the root namespace."""
    used = _ip("-4", "addr", "show") + _ip("-4", "route", "show", "table", "all")
    taken = {int(m.group(1)) for m in re.finditer(r"\b10\.(\d+)\.", used)}
    free = [n for n in range(100, 251) if n not in taken]
    if not free:
        raise NetworkError("no free 10.N.0.0/16 subnet for the test network")
    return secrets.choice(free)


class Network:
    """A private routed network of hosts in namespaces, with links that can be cut and healed.

    `add_host(name)` makes a host; `cut(a, b, kind)` stops a's packets to b (and b's to a unless
    `one_way`); `isolate(host, from_=...)` cuts a host from several at once; `heal()` removes cuts.
    The instance owns everything it made and removes it in `close()` (also a context manager).
    """

    def __init__(self) -> None:
        remove_stale()
        self.tag = secrets.token_hex(3)
        self.octet = _free_octet()
        self._name_base = f"{NAME_PREFIX}{os.getpid()}x{self.tag}"
        self.router = f"{self._name_base}-router"
        #: The test process's veth in the root namespace (at most 15 characters: an interface name).
        self.test_link = f"np{self.tag}t"
        self.hosts: dict[str, Host] = {}
        #: (from address, to address) -> (rule priority, kind) of each cut in force.
        self._cuts: dict[tuple[str, str], tuple[int, Cut]] = {}
        self._next_pref = _FIRST_RULE_PREF
        self._test_host: Host | None = None
        self._namespaces: list[str] = []
        try:
            self._make_namespace(self.router)
            _ip("netns", "exec", self.router, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ topology
    def _make_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self._namespaces.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _subnet(self, index: int) -> tuple[str, str]:
        """(router address, host address) of host `index`'s /24."""
        return f"10.{self.octet}.{index}.1", f"10.{self.octet}.{index}.2"

    def add_host(self, name: str) -> Host:
        """A new host `name` (letters, digits, '-'): its namespace, its veth to the router, its
        address 10.N.i.2 and a default route through the router."""
        if name in self.hosts or not re.fullmatch(r"[a-z0-9-]{1,20}", name):
            raise ValueError(f"host name {name!r} is taken or not of [a-z0-9-]{{1,20}}")
        index = len(self.hosts) + 1
        if index > 250:
            raise ValueError("at most 250 hosts")
        netns = f"{self._name_base}-{name}"
        self._make_namespace(netns)
        router_end, host_end = f"np{self.tag}r{index}", f"np{self.tag}h{index}"
        _ip(
            "link",
            "add",
            host_end,
            "netns",
            netns,
            "type",
            "veth",
            "peer",
            "name",
            router_end,
            "netns",
            self.router,
        )
        gateway, address = self._subnet(index)
        _ip("-n", self.router, "addr", "add", f"{gateway}/24", "dev", router_end)
        _ip("-n", self.router, "link", "set", router_end, "up")
        _ip("-n", netns, "addr", "add", f"{address}/24", "dev", host_end)
        _ip("-n", netns, "link", "set", host_end, "up")
        _ip("-n", netns, "route", "add", "default", "via", gateway)
        host = Host(name, netns, address)
        self.hosts[name] = host
        return host

    def attach_test_process(self) -> Host:
        """Give the test process (root namespace) a veth into the router, address 10.N.0.2, and
        one route to 10.N.0.0/16 through it; returns it as the host "test". Idempotent."""
        if self._test_host is not None:
            return self._test_host
        gateway, address = self._subnet(0)
        peer = f"np{self.tag}q"
        _ip("link", "add", self.test_link, "type", "veth", "peer", "name", peer, "netns", self.router)
        _ip("-n", self.router, "addr", "add", f"{gateway}/24", "dev", peer)
        _ip("-n", self.router, "link", "set", peer, "up")
        _ip("addr", "add", f"{address}/24", "dev", self.test_link)
        _ip("link", "set", self.test_link, "up")
        _ip("route", "add", str(ipaddress.ip_network(f"10.{self.octet}.0.0/16")), "via", gateway)
        self._test_host = Host("test", None, address)
        return self._test_host

    # ------------------------------------------------------------------ faults
    def cut(self, a: Host, b: Host, kind: Cut = Cut.BLACKHOLE, *, one_way: bool = False) -> None:
        """Stop the packets from `a` to `b` (with `one_way`, only those: b's packets still reach a),
        else both ways. A cut in force between the same pair in the same direction is replaced."""
        pairs = [(a.address, b.address)] if one_way else [(a.address, b.address), (b.address, a.address)]
        for source, target in pairs:
            self._remove_rule(source, target)
            pref = self._next_pref
            self._next_pref += 1
            _ip("-n", self.router, "rule", "add", "pref", str(pref), "from", source, "to", target, kind.value)
            self._cuts[(source, target)] = (pref, kind)

    def isolate(
        self, host: Host, from_: Iterable[Host], kind: Cut = Cut.BLACKHOLE, *, one_way: bool = False
    ) -> None:
        """`cut(host, other, kind, one_way=one_way)` for each host of `from_`."""
        for other in from_:
            self.cut(host, other, kind, one_way=one_way)

    def heal(self, a: Host | None = None, b: Host | None = None) -> None:
        """Remove the cuts between `a` and `b` (both directions), or every cut when no hosts are given."""
        if a is None or b is None:
            for source, target in list(self._cuts):
                self._remove_rule(source, target)
            return
        self._remove_rule(a.address, b.address)
        self._remove_rule(b.address, a.address)

    def cuts(self) -> dict[tuple[str, str], Cut]:
        """The cuts in force: (from address, to address) -> kind."""
        return {pair: kind for pair, (_, kind) in self._cuts.items()}

    def _remove_rule(self, source: str, target: str) -> None:
        entry = self._cuts.pop((source, target), None)
        if entry is not None:
            _ip("-n", self.router, "rule", "del", "pref", str(entry[0]))

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        """Kill what still runs in the hosts' namespaces, delete the namespaces (their veths and the
        cuts go with them) and the test process's veth (its route goes with it)."""
        for netns in reversed(self._namespaces):
            _delete_netns(netns)
        self._namespaces.clear()
        if self._test_host is not None:
            _ip("link", "del", self.test_link, check=False)
            self._test_host = None
        self.hosts.clear()
        self._cuts.clear()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
