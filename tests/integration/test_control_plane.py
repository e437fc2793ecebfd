"""Control-plane hardening against one real worker and the session broker (issue 15).

One worker serves the whole module: each test uses connectors of its own names and deletes them.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest
import typer
from confluent_kafka import Consumer, TopicPartition
from typer.testing import CliRunner

from eosconnect.clients.cli import connectors_app
from eosconnect.connectors.jdbc.database import VALIDATION_CONNECT_TIMEOUT_S
from eosconnect.tools.worker_process import WorkerProcess
from eosconnect.worker_config import DEFAULT_TASKS_PER_SLOT
from support.workers import connector_path, delete_connector, sequence_config, wait_running, worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

SLOTS = 4
cli = typer.Typer()
cli.add_typer(connectors_app, name="connectors")
SUPPORT = "support.control_plane_connectors"


@pytest.fixture(scope="module")
def allowed_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The only directory the worker's FileStream connectors may use (file.allowed.dirs)."""
    return tmp_path_factory.mktemp("allowed-files")


@pytest.fixture(scope="module")
def worker(
    bootstrap: str, tmp_path_factory: pytest.TempPathFactory, allowed_dir: Path
) -> Iterator[WorkerProcess]:
    props = worker_settings(
        bootstrap,
        f"control-plane-{uuid.uuid4().hex[:8]}",
        **{"file.allowed.dirs": str(allowed_dir), "spark.master": f"local[{SLOTS},2]"},
    )
    process = WorkerProcess(props, tmp_path_factory.mktemp("control-plane") / "w1").start(timeout=300)
    yield process
    process.stop()


# ---------------------------------------------------------------------------------------- bug 1: names
@pytest.mark.parametrize("name", ["a/b", ".", "..", "x\\y"])
def test_unaddressable_names_are_refused_with_the_reason(worker: WorkerProcess, name: str) -> None:
    response = worker.create_connector(name, sequence_config("unused"))
    assert response.status_code == 400, response.text
    assert "name" in response.json()["message"]
    assert name not in worker.request("GET", "/connectors").json()
    put = worker.request("PUT", f"/connectors/{quote(name, safe='')}/config", json=sequence_config("unused"))
    assert put.status_code in (400, 404, 405), put.text  # never created
    assert name not in worker.request("GET", "/connectors").json()


def test_a_name_with_percent_and_spaces_runs_logs_and_deletes(worker: WorkerProcess) -> None:
    name = f"50%off sale {uuid.uuid4().hex[:4]}"
    topic = f"cp-percent-{uuid.uuid4().hex[:6]}"
    created = worker.create_connector(name, sequence_config(topic))
    assert created.status_code == 201, created.text
    assert created.headers["location"].endswith(quote(name, safe=""))
    wait_running(worker, name)
    assert worker.request("DELETE", connector_path(name)).status_code == 204
    assert name not in worker.request("GET", "/connectors").json()
    log = Path(worker.log_path).read_text(errors="replace")
    assert "--- Logging error ---" not in log


def test_an_oversized_config_and_a_nul_path_are_client_errors(worker: WorkerProcess) -> None:
    """A 10 MB config fits the REST body limit (16 MiB) but not a config-topic record (about 1 MB): it
    is refused with 400 naming the limit and nothing is stored (it used to be a 500). A NUL byte in a
    path is a client error too, never a 500."""
    big = worker.create_connector("cp-big", {**sequence_config("unused"), "blob": "x" * 10_000_000})
    assert big.status_code in (400, 413), big.text
    assert "message.max.bytes" in big.json()["message"], big.text
    assert "cp-big" not in worker.request("GET", "/connectors").json()
    nul = worker.request("GET", "/connectors/a%00b/status")
    assert 400 <= nul.status_code < 500, nul.text


