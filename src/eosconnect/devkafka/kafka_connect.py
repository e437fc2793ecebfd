"""Run Apache Kafka Connect (Java) and MirrorMaker 2 beside eosconnect: our yardsticks.

The benchmarks and the differential tests compare eosconnect with the real thing on the same broker,
so the Java runtime is fetched like the broker: `connect-runtime`, `connect-file`, `connect-json` and
`connect-mirror` of the broker's own Kafka version, from Maven Central with `mvn`, cached once.
Each process is a plain JVM in its own work dir (config, log4j2 file, logs) that dies with the Python
process that started it, so a killed test run leaves no Connect worker behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from eosconnect.devkafka.distribution import LOG4J_SLF4J_BINDING, ensure_kafka
from eosconnect.devkafka.java_command import java_command, log4j2_config, spawn_java
from eosconnect.devkafka.maven import (
    COMPLETE_MARKER,
    KafkaSetupError,
    cache_root,
    fetch_artifacts,
    published_versions,
    version_key,
)
from eosconnect.devkafka.ports import free_port

CONNECT_ARTIFACTS = (
    "connect-runtime",
    "connect-file",
    "connect-json",
    "connect-transforms",
    "connect-mirror",
)
#: What a differential test of converters and transformations needs: no worker, a dozen jars.
CONNECT_LIBRARY_ARTIFACTS = ("connect-api", "connect-json", "connect-transforms")
CONNECT_HEAP = ("-Xms128m", "-Xmx768m")
#: Marks our Connect JVMs on the command line.
JVM_MARKER = "-Deosconnect.devkafka.connect=true"

LOG4J2_CONFIG = log4j2_config("connect.log", {"org.apache.kafka.clients": "WARN", "org.reflections": "ERROR"})


class ConnectProcessError(RuntimeError):
    """The Java Connect worker or MirrorMaker failed to start; the message ends with its log's tail."""


def ensure_kafka_connect(version: str | None = None, progress: bool = True) -> Path:
    """The libs dir of Apache Kafka Connect: `version` (or `EOSCONNECT_CONNECT_VERSION`), else the broker's
    own version, else the newest 4.x whose jars are all on Maven Central (Connect modules are sometimes
    published later than the broker). Cached once; later runs need no network."""
    pinned = version or os.environ.get("EOSCONNECT_CONNECT_VERSION")
    if pinned:
        return _fetch_connect(pinned, progress)
    for cached in sorted(cache_root().glob("connect-*/" + COMPLETE_MARKER), reverse=True):
        return cached.parent / "libs"
    broker_version = ensure_kafka(progress=progress).version
    candidates = [broker_version] + [
        v
        for v in published_versions("org.apache.kafka", "connect-runtime", "[4.0.0,5.0.0)")
        if version_key(v) < version_key(broker_version)
    ]
    failures = []
    for candidate in candidates:
        try:
            return _fetch_connect(candidate, progress)
        except KafkaSetupError as exc:
            failures.append(str(exc))
    raise KafkaSetupError("No Apache Kafka Connect 4.x could be fetched:\n  " + "\n  ".join(failures[:3]))


def ensure_connect_libraries(version: str | None = None, progress: bool = True) -> Path:
    """The libs dir of Kafka's `connect-api`, `connect-json` and `connect-transforms` (with dependencies):
    `version`, else `EOSCONNECT_CONNECT_VERSION`, else the broker's own version. Cached once.

    The differential tests run Kafka's own JsonConverter and transformations from it; the full runtime
    (`ensure_kafka_connect`) is not needed for that.
    """
    pinned = (
        version or os.environ.get("EOSCONNECT_CONNECT_VERSION") or ensure_kafka(progress=progress).version
    )
    coordinates = [f"org.apache.kafka:{a}:{pinned}" for a in CONNECT_LIBRARY_ARTIFACTS]
    # Not named connect-*: ensure_kafka_connect takes any complete connect-* entry for a full runtime.
    return fetch_artifacts(f"harness-connect-{pinned}", coordinates, progress=progress)


def _fetch_connect(version: str, progress: bool) -> Path:
    coordinates = [f"org.apache.kafka:{a}:{version}" for a in CONNECT_ARTIFACTS] + [LOG4J_SLF4J_BINDING]
    # Not named kafka-*: that prefix is reserved for broker distributions in the cache.
    return fetch_artifacts(f"connect-{version}", coordinates, progress=progress)


