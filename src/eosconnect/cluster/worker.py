"""`eosconnect worker worker.properties`: one worker process = one Spark driver + herder + REST.

The properties file is Kafka Connect's distributed-worker format. `spark.*` settings go to the
SparkSession; the default master `local[16,4]` gives 16 long-running task slots on one machine and
4 attempts per task (retries need the `local[N,F]` form, DESIGN.md section 1). The process runs
until SIGTERM/SIGINT, then stops its tasks gracefully and leaves the group.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from eosconnect.api.plugins import configure_plugin_path
from eosconnect.runtime.config import WorkerConfig

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[16,4]"
DEFAULT_LISTENER = "http://127.0.0.1:8083"


def load_properties(path: Path | str) -> dict[str, str]:
    """Java `.properties`: `key=value` or `key: value`, `#`/`!` comments, `\\` line continuations."""
    props: dict[str, str] = {}
    pending = ""
    for raw in Path(path).read_text().splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        match = re.match(r"([^=:\s]+)\s*[=:\s]\s*(.*)", line)
        if match:
            props[match.group(1)] = match.group(2).strip()
        else:
            props[line] = ""
    return props


def listener_of(props: dict[str, str]) -> tuple[str, str, int]:
    """(scheme, host, port) from `listeners` (first entry) or the legacy `rest.port`."""
    listener = props.get("listeners", "").split(",")[0].strip()
    if not listener:
        listener = f"http://127.0.0.1:{props['rest.port']}" if "rest.port" in props else DEFAULT_LISTENER
    parsed = urlparse(listener)
    host = parsed.hostname or "127.0.0.1"
    port = parsed.port if parsed.port is not None else 8083
    if port == 0:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
    return parsed.scheme or "http", host, port


def advertised_url(props: dict[str, str], scheme: str, host: str, port: int) -> str:
    adv_host = props.get("rest.advertised.host.name") or ("127.0.0.1" if host in ("0.0.0.0", "") else host)
    adv_port = int(props.get("rest.advertised.port", port))
    return f"{props.get('rest.advertised.listener', scheme)}://{adv_host}:{adv_port}"


def _progress(message: str) -> None:
    """Start-up steps on stdout, so a 40-100 s start is not silence (the log has the details)."""
    print(f"eosconnect worker: {message}", flush=True)


def run_worker(props: dict[str, str], ready_file: Path | None = None) -> None:
    """Start everything and block until a termination signal."""
    from eosconnect.cluster.herder import DistributedHerder
    from eosconnect.cluster.spark import create_spark_session
    from eosconnect.rest.app import create_app
    from eosconnect.rest.server import RestServer, RestServerConfig

    worker = WorkerConfig.parse(props)
    configure_plugin_path(worker.plugin_path)  # before Spark starts: its Python workers inherit it
    scheme, host, port = listener_of(props)
    url = advertised_url(props, scheme, host, port)
    spark_conf = {k: v for k, v in props.items() if k.startswith("spark.") and k != "spark.master"}
    _progress(f"starting Spark ({props.get('spark.master', DEFAULT_MASTER)}); this takes a while ...")
    spark = create_spark_session(
        props.get("spark.master", DEFAULT_MASTER), f"eosconnect-worker-{port}", spark_conf
    )
    herder = DistributedHerder(worker, spark, url)
    rest_config = RestServerConfig.from_properties(props)
    rest_config.host, rest_config.port, rest_config.advertised_url = host, port, url
    app = create_app(herder, basic_auth=rest_config.basic_auth_users or None, own_url=url)
    server = RestServer.from_config(app, rest_config)
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received signal %s; stopping the worker", signum)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    _progress(
        f"reading the internal topics on {worker.bootstrap_servers} and joining group {worker.group_id} ..."
    )
    herder.start()
    _progress(f"starting the REST API on {url} ...")
    server.start()
    log.info("worker %s is serving the REST API at %s", herder.worker_id, url)
    if ready_file is not None:
        ready_file.write_text(f"{url}\n{os.getpid()}\n")
    print(f"eosconnect worker listening on {url}", flush=True)
    stop.wait()
    herder.stop()  # first: tasks learn "stop" through their heartbeats to the REST server
    server.stop()
    spark.stop()