# ---------------------------------------------------------------------------------------- bug 2: tasks.max
def test_tasks_max_beyond_what_can_be_placed_is_a_clear_400(worker: WorkerProcess) -> None:
    huge = worker.create_connector("cp-huge", sequence_config("unused", tasks=100_000))
    assert huge.status_code == 400, huge.text
    assert "tasks.max=100000" in huge.json()["message"]
    # With tasks sharing slots (eosconnect.tasks.per.slot=K) the bound is K times the slots.
    per_slot = int(worker.props.get("eosconnect.tasks.per.slot", DEFAULT_TASKS_PER_SLOT))
    over = SLOTS * per_slot + 1
    over_slots = worker.create_connector("cp-over", sequence_config("unused", tasks=over))
    assert over_slots.status_code == 400, over_slots.text
    assert f"tasks.max={over} is more than" in over_slots.json()["message"]
    assert f"{SLOTS} Spark task slots" in over_slots.json()["message"]
    assert not {"cp-huge", "cp-over"} & set(worker.request("GET", "/connectors").json())


def test_one_failing_connector_does_not_block_another(worker: WorkerProcess) -> None:
    topic = f"cp-isolation-{uuid.uuid4().hex[:6]}"
    greedy = {
        **sequence_config(topic),
        "connector.class": "support.control_plane_connectors.GreedySequenceConnector",
    }
    assert worker.create_connector("cp-greedy", greedy).status_code == 201
    try:
        assert worker.create_connector("cp-fine", sequence_config(topic)).status_code == 201
        wait_running(worker, "cp-fine")

        def failed() -> dict | None:
            status = worker.request("GET", "/connectors/cp-greedy/status").json()
            return status if status["connector"]["state"] == "FAILED" else None

        status = worker.wait_for(failed, 60, "the greedy connector FAILED")
        assert "more than its tasks.max=1" in status["connector"]["trace"]
        assert worker.request("GET", "/connectors/cp-greedy/tasks").json() == []
    finally:
        delete_connector(worker, "cp-greedy")
        delete_connector(worker, "cp-fine")