def connect_worker_defaults(bootstrap_servers: str, group_id: str) -> dict[str, str]:
    """Settings a distributed Connect worker needs on a one-broker test cluster."""
    return {
        "bootstrap.servers": bootstrap_servers,
        "group.id": group_id,
        "config.storage.topic": f"{group_id}-configs",
        "offset.storage.topic": f"{group_id}-offsets",
        "status.storage.topic": f"{group_id}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter.schemas.enable": "false",
        "offset.flush.interval.ms": "1000",
    }


@dataclass
class _JavaProcess:
    """One JVM with a properties file, a log dir and parent-death tie."""

    workdir: Path
    #: Set by each subclass; not a constructor argument, so `KafkaConnectProcess(workdir, props)` works.
    main_class: str = field(default="", init=False)
    tie_to_parent: bool = field(default=True, kw_only=True)
    proc: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def log_path(self) -> Path:
        return self.workdir / "logs" / "connect.log"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def _launch(self, props_name: str, props: dict[str, str], args: list[str]) -> None:
        libs = ensure_kafka_connect()
        logs = self.workdir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        props_file = self.workdir / props_name
        props_file.write_text("".join(f"{k}={_escape(v)}\n" for k, v in props.items()))
        (self.workdir / "log4j2.xml").write_text(LOG4J2_CONFIG)
        cmd = java_command(
            heap=CONNECT_HEAP,
            marker=JVM_MARKER,
            logs_dir=logs,
            log4j2_file=self.workdir / "log4j2.xml",
            classpath=libs,
            main=[self.main_class, str(props_file), *args],
        )
        self.proc = spawn_java(cmd, logs / "stdout.log", self.tie_to_parent)

    def tail(self, lines: int = 40) -> str:
        text = ""
        for path in (self.workdir / "logs" / "stdout.log", self.log_path):
            if path.exists():
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text

    def _check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ConnectProcessError(
                f"{self.main_class} exited with {self.proc.returncode}; log:\n{self.tail()}"
            )

    def signal(self, sig: signal.Signals) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(30)

    def stop(self, timeout: float = 30.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()


def _escape(value: str) -> str:
    """Java properties escaping for values we write (Windows-free, so backslashes and leading spaces)."""
    return value.replace("\\", "\\\\").replace("\n", "\\n")


@dataclass
class KafkaConnectProcess(_JavaProcess):
    """`org.apache.kafka.connect.cli.ConnectDistributed` with `worker_props` (listeners default to a free
    loopback port). `start()` returns once the REST API answers `GET /connectors`."""

    worker_props: dict[str, str] = field(default_factory=dict)
    url: str = field(default="", init=False)

    def __post_init__(self) -> None:
        self.main_class = "org.apache.kafka.connect.cli.ConnectDistributed"

    def start(self, timeout: float = 120.0) -> KafkaConnectProcess:
        props = dict(self.worker_props)
        if "listeners" not in props:
            props["listeners"] = f"http://127.0.0.1:{free_port()}"
        self.url = props["listeners"].split(",")[0].replace("0.0.0.0", "127.0.0.1")
        self._launch("connect-distributed.properties", props, [])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._check_alive()
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/connectors", timeout=5).status_code == 200:
                    return self
            time.sleep(0.5)
        self.kill()
        raise ConnectProcessError(
            f"Kafka Connect did not answer at {self.url} in {timeout:.0f} s:\n{self.tail()}"
        )


@dataclass
class MirrorMakerProcess(_JavaProcess):
    """MirrorMaker 2 in dedicated mode (`org.apache.kafka.connect.mirror.MirrorMaker mm2.properties`),
    optionally limited to the flows into `clusters`. It has no REST API by default, so `start()` only
    checks that the JVM stays up for `settle` seconds; callers watch the target topics for progress."""

    mm2_props: dict[str, str] = field(default_factory=dict)
    clusters: list[str] | None = None

    def __post_init__(self) -> None:
        self.main_class = "org.apache.kafka.connect.mirror.MirrorMaker"

    def start(self, settle: float = 3.0) -> MirrorMakerProcess:
        args = ["--clusters", *self.clusters] if self.clusters else []
        self._launch("mm2.properties", self.mm2_props, args)
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            self._check_alive()
            time.sleep(0.2)
        self._check_alive()
        return self
