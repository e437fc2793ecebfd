"""The worker and an exactly-once source on a SASL_SSL broker with an authorizer: exactly KIP-618's
ACLs suffice, and each missing one fails the connector with a message that says how to grant it."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosconnect.connectors.sequence import parse_value
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.devkafka.security import Acl
from eosconnect.storage.acls import connector_acls
from eosconnect.storage.topic_reader import read_to_end
from support.secured import (
    SecuredWorker,
    create_topics,
    internal_topics,
    kip618_source_acls,
    kip618_worker_acls,
    overrides,
    secured_worker,
)

pytestmark = [pytest.mark.kafka, pytest.mark.spark, pytest.mark.secured]

TASKS = 2
RECORDS = 300


@pytest.fixture(scope="module")
def sw(secured_kafka: LocalKafkaCluster, tmp_path_factory) -> Iterator[SecuredWorker]:
    """A worker logged in as its own principal with only its KIP-618 ACLs, on topics the super
    user made; connectors may override only their SASL user and password (Kafka 4.2's `Allowlist`
    policy, KIP-1188)."""
    worker = secured_worker(
        secured_kafka, tmp_path_factory.mktemp("secured-worker"), tmp_path_factory.mktemp("secrets")
    )
    yield worker
    worker.worker.stop()


def _sequence(data: str, principals: dict[str, dict[str, str]]) -> dict[str, str]:
    config = {
        "connector.class": "SequenceSource",
        "tasks.max": str(TASKS),
        "topic": data,
        "records.per.task": str(RECORDS),
        "batch.size": "20",
        "rate.per.task": "300",
        "payload.bytes": "10",
    }
    for kind, client in principals.items():
        config.update(overrides(kind, client))
    return config


def _connector_principals(sw: SecuredWorker, name: str) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    users = {
        kind: sw.cluster.create_user(f"{sw.group}-{name}-{kind}")
        for kind in ("producer", "consumer", "admin")
    }
    names = {kind: c["sasl.username"] for kind, c in users.items()}
    return users, names


def _verify(
    cluster: LocalKafkaCluster, reader: dict[str, str], topic: str
) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "eosconnect.cli", "verify", "-t", topic, "--sequence"]
    args += ["--tasks", str(TASKS), "--records-per-task", str(RECORDS)]
    args += ["-b", reader["bootstrap.servers"]]
    for key, value in reader.items():
        if key != "bootstrap.servers":
            args += ["-X", f"{key}={value}"]
    return subprocess.run(args, capture_output=True, text=True, timeout=180, check=False)


def test_exactly_once_source_with_exactly_kip618_acls(sw: SecuredWorker, tmp_path: Path):
    name = "seq"
    data = f"{sw.group}-{name}-data"
    create_topics(sw.cluster, {data: 2})
    users, names = _connector_principals(sw, name)
    granted = kip618_source_acls(sw.group, name, TASKS, data, **names)
    # The passwords live in a properties file, not in the connector config (KIP-297 FileConfigProvider).
    passwords = sw.secrets / f"{name}.properties"
    passwords.write_text("".join(f"{kind}={client['sasl.password']}\n" for kind, client in users.items()))
    config = {
        **_sequence(data, users),
        **{
            f"{kind}.override.sasl.password": f"${{file:{passwords}:{kind}}}"
            for kind in ("producer", "consumer", "admin")
        },
    }
    # The acls listing says what KIP-618 says (the consumer's Read is the worker's: with the
    # worker's offsets topic, the worker's consumer reads the connector's offsets).
    listed = {
        (a.principal, a.operation, a.resource_type, a.resource_name)
        for a in connector_acls(sw.props, name, config)
    }
    kip = {(a.principal, a.operation, a.resource_type, a.resource_name) for a in granted}
    consumer_read = (
        f"User:{names['consumer']}",
        "Read",
        "Topic",
        internal_topics(sw.group)["offset.storage.topic"],
    )
    worker_read = (f"User:{sw.group}-worker", "Read", "Topic", consumer_read[3])
    assert listed == (kip - {consumer_read}) | {worker_read}
    sw.cluster.grant(granted)
    reader = sw.cluster.create_user(f"{sw.group}-reader")
    sw.cluster.grant([Acl(f"User:{reader['sasl.username']}", "Read", "Topic", data)])

    created = sw.worker.create_connector(name, config)
    assert created.status_code == 201, created.text
    sw.worker.wait_for(lambda: sw.worker.task_states(name) == ["RUNNING"] * TASKS, 120, "tasks RUNNING")

    def done() -> bool:
        result = _verify(sw.cluster, reader, data)
        return result.returncode == 0

    sw.worker.wait_for(done, 180, "every sequence exactly once, read_committed by the Read-only reader")
    stored = sw.worker.request("GET", f"/connectors/{name}/config").json()
    assert stored["producer.override.sasl.password"] == config["producer.override.sasl.password"]
    task_configs = sw.worker.request("GET", f"/connectors/{name}/tasks").text
    log = sw.worker.log_path.read_text(errors="replace")
    for client in users.values():
        assert client["sasl.password"] not in task_configs and client["sasl.password"] not in log
    final = _verify(sw.cluster, reader, data)
    assert final.returncode == 0, final.stdout + final.stderr
    assert sw.worker.task_states(name) == ["RUNNING"] * TASKS

    # GET /connectors/<c>/acls and `eosconnect connectors acls`: the worker's rows and the connector's.
    answer = sw.worker.request("GET", f"/connectors/{name}/acls").json()
    served = {
        (a["principal"], a["operation"], a["resource_type"], a["resource_name"]) for a in answer["acls"]
    }
    worker_rows = {
        (a.principal, a.operation, a.resource_type, a.resource_name)
        for a in kip618_worker_acls(f"{sw.group}-worker", sw.group)
    }
    assert served == listed | worker_rows
    cli = subprocess.run(
        [sys.executable, "-m", "eosconnect.cli", "connectors", "acls", name, "--url", sw.worker.url],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    grant = (
        f"kafka-acls.sh --bootstrap-server {sw.cluster.bootstrap_servers} --add --allow-principal "
        f"User:{names['admin']} --operation Write --transactional-id {sw.group}-{name}-1"
    )
    assert grant in cli, cli
    assert sw.worker.request("DELETE", f"/connectors/{name}").status_code == 204


MISSING = {
    "producer-transactional-id": ("producer", "Write", "TransactionalId", "{group}-{name}-0"),
    "admin-fencing": ("admin", "Write", "TransactionalId", "{group}-{name}-1"),
    "producer-offsets-topic": ("producer", "Write", "Topic", "{group}-offsets"),
    "producer-data-topic": ("producer", "Write", "Topic", "{group}-{name}-data"),
    # The connector's consumer reads offsets only from its own offsets topic: the worker's is read
    # by the worker's consumer (see test_exactly_once_source_with_exactly_kip618_acls).
    "consumer-offsets-read": ("consumer", "Read", "Topic", "{group}-{name}-offsets"),
}
#: Cases run with the connector's own offsets topic (`offsets.storage.topic`), made beforehand.
OWN_OFFSETS_TOPIC = {"consumer-offsets-read"}


@pytest.mark.parametrize("case", sorted(MISSING))
def test_a_missing_kip618_acl_fails_loudly_with_its_remedy(sw: SecuredWorker, case: str):
    """KIP-618: "the stack trace will include a helpful error message containing instructions on
    how to remediate the failure". Nothing half-written is visible to read_committed."""
    name = f"miss-{case}"
    data = f"{sw.group}-{name}-data"
    own = f"{sw.group}-{name}-offsets" if case in OWN_OFFSETS_TOPIC else None
    create_topics(sw.cluster, {data: 2, **({own: 1} if own else {})}, {own} if own else set())
    users, names = _connector_principals(sw, name)
    kind, operation, rtype, pattern = MISSING[case]
    missing = Acl(f"User:{names[kind]}", operation, rtype, pattern.format(group=sw.group, name=name))
    every = kip618_source_acls(sw.group, name, TASKS, data, **names, offsets=own)
    granted = [a for a in every if a != missing]
    assert len(granted) == len(every) - 1
    sw.cluster.grant(granted)

    config = _sequence(data, users)
    if own:
        config["offsets.storage.topic"] = own
    created = sw.worker.create_connector(name, config)
    assert created.status_code == 201, created.text
    if kind == "admin":
        # The first generation has no earlier one to fence: fencing (the admin principal's job)
        # starts with the next generation, here a reconfiguration.
        sw.worker.wait_for(lambda: sw.worker.task_states(name) == ["RUNNING"] * TASKS, 120, "tasks RUNNING")
        changed = sw.worker.request("PUT", f"/connectors/{name}/config", json={**config, "batch.size": "10"})
        assert changed.status_code == 200, changed.text

    def failure() -> str | None:
        status = sw.worker.status(name)
        traces = [t.get("trace", "") for t in status["tasks"] if t["state"] == "FAILED"]
        if status["connector"]["state"] == "FAILED":
            traces.append(status["connector"].get("trace", ""))
        return "\n".join(traces) or None

    try:
        trace = sw.worker.wait_for(failure, 120, f"the connector or a task FAILED without {missing}")
        _check_failure(sw, name, data, case, missing, trace)
        assert sw.worker.request("DELETE", f"/connectors/{name}").status_code == 204
        # /internal/tasks lists a deleted connector's tasks only while they stop (was: for ever).
        sw.worker.wait_for(
            lambda: (
                not any(
                    t["connector"] == name
                    for t in sw.worker.request("GET", "/internal/tasks").json().values()
                )
            ),
            30,
            "the deleted connector's tasks gone from /internal/tasks",
        )
    finally:
        sw.worker.request("DELETE", f"/connectors/{name}")


