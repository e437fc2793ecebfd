"""The mirror sink's settings, topic naming and static partition spreading (no broker)."""

from __future__ import annotations

import pytest

from eosconnect.api import SinkRecord, SinkTaskContext, TopicPartition
from eosconnect.api.sink import ASSIGNED_PARTITIONS_CONFIG, decode_partitions, encode_partitions
from eosconnect.cluster.connector_kinds import fencing_producer_config, uses_exactly_once_startup
from eosconnect.cluster.validation import config_errors, validate_connector_config
from eosconnect.connectors.mirror import MirrorSinkConnector, MirrorSinkTask
from eosconnect.connectors.mirror_policy import ReplicationPolicy, spread_partitions
from eosconnect.connectors.mirror_topics import policy_of
from eosconnect.worker_config import WorkerConfig

ENABLED = WorkerConfig.parse(
    {"bootstrap.servers": "127.0.0.1:9092", "exactly.once.source.support": "enabled"}
)
DISABLED = WorkerConfig.parse({"bootstrap.servers": "127.0.0.1:9092"})
BASE = {
    "name": "mm",
    "connector.class": "MirrorSink",
    "topics": "orders",
    "target.cluster.bootstrap.servers": "127.0.0.1:9999",
}


def errors_of(config: dict[str, str], worker: WorkerConfig = ENABLED) -> dict[str, list[str]]:
    return config_errors(validate_connector_config(config, worker))


def test_a_valid_config_has_no_errors() -> None:
    assert errors_of(BASE) == {}
    assert errors_of({**BASE, "transaction.producer": "true"}) == {}


def test_target_bootstrap_servers_is_required() -> None:
    config = {k: v for k, v in BASE.items() if k != "target.cluster.bootstrap.servers"}
    assert set(errors_of(config)) == {"target.cluster.bootstrap.servers"}


def test_transaction_producer_needs_an_enabled_worker_and_says_how() -> None:
    assert errors_of({**BASE, "transaction.producer": "false"}, DISABLED) == {}
    errors = errors_of({**BASE, "transaction.producer": "true"}, DISABLED)
    assert list(errors) == ["transaction.producer"]
    (message,) = errors["transaction.producer"]
    assert "exactly.once.source.support=enabled" in message and "transaction.producer=false" in message


def test_excluded_topic_settings_must_be_regular_expressions() -> None:
    assert errors_of({**BASE, "config.properties.exclude": r"retention\..*,segment\.bytes"}) == {}
    errors = errors_of({**BASE, "config.properties.exclude": "retention.(ms"})
    assert list(errors) == ["config.properties.exclude"]
    assert "regular expressions" in errors["config.properties.exclude"][0]
    assert set(errors_of({**BASE, "sync.topic.configs.enabled": "maybe"})) == {"sync.topic.configs.enabled"}


def test_replication_policy_and_alias_are_checked() -> None:
    assert set(errors_of({**BASE, "replication.policy.class": "fancy"})) == {"replication.policy.class"}
    assert set(errors_of({**BASE, "source.cluster.alias": "a b"})) == {"source.cluster.alias"}
    assert (
        errors_of(
            {**BASE, "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"}
        )
        == {}
    )


def test_target_client_settings_are_validated_by_their_own_name() -> None:
    errors = errors_of({**BASE, "target.cluster.no.such.setting": "1", "target.cluster.linger.ms": "5"})
    assert list(errors) == ["target.cluster.no.such.setting"]
    assert "No such configuration property" in errors["target.cluster.no.such.setting"][0]


def test_topic_names_follow_the_replication_policy() -> None:
    default = policy_of({"source.cluster.alias": "east"})
    assert default.target_topic("orders") == "east.orders"
    assert default.target_topic("east.orders") == "east.orders", "never prefixed twice"
    assert default.target_partition(TopicPartition("orders", 2)) == TopicPartition("east.orders", 2)
    assert policy_of({}).target_topic("orders") == "source.orders"
    assert ReplicationPolicy.of("identity", "east").target_topic("orders") == "orders"
    assert ReplicationPolicy.of("default", "east", "_").target_topic("orders") == "east_orders"
    with pytest.raises(ValueError, match="unknown replication policy"):
        ReplicationPolicy.of("nope", "east")


def test_partitions_spread_round_robin_deterministically() -> None:
    a = [TopicPartition("a", p) for p in range(3)]
    b = [TopicPartition("b", p) for p in range(2)]
    groups = spread_partitions([*b, *a], 2)
    assert groups == [
        [TopicPartition("a", 0), TopicPartition("a", 2), TopicPartition("b", 1)],
        [TopicPartition("a", 1), TopicPartition("b", 0)],
    ]
    assert spread_partitions(a, 10) == [[tp] for tp in a], "never a task without partitions"
    assert spread_partitions([], 3) == [[]]
    spread = spread_partitions([TopicPartition("t", p) for p in range(10)], 3)
    assert sorted(len(g) for g in spread) == [3, 3, 4]
    assert sorted(tp for g in spread for tp in g) == [TopicPartition("t", p) for p in range(10)]


