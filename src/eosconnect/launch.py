"""The worker-launch API: one worker process = one Spark driver + herder + REST, in this process.

`load_properties` reads a worker's settings (Kafka Connect's distributed-worker format) and
`run_worker` starts it and blocks until SIGTERM/SIGINT, then stops its tasks gracefully and leaves
the group. Both `eosconnect worker` (distributed.py) and MirrorMaker's dedicated mode
(mirrormaker/driver.py) launch their workers through it. `run_standalone_worker` is Kafka's
`ConnectStandalone` for `eosconnect standalone` (standalone.py): the same checks, signals and REST
server around the standalone herder (cluster/standalone.py), with no Spark application.

Like Kafka Connect's `ConnectDistributed`, `run_worker` wires the layers together (the herder of
cluster/, the REST server of rest/, the Spark application), so that none of them imports the
others' upper layer. `spark.*` settings go to the SparkSession; the default master `local[16,4]`
gives 16 long-running task slots on one machine and 4 attempts per task (retries need the
`local[N,F]` form, docs/architecture.md).
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import socket
import sys
import threading
import traceback
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import javaproperties

from eosconnect.api.errors import ConfigException
from eosconnect.cli_errors import UserError
from eosconnect.plugins.loading import configure_plugin_path
from eosconnect.preflight import bind_listener, check_brokers, check_worker_acls, check_worker_settings
from eosconnect.runtime.loop_watch import dump_stacks_on_sigusr1

if TYPE_CHECKING:
    from eosconnect.rest.server import RestServer, RestServerConfig

__all__ = ["arm_exit_watchdog", "load_properties", "run_standalone_worker", "run_worker"]

log = logging.getLogger(__name__)

DEFAULT_MASTER = "local[16,4]"
DEFAULT_LISTENER = "http://127.0.0.1:8083"
#: How long `eosconnect worker` may take from SIGTERM to its exit before `arm_exit_watchdog` ends it:
#: tasks stop within seconds (Kafka Connect gives them 5 s), a whole stop takes 1-3 s in the tests.
EXIT_GRACE_S = 25.0
#: After the grace, how long the watchdog's Python timer has before a C-level one ends the process.
GIL_FREE_EXIT_AFTER_S = 5.0


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


def listener_text(props: dict[str, str]) -> str:
    """The listener served: the first of `listeners`, else one from the legacy `rest.port`."""
    listener = props.get("listeners", "").split(",")[0].strip()
    if not listener:
        listener = f"http://127.0.0.1:{props['rest.port']}" if "rest.port" in props else DEFAULT_LISTENER
    return listener


def listener_of(props: dict[str, str]) -> tuple[str, str, int]:
    """(scheme, host, port) of `listener_text` (port 0: a free one, picked when it is bound)."""
    listener = listener_text(props)
    try:
        parsed = urlparse(listener)
        port = parsed.port if parsed.port is not None else 8083
    except ValueError as exc:
        raise UserError(f"listeners={listener} is not a URL such as http://127.0.0.1:8083 ({exc})") from exc
    return parsed.scheme or "http", parsed.hostname or "127.0.0.1", port


WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def advertised_host(props: dict[str, str], host: str) -> str:
    """`rest.advertised.host.name`, else the listener's host; for a wildcard listener the machine's
    host name, as Kafka Connect does (127.0.0.1 would point tasks on other machines at themselves)."""
    return props.get("rest.advertised.host.name") or (
        socket.gethostname() if host in WILDCARD_HOSTS else host
    )


def advertised_url(props: dict[str, str], scheme: str, host: str, port: int) -> str:
    """Where tasks and other workers call this worker (`rest.advertised.host.name|port|listener`)."""
    adv_port = int(props.get("rest.advertised.port", port))
    return f"{props.get('rest.advertised.listener', scheme)}://{advertised_host(props, host)}:{adv_port}"


def driver_address_settings(props: dict[str, str], host: str) -> dict[str, str]:
    """The Spark driver binds where the REST listener binds and advertises the REST API's host,
    unless `spark.driver.bindAddress` / `spark.driver.host` say otherwise."""
    defaults = {
        "spark.driver.bindAddress": host or "0.0.0.0",
        "spark.driver.host": advertised_host(props, host),
    }
    return {k: v for k, v in defaults.items() if k not in props}


def _progress(message: str) -> None:
    """Start-up steps on stdout, so a 40-100 s start is not silence (the log has the details)."""
    print(f"eosconnect worker: {message}", flush=True)


def run_worker(
    props: dict[str, str],
    ready_file: Path | None = None,
    *,
    source: str = "worker.properties",
    warn_unknown: bool = True,
    exit_within_s: float | None = None,
) -> None:
    """Start everything and block until a termination signal; with `exit_within_s`, the process
    ends at the latest that long after the signal (`arm_exit_watchdog`).

    Before Spark starts (preflight.py): the settings are checked (`source` names them in errors;
    `warn_unknown=False` when a caller such as `mirror-maker` checked them already), the brokers
    must answer, the worker's principals must hold the ACLs the broker can tell about, and the REST
    listener's port is bound, each failing as one `UserError` line.

    Long because it is the worker's whole life in order (checks, Spark, herder, REST server, the
    wait for a signal, the shutdown): each step is a call, and the order is what this reads as.
    """
    from eosconnect.cluster.herder import DistributedHerder
    from eosconnect.cluster.spark import SparkProvider
    from eosconnect.rest.app import create_app
    from eosconnect.rest.server import RestServer

    worker = check_worker_settings(props, source, warn_unknown=warn_unknown)
    rest_config, listen = _checked_listener(props, source)
    check_brokers(worker.originals, worker.bootstrap_servers)
    check_worker_acls(worker.originals, worker.bootstrap_servers)
    scheme, host, _ = listener_of(props)
    port = listen.getsockname()[1]
    # Importable here (the driver starts connectors from plugin.path too) and, before Spark starts,
    # in its Python workers, which inherit the environment.
    configure_plugin_path(worker.plugin_path)
    url = advertised_url(props, scheme, host, port)
    spark_conf = {k: v for k, v in props.items() if k.startswith("spark.") and k != "spark.master"}
    _progress(f"starting Spark ({props.get('spark.master', DEFAULT_MASTER)}); this takes a while ...")
    spark = SparkProvider(
        props.get("spark.master", DEFAULT_MASTER),
        f"eosconnect-worker-{port}",
        {**driver_address_settings(props, host), **spark_conf},
        worker.plugin_path,
        ship=props.get("eosconnect.ship.environment", "true").lower() != "false",
    )
    spark.prepare()
    if spark.kept_by_standby:  # it holds no executors without tasks: create it now, not at failover
        if spark.on_demand_executors:  # registering with a cluster manager can take long: meanwhile serve
            threading.Thread(target=spark.get, name="spark-application", daemon=True).start()
        else:
            spark.get()
    herder = DistributedHerder(worker, spark, url)
    rest_config.host, rest_config.port, rest_config.advertised_url = host, port, url
    app = create_app(herder, basic_auth=rest_config.basic_auth_users or None, own_url=url)
    server = RestServer.from_config(app, rest_config, bound_socket=listen)
    _progress(
        f"reading the internal topics on {worker.bootstrap_servers} and joining group {worker.group_id} ..."
    )
    stop = _stop_on_signals(exit_within_s)
    herder.start()
    _serve(server, herder.worker_id, url, ready_file)
    stop.wait()
    herder.stop()  # first: tasks learn "stop" through their heartbeats to the REST server
    server.stop()
    spark.release()
    quiet_interpreter_exit()


def _checked_listener(props: dict[str, str], source: str) -> tuple[RestServerConfig, socket.socket]:
    """The REST server's settings and its listener's socket, bound; `UserError` for a bad listener
    URL or TLS setting (naming it) or a port that cannot be bound."""
    from eosconnect.rest.server import RestServerConfig

    try:
        rest_config = RestServerConfig.from_properties(props)
    except ValueError as exc:  # say which setting when the text does not
        named = any(name in str(exc) for name in ("listeners", "rest."))
        raise UserError(
            f"{source}: {exc}" if named else f"{source}: listeners={listener_text(props)}: {exc}"
        ) from exc
    _, host, port = listener_of(props)
    return rest_config, bind_listener(host, port, listener_text(props))


def run_standalone_worker(
    props: dict[str, str],
    connectors: list[tuple[str, dict[str, str], str]],
    ready_file: Path | None = None,
    *,
    source: str = "worker.properties",
    exit_within_s: float | None = None,
) -> None:
    """Kafka Connect's `ConnectStandalone`: the `connectors` (name, config, the file it came from)
    run in this process (cluster/standalone.py), until a termination signal.

    The same checks as `run_worker` come first, each one `UserError` line: the settings, the offsets
    mode (`offset.storage.file.filename`, or `exactly.once.source.support=enabled` and the offsets
    topic), the REST listener's port, the brokers, then each connector's config, validated as a
    REST create is and failing naming its file. The internal topics' ACLs are not checked: a
    standalone worker has no config or status topic.
    """
    from eosconnect.cluster.herder_api import BadRequestError
    from eosconnect.cluster.standalone import OFFSETS_FILE_SETTING, StandaloneHerder
    from eosconnect.rest.app import create_app
    from eosconnect.rest.server import RestServer

    worker = check_worker_settings({k: v for k, v in props.items() if k != OFFSETS_FILE_SETTING}, source)
    offsets_file = props.get(OFFSETS_FILE_SETTING, "").strip() or None
    if not worker.exactly_once_enabled and offsets_file is None:
        raise UserError(
            f"{source}: {OFFSETS_FILE_SETTING} is required in standalone mode (the file that keeps the "
            "source offsets, such as /tmp/connect.offsets), or set exactly.once.source.support=enabled to "
            f"keep them in the offsets topic (offset.storage.topic={worker.offset_storage_topic})"
        )
    if worker.exactly_once_enabled and offsets_file is not None:
        log.warning(
            "%s is not used: with exactly.once.source.support=enabled the source offsets are kept in the "
            "offsets topic %s, inside each transaction",
            OFFSETS_FILE_SETTING,
            worker.offset_storage_topic,
        )
    elif not worker.exactly_once_enabled and "offset.storage.topic" in props:
        log.warning(
            "offset.storage.topic is not used: the source offsets are kept in %s=%s (at least once); set "
            "exactly.once.source.support=enabled to keep them in the topic, exactly once",
            OFFSETS_FILE_SETTING,
            offsets_file,
        )
    rest_config, listen = _checked_listener(props, source)
    check_brokers(worker.originals, worker.bootstrap_servers)
    configure_plugin_path(worker.plugin_path)
    scheme, host, _ = listener_of(props)
    port = listen.getsockname()[1]
    url = advertised_url(props, scheme, host, port)
    try:
        herder = StandaloneHerder(worker, url, offsets_file)
    except ConfigException as exc:
        raise UserError(f"{source}: {exc}") from None
    for name, config, path in connectors:
        try:
            herder.add_connector(name, config)
        except BadRequestError as exc:
            raise UserError(f"{path}: {exc}") from None
        mode = herder.delivery(name)
        log.info("standalone connector %s (from %s): %s", name, path, mode)
        _progress(f"connector {name} from {path}: {mode}")
    rest_config.host, rest_config.port, rest_config.advertised_url = host, port, url
    app = create_app(herder, basic_auth=rest_config.basic_auth_users or None, own_url=url)
    server = RestServer.from_config(app, rest_config, bound_socket=listen)
    stop = _stop_on_signals(exit_within_s)
    herder.start()
    _serve(server, herder.worker_id, url, ready_file)
    stop.wait()
    herder.stop()
    server.stop()
    quiet_interpreter_exit()


def _stop_on_signals(exit_within_s: float | None) -> threading.Event:
    """An event set by SIGTERM, SIGINT or SIGHUP (a closed terminal: stop as cleanly as Kafka Connect
    does); with `exit_within_s`, the process ends at the latest that long after the signal."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("received signal %s; stopping the worker", signum)
        if exit_within_s is not None and not stop.is_set():
            arm_exit_watchdog(exit_within_s)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    dump_stacks_on_sigusr1()
    return stop


