"""Shared fixtures: one real Kafka broker and one SparkSession per test session.

The broker JVMs are tied to the pytest process (PR_SET_PDEATHSIG) and stopped in teardown, so no
run, even a crashed one, leaves brokers behind. Topic names are unique per test.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.devkafka import KafkaSetupError, LocalKafkaCluster
from eosconnect.devkafka.java_runtime import find_java
from eosconnect.devkafka.registry import MIN_JAVA, LocalSchemaRegistry
from eosconnect.devkafka.security import SecurityMode
from eosconnect.storage.topic_reader import TopicRecord, read_to_end
from eosconnect.tools.worker_process import WorkerProcess
from support.connect_harness import ConnectHarness
from support.workers import LONG_TESTS, packing_settings

#: How long the secured and three-broker clusters may take to start: at load 75 a SASL_SSL broker
#: was still starting after the launcher's default 90 s.
START_TIMEOUT_S = 240.0
SPARK_MASTER = os.environ.get("EOSCONNECT_TEST_SPARK_MASTER", "local[6,4]")
TESTS_DIR = Path(__file__).resolve().parent
# Spark's Python workers inherit PYTHONPATH from the driver: this makes tests/support importable there.
os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(TESTS_DIR), os.environ.get("PYTHONPATH")) if p)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`make test` must end within CI's hour, so a fault whose guarantee another bounded test also
    proves is marked `long` and runs in `make test-long` only; the skip reason says where."""
    if LONG_TESTS:
        return
    skip = pytest.mark.skip(reason="a long form: runs in `make test-long` (EOSCONNECT_LONG_TESTS=1)")
    for item in items:
        if item.get_closest_marker("long"):
            item.add_marker(skip)


@pytest.fixture(scope="session")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    """A single combined broker+controller for the whole session."""
    cluster = LocalKafkaCluster(tmp_path_factory.mktemp("kafka1"), brokers=1, tie_to_parent=True)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def second_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    """A second single-node cluster apart from `kafka`, started only for the tests that ask for it:
    the other cluster of a mirror (tests/integration/test_mirror.py), or a broker a test freezes
    (SIGSTOP, tests/integration/test_source_stall.py) without stalling the rest of the session. A
    test that stops or freezes it resumes it before it ends (in a `finally`)."""
    cluster = LocalKafkaCluster(tmp_path_factory.mktemp("kafka-second"), brokers=1, tie_to_parent=True)
    cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="module")
def kafka3_security() -> SecurityMode:
    """The security of `kafka3`'s brokers; a module overrides this fixture to run on secured ones
    (the secured soak: tests/support/secured_soak.py)."""
    return "plaintext"


@pytest.fixture(scope="module")
def kafka3(
    tmp_path_factory: pytest.TempPathFactory, kafka3_security: SecurityMode
) -> Iterator[LocalKafkaCluster]:
    """Three brokers plus a controller, started only for the modules that ask for it. Topics
    default to three replicas (the launcher's default) and min.insync.replicas=2, so that losing any
    one broker loses no acknowledged write and leaves every partition writable."""
    cluster = LocalKafkaCluster(
        tmp_path_factory.mktemp(f"kafka3-{kafka3_security}"),
        brokers=3,
        tie_to_parent=True,
        extra_config={"unclean.leader.election.enable": "false", "min.insync.replicas": "2"},
        security=kafka3_security,
    )
    cluster.start(timeout=START_TIMEOUT_S)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def schema_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalSchemaRegistry]:
    """A real schema registry (Apicurio Registry, Confluent-compatible API) for the whole session,
    started only when a test asks for it (6-16 s, ~300 MB). Its global compatibility is Apicurio's
    NONE: tests that rely on a rule set it on their own subject (one sets the global rule for its
    duration, restoring NONE, to check that a refusal names the rule in force). Skipped, saying
    why, where no Java 21+ is installed (`make registry` installs one where Debian has it)."""
    if find_java(MIN_JAVA) is None:
        pytest.skip(f"the schema registry needs Java {MIN_JAVA}+, and none was found (see `make registry`)")
    registry = LocalSchemaRegistry(tmp_path_factory.mktemp("registry"), tie_to_parent=True)
    try:
        registry.start()
    except KafkaSetupError as exc:
        pytest.fail(f"the schema registry could not be set up: {exc}")
    yield registry
    registry.stop()


