"""`eosconnect standalone`, as a newcomer runs it: Kafka's own quickstart files, a real broker, the
command started as a process and stopped by its PID.

tests/support/kafka_quickstart holds Apache Kafka's config/connect-standalone.properties,
config/connect-file-source.properties and config/connect-file-sink.properties, verbatim; a test
changes only what must point at its own broker and directory (`bootstrap.servers`,
`offset.storage.file.filename`) and adds a free REST port (Kafka's default 8083 may be taken on a
shared machine). `file=test.txt` and `file=test.sink.txt` are relative, as in the quickstart: the
worker runs in the test's directory.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import eosconnect
from eosconnect.devkafka.ports import free_port
from eosconnect.storage.topic_reader import TopicRecord

#: Apache Kafka's config/connect-standalone.properties and config/connect-file-source.properties.
QUICKSTART = Path(__file__).parent.parent / "support" / "kafka_quickstart"
KAFKA_CONNECT_STANDALONE_PROPERTIES = (QUICKSTART / "connect-standalone.properties").read_text()
KAFKA_CONNECT_FILE_SOURCE_PROPERTIES = (QUICKSTART / "connect-file-source.properties").read_text()
KAFKA_CONNECT_FILE_SINK_PROPERTIES = (QUICKSTART / "connect-file-sink.properties").read_text()

#: Where this eosconnect is imported from, for a process that runs in another directory.
IMPORT_PATH = os.pathsep.join(
    [str(Path(eosconnect.__file__).parents[1]), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]
)
#: The topic and the connector Kafka's connect-file-source.properties name.
TOPIC = "connect-test"
CONNECTOR = "local-file-source"


def worker_file(tmp_path: Path, bootstrap: str, **extra: str) -> Path:
    """Kafka's connect-standalone.properties with the test's broker, offsets file and REST port."""
    text = KAFKA_CONNECT_STANDALONE_PROPERTIES.replace(
        "bootstrap.servers=localhost:9092", f"bootstrap.servers={bootstrap}"
    )
    text = text.replace("/tmp/connect.offsets", str(tmp_path / "connect.offsets"))
    text += f"listeners=http://127.0.0.1:{free_port()}\n"
    text += "".join(f"{k}={v}\n" for k, v in extra.items())
    path = tmp_path / "connect-standalone.properties"
    path.write_text(text)
    return path


class Standalone:
    """One `eosconnect standalone` process, with its log in `workdir`."""

    def __init__(self, workdir: Path, *args: Path) -> None:
        self.workdir = workdir
        self.ready = workdir / "ready"
        self.ready.unlink(missing_ok=True)
        self.log = workdir / "standalone.log"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "eosconnect.cli",
                    "standalone",
                    *map(str, args),
                    "--ready-file",
                    str(self.ready),
                ],
                cwd=workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": IMPORT_PATH, "COLUMNS": "200"},
            )
        self.url = ""

    def wait_ready(self, timeout: float = 90.0) -> Standalone:
        deadline = time.monotonic() + timeout
        while not (self.ready.exists() and self.ready.read_text().endswith("\n")):
            assert self.proc.poll() is None, f"exited with {self.proc.returncode}:\n{self.log.read_text()}"
            assert time.monotonic() < deadline, f"not ready in {timeout:.0f} s:\n{self.log.read_text()}"
            time.sleep(0.2)
        self.url = self.ready.read_text().splitlines()[0]
        return self

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM to its PID, as an operator's Ctrl-C; the exit status."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        return self.proc.returncode


@pytest.fixture
def standalone() -> Iterator[Callable[..., Standalone]]:
    started: list[Standalone] = []

    def _start(workdir: Path, *args: Path) -> Standalone:
        process = Standalone(workdir, *args)
        started.append(process)
        return process.wait_ready()

    yield _start
    for process in started:
        process.stop()


def payloads(records: list[TopicRecord]) -> list[str]:
    """The lines of JsonConverter envelopes (`schemas.enable=true`, as the quickstart sets)."""
    return [json.loads(r.value or b"null")["payload"] for r in records]


def wait_for_records(
    read: Callable[[str], list[TopicRecord]], count: int, timeout: float = 60.0
) -> list[TopicRecord]:
    deadline = time.monotonic() + timeout
    records: list[TopicRecord] = []
    while time.monotonic() < deadline:
        try:
            records = read(TOPIC)
        except Exception:
            records = []  # the topic is created by the first record
        if len(records) >= count:
            return records
        time.sleep(0.5)
    raise AssertionError(f"{len(records)} of {count} records in {TOPIC} after {timeout:.0f} s")


def wait_status(process: Standalone, state: str, timeout: float = 60.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    body: dict[str, object] = {}
    while time.monotonic() < deadline:
        response = process.get(f"/connectors/{CONNECTOR}/status")
        body = response.json() if response.status_code == 200 else {}
        tasks = body.get("tasks") or []
        if tasks and all(t["state"] == state for t in tasks):  # type: ignore[index]
            return body
        time.sleep(0.3)
    raise AssertionError(f"tasks not {state} within {timeout:.0f} s: {body}")


def test_quickstart_file_source_and_sink_copy_every_line_once_through_a_restart(
    tmp_path: Path,
    bootstrap: str,
    read_committed: Callable[[str], list[TopicRecord]],
    standalone: Callable[..., Standalone],
) -> None:
    lines = [f"line {i}" for i in range(50)]
    (tmp_path / "test.txt").write_text("".join(f"{line}\n" for line in lines))
    worker = worker_file(tmp_path, bootstrap)
    connector = tmp_path / "connect-file-source.properties"
    connector.write_text(KAFKA_CONNECT_FILE_SOURCE_PROPERTIES)
    sink = tmp_path / "connect-file-sink.properties"
    sink.write_text(KAFKA_CONNECT_FILE_SINK_PROPERTIES)

    first = standalone(tmp_path, worker, connector, sink)
    assert first.get("/connectors").json() == ["local-file-sink", CONNECTOR]
    status = wait_status(first, "RUNNING")
    assert status["connector"]["state"] == "RUNNING" and status["type"] == "source"  # type: ignore[index]
    assert payloads(wait_for_records(read_committed, len(lines))) == lines
    assert first.get(f"/connectors/{CONNECTOR}/config").json()["file"] == "test.txt"
    log = first.log.read_text()
    assert f"connector {CONNECTOR} from {connector}: at least once, source offsets in" in log
    assert first.stop() == 0
    stored = json.loads((tmp_path / "connect.offsets").read_text())
    assert [value for _key, value in stored] == [{"position": len("".join(f"{x}\n" for x in lines))}]

    more = [f"more {i}" for i in range(20)]
    with (tmp_path / "test.txt").open("a") as f:
        f.write("".join(f"{line}\n" for line in more))
    second = standalone(tmp_path, worker, connector, sink)
    wait_status(second, "RUNNING")
    wait_for_records(read_committed, len(lines) + len(more))
    copied = tmp_path / "test.sink.txt"  # the sink's file=test.sink.txt, in the worker's directory
    deadline = time.monotonic() + 60
    while len(copied.read_text().splitlines()) < len(lines) + len(more) and time.monotonic() < deadline:
        time.sleep(0.5)
    time.sleep(2)  # anything sent or written twice would have arrived by now
    assert payloads(read_committed(TOPIC)) == lines + more
    assert second.stop() == 0
    assert copied.read_text().splitlines() == lines + more


def test_a_bad_connector_file_is_one_error_naming_the_file_and_the_field(
    tmp_path: Path, bootstrap: str
) -> None:
    worker = worker_file(tmp_path, bootstrap)
    bad = tmp_path / "bad-source.json"
    bad.write_text(
        json.dumps({"name": "bad", "config": {"connector.class": "FileStreamSource", "tasks.max": "zero"}})
    )
    process = Standalone(tmp_path, worker, bad)
    process.proc.wait(60)
    output = process.log.read_text()
    errors = [line for line in output.splitlines() if line.startswith("Error:")]
    assert process.proc.returncode == 2, output
    assert len(errors) == 1 and "Traceback" not in output, output
    assert str(bad) in errors[0] and "tasks.max" in errors[0], errors[0]


def wait_states(process: Standalone, name: str, connector: str, tasks: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        response = process.get(f"/connectors/{name}/status")
        body = response.json() if response.status_code == 200 else {}
        if body.get("connector", {}).get("state") == connector and [t["state"] for t in body["tasks"]] == [
            tasks
        ]:
            return
        time.sleep(0.3)
    raise AssertionError(f"{name} not {connector}/{tasks} within {timeout:.0f} s: {body}")


def test_rest_changes_connectors_as_kafkas_standalone_worker_does(
    tmp_path: Path,
    bootstrap: str,
    create_topic: Callable[..., str],
    read_committed: Callable[[str], list[TopicRecord]],
    standalone: Callable[..., Standalone],
) -> None:
    """A second connector from a JSON file, then PUT config, pause, resume, restart, stop and
    delete over REST; every line of its file reaches its topic once through all of it."""
    topic = create_topic("standalone-rest")
    source = tmp_path / "rest.txt"
    source.write_text("".join(f"r{i}\n" for i in range(10)))
    connector = tmp_path / "rest-source.json"
    config = {"connector.class": "FileStreamSource", "tasks.max": "1", "file": str(source), "topic": topic}
    connector.write_text(json.dumps({"name": "rest-source", "config": config}))
    process = standalone(
        tmp_path, worker_file(tmp_path, bootstrap, **{"offset.flush.interval.ms": "500"}), connector
    )
    client = httpx.Client(base_url=process.url, timeout=30)
    wait_states(process, "rest-source", "RUNNING", "RUNNING")
    assert client.put("/connectors/rest-source/config", json={**config, "batch.size": "5"}).status_code == 200
    assert client.get("/connectors/rest-source/config").json()["batch.size"] == "5"
    assert client.put("/connectors/rest-source/pause").status_code == 202
    wait_states(process, "rest-source", "PAUSED", "PAUSED")
    with source.open("a") as f:
        f.write("".join(f"p{i}\n" for i in range(5)))
    assert client.put("/connectors/rest-source/resume").status_code == 202
    wait_states(process, "rest-source", "RUNNING", "RUNNING")
    restarted = client.post("/connectors/rest-source/restart?includeTasks=true")
    assert restarted.status_code == 202, restarted.text
    wait_states(process, "rest-source", "RUNNING", "RUNNING")
    deadline = time.monotonic() + 60
    while len(read_committed(topic)) < 15 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [json.loads(r.value or b"null")["payload"] for r in read_committed(topic)] == [
        *(f"r{i}" for i in range(10)),
        *(f"p{i}" for i in range(5)),
    ]
    assert client.put("/connectors/rest-source/stop").status_code == 204
    offsets = client.get("/connectors/rest-source/offsets").json()["offsets"]
    assert offsets == [
        {"partition": {"filename": str(source)}, "offset": {"position": source.stat().st_size}}
    ]
    assert client.put("/connectors/rest-source/resume").status_code == 202
    wait_states(process, "rest-source", "RUNNING", "RUNNING")
    time.sleep(1)  # anything read again would have been sent by now
    assert len(read_committed(topic)) == 15  # resumed from the offsets it stopped at
    refused = client.put("/connectors/other/config", json={"connector.class": "FileStreamSource"})
    assert refused.status_code == 400 and "file" in refused.json()["message"]
    assert client.delete("/connectors/rest-source").status_code == 204
    assert client.get("/connectors").json() == []
    assert client.get("/connectors/rest-source/status").status_code == 404
    client.close()


def test_exactly_once_when_the_worker_enables_it(
    tmp_path: Path,
    bootstrap: str,
    create_topic: Callable[..., str],
    read_committed: Callable[[str], list[TopicRecord]],
    standalone: Callable[..., Standalone],
) -> None:
    """`exactly.once.source.support=enabled`: the start-up says so, the offsets go to the offsets
    topic inside the transactions, and a restart resumes from them (no offsets file is written)."""
    topic = create_topic("standalone-eos")
    source = tmp_path / "eos.txt"
    source.write_text("".join(f"e{i}\n" for i in range(10)))
    connector = tmp_path / "eos-source.properties"
    connector.write_text(f"name=eos-source\nconnector.class=FileStreamSource\nfile={source}\ntopic={topic}\n")
    offsets_topic = f"{topic}-offsets"
    worker = worker_file(
        tmp_path,
        bootstrap,
        **{
            "exactly.once.source.support": "enabled",
            "offset.storage.topic": offsets_topic,
            "offset.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
        },
    )
    for round_, expected in enumerate((10, 15)):
        process = standalone(tmp_path, worker, connector)
        assert f"exactly once, source offsets in topic {offsets_topic}" in process.log.read_text()
        wait_states(process, "eos-source", "RUNNING", "RUNNING")
        deadline = time.monotonic() + 60
        while len(read_committed(topic)) < expected and time.monotonic() < deadline:
            time.sleep(0.5)
        assert process.stop() == 0
        if round_ == 0:
            with source.open("a") as f:
                f.write("".join(f"f{i}\n" for i in range(5)))
    assert [json.loads(r.value or b"null")["payload"] for r in read_committed(topic)] == [
        *(f"e{i}" for i in range(10)),
        *(f"f{i}" for i in range(5)),
    ]
    assert read_committed(offsets_topic) and not (tmp_path / "connect.offsets").exists()
