"""A Spark standalone cluster for tests, started from Spark's own classes, whose workers act like
other machines.

The master and workers are `spark-class org.apache.spark.deploy.master.Master` / `...worker.Worker`
of a Spark install of their own: a separate virtualenv in the cache holding a copy of the same
pyspark version (made once). Each Spark worker runs in a private mount namespace (`unshare -m`) in
which the project checkout, and with it the eosconnect worker's virtualenv, is covered by an empty
tmpfs, and with a clean environment (no PYTHONPATH, no PYSPARK_PYTHON): its executors can only run
what the eosconnect worker ships to them. Every process dies with the test process.

The master and each worker can also be put on a host of a partitionable network
(tests/support/netns.py): `StandaloneCluster(master_host=...)`, `start(hosts=[...])` or
`add_worker(host=...)` run them under the host's launcher, listening on its address (the
namespace's mount and network namespace both: `ip netns exec` then `unshare -m`). A network's
`close()` kills what runs in its namespaces; `stop()` kills the cluster's processes by pid before.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import venv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eosconnect.devkafka.ports import free_port
from eosconnect.runtime.host import cache_root, die_with_parent
from support.netns import Host

CHECKOUT = Path(__file__).resolve().parents[2]


def unshare_available() -> bool:
    """Whether this process may make mount namespaces (root, or a kernel allowing it)."""
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "true"], capture_output=True, check=False
    )
    return probe.returncode == 0


def ensure_executor_spark() -> Path:
    """SPARK_HOME of a separate environment with the same pyspark as the driver's, made once."""
    import pyspark

    home = cache_root() / f"spark-standalone-{pyspark.__version__}"
    env = home / "venv"
    site = env / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    spark_home = site / "pyspark"
    if (home / ".complete").exists():
        return spark_home
    shutil.rmtree(home, ignore_errors=True)
    venv.create(env, with_pip=False)
    source = Path(pyspark.__file__).parent
    shutil.copytree(source, spark_home, ignore=shutil.ignore_patterns("__pycache__"), symlinks=True)
    import py4j

    shutil.copytree(Path(py4j.__file__).parent, site / "py4j", ignore=shutil.ignore_patterns("__pycache__"))
    (home / ".complete").write_text(pyspark.__version__)
    return spark_home


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (from /proc), e.g. a Spark worker's executors and Python workers."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


@dataclass
class SparkWorker:
    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    #: The network host it runs on; None: loopback of the test's own namespace.
    host: Host | None = None

    def kill(self) -> list[int]:
        """SIGKILL the Spark worker and everything it started (executors and their Python workers)."""
        pids = [self.proc.pid, *descendants(self.proc.pid)]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(10)
        return pids