@pytest.fixture(scope="session")
def connect_harness() -> Iterator[ConnectHarness]:
    """One JVM running Kafka's own JsonConverter, transformations and predicates (differential tests)."""
    with ConnectHarness() as harness:
        yield harness


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKafkaCluster]:
    """One SASL_SSL broker (SCRAM-SHA-512, a CA made for the run, StandardAuthorizer with
    `allow.everyone.if.no.acl.found=false`), started only by the tests that ask for it.
    `secured_kafka.create_user(name)` returns a principal's client settings; `.grant([...])` and
    `.revoke([...])` take `eosconnect.devkafka.security.Acl`s. EOSCONNECT_TEST_SECURED_KAFKA=<dir>
    reuses a cluster started by `eosconnect kafka start --security sasl_ssl --dir <dir>` (left running)."""
    reuse = os.environ.get("EOSCONNECT_TEST_SECURED_KAFKA")
    if reuse:
        yield LocalKafkaCluster.attach(reuse)
        return
    cluster = LocalKafkaCluster(
        tmp_path_factory.mktemp("kafka-sasl-ssl"), tie_to_parent=True, security="sasl_ssl"
    )
    cluster.start(timeout=START_TIMEOUT_S)
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def bootstrap(kafka: LocalKafkaCluster) -> str:
    return kafka.bootstrap_servers


@pytest.fixture(scope="session")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})


@pytest.fixture(scope="session")
def spark():
    from eosconnect.cluster.spark import create_spark_session

    session = create_spark_session(SPARK_MASTER, app_name="eosconnect-tests")
    yield session
    session.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> Callable[[str], str]:
    """Unique topic names derived from the test's name: `topic_name("data")`."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", request.node.name)[:60].strip("-")
    suffix = uuid.uuid4().hex[:6]
    return lambda role="t": f"{base}-{role}-{suffix}"


@pytest.fixture
def create_topic(admin: AdminClient) -> Callable[..., str]:
    def _create(
        name: str, partitions: int = 1, replication: int = 1, config: dict[str, str] | None = None
    ) -> str:
        futures = admin.create_topics([NewTopic(name, partitions, replication, config=config or {})])
        for fut in futures.values():
            fut.result(30)
        return name

    return _create


@pytest.fixture
def read_committed(bootstrap: str) -> Callable[..., list[TopicRecord]]:
    """Every committed record of a topic, reading past transactions that were open at the call."""

    def _read(topic: str, timeout: float = 60.0, servers: str | None = None) -> list[TopicRecord]:
        return read_to_end({"bootstrap.servers": servers or bootstrap}, topic, timeout=timeout)

    return _read


@pytest.fixture
def worker_props(bootstrap: str, topic_name: Callable[[str], str]) -> Callable[..., dict[str, str]]:
    """Worker settings with a group id and global offsets topic of the test's own."""

    def _props(mode: str = "enabled", **extra: str) -> dict[str, str]:
        return {
            "bootstrap.servers": bootstrap,
            "group.id": topic_name("group"),
            "offset.storage.topic": topic_name("offsets"),
            "offset.storage.partitions": "1",
            "offset.storage.replication.factor": "1",
            "exactly.once.source.support": mode,
            "offset.flush.interval.ms": "500",
            **{k.replace("_", "."): v for k, v in extra.items()},
        }

    return _props


@pytest.fixture
def workers(worker_props, tmp_path: Path):
    """Start `eosconnect worker` processes of one group (same internal topics); stopped at the end."""
    started: list[WorkerProcess] = []
    base = worker_props("enabled")

    def _start(name: str = "w1", mode: str = "enabled", **overrides: str) -> WorkerProcess:
        props = {
            **base,
            "exactly.once.source.support": mode,
            "config.storage.topic": base["offset.storage.topic"].replace("-offsets-", "-configs-"),
            "status.storage.topic": base["offset.storage.topic"].replace("-offsets-", "-status-"),
            "config.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "status.storage.partitions": "1",
            "listeners": "http://127.0.0.1:0",
            "task.shutdown.graceful.timeout.ms": "3000",
            "spark.master": "local[8,4]",
            "spark.driver.memory": "768m",
            **packing_settings(),
            **overrides,
        }
        worker = WorkerProcess(props, tmp_path / name).start(timeout=240)  # Spark starts slowly under load
        started.append(worker)
        return worker

    yield _start
    for worker in started:
        worker.stop()


# Shared fixtures defined next to their helpers (tests/support), registered for every test module.
from support.mariadb import mariadb, mariadb_binlog  # noqa: E402, F401
from support.postgres import postgres  # noqa: E402, F401
from support.runtime_helpers import run_job  # noqa: E402, F401
