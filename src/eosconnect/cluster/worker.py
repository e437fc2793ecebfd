"""`eosconnect worker worker.properties`: one worker process = one Spark driver + herder + REST.

The properties file is Kafka Connect's distributed-worker format. `spark.*` settings go to the
SparkSession; the default master `local[16,4]` gives 16 long-running task slots on one machine and
4 attempts per task (retries need the `local[N,F]` form, DESIGN.md section 1). The process runs
until SIGTERM/SIGINT, then stops its tasks gracefully and leaves the group.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

import javaproperties

from eosconnect.runtime.config import WorkerConfig

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[16,4]"
DEFAULT_LISTENER = "http://127.0.0.1:8083"


def load_properties(path: Path | str) -> dict[str, str]:
    """A Java `.properties` file, read as `java.util.Properties.load` reads it (`javaproperties`):
    `=`, `:` or white space separators, `#`/`!` comments, line continuations, and the `\\:`, `\\=`,
    `\\ ` and `\\uXXXX` escapes in keys and values. Latin-1 like Java; a file that is valid UTF-8 is
    read as UTF-8 (what Kafka's tools write since Java 9)."""
    raw = Path(path).read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    return dict(javaproperties.loads(text))


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


def run_worker(props: dict[str, str], ready_file: Path | None = None) -> None:
    """Start everything and block until a termination signal."""
    from eosconnect.cluster.herder import DistributedHerder
    from eosconnect.cluster.spark import create_spark_session
    from eosconnect.rest.app import create_app
    from eosconnect.rest.server import RestServer, RestServerConfig

    worker = WorkerConfig.parse(props)
    scheme, host, port = listener_of(props)
    url = advertised_url(props, scheme, host, port)
    spark_conf = {k: v for k, v in props.items() if k.startswith("spark.") and k != "spark.master"}
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
    herder.start()
    server.start()
    log.info("worker %s is serving the REST API at %s", herder.worker_id, url)
    if ready_file is not None:
        ready_file.write_text(f"{url}\n{os.getpid()}\n")
    print(f"eosconnect worker listening on {url}", flush=True)
    stop.wait()
    herder.stop()  # first: tasks learn "stop" through their heartbeats to the REST server
    server.stop()
    spark.stop()