@dataclass
class StandaloneCluster:
    workdir: Path
    spark_home: Path = field(default_factory=ensure_executor_spark)
    master_port: int = field(default_factory=free_port)
    ui_port: int = field(default_factory=free_port)
    workers: list[SparkWorker] = field(default_factory=list)
    #: The network host the master runs on; None: loopback of the test's own namespace.
    master_host: Host | None = None
    #: Extra `-D` options of the master's JVM (SPARK_MASTER_OPTS), e.g. `spark.worker.timeout`.
    master_options: tuple[str, ...] = ()
    _master: subprocess.Popen[bytes] | None = None

    @property
    def master_address(self) -> str:
        return self.master_host.address if self.master_host is not None else "127.0.0.1"

    @property
    def url(self) -> str:
        return f"spark://{self.master_address}:{self.master_port}"

    def _env(self, address: str = "127.0.0.1") -> dict[str, str]:
        env = {
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "HOME": os.environ.get("HOME", "/root"),
            "SPARK_HOME": str(self.spark_home),
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_LOCAL_IP": address,
            "SPARK_LOG_DIR": str(self.workdir / "logs"),
        }
        if self.master_options:
            env["SPARK_MASTER_OPTS"] = " ".join(self.master_options)
        if "JAVA_HOME" in os.environ:
            env["JAVA_HOME"] = os.environ["JAVA_HOME"]
        return env

    def _spawn(
        self, name: str, command: list[str], host: Host | None = None
    ) -> tuple[subprocess.Popen[bytes], Path]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        log_path = self.workdir / f"{name}.log"
        proc = subprocess.Popen(
            [*(host.launcher() if host is not None else []), *command],
            stdout=log_path.open("ab"),
            stderr=subprocess.STDOUT,
            env=self._env(host.address if host is not None else "127.0.0.1"),
            start_new_session=True,
            preexec_fn=die_with_parent,
        )
        return proc, log_path

    def start(
        self, workers: int = 2, cores: int = 3, timeout: float = 120, hosts: list[Host] | None = None
    ) -> StandaloneCluster:
        """The master and `workers` workers (one on each of `hosts` when given)."""
        spark_class = str(self.spark_home / "bin" / "spark-class")
        self._master, _ = self._spawn(
            "master",
            [
                spark_class,
                "org.apache.spark.deploy.master.Master",
                "--host",
                self.master_address,
                "--port",
                str(self.master_port),
                "--webui-port",
                str(self.ui_port),
            ],
            self.master_host,
        )
        self._wait(lambda: self.state() is not None, timeout, "the Spark master")
        placed: list[Host | None] = list(hosts) if hosts is not None else [None] * workers
        for host in placed:
            self.add_worker(cores, wait=False, host=host)
        self._wait(lambda: self.alive_workers() == len(placed), timeout, f"{len(placed)} Spark workers")
        return self

    def add_worker(
        self, cores: int = 3, wait: bool = True, timeout: float = 120, host: Host | None = None
    ) -> SparkWorker:
        """A Spark worker in its own mount namespace, where the checkout (and the venv in it) is
        hidden; on `host` when given (its network namespace, listening on its address)."""
        name = f"worker{len(self.workers) + 1}"
        work = self.workdir / name
        work.mkdir(parents=True, exist_ok=True)
        hide = f"mount -t tmpfs -o size=1m eosconnect-hidden {CHECKOUT}"
        if not str(Path(sys.prefix).resolve()).startswith(str(CHECKOUT)):
            hide += f" && mount -t tmpfs -o size=1m eosconnect-hidden {Path(sys.prefix).resolve()}"
        launch = (
            f"{hide} && exec {self.spark_home}/bin/spark-class org.apache.spark.deploy.worker.Worker "
            f"--host {host.address if host is not None else '127.0.0.1'} --cores {cores} --memory 3g "
            f"--work-dir {work} --webui-port 0 {self.url}"
        )
        before = self.alive_workers()
        proc, log_path = self._spawn(
            name, ["unshare", "-m", "--propagation", "private", "sh", "-c", launch], host
        )
        worker = SparkWorker(name, proc, log_path, host)
        self.workers.append(worker)
        if wait:
            self._wait(lambda: self.alive_workers() > before, timeout, f"Spark {name}")
        return worker

    # --------------------------------------------------------------------------- master's view
    def state(self) -> dict[str, Any] | None:
        try:
            url = f"http://{self.master_address}:{self.ui_port}/json/"
            with urllib.request.urlopen(url, timeout=5) as response:
                return json.loads(response.read())
        except OSError:
            return None

    def alive_workers(self) -> int:
        state = self.state() or {}
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def active_apps(self) -> list[dict[str, Any]]:
        return list((self.state() or {}).get("activeapps", []))

    def _wait(self, check: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return
            if self._master is not None and self._master.poll() is not None:
                break
            time.sleep(0.5)
        logs = "\n".join(
            f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-15:])
            for p in sorted(self.workdir.glob("*.log"))
        )
        raise TimeoutError(f"timed out waiting for {what}\n{logs}")

    def stop(self) -> None:
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.kill()
        if self._master is not None and self._master.poll() is None:
            self._master.send_signal(signal.SIGKILL)
            self._master.wait(10)