def _check_failure(sw: SecuredWorker, name: str, data: str, case: str, missing: Acl, trace: str) -> None:
    operation, rtype = missing.operation, missing.resource_type
    command = (
        f"kafka-acls.sh --bootstrap-server {sw.cluster.bootstrap_servers} --add --allow-principal "
        f"{missing.principal} --operation {operation} "
        f"{'--topic' if rtype == 'Topic' else '--transactional-id'} {missing.resource_name}"
    )
    assert f"{missing.principal} needs {operation} on {rtype} '{missing.resource_name}'" in trace, trace
    assert command in trace, trace

    # Nothing half-written: what read_committed shows is, per task, a gap-free prefix (no record of
    # an aborted or open transaction, no duplicate).
    records = read_to_end(sw.cluster.client_config(), data, timeout=60)
    by_task: dict[int, list[int]] = {}
    for record in records:
        task, seq = parse_value(record.value)
        by_task.setdefault(task, []).append(seq)
    for task, seqs in by_task.items():
        assert sorted(seqs) == list(range(len(seqs))), f"task {task}: {seqs[:20]}..."
    if case == "producer-offsets-topic":
        assert records == [], "a transaction whose offsets could not be written was committed"
    if case == "producer-data-topic":
        assert records == [], "a record was committed to a topic its producer may not write"
    if case == "consumer-offsets-read":
        # The refusal keeps its code and fails at once (was: UNKNOWN_TOPIC_OR_PART, retried as
        # transient until the offsets read timed out, ~100 s).
        assert "UNKNOWN_TOPIC_OR_PART" not in trace and "TOPIC_AUTHORIZATION_FAILED" in trace, trace
    if case == "producer-transactional-id":
        assert 0 not in by_task