# ---------------------------------------------------------------------------------------- validate up front
BAD_SETTINGS = [
    ({"key.converter": "nope.NoConverter"}, "key.converter"),
    ({"header.converter": "nope.NoHeaderConverter"}, "header.converter"),
    ({"transforms": "t", "transforms.t.type": "nope.NoTransform"}, "transforms.t.type"),
    ({"transforms": "t"}, "transforms.t.type"),
    (
        {"predicates": "p", "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "("},
        "predicates.p.pattern",
    ),
    ({"topic": "not a topic!"}, "topic"),
    ({"errors.tolerance": "sometimes"}, "errors.tolerance"),
    ({"errors.retry.timeout": "soon"}, "errors.retry.timeout"),
]


@pytest.mark.parametrize(("settings", "field"), BAD_SETTINGS, ids=[f for _, f in BAD_SETTINGS])
def test_bad_framework_settings_are_refused_before_anything_is_stored(
    worker: WorkerProcess, settings: dict[str, str], field: str
) -> None:
    config = {**sequence_config("cp-valid-topic"), **settings}
    created = worker.create_connector("cp-bad-settings", config)
    assert created.status_code == 400, created.text
    assert field in created.json()["message"]
    assert "cp-bad-settings" not in worker.request("GET", "/connectors").json()
    infos = worker.request("PUT", "/connector-plugins/SequenceSource/config/validate", json=config).json()
    flagged = {c["value"]["name"] for c in infos["configs"] if c["value"]["errors"]}
    assert field in flagged, infos


def test_validate_flags_a_missing_connector_class(worker: WorkerProcess) -> None:
    response = worker.request("PUT", "/connector-plugins/SequenceSource/config/validate", json={"topic": "t"})
    assert response.status_code == 400
    assert "connector.class" in response.json()["message"]


def test_config_def_returning_none_is_a_400_naming_the_class(worker: WorkerProcess) -> None:
    config = {**sequence_config("cp-none"), "connector.class": f"{SUPPORT}.NoConfigDefConnector"}
    created = worker.create_connector("cp-none", config)
    assert created.status_code == 400, created.text
    assert "NoConfigDefConnector.config_def() must return a ConfigDef" in created.json()["message"]
    validated = worker.request(
        "PUT", f"/connector-plugins/{SUPPORT}.NoConfigDefConnector/config/validate", json=config
    )
    assert validated.status_code == 400
    assert "NoConfigDefConnector" in validated.json()["message"]


@pytest.mark.parametrize(
    ("connector", "named"),
    [("NonRecordPollConnector", "returned str 'not records'"), ("NonRecordItemConnector", "item 0 is dict")],
)
def test_poll_returning_non_records_fails_naming_what_it_returned(
    worker: WorkerProcess, connector: str, named: str
) -> None:
    name = f"cp-{connector.lower()}"
    topic = f"cp-poll-{uuid.uuid4().hex[:6]}"
    config = {**sequence_config(topic), "connector.class": f"{SUPPORT}.{connector}"}
    assert worker.create_connector(name, config).status_code == 201
    try:

        def failed() -> dict | None:
            tasks = worker.request("GET", f"/connectors/{name}/status").json().get("tasks", [])
            return tasks[0] if tasks and tasks[0]["state"] == "FAILED" else None

        task = worker.wait_for(failed, 90, f"{name}'s task FAILED")
        assert named in task["trace"] and ".poll()" in task["trace"]
        shown = CliRunner().invoke(
            cli, ["connectors", "status", name, "--url", worker.url], env={"COLUMNS": "300"}
        )
        assert shown.exit_code == 0, shown.output
        assert "ConnectException" in shown.output and "Traceback (most recent" not in shown.output
    finally:
        delete_connector(worker, name)


def test_file_stream_source_refuses_bad_offsets_through_the_connector(
    worker: WorkerProcess, allowed_dir: Path
) -> None:
    outside = {"connector.class": "FileStreamSource", "file": "/etc/hostname", "topic": "cp-outside"}
    refused = worker.create_connector("cp-outside", outside)
    assert refused.status_code == 400 and "file.allowed.dirs" in refused.json()["message"]
    source = allowed_dir / "in.txt"
    source.write_text("one\ntwo\n")
    config = {
        "connector.class": "FileStreamSource",
        "file": str(source),
        "topic": f"cp-file-{uuid.uuid4().hex[:6]}",
    }
    body = {"name": "cp-file", "config": config, "initial_state": "STOPPED"}
    assert worker.request("POST", "/connectors", json=body).status_code == 201
    try:
        offsets = "/connectors/cp-file/offsets"
        for partition, offset, problem in [
            ({"file": str(source)}, {"position": 3}, "filename"),
            ({"filename": str(source)}, {"position": "abc"}, "position"),
            ({"filename": str(source)}, {"position": -1}, "non-negative"),
            ({"filename": str(source)}, {"pos": 1}, "position"),
        ]:
            response = worker.request(
                "PATCH", offsets, json={"offsets": [{"partition": partition, "offset": offset}]}
            )
            assert response.status_code == 400, (partition, offset, response.text)
            assert problem in response.json()["message"]
        assert worker.request("GET", offsets).json() == {"offsets": []}  # nothing was written
        good = {"partition": {"filename": str(source)}, "offset": {"position": 4}}
        assert worker.request("PATCH", offsets, json={"offsets": [good]}).status_code == 200
        assert worker.request("GET", offsets).json() == {"offsets": [good]}
    finally:
        delete_connector(worker, "cp-file")


def test_a_file_that_becomes_a_link_out_of_the_allowed_dirs_fails_its_task(
    worker: WorkerProcess, allowed_dir: Path, tmp_path: Path
) -> None:
    """Validation saw a path inside file.allowed.dirs; by the time the task opens it, it is a
    symbolic link to a file outside. The task fails naming the file, the setting and the fix."""
    unique = uuid.uuid4().hex[:6]
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the topic\n")
    source_file, sink_file = allowed_dir / f"in-{unique}.txt", allowed_dir / f"out-{unique}.txt"
    topic = f"cp-link-{unique}"
    source = {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic}
    sink = {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic}
    assert worker.create_connector("cp-link-src", source).status_code == 201
    body = {"name": "cp-link-sink", "config": sink, "initial_state": "STOPPED"}
    assert worker.request("POST", "/connectors", json=body).status_code == 201
    try:
        wait_running(worker, "cp-link-src")
        source_file.symlink_to(secret)
        sink_file.symlink_to(tmp_path / "written.txt")
        assert worker.request("PUT", "/connectors/cp-link-sink/resume").status_code == 202

        for name, path, target in [
            ("cp-link-src", source_file, secret),
            ("cp-link-sink", sink_file, tmp_path / "written.txt"),
        ]:

            def failed(name: str = name) -> dict | None:
                tasks = worker.status(name).get("tasks", [])
                return tasks[0] if tasks and tasks[0]["state"] == "FAILED" else None

            trace = worker.wait_for(failed, 90, f"{name}'s task FAILED")["trace"]
            assert f"file '{path}' (it resolves to {target})" in trace, trace
            assert f"file.allowed.dirs={allowed_dir}" in trace and "add its directory" in trace
        assert not (tmp_path / "written.txt").exists()
    finally:
        delete_connector(worker, "cp-link-src")
        delete_connector(worker, "cp-link-sink")


# ------------------------------------------------------------------------------ probe holes (issue 27)
#: How long the module's worker lets a task stop before abandoning it (task.shutdown.graceful.timeout.ms).
GRACEFUL_S = 3.0
#: Slack for a loaded machine: heartbeats every 0.5 s, the final commit, the leader's 1 s tick.
STOP_MARGIN_S = 5.0


def _high_watermark(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"hwm-{uuid.uuid4().hex[:6]}"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)[1]
    finally:
        consumer.close()


def test_a_deleted_connectors_busy_file_tasks_stop_within_the_graceful_timeout(
    worker: WorkerProcess, allowed_dir: Path, bootstrap: str
) -> None:
    """The probe's FileStreamSource on a file without newlines kept its task inside one poll() (it
    read the whole 2 GB line, copying it at every chunk), so `DELETE /connectors/<c>` left it running
    until the leader cancelled its job a minute later. Two busy tasks are deleted here: one producing
    the lines of a large file (1M lines), one reading a 512 MiB line (line.max.bytes above it).
    Each must stop by itself (not be abandoned) within task.shutdown.graceful.timeout.ms plus a
    margin, and nothing is written after."""
    assert float(worker.props["task.shutdown.graceful.timeout.ms"]) / 1000 == GRACEFUL_S
    unique = uuid.uuid4().hex[:6]
    lines_file, long_file = allowed_dir / f"busy-{unique}.txt", allowed_dir / f"long-{unique}.txt"
    with long_file.open("wb") as f:
        f.truncate(512 * 1024 * 1024)  # sparse: NUL bytes and no newline, as in the probe
    total = 1_000_000  # ~44 MB: more than the task can send before the delete, on any machine here
    lines_file.write_bytes(b"".join(b"%09d one line of a large file of lines\n" % i for i in range(total)))
    topic = f"cp-busy-{unique}"
    names = {"lines": f"cp-busy-lines-{unique}", "long": f"cp-busy-long-{unique}"}
    configs = {
        "lines": {"connector.class": "FileStreamSource", "file": str(lines_file), "topic": topic},
        "long": {
            "connector.class": "FileStreamSource",
            "file": str(long_file),
            "topic": f"{topic}-long",
            "line.max.bytes": str(1024 * 1024 * 1024),
        },
    }
    try:
        for kind, name in names.items():
            assert worker.create_connector(name, configs[kind]).status_code == 201
        for name in names.values():
            wait_running(worker, name)
        worker.wait_for(lambda: _high_watermark(bootstrap, topic) > 20_000, 90, "lines in the topic")
        began = time.monotonic()
        for name in names.values():
            assert worker.request("DELETE", connector_path(name)).status_code == 204
        stopped_at: dict[str, float] = {}  # the task logged its end (after its final commit)
        gone_at: dict[str, float] = {}  # the leader reaped its ended job: /internal/tasks drops it

        def ended() -> bool:
            now = time.monotonic() - began
            log = worker.log_path.read_text(errors="replace")
            listed = worker.request("GET", "/internal/tasks").json()
            for name in names.values():
                if name not in stopped_at and f"[{name}-0] stopped after" in log:
                    stopped_at[name] = now
                if name not in gone_at and f"{name}-0" not in listed:
                    gone_at[name] = now
            return len(stopped_at) == len(gone_at) == len(names)

        worker.wait_for(ended, 90, "both tasks to stop and leave /internal/tasks")
        assert max(*stopped_at.values(), *gone_at.values()) < GRACEFUL_S + STOP_MARGIN_S, (
            stopped_at,
            gone_at,
        )
        log = worker.log_path.read_text(errors="replace")
        abandoned = [line for line in log.splitlines() if "did not stop within" in line and unique in line]
        assert not abandoned, abandoned  # stopped by itself, not left running as a zombie
        assert all(f"connector {name}: generation 0 stopped" in log for name in names.values())
        written = _high_watermark(bootstrap, topic)
        time.sleep(2)
        assert _high_watermark(bootstrap, topic) == written, "records were written after the task stopped"
        assert written < total, "the task had sent the whole file before the delete: it was not busy"
        print(f"after DELETE: task logged its stop {stopped_at}, left /internal/tasks {gone_at} (s)")
    finally:
        for name in names.values():
            delete_connector(worker, name)
        lines_file.unlink(missing_ok=True)
        long_file.unlink(missing_ok=True)


JDBC_PLUGINS = {
    "JdbcSource": {
        "tables": "orders",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "topic.prefix": "cp-jdbc-",
    },
    "JdbcSink": {"topics": "cp-jdbc-orders"},
}
DATABASE_URLS = {
    "postgresql": "postgresql://app:s3cret@127.0.0.1:{port}/shop",
    "mysql": "mysql+pymysql://app:s3cret@127.0.0.1:{port}/shop",
}


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A port on 127.0.0.1 that accepts connections and never says a word (not a database)."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        server.settimeout(0.2)
        held: list[socket.socket] = []
        done = threading.Event()

        def accept() -> None:
            while not done.is_set():
                try:
                    held.append(server.accept()[0])
                except OSError:
                    continue

        acceptor = threading.Thread(target=accept, daemon=True)
        acceptor.start()
        try:
            yield server.getsockname()[1]
        finally:
            done.set()
            acceptor.join(5)
            for conn in held:
                conn.close()


def _validate_jdbc(worker: WorkerProcess, plugin: str, url: str) -> tuple[float, dict[str, list[str]]]:
    config = {"connector.class": plugin, "name": f"cp-{plugin.lower()}", "connection.url": url}
    began = time.monotonic()
    response = worker.request(
        "PUT", f"/connector-plugins/{plugin}/config/validate", json={**config, **JDBC_PLUGINS[plugin]}
    )
    took = time.monotonic() - began
    assert response.status_code == 200, response.text
    configs = response.json()["configs"]
    return took, {c["value"]["name"]: c["value"]["errors"] for c in configs if c["value"]["errors"]}


def test_validating_a_database_url_at_a_silent_or_closed_port_answers_within_the_connect_timeout(
    worker: WorkerProcess, silent_port: int
) -> None:
    """Validation connects to the database a connection.url names. At a port that accepts and then
    says nothing it used to wait for the driver's default (130 s for PostgreSQL; for ever with
    PyMySQL, whose connect_timeout does not cover the server's greeting), which made validate a port
    scanner that held a REST thread: JdbcSource and JdbcSink, both drivers, answer within
    VALIDATION_CONNECT_TIMEOUT_S with an error on connection.url naming that timeout. A closed port
    answers at once."""
    cases = [(plugin, db) for plugin in JDBC_PLUGINS for db in DATABASE_URLS]
    with ThreadPoolExecutor(len(cases)) as pool:  # at once: the REST server must not queue them
        answers = dict(
            zip(
                cases,
                pool.map(
                    lambda c: _validate_jdbc(worker, c[0], DATABASE_URLS[c[1]].format(port=silent_port)),
                    cases,
                ),
                strict=True,
            )
        )
    for (plugin, db), (took, errors) in answers.items():
        assert took < VALIDATION_CONNECT_TIMEOUT_S + STOP_MARGIN_S, (plugin, db, took)
        assert list(errors) == ["connection.url"], (plugin, db, errors)
        message = errors["connection.url"][0]
        assert f"127.0.0.1:{silent_port}" in message and "s3cret" not in message, message
        assert f"no answer within the {VALIDATION_CONNECT_TIMEOUT_S} s connect timeout" in message, message
    with socket.socket() as closed:  # bound, not listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        for plugin, db in cases:
            took, errors = _validate_jdbc(worker, plugin, DATABASE_URLS[db].format(port=port))
            assert took < 5, (plugin, db, took)
            assert list(errors) == ["connection.url"], (plugin, db, errors)
            message = errors["connection.url"][0]
            assert (
                f"cannot connect to {DATABASE_URLS[db].format(port=port).replace('s3cret', '***')}" in message
            )
            assert "refused" in message.lower(), message
    print({f"{p}/{d}": round(t, 2) for (p, d), (t, _) in answers.items()})


# ---------------------------------------------------------------------------------------- REST parity
def test_rest_parity_items_on_a_running_connector(worker: WorkerProcess) -> None:
    assert worker.request("GET", "/health").json()["status"] == "healthy"
    unknown = worker.request("GET", "/connector-plugins/com.example.Nope/config")
    assert unknown.status_code == 404 and "Unknown plugin" in unknown.json()["message"]
    assert worker.request("GET", "/connectors/cp-nobody/topics").json() == {"cp-nobody": {"topics": []}}
    unsigned = worker.request("PUT", "/connectors/cp-nobody/fence", json={})
    assert unsigned.status_code == 400 and "not signed" in unsigned.json()["message"]
    internal_unsigned = httpx.get(worker.url + "/internal/tasks", timeout=30)
    assert internal_unsigned.status_code == 400, internal_unsigned.text
    headers = worker.signed_headers("GET", "/internal/tasks")
    assert httpx.get(worker.url + "/internal/tasks", headers=headers, timeout=30).status_code == 200
    replayed = httpx.get(worker.url + "/internal/tasks", headers=headers, timeout=30)
    assert replayed.status_code == 403 and "already accepted" in replayed.json()["message"]
    cluster = worker.request("PUT", "/admin/loggers/cp.cluster.scope?scope=cluster", json={"level": "WARN"})
    assert cluster.status_code == 204, cluster.text  # applied through the config topic (KIP-976)
    worker.wait_for(
        lambda: worker.request("GET", "/admin/loggers/cp.cluster.scope").json().get("level") == "WARNING",
        30,
        "the cluster-wide logger level applied",
    )

    topic = f"cp-parity-{uuid.uuid4().hex[:6]}"
    assert worker.create_connector("cp-parity", sequence_config(topic)).status_code == 201
    try:
        status = wait_running(worker, "cp-parity")
        assert status["connector"]["version"] == "1.0.0" and status["tasks"][0]["version"] == "1.0.0"
        worker.wait_for(
            lambda: (
                worker.request("GET", "/connectors/cp-parity/topics").json()["cp-parity"]["topics"] == [topic]
            ),
            60,
            "the active topic",
        )
        assert worker.request("PUT", "/connectors/cp-parity/topics/reset").status_code == 202
        restarted = worker.request("POST", "/connectors/cp-parity/restart?includeTasks=true")
        assert restarted.status_code == 202
        body = restarted.json()
        assert body["connector"]["state"] == "RESTARTING" and body["tasks"][0]["state"] == "RESTARTING"
        wait_running(worker, "cp-parity")
        worker.stop_connector("cp-parity")  # PUT /stop; STOPPED once the tasks are over
        assert worker.request("GET", "/connectors/cp-parity").json()["tasks"] == []
        assert worker.request("GET", "/connectors/cp-parity/tasks").json() == []
        stopped = worker.request("GET", "/connectors/cp-parity/status").json()
        assert stopped["connector"]["state"] == "STOPPED" and stopped["tasks"] == []
    finally:
        delete_connector(worker, "cp-parity")


# ---------------------------------------------------------------------------------------- operations
def test_failed_task_restarts_automatically_when_the_connector_opts_in(
    worker: WorkerProcess, tmp_path: Path
) -> None:
    config = {
        **sequence_config(f"cp-restart-{uuid.uuid4().hex[:6]}"),
        "connector.class": f"{SUPPORT}.FailingOnceConnector",
        "fail.marker": str(tmp_path / "failed-once"),
        "errors.restart.enable": "true",
        "errors.restart.backoff.initial.ms": "500",
    }
    assert worker.create_connector("cp-restart", config).status_code == 201
    try:
        # RUNNING is reported before the first poll, so the first run may still be about to fail:
        # wait for the failure (the marker) and then for the restart to be counted.
        marker = tmp_path / "failed-once"
        worker.wait_for(marker.exists, 120, "the task's first run to fail")
        restarted = 'eosconnect_task_auto_restarts_total{connector="cp-restart",task="0"} 1.0'
        worker.wait_for(lambda: restarted in worker.request("GET", "/metrics").text, 60, "one auto-restart")
        wait_running(worker, "cp-restart", timeout=120)
    finally:
        delete_connector(worker, "cp-restart")
