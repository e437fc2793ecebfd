"""Run a real schema registry on loopback for tests, the demo and development.

The registry is Apicurio Registry, published ready to run on Maven Central
(`io.apicurio:apicurio-registry-app:<version>:tar.gz:all`, a Quarkus application), whose
Confluent-compatible API under `/apis/ccompat/v7` is what Confluent's clients and our registry converters
speak. It is fetched once with the project's mvn fetcher into the cache beside the Kafka jars, and runs
with in-memory storage: a restart starts empty. Like the Kafka launcher, everything lives in a run
directory (`registry.json` records the pid and ports so that `eosconnect registry stop` can find it),
a marker on the command line identifies our JVM before it is signalled, and `tie_to_parent` makes it die
with the process that started it.

Unlike Confluent Schema Registry (BACKWARD), Apicurio's global compatibility defaults to NONE: pass
`compatibility=` or call `set_compatibility` where a rule matters.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import httpx

from eosconnect.devkafka.java_command import spawn_java
from eosconnect.devkafka.java_runtime import require_java_major
from eosconnect.devkafka.maven import fetch_unpacked
from eosconnect.devkafka.ports import free_port
from eosconnect.devkafka.processes import is_our_jvm, pid_alive

log = logging.getLogger(__name__)

APICURIO_VERSION = "3.3.3"
APICURIO_COORDINATE = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"
#: Apicurio Registry 3.x is built for Java 21.
MIN_JAVA = 21
CCOMPAT_PATH = "/apis/ccompat/v7"
STATE_FILE = "registry.json"
#: In-memory storage of a few thousand schemas fits easily; the JVM settles at ~300 MB resident.
REGISTRY_HEAP = ("-Xms64m", "-Xmx384m")
JVM_MARKER = "-Deosconnect.devregistry=true"
COMPATIBILITY_LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)

__all__ = ["APICURIO_COORDINATE", "LocalSchemaRegistry", "RegistryError", "ensure_registry_app"]


class RegistryError(RuntimeError):
    """The registry failed to start or to answer; the message carries the tail of its log."""


def ensure_registry_app(progress: bool = True) -> Path:
    """The unpacked Apicurio Registry application (holding `quarkus-run.jar`), fetched once."""
    return fetch_unpacked(f"apicurio-registry-{APICURIO_VERSION}", APICURIO_COORDINATE, progress)


@dataclass
class RegistryState:
    run_dir: str
    version: str
    port: int
    management_port: int
    java: str
    pid: int | None = None

    @classmethod
    def load(cls, run_dir: Path) -> RegistryState:
        return cls(**json.loads((run_dir / STATE_FILE).read_text()))

    def save(self) -> None:
        path = Path(self.run_dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(path)


class LocalSchemaRegistry:
    """One Apicurio Registry JVM in `run_dir`, its Confluent-compatible API at `url`."""

    def __init__(
        self,
        run_dir: Path | str,
        *,
        port: int | None = None,
        compatibility: str | None = None,
        basic_auth: tuple[str, str] | None = None,
        tie_to_parent: bool = False,
    ) -> None:
        if compatibility is not None and compatibility.upper() not in COMPATIBILITY_LEVELS:
            raise ValueError(
                f"compatibility must be one of {', '.join(COMPATIBILITY_LEVELS)}, got {compatibility!r}"
            )
        self.run_dir = Path(run_dir).resolve()
        self.port = port
        self.compatibility = compatibility.upper() if compatibility else None
        self.tie_to_parent = tie_to_parent
        #: (user, password) required on every API call (HTTP basic auth), as a secured registry would.
        self.basic_auth = basic_auth
        self.state: RegistryState | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @classmethod
    def attach(cls, run_dir: Path | str) -> LocalSchemaRegistry:
        """Reconnect to a registry started earlier (e.g. by `eosconnect registry start`)."""
        run_dir = Path(run_dir).resolve()
        if not (run_dir / STATE_FILE).exists():
            raise RegistryError(
                f"No schema registry state in {run_dir}: start one with `eosconnect registry start`."
            )
        registry = cls(run_dir)
        registry.state = RegistryState.load(run_dir)
        return registry

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 120.0) -> str:
        """Start the JVM and return the Confluent-compatible URL once it answers `GET /subjects`."""
        java = require_java_major(MIN_JAVA, f"Apicurio Registry {APICURIO_VERSION}")
        app = ensure_registry_app()
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self._reap_stale()
        self.state = RegistryState(
            run_dir=str(self.run_dir),
            version=APICURIO_VERSION,
            port=self.port or free_port(),
            management_port=free_port(),
            java=java,
        )
        cmd = [
            java,
            *REGISTRY_HEAP,
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            JVM_MARKER,
            "-Dquarkus.http.host=127.0.0.1",
            f"-Dquarkus.http.port={self.state.port}",
            "-Dquarkus.management.host=127.0.0.1",
            f"-Dquarkus.management.port={self.state.management_port}",
            "-Dquarkus.http.access-log.enabled=false",
            # Let users and tests delete subjects and versions, as Confluent's registry does.
            "-Dapicurio.rest.deletion.group.enabled=true",
            "-Dapicurio.rest.deletion.artifact.enabled=true",
            "-Dapicurio.rest.deletion.artifact-version.enabled=true",
            *self._auth_options(),
            "-jar",
            str(app / "quarkus-run.jar"),
        ]
        self._proc = spawn_java(cmd, self.log_file, self.tie_to_parent)
        self.state.pid = self._proc.pid
        self.state.save()
        log.info(
            "started Apicurio Registry %s, pid %s, port %s", APICURIO_VERSION, self._proc.pid, self.state.port
        )
        try:
            self.wait_ready(timeout)
            if self.compatibility:
                self.set_compatibility(self.compatibility)
        except BaseException:
            self.stop()
            raise
        return self.url

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM, then SIGKILL if it has not exited after `timeout`."""
        if self.state is None or not pid_alive(self.state.pid):
            return
        self._signal(signal.SIGTERM)
        if not self._wait_exit(timeout):
            log.warning("Schema registry pid %s did not stop in %.0fs; killing it", self.state.pid, timeout)
            self._signal(signal.SIGKILL)
            self._wait_exit(10)
        self.state.pid = None
        self.state.save()

    def __enter__(self) -> LocalSchemaRegistry:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ access
    @property
    def url(self) -> str:
        """`schema.registry.url` for clients and converters."""
        assert self.state is not None, "registry not started"
        return f"http://127.0.0.1:{self.state.port}{CCOMPAT_PATH}"

    @property
    def pid(self) -> int | None:
        return self.state.pid if self.state else None

    @property
    def log_file(self) -> Path:
        return self.run_dir / "registry.log"

    def is_running(self) -> bool:
        return self.state is not None and pid_alive(self.state.pid)

    def set_compatibility(self, level: str, subject: str | None = None) -> None:
        """`PUT /config[/<subject>]`: the global compatibility rule, or one subject's."""
        path = f"/config/{subject}" if subject else "/config"
        response = httpx.put(
            f"{self.url}{path}", json={"compatibility": level.upper()}, timeout=10, auth=self.basic_auth
        )
        if response.status_code != 200:
            raise RegistryError(f"PUT {path} {level} was refused: {response.status_code} {response.text}")

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if not self.is_running():
                raise RegistryError(f"The schema registry exited during start-up; {self._log_hint()}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/subjects", timeout=2, auth=self.basic_auth).status_code == 200:
                    return
            if time.monotonic() > deadline:
                raise RegistryError(
                    f"The schema registry did not answer in {timeout:.0f} s; {self._log_hint()}"
                )
            time.sleep(0.25)

    # ------------------------------------------------------------------ internals
    def _auth_options(self) -> list[str]:
        """Quarkus' HTTP basic auth with one embedded user guarding the whole API."""
        if self.basic_auth is None:
            return []
        user, password = self.basic_auth
        return [
            "-Dquarkus.http.auth.basic=true",
            "-Dquarkus.security.users.embedded.enabled=true",
            "-Dquarkus.security.users.embedded.plain-text=true",
            f"-Dquarkus.security.users.embedded.users.{user}={password}",
            "-Dquarkus.http.auth.permission.api.paths=/apis/*",
            "-Dquarkus.http.auth.permission.api.policy=authenticated",
        ]

    def _signal(self, sig: signal.Signals) -> None:
        assert self.state is not None
        if self.state.pid and is_our_jvm(self.state.pid, JVM_MARKER):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.state.pid, sig)

    def _wait_exit(self, timeout: float) -> bool:
        assert self.state is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc is not None and self._proc.poll() is not None:
                return True
            if self._proc is None and not pid_alive(self.state.pid):
                return True
            time.sleep(0.1)
        return False

    def _log_hint(self) -> str:
        if not self.log_file.exists():
            return "it wrote no log"
        tail = self.log_file.read_text(errors="replace").strip().splitlines()[-12:]
        return f"log {self.log_file}:\n    " + "\n    ".join(tail)

    def _reap_stale(self) -> None:
        """Kill a registry JVM left by an earlier start in the same run dir (only ours, by marker)."""
        with contextlib.suppress(Exception):
            old = RegistryState.load(self.run_dir)
            if pid_alive(old.pid) and old.pid and is_our_jvm(old.pid, JVM_MARKER):
                log.warning("killing stale schema registry pid %s in %s", old.pid, self.run_dir)
                os.kill(old.pid, signal.SIGKILL)
