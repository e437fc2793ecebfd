"""Run `eosconnect mirror-maker mm2.properties` as a real subprocess, for tests and demos.

Like `WorkerProcess`: its own process group (the Python driver and, with several target clusters,
its child workers; their Spark JVMs run in sessions of their own), tied to the caller's life,
killable with signals. Ready once every selected target's worker has printed that its connectors
are configured.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import javaproperties

from eosconnect.runtime.host import die_with_parent
from eosconnect.tools.worker_process import signal_with_jvm

__all__ = ["EosMirrorMakerProcess"]


@dataclass
class EosMirrorMakerProcess:
    workdir: Path
    mm2_props: dict[str, str]
    clusters: list[str]
    proc: subprocess.Popen[bytes] | None = None
    log_path: Path = field(init=False)
    _offset: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.log_path = self.workdir / "mirror-maker.log"

    def start(self, timeout: float = 180.0) -> EosMirrorMakerProcess:
        return self.launch().wait_ready(timeout)

    def launch(self) -> EosMirrorMakerProcess:
        """Start the process without waiting (several can then start side by side)."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        props = self.workdir / "mm2.properties"
        props.write_text(javaproperties.dumps(self.mm2_props, timestamp=False))
        self._offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        args = [arg for alias in self.clusters for arg in ("--clusters", alias)]
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "eosconnect.cli", "mirror-maker", str(props), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return self

    def wait_ready(self, timeout: float = 180.0) -> EosMirrorMakerProcess:
        """Until every selected target's connectors are configured; raises if the process died."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while True:
            text = self.log_path.read_bytes()[self._offset :].decode(errors="replace")
            if all(f"connectors into {alias} at" in text for alias in self.clusters):
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"mirror-maker exited with {self.proc.returncode}:\n{self.tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"mirror-maker did not configure its connectors:\n{self.tail()}")
            time.sleep(0.5)

    def tail(self, lines: int = 60) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def signal(self, sig: signal.Signals) -> None:
        """Its process group and the Spark JVMs its workers start in sessions of their own."""
        if self.proc is not None:
            signal_with_jvm(self.proc.pid, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(10)

    def stop(self, timeout: float = 60.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self.signal(signal.SIGKILL)  # whatever is left of its group (a child worker's JVM)
