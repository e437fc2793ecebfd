"""Run `eosconnect worker` as a real subprocess: used by the demo and the end-to-end tests.

Each worker is its own Spark driver (a JVM) plus herder and REST server, exactly as operators run
it; callers talk to it over HTTP and may kill or freeze it with signals.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import javaproperties

from eosconnect.cluster.herder_api import no_leader_now
from eosconnect.runtime.host import die_with_parent


def local_worker_settings(bootstrap: str, name: str, **overrides: str) -> dict[str, str]:
    """The settings of a one-broker local worker with exactly-once source support, as the demos and
    benches start it: its group and storage topics are named after `name` (unique per run), with
    replication factor 1 and one partition. `overrides` (underscores for dots) add or replace settings."""
    return {
        "bootstrap.servers": bootstrap,
        "group.id": name,
        "config.storage.topic": f"{name}-configs",
        "offset.storage.topic": f"{name}-offsets",
        "status.storage.topic": f"{name}-status",
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "offset.storage.partitions": "1",
        "status.storage.partitions": "1",
        "exactly.once.source.support": "enabled",
        "listeners": "http://127.0.0.1:0",
        "task.shutdown.graceful.timeout.ms": "5000",
        "spark.driver.memory": "1g",
        **{key.replace("_", "."): value for key, value in overrides.items()},
    }


def detached_children(pid: int) -> list[int]:
    """Descendants of `pid` within its process group that lead a group of their own (Linux /proc):
    a worker's Spark JVM, or the JVMs of mirror-maker's child workers. Empty where /proc does not say."""
    found: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with contextlib.suppress(OSError):
            for child in map(int, children.read_text().split()):
                with contextlib.suppress(OSError):
                    found.extend([child] if os.getpgid(child) == child else detached_children(child))
    return found


def signal_with_jvm(pid: int, sig: signal.Signals) -> None:
    """Signal the process group led by `pid` and the groups of its detached children (its JVM)."""
    for group in [*detached_children(pid), pid]:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, sig)


@dataclass
class WorkerProcess:
    props: dict[str, str]
    workdir: Path
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    #: The worker (and with it its Spark JVM and Python workers) dies with the process that started
    #: it, so a killed test run or demo leaves nothing behind. Start it from the main thread.
    tie_to_parent: bool = True
    #: Extra environment variables for the worker (and the Spark Python workers it starts).
    env: dict[str, str] = field(default_factory=dict)
    #: A command prefix the worker runs under, which must exec it (keeping its pid): a test puts the
    #: worker on a host of a network it can partition (`ip netns exec <namespace>`).
    launcher: tuple[str, ...] = ()
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / "worker.log"

    def start(self, timeout: float = 120.0) -> WorkerProcess:
        self.workdir.mkdir(parents=True, exist_ok=True)
        props_file = self.workdir / "worker.properties"
        props_file.write_text(javaproperties.dumps(self.props, timestamp=False))
        ready = self.workdir / "ready"
        ready.unlink(missing_ok=True)
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [
                *self.launcher,
                sys.executable,
                "-m",
                "eosconnect.cli",
                "worker",
                str(props_file),
                "--ready-file",
                str(ready),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent if self.tie_to_parent else None,
            env={**os.environ, "EOSCONNECT_LOG_LEVEL": "INFO", **self.env},
        )
        deadline = time.monotonic() + timeout
        # The worker writes "<url>\n<pid>\n" in one call, but a reader can see the file created and
        # still empty: wait for the whole of it, not for the name.
        while not (ready.exists() and ready.read_text().endswith("\n")):
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {self.proc.returncode}; log:\n{self.tail()}")
            if time.monotonic() > deadline:
                self.kill()  # not left running unowned: the caller never got it to stop
                raise TimeoutError(f"worker did not become ready in {timeout:.0f}s; log:\n{self.tail()}")
            time.sleep(0.2)
        self.url = ready.read_text().splitlines()[0]
        return self

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal(self, sig: signal.Signals) -> None:
        """Signal the worker's process group and Spark's JVM, which the worker starts in a session of
        its own (cluster/spark.py). Spark's Python workers run in a process group of their own too
        (pyspark's daemon calls setpgid): signal their pids (GET /internal/tasks) to reach a task."""
        assert self.proc is not None
        signal_with_jvm(self.proc.pid, sig)

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.proc.wait(10)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)

    # ------------------------------------------------------------------ REST helpers
    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """An HTTP request to the worker; `/internal/...` requests are signed with the group's
        current session key (read from the config topic), as the worker requires."""
        if path.startswith("/internal/") and "headers" not in kwargs:
            kwargs["headers"] = self.signed_headers(method, path)
        return httpx.request(method, self.url + path, timeout=60, **kwargs)

    def signed_headers(self, method: str, path: str, body: bytes = b"") -> dict[str, str]:
        from eosconnect.storage.clients import client_config
        from eosconnect.storage.config_state import build_snapshot
        from eosconnect.storage.session_key import sign_request
        from eosconnect.storage.topic_reader import read_to_end

        topic = self.props.get("config.storage.topic", "connect-configs")
        # As the worker reads it: its connection settings (a secured cluster's principal) included.
        client = client_config("consumer", self.props)
        client.pop("logger", None)
        records = read_to_end(client, topic, timeout=30)
        key = build_snapshot((r.key, r.value) for r in records).session_key
        if key is None:
            return {}
        return sign_request(key, method, path.split("?", 1)[0], body)

    def wait_for(self, check: Any, timeout: float, what: str) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = check()
                if last:
                    return last
            except (httpx.HTTPError, LookupError) as exc:  # not reachable yet, or not there yet
                last = exc
            time.sleep(0.5)
        raise AssertionError(f"timed out waiting for {what} (last: {last}); worker log:\n{self.tail()}")

    def create_connector(self, name: str, config: dict[str, str], timeout: float = 60.0) -> httpx.Response:
        """POST /connectors, retrying while the group has no leader (`request_led`)."""
        return self.request_led("POST", "/connectors", timeout, json={"name": name, "config": config})

    def request_led(self, method: str, path: str, timeout: float = 60.0, **kwargs: Any) -> httpx.Response:
        """A leader's request, retried while the group has no leader to serve it: right after
        start-up (none elected, or this worker elected but not told so by its group consumer yet),
        or while the leader is in doubt after its group coordinator died (409 "rejoining the group")."""
        deadline = time.monotonic() + timeout
        while True:
            response = self.request(method, path, **kwargs)
            if not no_leader_now(response.status_code, response.text) or time.monotonic() > deadline:
                return response
            time.sleep(0.5)

    def status(self, connector: str) -> dict[str, Any]:
        response = self.request("GET", "/connectors/" + quote(connector, safe="") + "/status")
        return response.json() if response.status_code == 200 else {}

    def task_states(self, connector: str) -> list[str]:
        return [t["state"] for t in self.status(connector).get("tasks", [])]

    def stop_connector(self, connector: str, timeout: float = 60.0) -> None:
        """PUT /stop and wait for STOPPED, which the worker reports once the tasks are over (their
        last transactions committed or aborted); a stopped connector lists no tasks (KIP-875)."""
        response = self.request_led("PUT", "/connectors/" + quote(connector, safe="") + "/stop", timeout)
        assert response.status_code == 204, response.text
        self.wait_for(
            lambda: (
                self.status(connector).get("connector", {}).get("state") == "STOPPED"
                and self.task_states(connector) == []
            ),
            timeout,
            f"connector {connector} to stop",
        )