def test_no_endpoint_answers_or_logs_a_secret(sw: SecuredWorker):
    """Secrets given inline (the connector's PASSWORD settings, clients' sasl.password) and behind a
    config provider: no REST answer (connectors, expansions, config, status, tasks, offsets, acls,
    topics, validate, plugins, loggers, metrics, a failed task's trace, a refused request's error)
    and no log line holds one. Inline secrets answer `[hidden]`, as Kafka masks Password settings;
    provider variables stay readable, and a config PUT back with `[hidden]` keeps the secret."""
    name, bad = "leaky", "leaky-bad"
    data = f"{sw.group}-{name}-data"
    create_topics(sw.cluster, {data: 2})
    users, names = _connector_principals(sw, name)
    sw.cluster.grant(kip618_source_acls(sw.group, name, TASKS, data, **names))
    passwords = sw.secrets / f"{name}.properties"
    passwords.write_text(f"consumer={users['consumer']['sasl.password']}\n")
    config = {
        **_sequence(data, users),  # producer and admin passwords inline
        "consumer.override.sasl.password": f"${{file:{passwords}:consumer}}",
    }
    wrong = f"not-the-password-{uuid.uuid4().hex}"
    failing = {
        **_sequence(data, {"producer": {**users["producer"], "sasl.password": wrong}}),
        "tasks.max": "1",
    }
    jdbc_secret = f"jdbc-secret-{uuid.uuid4().hex}"
    secrets = [users[k]["sasl.password"] for k in ("producer", "consumer", "admin")] + [wrong, jdbc_secret]

    assert sw.worker.create_connector(name, config).status_code == 201
    assert sw.worker.create_connector(bad, failing).status_code == 201
    try:
        sw.worker.wait_for(lambda: sw.worker.task_states(name) == ["RUNNING"] * TASKS, 120, "tasks RUNNING")
        trace = sw.worker.wait_for(
            lambda: failure_trace(sw, bad), 120, "the task with a wrong password FAILED"
        )
        # It fails for what it is (was: an AttributeError of the runner hid the producer's error),
        # at once (was: _TIMED_OUT after 60 s), naming the principal, the settings and the fix.
        assert "initialising the transactional producer" in trace and "AttributeError" not in trace, trace
        servers, who = sw.cluster.bootstrap_servers, f"User:{names['producer']}"
        assert f"cannot log in to the Kafka brokers at {servers} as {who}" in trace, trace
        assert "invalid credentials" in trace and "_TIMED_OUT" not in trace, trace
        assert "producer.override.sasl.username and producer.override.sasl.password" in trace, trace
        assert f"--entity-type users --entity-name {names['producer']}" in trace, trace

        shown = sw.worker.request("GET", f"/connectors/{name}/config").json()
        assert shown["producer.override.sasl.password"] == "[hidden]"
        assert shown["admin.override.sasl.password"] == "[hidden]"
        assert shown["consumer.override.sasl.password"] == config["consumer.override.sasl.password"]
        # GET, edit, PUT back: the masked password is kept, not replaced by the mask.
        edited = {**shown, "batch.size": "10"}
        assert sw.worker.request("PUT", f"/connectors/{name}/config", json=edited).status_code == 200
        sw.worker.wait_for(lambda: sw.worker.task_states(name) == ["RUNNING"] * TASKS, 120, "reconfigured")

        answers = []
        jdbc = {
            "connector.class": "JdbcSource",
            "connection.url": "postgresql://127.0.0.1:1/none",
            "connection.user": "eos",
            "connection.password": jdbc_secret,
            "producer.override.sasl.password": wrong,
            "topic.prefix": "x-",
        }
        validated = sw.worker.request("PUT", "/connector-plugins/JdbcSource/config/validate", json=jdbc)
        answers.append(validated.text)
        assert jdbc_secret not in validated.text and "[hidden]" in validated.text, validated.text
        no_class = sw.worker.request(
            "PUT", "/connector-plugins/JdbcSource/config/validate", json={"connection.password": jdbc_secret}
        )
        answers.append(no_class.text)
        for path in (
            "/",
            "/connectors",
            "/connectors?expand=info&expand=status",
            "/connector-plugins",
            "/connector-plugins/JdbcSource/config",
            "/admin/loggers",
            "/metrics",
            *(
                f"/connectors/{c}{suffix}"
                for c in (name, bad)
                for suffix in (
                    "",
                    "/config",
                    "/status",
                    "/tasks",
                    "/tasks/0/status",
                    "/offsets",
                    "/acls",
                    "/topics",
                )
            ),
        ):
            answer = sw.worker.request("GET", path)
            assert answer.status_code < 500, (path, answer.text)
            answers.append(f"{path}: {answer.text}")
        log = sw.worker.log_path.read_text(errors="replace")
        for secret in secrets:
            for answer in answers:
                assert secret not in answer, answer
            assert secret not in log, [line for line in log.splitlines() if secret in line][:3]
    finally:
        for c in (name, bad):
            sw.worker.request("DELETE", f"/connectors/{c}")


def failure_trace(sw: SecuredWorker, name: str) -> str | None:
    status = sw.worker.status(name)
    return "\n".join(t.get("trace", "") for t in status["tasks"] if t["state"] == "FAILED") or None
