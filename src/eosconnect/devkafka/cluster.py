"""Run real Apache Kafka KRaft brokers on loopback for tests and the demo.

One broker means one combined broker+controller node. Three brokers means three broker-only nodes
plus a separate controller, so that a test can stop, SIGKILL or restart any broker (leader epochs,
unclean leader election) while the quorum stays up, or place each node on a host of its own and cut
it off from the others (`NodePlacement`). Everything a cluster needs lives in its run
directory: configs, data, logs and `cluster.json`, the state file the CLI uses to find the JVMs.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from eosconnect.devkafka.distribution import KafkaDistribution, ensure_kafka
from eosconnect.devkafka.java_command import java_command, log4j2_config, spawn_java
from eosconnect.devkafka.ports import free_port
from eosconnect.devkafka.processes import JVM_MARKER, is_our_jvm, pid_alive
from eosconnect.devkafka.security import (
    CLIENT_LISTENER,
    SUPER_USER,
    Acl,
    SecurityMode,
    SecurityState,
    create_scram_users,
    grant,
    revoke,
)

log = logging.getLogger(__name__)

STATE_FILE = "cluster.json"
CONTROLLER_NODE_ID = 100
READY_TOPIC = "__eosconnect_ready"
#: Heap sizes that let a controller, three brokers, Spark and the tests share 2 cores and 24 GiB.
BROKER_HEAP = ("-Xms256m", "-Xmx768m")
CONTROLLER_HEAP = ("-Xms128m", "-Xmx384m")

LOG4J2_CONFIG = log4j2_config(
    "server.log", {"kafka.request.logger": "WARN", "org.apache.kafka.clients": "WARN"}
)


class ClusterError(RuntimeError):
    """A broker failed to start or to serve; the message points at its log file."""


def _new_cluster_id() -> str:
    """Kafka's Uuid format; like Kafka, never starting with '-' (the storage tool would read an option)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


@dataclass(frozen=True)
class NodePlacement:
    """Where one node runs: the address it listens on and advertises, and the command prefix it is
    launched under (e.g. `ip netns exec <namespace>`, with that namespace's address)."""

    address: str
    launcher: tuple[str, ...] = ()


@dataclass
class Node:
    node_id: int
    roles: str  # "broker,controller" | "broker" | "controller"
    port: int | None  # client listener, None for a pure controller
    controller_port: int | None  # set for nodes that are controllers
    pid: int | None = None
    #: The node's own address when it was placed apart (`NodePlacement`), else the cluster's `host`.
    address: str | None = None

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles


@dataclass
class ClusterState:
    run_dir: str
    version: str
    libs_dir: str
    cluster_id: str
    nodes: list[Node] = field(default_factory=list)
    extra_config: dict[str, str] = field(default_factory=dict)
    security: SecurityState = field(default_factory=SecurityState)
    #: The address every node listens on and advertises.
    host: str = "127.0.0.1"

    @classmethod
    def load(cls, run_dir: Path) -> ClusterState:
        data = json.loads((run_dir / STATE_FILE).read_text())
        data["nodes"] = [Node(**n) for n in data["nodes"]]
        data["security"] = SecurityState(**data.get("security", {}))
        return cls(**data)

    def save(self) -> None:
        """Owner-only (0600): a secured cluster's state holds the super user's password."""
        path = Path(self.run_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.touch(mode=0o600)
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)