def test_assigned_partitions_round_trip() -> None:
    tps = [TopicPartition("x.y-z", 3), TopicPartition("a", 0)]
    text = encode_partitions(tps)
    assert text == "a:0,x.y-z:3"
    assert decode_partitions(text) == sorted(tps)
    assert decode_partitions("") == []
    with pytest.raises(ValueError, match=ASSIGNED_PARTITIONS_CONFIG):
        decode_partitions("nopartition")


def test_only_a_transactional_mirror_uses_the_exactly_once_start_up() -> None:
    assert uses_exactly_once_startup({**BASE, "transaction.producer": "true"})
    assert not uses_exactly_once_startup(BASE)
    assert not uses_exactly_once_startup({"connector.class": "FileStreamSink"})
    assert uses_exactly_once_startup({"connector.class": "SequenceSource"})
    worker = {"bootstrap.servers": "127.0.0.1:9092", "producer.linger.ms": "7"}
    fencing = fencing_producer_config(worker, {**BASE, "target.cluster.sasl.username": "u"})
    assert fencing["bootstrap.servers"] == "127.0.0.1:9999" and fencing["sasl.username"] == "u"
    assert "linger.ms" not in fencing, "the worker's client settings do not leak to the target"


def test_task_configs_without_a_runtime_fail_only_when_transactional() -> None:
    connector = MirrorSinkConnector()
    connector.start(dict(BASE))
    assert len(connector.task_configs(2)) == 2
    connector.start({**BASE, "transaction.producer": "true"})
    with pytest.raises(Exception, match="source cluster's settings"):
        connector.task_configs(2)


class _OpenTransaction:
    """Stands in for the transactional producer: a transaction open for `seconds`."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.produced: list[tuple] = []
        self.origins: list[tuple[str, int, int] | None] = []

    def open_for_s(self) -> float:
        return self.seconds

    def must_commit(self, interval_s: float) -> bool:
        return self.seconds >= interval_s

    def produce(self, *args: object, origin: tuple[str, int, int] | None = None) -> None:
        self.produced.append(args)
        self.origins.append(origin)


@pytest.mark.parametrize(("open_for", "asks"), [(0.5, False), (2.0, True)])
def test_a_long_open_transaction_asks_for_a_commit(open_for: float, asks: bool) -> None:
    task = MirrorSinkTask()
    task.initialize(SinkTaskContext())
    task.start({**BASE, "transaction.commit.interval.ms": "1000"})
    writer = _OpenTransaction(open_for)
    task.writer = writer  # type: ignore[assignment]
    task._target_partitions = {"source.orders": 1}
    task.put([SinkRecord("orders", 0, 7, b"k", b"v", 1234, [("h", b"1")])])
    assert writer.produced == [("source.orders", 0, b"k", b"v", [("h", b"1")], 1234)]
    assert writer.origins == [("orders", 0, 7)]  # what its offset sync will say the copy came from
    assert task.context.commit_requested is asks


# ============================================================================ MirrorSource

SOURCE = {
    "name": "from-east",
    "connector.class": "MirrorSource",
    "topics": "orders",
    "source.cluster.bootstrap.servers": "127.0.0.1:9999",
    "source.cluster.alias": "east",
}


def test_mirror_source_valid_config_and_its_exactly_once_support() -> None:
    from eosconnect.api import ExactlyOnceSupport
    from eosconnect.connectors.mirror_source import MirrorSourceConnector, source_client_config

    assert errors_of({**SOURCE, "exactly.once.support": "required"}) == {}
    connector = MirrorSourceConnector()
    assert connector.exactly_once_support(SOURCE) is ExactlyOnceSupport.SUPPORTED
    uncommitted = {**SOURCE, "source.cluster.isolation.level": "read_uncommitted"}
    assert connector.exactly_once_support(uncommitted) is ExactlyOnceSupport.UNSUPPORTED
    assert "exactly.once.support" in errors_of({**uncommitted, "exactly.once.support": "required"})
    # the alias is the connector's setting, not a client setting under the same prefix
    consumer = source_client_config("consumer", SOURCE)
    assert consumer["bootstrap.servers"] == "127.0.0.1:9999" and "alias" not in consumer


def test_mirror_source_names_bad_source_client_settings_and_topic_choices() -> None:
    errors = errors_of({**SOURCE, "source.cluster.no.such.setting": "1"})
    assert set(errors) == {"source.cluster.no.such.setting"}
    assert len(errors["source.cluster.no.such.setting"]) == 1, "once, though two clients see it"
    both = errors_of({**SOURCE, "topics.regex": "orders.*"})
    assert set(both) == {"topics", "topics.regex"}
    assert set(errors_of({k: v for k, v in SOURCE.items() if k != "source.cluster.bootstrap.servers"})) == {
        "source.cluster.bootstrap.servers"
    }


def test_mirror_source_task_records_are_mm2_shaped_and_copied_as_bytes() -> None:
    from eosconnect.connectors.mirror_source import MirrorSourceTask, wrap_partition

    assert MirrorSourceTask.raw_bytes
    assert wrap_partition("east", TopicPartition("orders", 3)) == {
        "cluster": "east",
        "partition": 3,
        "topic": "orders",
    }
