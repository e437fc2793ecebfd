"""The same REST requests, good and bad, to Apache Kafka Connect 4.x (Java) and to an eosconnect
worker on one broker: equal status codes and equal body shapes, except the written allowlist of
intended differences (`INTENDED`, also in docs/kafka-connect-compatibility.md).

One Java worker and one eosconnect worker serve the whole module. Requests run in one fixed
order (a connector is created, used, paused, stopped, its offsets edited, deleted); steps that
must wait for a state wait on both sides before the next request.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from eosconnect.devkafka.kafka_connect import KafkaConnectProcess, connect_worker_defaults
from eosconnect.tools.worker_process import WorkerProcess
from support.workers import packing_settings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]


@dataclass(frozen=True)
class Intended:
    """An intended difference: the status each side answers, and why eosconnect differs."""

    java: int
    eos: int
    why: str


# Every intended difference, by case id. The test checks that both sides still answer exactly these
# codes, so the list cannot silently go stale.
INTENDED: dict[str, Intended] = {
    "create-malformed-json": Intended(500, 400, "a malformed body is the client's fault: 400, not 500"),
    "validate-malformed-json": Intended(500, 400, "a malformed body is the client's fault: 400, not 500"),
    "create-bad-initial-state": Intended(500, 400, "an unknown initial_state is the client's fault: 400"),
    "create-name-with-slash": Intended(
        201, 400, "a name with '/' cannot be addressed over REST afterwards; refused with the reason"
    ),
    "create-tasks-max-huge": Intended(
        201, 400, "tasks.max beyond what Spark can place (or eosconnect.tasks.max.limit) is refused"
    ),
    "create-file-source-without-file": Intended(
        201, 400, "FileStreamSource needs `file`: reading stdin makes no sense inside a Spark task"
    ),
    "validate-no-class": Intended(
        500, 400, "Kafka wraps its own BadRequestException ('contains no connector type') into a 500"
    ),
    "create-no-config": Intended(
        500, 400, "a body without `config` is the client's fault (Kafka: NullPointerException)"
    ),
    "offsets-partition-without-filename": Intended(
        500,
        400,
        "the connector refusing offsets (KIP-875 alter_offsets) is a bad request, not a server error",
    ),
    "offsets-position-not-integer": Intended(
        500,
        400,
        "the connector refusing offsets (KIP-875 alter_offsets) is a bad request, not a server error",
    ),
}


@dataclass
class Case:
    id: str
    method: str
    path: str
    body: Any = None
    raw: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    #: The body maps names (loggers, connectors) to objects: compare the objects' shapes, not the names.
    keyed: bool = False


#: Validations (both 200) whose errors are meant to sit on other settings than Kafka's, and where.
INTENDED_ERRORS: dict[str, list[str]] = {
    # The create would be refused (create-tasks-max-huge), so its validation says why, on tasks.max.
    "validate-tasks-max-huge": ["tasks.max"],
    # FileStreamSink needs `file` (Kafka's writes to stdout without one, as its source reads stdin).
    "validate-sink-no-topics": ["file", "topics", "topics.regex"],
}


def erring(infos: Any) -> list[str]:
    """The settings a ConfigInfos body puts errors on."""
    return sorted(c["value"]["name"] for c in infos.get("configs", []) if c["value"]["errors"])


@dataclass
class Wait:
    """Wait on both sides until `check(client)` is true."""

    what: str
    check: Callable[[httpx.Client], bool]


@pytest.fixture(scope="module")
def pair(
    bootstrap: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    base = tmp_path_factory.mktemp("differential")
    unique = uuid.uuid4().hex[:8]
    java = KafkaConnectProcess(
        base / "java", worker_props=connect_worker_defaults(bootstrap, f"diff-java-{unique}")
    )
    eos_props = {
        "bootstrap.servers": bootstrap,
        "group.id": f"diff-eos-{unique}",
        "offset.storage.topic": f"diff-eos-{unique}-offsets",
        "config.storage.topic": f"diff-eos-{unique}-configs",
        "status.storage.topic": f"diff-eos-{unique}-status",
        "offset.storage.partitions": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "status.storage.partitions": "1",
        "listeners": "http://127.0.0.1:0",
        "task.shutdown.graceful.timeout.ms": "3000",
        "spark.master": "local[4,2]",
        "spark.driver.memory": "768m",
        **packing_settings(),
    }
    eos = WorkerProcess(eos_props, base / "eos")
    java.start(timeout=300)
    try:
        eos.start(timeout=300)
        with (
            httpx.Client(base_url=java.url, timeout=90) as j,
            httpx.Client(base_url=eos.url, timeout=90) as e,
        ):
            # Both past start-up (KIP-1017: 503 "starting" until then), so `health` compares ready workers.
            wait_both(Wait("a healthy worker", lambda c: c.get("/health").status_code == 200), (j, e))
            yield j, e
    finally:
        eos.stop()
        java.stop()


def shape(value: Any) -> Any:
    """The structure of a JSON body: object keys (recursively) and list-ness; scalar values ignored."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        merged: dict[str, Any] = {}
        for item in value:
            item_shape = shape(item)
            if not isinstance(item_shape, dict):
                return ["scalar"]
            for k, v in item_shape.items():
                merged.setdefault(k, v)
        return [merged] if merged else []
    return "scalar"