class LocalKafkaCluster:
    """A KRaft cluster of real Apache Kafka brokers in `run_dir`.

    `tie_to_parent=True` (used by test fixtures) makes the JVMs die with the Python process that
    started them, so a crashed or interrupted test session cannot leave brokers behind.

    `host` is the address every node listens on and advertises (loopback by default) and `launcher`
    a command prefix the nodes run under: a test puts the cluster on a host of a network it can
    partition (`ip netns exec <namespace>` and that namespace's address, tests/support/netns.py).
    `placement` overrides both per node id (the brokers are 1..N, the separate controller
    `CONTROLLER_NODE_ID`, the combined node of a one-broker cluster 1), so that a test can cut one
    broker off from the controller and the other brokers.
    """

    def __init__(
        self,
        run_dir: Path | str,
        brokers: int = 1,
        extra_config: dict[str, str] | None = None,
        tie_to_parent: bool = False,
        distribution: KafkaDistribution | None = None,
        security: SecurityMode = "plaintext",
        host: str = "127.0.0.1",
        launcher: Sequence[str] = (),
        placement: Mapping[int, NodePlacement] | None = None,
    ) -> None:
        if brokers not in (1, 3):
            raise ValueError(f"brokers must be 1 or 3, got {brokers}")
        node_ids = {1} if brokers == 1 else {CONTROLLER_NODE_ID, *range(1, brokers + 1)}
        unknown = sorted(set(placement or {}) - node_ids)
        if unknown:
            raise ValueError(
                f"placement names nodes {unknown} this cluster does not have; "
                f"its node ids are {sorted(node_ids)}"
            )
        self.run_dir = Path(run_dir).resolve()
        self.brokers = brokers
        self.extra_config = dict(extra_config or {})
        self.tie_to_parent = tie_to_parent
        self.security_mode: SecurityMode = security
        self.host = host
        self.launcher = tuple(launcher)
        self.placement = dict(placement or {})
        self._distribution = distribution
        self.state: ClusterState | None = None
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def attach(cls, run_dir: Path | str) -> LocalKafkaCluster:
        """Reconnect to a cluster started earlier (e.g. by `eosconnect kafka start`)."""
        run_dir = Path(run_dir).resolve()
        if not (run_dir / STATE_FILE).exists():
            raise ClusterError(
                f"No Kafka cluster state in {run_dir}: start one with `eosconnect kafka start`."
            )
        state = ClusterState.load(run_dir)
        brokers = sum(1 for n in state.nodes if n.is_broker)
        cluster = cls(
            run_dir,
            brokers=brokers,
            extra_config=state.extra_config,
            security=state.security.mode,
            host=state.host,
        )
        cluster.state = state
        return cluster

    def start(self, timeout: float = 90.0) -> str:
        """Format storage, start every node, and return once a produce is acknowledged."""
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if (self.run_dir / STATE_FILE).exists():
            self._reap_stale()
        dist = self._distribution or ensure_kafka()
        self.state = ClusterState(
            run_dir=str(self.run_dir),
            version=dist.version,
            libs_dir=str(dist.libs_dir),
            cluster_id=_new_cluster_id(),
            nodes=self._plan_nodes(),
            extra_config=self.extra_config,
            security=SecurityState.generate(self.security_mode, self.run_dir),
            host=self.host,
        )
        (self.run_dir / "log4j2.xml").write_text(LOG4J2_CONFIG)
        for node in self.state.nodes:
            self._write_config(node)
        # One StorageTool JVM per node, all at once: one after another took 4 x 5-10 s under load.
        with ThreadPoolExecutor(len(self.state.nodes)) as pool:
            list(pool.map(self._format, self.state.nodes))
        self.state.save()
        try:
            for node in self._controllers_first():
                self._launch(node)
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self.bootstrap_servers

    def stop(self, timeout: float = 20.0) -> None:
        """Clean shutdown of every node (the brokers together, then the controllers), SIGKILL for any
        that hang. The brokers are told at once: one after another, each controlled shutdown moved
        its leaderships to the next broker to stop (15-20 s for three under load)."""
        if self.state is None:
            return
        for group in (
            [n for n in self.state.nodes if n.is_broker],
            [n for n in self.state.nodes if not n.is_broker],
        ):
            for node in group:
                if pid_alive(node.pid):
                    self._signal(node, signal.SIGTERM)
            for node in group:
                self.stop_node(node.node_id, timeout=timeout)

    def __enter__(self) -> LocalKafkaCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ per-node control
    @property
    def bootstrap_servers(self) -> str:
        assert self.state is not None, "cluster not started"
        return ",".join(f"{self.address(n.node_id)}:{n.port}" for n in self.state.nodes if n.is_broker)

    @property
    def version(self) -> str:
        assert self.state is not None
        return self.state.version

    @property
    def security(self) -> SecurityState:
        assert self.state is not None, "cluster not started"
        return self.state.security

    def client_config(self, user: str = SUPER_USER, password: str | None = None) -> dict[str, str]:
        """librdkafka settings to reach the cluster as `user` (the super user by default)."""
        return {"bootstrap.servers": self.bootstrap_servers, **self.security.client_settings(user, password)}

    def create_user(self, name: str, password: str | None = None) -> dict[str, str]:
        """A new principal `User:<name>` with no ACLs; returns its client settings.

        SCRAM-SHA-512 credentials through the admin API in the SASL modes, a certificate signed by
        the run's CA in `ssl` mode. The call returns once the user can connect.
        """
        return self.create_users({name: password})[name]

    def create_users(self, users: Mapping[str, str | None] | Iterable[str]) -> dict[str, dict[str, str]]:
        """Several principals at once (name -> password, None or a bare name for a random one): one
        admin request for their SCRAM credentials, then one wait until they can connect. Returns
        each one's client settings by name."""
        import secrets

        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        sec = self.security
        if not sec.enabled:
            raise ClusterError(
                "users need a secured cluster: start it with security=sasl_ssl|sasl_plaintext|ssl"
            )
        wanted = dict(users) if isinstance(users, Mapping) else dict.fromkeys(users)
        passwords: dict[str, str | None] = {}
        if sec.sasl:
            passwords = {name: pw or secrets.token_urlsafe(12) for name, pw in wanted.items()}
            create_scram_users(self.client_config(), {n: p for n, p in passwords.items() if p})
        else:
            for name in wanted:
                sec.issue_certificate(name)
                passwords[name] = None
        settings = {name: self.client_config(name, pw) for name, pw in passwords.items()}
        deadline = time.monotonic() + 30
        for config in settings.values():
            while True:  # SCRAM credentials reach the broker through the metadata log
                try:
                    AdminClient({**config, "log_level": 0}).list_topics(timeout=3)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.3)
        return settings

    def grant(self, acls: list[Acl]) -> None:
        """Create ALLOW ACLs as the super user."""
        grant(self.client_config(), acls)

    def revoke(self, acls: list[Acl]) -> None:
        """Delete exactly these ACLs as the super user."""
        revoke(self.client_config(), acls)

    def address(self, node_id: int) -> str:
        """The address node `node_id` listens on and advertises."""
        assert self.state is not None, "cluster not started"
        return self.node(node_id).address or self.state.host

    def broker_bootstrap(self, node_id: int) -> str:
        """Broker `node_id`'s client listener alone: a client that must ask that broker, and only it."""
        return f"{self.address(node_id)}:{self.node(node_id).port}"

    def broker_ids(self) -> list[int]:
        assert self.state is not None
        return [n.node_id for n in self.state.nodes if n.is_broker]

    def node(self, node_id: int) -> Node:
        assert self.state is not None
        for n in self.state.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(f"no node {node_id}; nodes are {[n.node_id for n in self.state.nodes]}")

    def is_running(self, node_id: int) -> bool:
        return pid_alive(self.node(node_id).pid)

    def stop_node(self, node_id: int, timeout: float = 20.0) -> None:
        """SIGTERM (Kafka's controlled shutdown), then SIGKILL after `timeout`."""
        node = self.node(node_id)
        if pid_alive(node.pid):
            self._signal(node, signal.SIGTERM)
            if not self._wait_exit(node, timeout):
                log.warning("Kafka node %s did not stop in %.0fs; killing it", node_id, timeout)
                self._signal(node, signal.SIGKILL)
                self._wait_exit(node, 10)
        node.pid = None
        self._save()

    def kill_node(self, node_id: int) -> None:
        """SIGKILL: an unclean crash, no controlled shutdown."""
        node = self.node(node_id)
        if pid_alive(node.pid):
            self._signal(node, signal.SIGKILL)
            self._wait_exit(node, 10)
        node.pid = None
        self._save()

    def start_node(self, node_id: int, wait: bool = True, timeout: float = 120.0) -> None:
        """(Re)start a stopped node with its existing config, ports and data."""
        node = self.node(node_id)
        if pid_alive(node.pid):
            return
        log_path = self.log_file(node_id)
        offset = log_path.stat().st_size if log_path.exists() else 0
        self._launch(node)
        if wait:
            self._wait_started_log(node, log_path, offset, timeout)

    def restart_node(self, node_id: int, hard: bool = False) -> None:
        if hard:
            self.kill_node(node_id)
        else:
            self.stop_node(node_id)
        self.start_node(node_id)

    def log_file(self, node_id: int) -> Path:
        return self.run_dir / f"node-{node_id}" / "logs" / "server.log"

    def data_dir(self, node_id: int) -> Path:
        """The node's `log.dirs`: a partition's segments are in `<topic>-<partition>/` below it."""
        return self.run_dir / f"node-{node_id}" / "data"

    # ------------------------------------------------------------------ readiness
    def wait_ready(self, timeout: float = 90.0) -> None:
        """Metadata lists every broker and an acks=all produce to a test topic succeeds."""
        from confluent_kafka import KafkaException, Producer
        from confluent_kafka.admin import AdminClient, NewTopic

        assert self.state is not None
        deadline = time.monotonic() + timeout
        expected = len(self.broker_ids())
        admin = AdminClient({**self.client_config(), "log_level": 0})
        while True:
            self._check_alive()
            try:
                md = admin.list_topics(timeout=2)
                if len(md.brokers) >= expected:
                    break
            except KafkaException:
                pass
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"Kafka brokers did not register within {timeout:.0f}s; {self._log_hint()}"
                )
            time.sleep(0.3)
        futures = admin.create_topics([NewTopic(READY_TOPIC, 1, expected)], operation_timeout=30)
        for fut in futures.values():
            try:
                fut.result(timeout=30)
            except KafkaException as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise ClusterError(f"Could not create {READY_TOPIC}: {exc}; {self._log_hint()}") from exc
        producer = Producer({**self.client_config(), "acks": "all", "log_level": 0})
        acked: list[object] = []
        while not acked:
            self._check_alive()
            producer.produce(READY_TOPIC, b"ready", on_delivery=lambda err, msg: acked.append(err))
            producer.flush(10)
            if acked and acked[0] is not None:
                acked.clear()
                time.sleep(0.5)
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"Kafka did not acknowledge a produce within {timeout:.0f}s; {self._log_hint()}"
                )

    def _wait_started_log(self, node: Node, log_path: Path, offset: int, timeout: float) -> None:
        """Wait for this launch's own "Kafka Server started" line: metadata may still list a dead
        broker until its session expires, so it cannot tell a restarted broker from a stale entry."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not pid_alive(node.pid):
                raise ClusterError(f"Kafka node {node.node_id} exited on restart; {self._log_hint(node)}")
            if log_path.exists():
                with log_path.open("rb") as f:
                    f.seek(offset)
                    if b"Kafka Server started" in f.read():
                        return
            time.sleep(0.2)
        raise ClusterError(
            f"Kafka node {node.node_id} did not start within {timeout:.0f}s; {self._log_hint(node)}"
        )

    # ------------------------------------------------------------------ internals
    def _plan_nodes(self) -> list[Node]:
        if self.brokers == 1:
            nodes = [Node(1, "broker,controller", free_port(), free_port())]
        else:
            nodes = [Node(CONTROLLER_NODE_ID, "controller", None, free_port())]
            nodes += [Node(i, "broker", free_port(), None) for i in range(1, self.brokers + 1)]
        for node in nodes:
            if node.node_id in self.placement:
                node.address = self.placement[node.node_id].address
        return nodes

    def _launcher(self, node: Node) -> tuple[str, ...]:
        placed = self.placement.get(node.node_id)
        return placed.launcher if placed is not None else self.launcher

    def _controllers_first(self) -> list[Node]:
        assert self.state is not None
        return sorted(self.state.nodes, key=lambda n: n.is_broker)

    def _node_dir(self, node: Node) -> Path:
        return self.run_dir / f"node-{node.node_id}"

    def _write_config(self, node: Node) -> None:
        assert self.state is not None
        controller = next(n for n in self.state.nodes if "controller" in n.roles)
        rf = str(self.brokers)
        min_isr = "1" if self.brokers == 1 else "2"
        listeners, advertised = [], []
        client = CLIENT_LISTENER if self.state.security.enabled else "PLAINTEXT"
        host = node.address or self.state.host
        if node.is_broker:
            listeners.append(f"{client}://{host}:{node.port}")
            advertised.append(f"{client}://{host}:{node.port}")
        if node.controller_port:
            listeners.append(f"CONTROLLER://{host}:{node.controller_port}")
        props = {
            "process.roles": node.roles,
            "node.id": str(node.node_id),
            "controller.quorum.voters": (
                f"{controller.node_id}@{controller.address or self.state.host}:{controller.controller_port}"
            ),
            "controller.listener.names": "CONTROLLER",
            "listeners": ",".join(listeners),
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self._node_dir(node) / "data"),
            "num.partitions": "1",
            "default.replication.factor": rf,
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "5",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": min_isr,
            "transaction.state.log.num.partitions": "5",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": min_isr,
            "group.initial.rebalance.delay.ms": "0",
            "auto.create.topics.enable": "true",
            # Faster recovery of transactions left open by killed producers (tests kill many).
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": "5000",
            "transaction.remove.expired.transaction.cleanup.interval.ms": "60000",
        }
        if node.is_broker:
            props["inter.broker.listener.name"] = "PLAINTEXT"
            props["advertised.listeners"] = ",".join(advertised)
        props.update(self.state.security.broker_properties(node.is_broker))
        props.update(self.extra_config)
        path = self._node_dir(node) / "server.properties"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    def _java_cmd(self, node: Node, main: list[str]) -> list[str]:
        assert self.state is not None
        heap = CONTROLLER_HEAP if node.roles == "controller" else BROKER_HEAP
        logs = self._node_dir(node) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        return java_command(
            heap=heap,
            jvm_options=("-XX:MaxGCPauseMillis=20",),
            marker=JVM_MARKER,
            logs_dir=logs,
            log4j2_file=self.run_dir / "log4j2.xml",
            classpath=Path(self.state.libs_dir),
            main=main,
        )

    def _format(self, node: Node) -> None:
        assert self.state is not None
        cmd = self._java_cmd(
            node,
            [
                "kafka.tools.StorageTool",
                "format",
                "-t",
                self.state.cluster_id,
                "-c",
                str(self._node_dir(node) / "server.properties"),
                "--ignore-formatted",
                *self.state.security.format_arguments(),
            ],
        )
        result = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise ClusterError(
                f"Formatting KRaft storage for node {node.node_id} failed:\n{result.stdout}{result.stderr}"
            )

    def _launch(self, node: Node) -> None:
        cmd = self._java_cmd(node, ["kafka.Kafka", str(self._node_dir(node) / "server.properties")])
        proc = spawn_java(
            [*self._launcher(node), *cmd], self._node_dir(node) / "logs" / "stdout.log", self.tie_to_parent
        )
        self._procs[node.node_id] = proc
        node.pid = proc.pid
        self._save()
        log.info("started Kafka node %s (%s) pid %s", node.node_id, node.roles, proc.pid)

    def _signal(self, node: Node, sig: signal.Signals) -> None:
        if node.pid and is_our_jvm(node.pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(node.pid, sig)

    def _wait_exit(self, node: Node, timeout: float) -> bool:
        proc = self._procs.get(node.node_id)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                return True
            if proc is None and not pid_alive(node.pid):
                return True
            time.sleep(0.1)
        return False

    def _check_alive(self) -> None:
        assert self.state is not None
        for node in self.state.nodes:
            if not pid_alive(node.pid):
                raise ClusterError(
                    f"Kafka node {node.node_id} exited during start-up; {self._log_hint(node)}"
                )

    def _log_hint(self, node: Node | None = None) -> str:
        assert self.state is not None
        nodes = [node] if node else self.state.nodes
        parts = []
        for n in nodes:
            for name in ("stdout.log", "server.log"):
                path = self._node_dir(n) / "logs" / name
                if path.exists():
                    tail = path.read_text(errors="replace").strip().splitlines()[-8:]
                    parts.append(f"{path}:\n    " + "\n    ".join(tail))
        return "logs:\n" + "\n".join(parts) if parts else "no logs were written"

    def _reap_stale(self) -> None:
        """Kill JVMs left by an earlier cluster in the same run dir (only ours, by marker)."""
        with contextlib.suppress(Exception):
            old = ClusterState.load(self.run_dir)
            for node in old.nodes:
                if node.pid is not None and pid_alive(node.pid) and is_our_jvm(node.pid):
                    log.warning(
                        "killing stale Kafka node %s (pid %s) in %s", node.node_id, node.pid, self.run_dir
                    )
                    os.kill(node.pid, signal.SIGKILL)

    def _save(self) -> None:
        if self.state is not None:
            self.state.save()