def _serve(server: RestServer, worker_id: str, url: str, ready_file: Path | None) -> None:
    """Start the REST server, then say so: in the log, in `ready_file` (URL and pid) and on stdout."""
    _progress(f"starting the REST API on {url} ...")
    server.start()
    log.info("worker %s is serving the REST API at %s", worker_id, url)
    if ready_file is not None:
        ready_file.write_text(f"{url}\n{os.getpid()}\n")
    print(f"eosconnect worker listening on {url}", flush=True)


def quiet_interpreter_exit() -> None:
    """Nothing logs once the worker has stopped. The interpreter's exit freezes daemon threads
    where they stand, one of them possibly inside a log handler with the handler's lock held, and
    then runs finalizers that log (py4j's connections say "Closing down clientserver connection"
    in `__del__`): the main thread then waited for that lock forever, and stopped workers lingered
    until the exit watchdog's faulthandler dump (which showed that wait) or their SIGKILL. The
    handlers are flushed and closed first, while every thread still runs."""
    logging.shutdown()
    logging.disable(logging.CRITICAL)


def arm_exit_watchdog(grace_s: float = EXIT_GRACE_S) -> None:
    """Bound the exit of a process whose worker is stopping: the interpreter's exit joins every
    thread that is not a daemon (a client's pending call, an executor's queued work), and the test
    suite saw stopped workers linger 60 s past SIGTERM, until their SIGKILL, with nothing in their
    logs after "stopping Spark application". A daemon timer, armed at the signal, names every
    thread still alive after `grace_s`, with where it is, in a WARNING, and ends the process with
    status 0 (the tasks were told to stop at the signal and are fenced by their next generation
    anyway). A normal exit comes first and takes the timer with it."""

    def force_exit() -> None:
        frames = sys._current_frames()
        for thread in threading.enumerate():
            if thread is threading.current_thread() or thread.daemon or not thread.is_alive():
                continue  # the main thread is not a daemon: it is named too, wherever it waits
            frame = frames.get(thread.ident or -1)
            where = "".join(traceback.format_stack(frame)[-4:]) if frame is not None else ""
            told = "after the worker was told to stop"
            log.warning("thread %r still runs %.0f s %s:\n%s", thread.name, grace_s, told, where)
        log.warning("exiting without those threads")
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)

    timer = threading.Timer(grace_s, force_exit)
    timer.daemon = True
    timer.start()
    # The timer runs Python code, so it needs the GIL, and a C call that blocks while holding it (a
    # client library's destructor, say) stops the timer too: the CI runs still saw workers linger 60 s
    # with nothing in their logs. faulthandler's watchdog is a C thread: it writes every thread's
    # Python stack to stderr (the worker's log) and exits with status 1, GIL or not.
    faulthandler.dump_traceback_later(grace_s + GIL_FREE_EXIT_AFTER_S, exit=True, file=2)  # stderr