def same_shape(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_shape(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return not a or not b or same_shape(a[0], b[0])  # an empty list matches any list
    return a == b


def body_of(response: httpx.Response) -> Any:
    if not response.content:
        return None
    try:
        return response.json()
    except ValueError:
        return "<not json>"


def send(client: httpx.Client, case: Case) -> httpx.Response:
    headers = {"Content-Type": "application/json", **case.headers}
    if case.raw is not None:
        return client.request(case.method, case.path, content=case.raw, headers=headers)
    if case.body is not None:
        return client.request(case.method, case.path, json=case.body, headers=headers)
    return client.request(case.method, case.path, headers=case.headers)


def state_of(client: httpx.Client, name: str) -> tuple[str, list[str]]:
    body = client.get(f"/connectors/{name}/status").json()
    return body.get("connector", {}).get("state", ""), [t["state"] for t in body.get("tasks", [])]


def script(data_file: Path) -> list[Case | Wait]:
    src = {
        "connector.class": "FileStreamSource",
        "file": str(data_file),
        "topic": "differential-lines",
        "tasks.max": "1",
    }
    sink = {
        "connector.class": "FileStreamSink",
        "file": str(data_file) + ".out",
        "topics": "differential-lines",
    }
    plugins = "/connector-plugins"
    validate = f"{plugins}/FileStreamSource/config/validate"
    good_partition = {"filename": str(data_file)}
    return [
        Case("root", "GET", "/"),
        Case("health", "GET", "/health"),
        Case("list-empty", "GET", "/connectors"),
        Case("plugins", "GET", plugins),
        Case("plugins-all", "GET", f"{plugins}?connectorsOnly=false"),
        Case("plugin-config-source", "GET", f"{plugins}/FileStreamSource/config"),
        Case("plugin-config-sink", "GET", f"{plugins}/FileStreamSink/config"),
        Case(
            "plugin-config-full-name",
            "GET",
            f"{plugins}/org.apache.kafka.connect.file.FileStreamSourceConnector/config",
        ),
        Case("plugin-config-unknown", "GET", f"{plugins}/com.example.NoSuchConnector/config"),
        Case("validate-good", "PUT", validate, {**src, "name": "v"}),
        Case("validate-no-name", "PUT", validate, src),
        Case(
            "validate-bad-converter",
            "PUT",
            validate,
            {**src, "name": "v", "key.converter": "com.example.Nope"},
        ),
        Case("validate-transform-no-type", "PUT", validate, {**src, "name": "v", "transforms": "a"}),
        Case(
            "validate-transform-unknown",
            "PUT",
            validate,
            {**src, "name": "v", "transforms": "a", "transforms.a.type": "com.example.Nope"},
        ),
        Case(
            "validate-predicate-bad-regex",
            "PUT",
            validate,
            {
                **src,
                "name": "v",
                "predicates": "p",
                "predicates.p.type": "TopicNameMatches",
                "predicates.p.pattern": "(",
            },
        ),
        Case("validate-tasks-max-text", "PUT", validate, {**src, "name": "v", "tasks.max": "many"}),
        Case("validate-tasks-max-zero", "PUT", validate, {**src, "name": "v", "tasks.max": "0"}),
        Case("validate-tasks-max-huge", "PUT", validate, {**src, "name": "v", "tasks.max": "100000"}),
        Case("validate-errors-tolerance", "PUT", validate, {**src, "name": "v", "errors.tolerance": "some"}),
        Case("validate-class-mismatch", "PUT", validate, {**sink, "name": "v"}),
        Case("validate-no-class", "PUT", validate, {"name": "v", "topic": "t"}),
        Case(
            "validate-sink-no-topics",
            "PUT",
            f"{plugins}/FileStreamSink/config/validate",
            {"connector.class": "FileStreamSink", "name": "v"},
        ),
        Case("validate-malformed-json", "PUT", validate, raw=b"{nope"),
        Case("create-malformed-json", "POST", "/connectors", raw=b"{nope"),
        Case("create-no-config", "POST", "/connectors", {"name": "x"}),
        Case("create-name-mismatch", "POST", "/connectors", {"name": "x", "config": {**src, "name": "y"}}),
        Case("create-no-class", "POST", "/connectors", {"name": "x", "config": {"topic": "t"}}),
        Case(
            "create-unknown-class",
            "POST",
            "/connectors",
            {"name": "x", "config": {**src, "connector.class": "com.example.Nope"}},
        ),
        Case(
            "create-bad-converter",
            "POST",
            "/connectors",
            {"name": "x", "config": {**src, "value.converter": "com.example.Nope"}},
        ),
        Case(
            "create-bad-transform", "POST", "/connectors", {"name": "x", "config": {**src, "transforms": "a"}}
        ),
        Case(
            "create-bad-initial-state",
            "POST",
            "/connectors",
            {"name": "x", "config": src, "initial_state": "BOGUS"},
        ),
        Case("create-empty-name", "POST", "/connectors", {"name": "", "config": src}),
        Case("create-control-char-name", "POST", "/connectors", {"name": "a\tb", "config": src}),
        Case(
            "create-name-with-slash",
            "POST",
            "/connectors",
            {"name": "a/b", "config": src, "initial_state": "STOPPED"},
        ),
        Case(
            "create-tasks-max-huge",
            "POST",
            "/connectors",
            {"name": "huge", "config": {**src, "tasks.max": "100000"}, "initial_state": "STOPPED"},
        ),
        Case(
            "create-file-source-without-file",
            "POST",
            "/connectors",
            {
                "name": "stdin",
                "config": {"connector.class": "FileStreamSource", "topic": "t"},
                "initial_state": "STOPPED",
            },
        ),
        Case("create-src", "POST", "/connectors", {"name": "src", "config": src}),
        Case("create-src-again", "POST", "/connectors", {"name": "src", "config": src}),
        Case(
            "create-stopped",
            "POST",
            "/connectors",
            {"name": "parked", "config": src, "initial_state": "STOPPED"},
        ),
        Case("put-new", "PUT", "/connectors/put-made/config", src),
        Wait("src RUNNING", lambda c: state_of(c, "src") == ("RUNNING", ["RUNNING"])),
        Case("list", "GET", "/connectors"),
        Case("list-expand-status", "GET", "/connectors?expand=status", keyed=True),
        Case("list-expand-info", "GET", "/connectors?expand=info", keyed=True),
        Case("list-expand-both", "GET", "/connectors?expand=status&expand=info", keyed=True),
        Case("info", "GET", "/connectors/src"),
        Case("config", "GET", "/connectors/src/config"),
        Case("status", "GET", "/connectors/src/status"),
        Case("tasks", "GET", "/connectors/src/tasks"),
        Case("task-status", "GET", "/connectors/src/tasks/0/status"),
        Case("task-status-missing", "GET", "/connectors/src/tasks/7/status"),
        Case("task-status-not-a-number", "GET", "/connectors/src/tasks/x/status"),
        Case("topics", "GET", "/connectors/src/topics"),
        Case("topics-unknown", "GET", "/connectors/nobody/topics"),
        Case("topics-reset", "PUT", "/connectors/src/topics/reset"),
        Case("topics-reset-unknown", "PUT", "/connectors/nobody/topics/reset"),
        Case("unknown-info", "GET", "/connectors/nobody"),
        Case("unknown-status", "GET", "/connectors/nobody/status"),
        Case("unknown-config", "GET", "/connectors/nobody/config"),
        Case("unknown-tasks", "GET", "/connectors/nobody/tasks"),
        Case("unknown-delete", "DELETE", "/connectors/nobody"),
        Case("unknown-pause", "PUT", "/connectors/nobody/pause"),
        Case("unknown-resume", "PUT", "/connectors/nobody/resume"),
        Case("unknown-restart", "POST", "/connectors/nobody/restart"),
        Case("unknown-stop", "PUT", "/connectors/nobody/stop"),
        Case("unknown-offsets", "GET", "/connectors/nobody/offsets"),
        Case("unknown-patch-config", "PATCH", "/connectors/nobody/config", {"batch.size": "5"}),
        Case("put-config", "PUT", "/connectors/src/config", {**src, "batch.size": "50"}),
        Case("put-config-name-mismatch", "PUT", "/connectors/src/config", {**src, "name": "other"}),
        Case("put-config-no-class", "PUT", "/connectors/src/config", {"topic": "t"}),
        Case("patch-config", "PATCH", "/connectors/src/config", {"batch.size": "20"}),
        Wait("src RUNNING after reconfiguration", lambda c: state_of(c, "src") == ("RUNNING", ["RUNNING"])),
        Case("pause", "PUT", "/connectors/src/pause"),
        Wait("src PAUSED", lambda c: state_of(c, "src") == ("PAUSED", ["PAUSED"])),
        Case("status-paused", "GET", "/connectors/src/status"),
        Case("resume", "PUT", "/connectors/src/resume"),
        Wait("src RUNNING after resume", lambda c: state_of(c, "src") == ("RUNNING", ["RUNNING"])),
        Case("restart", "POST", "/connectors/src/restart"),
        Case("restart-include-tasks", "POST", "/connectors/src/restart?includeTasks=true"),
        Wait("src RUNNING after restart", lambda c: state_of(c, "src") == ("RUNNING", ["RUNNING"])),
        Case("restart-only-failed", "POST", "/connectors/src/restart?onlyFailed=true&includeTasks=true"),
        Case("restart-task", "POST", "/connectors/src/tasks/0/restart"),
        Case("restart-task-missing", "POST", "/connectors/src/tasks/9/restart"),
        Wait("src RUNNING after task restart", lambda c: state_of(c, "src") == ("RUNNING", ["RUNNING"])),
        Case("offsets-running", "GET", "/connectors/src/offsets"),
        Case(
            "offsets-patch-running",
            "PATCH",
            "/connectors/src/offsets",
            {"offsets": [{"partition": good_partition, "offset": {"position": 0}}]},
        ),
        Case("offsets-delete-running", "DELETE", "/connectors/src/offsets"),
        Case("stop", "PUT", "/connectors/src/stop"),
        Wait("src STOPPED", lambda c: state_of(c, "src") == ("STOPPED", [])),
        Case("status-stopped", "GET", "/connectors/src/status"),
        Case("tasks-stopped", "GET", "/connectors/src/tasks"),
        Case("info-stopped", "GET", "/connectors/src"),
        Case(
            "offsets-partition-without-filename",
            "PATCH",
            "/connectors/src/offsets",
            {"offsets": [{"partition": {"file": "x"}, "offset": {"position": 1}}]},
        ),
        Case(
            "offsets-position-not-integer",
            "PATCH",
            "/connectors/src/offsets",
            {"offsets": [{"partition": good_partition, "offset": {"position": "abc"}}]},
        ),
        Case("offsets-empty-list", "PATCH", "/connectors/src/offsets", {"offsets": []}),
        Case(
            "offsets-patch",
            "PATCH",
            "/connectors/src/offsets",
            {"offsets": [{"partition": good_partition, "offset": {"position": 2}}]},
        ),
        Case("offsets-get", "GET", "/connectors/src/offsets"),
        Case("offsets-delete", "DELETE", "/connectors/src/offsets"),
        Case("resume-stopped", "PUT", "/connectors/src/resume"),
        Case("fence-unsigned", "PUT", "/connectors/src/fence", {}),
        Case(
            "fence-bad-signature",
            "PUT",
            "/connectors/src/fence",
            {},
            headers={
                "X-Connect-Authorization": "AAAA",
                "X-Connect-Request-Signature-Algorithm": "HmacSHA256",
                "X-Connect-Request-Signature-Timestamp": str(int(time.time() * 1000)),
            },
        ),
        Case("loggers", "GET", "/admin/loggers", keyed=True),
        Case("logger-root", "GET", "/admin/loggers/root"),
        Case("logger-unknown", "GET", "/admin/loggers/no.such.logger"),
        Case("logger-set", "PUT", "/admin/loggers/differential.test", {"level": "DEBUG"}),
        Case("logger-get-set", "GET", "/admin/loggers/differential.test"),
        Case("logger-no-level", "PUT", "/admin/loggers/differential.test", {}),
        Case("logger-bad-level", "PUT", "/admin/loggers/differential.test", {"level": "LOUD"}),
        Case(
            "logger-cluster-scope",
            "PUT",
            "/admin/loggers/differential.cluster?scope=cluster",
            {"level": "WARN"},
        ),
        Case("unknown-path", "GET", "/no/such/path"),
        Case("wrong-method", "DELETE", "/connectors"),
        Case("delete-src", "DELETE", "/connectors/src"),
        Case("delete-parked", "DELETE", "/connectors/parked"),
        Case("delete-put-made", "DELETE", "/connectors/put-made"),
        Case("delete-again", "DELETE", "/connectors/src"),
    ]


def wait_both(step: Wait, clients: tuple[httpx.Client, httpx.Client], timeout: float = 120) -> None:
    for client in clients:
        deadline = time.monotonic() + timeout
        while not step.check(client):
            assert time.monotonic() < deadline, f"timed out waiting for {step.what} at {client.base_url}"
            time.sleep(0.5)


def test_same_answers_as_kafka_connect(pair: tuple[httpx.Client, httpx.Client], tmp_path: Path) -> None:
    java, eos = pair
    data_file = tmp_path / "lines.txt"
    data_file.write_text("".join(f"line {i}\n" for i in range(20)))
    steps = script(data_file)
    cases = [s for s in steps if isinstance(s, Case)]
    assert len(cases) >= 80
    assert set(INTENDED) <= {c.id for c in cases}, "an intended difference names no request"
    problems: list[str] = []
    for step in steps:
        if isinstance(step, Wait):
            wait_both(step, pair)
            continue
        j, e = send(java, step), send(eos, step)
        intended = INTENDED.get(step.id)
        if intended is not None and j.status_code == 201:  # only Kafka took it: do not let it linger
            java.delete("/connectors/" + quote(step.body["name"], safe=""))
        if intended is not None:
            if (j.status_code, e.status_code) != (intended.java, intended.eos):
                problems.append(
                    f"{step.id}: intended difference {intended.java}/{intended.eos} ({intended.why}) is now "
                    f"{j.status_code}/{e.status_code}: {j.text[:200]} | {e.text[:200]}"
                )
            continue
        if j.status_code != e.status_code:
            problems.append(
                f"{step.id}: status {j.status_code} (Kafka) vs {e.status_code}: {j.text[:300]} | {e.text[:300]}"  # noqa: E501
            )
            continue
        java_body, eos_body = body_of(j), body_of(e)
        if step.keyed:
            java_body, eos_body = list(java_body.values()), list(eos_body.values())
        java_shape, eos_shape = shape(java_body), shape(eos_body)
        if not same_shape(java_shape, eos_shape):
            problems.append(
                f"{step.id}: body shape {str(java_shape)[:600]} (Kafka) vs {str(eos_shape)[:600]}"
            )
        elif step.path.endswith("/config/validate") and j.status_code == 200:
            wanted = INTENDED_ERRORS.get(step.id, erring(java_body))
            if erring(eos_body) != wanted:
                problems.append(f"{step.id}: errors on {erring(java_body)} (Kafka) vs {erring(eos_body)}")
    assert not problems, f"{len(problems)} of {len(cases)} requests differ:\n" + "\n".join(problems)
