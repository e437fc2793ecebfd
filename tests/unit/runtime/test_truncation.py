"""KIP-320 in the sink runtime without a broker: librdkafka's truncation texts, the policy and
reset settings, the validating consumer's settings, rewinds that carry a leader epoch, and the mirror
keeping the source epoch in its target transaction (tests/integration/test_sink_truncation.py has
the real brokers)."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api import ConfigException, OffsetAndMetadata, SinkTaskContext, TopicPartition
from eosconnect.api.errors import ConnectException
from eosconnect.api.sink import ASSIGNED_PARTITIONS_CONFIG
from eosconnect.api.transactions import TransactionRetry
from eosconnect.connectors.mirror import MirrorSinkTask
from eosconnect.runtime.config import LogTruncationPolicy, SinkConnectorConfig
from eosconnect.runtime.sink_consumer import sink_consumer_settings
from eosconnect.runtime.sink_task import SinkTaskRunner
from eosconnect.runtime.task import TASK_CLASS_KEY, TaskSpec
from eosconnect.runtime.truncation import (
    OffsetReset,
    parse_truncation,
    validate_positions,
    validation_consumer_config,
)
from eosconnect.worker_config import WorkerConfig
from support.sink_writers import unconnected_sink_writer

# As librdkafka 2.16 reported them against Kafka 4.3 (tests/integration/test_sink_truncation.py).
DETECTED = (
    "Partition log truncation detected at offset 15 (leader epoch 0): broker end offset is 10 "
    "(offset leader epoch 0). Reset to INVALID.: Local: Partition log truncation detected (broker 2)"
)
NO_EPOCH = (
    "No epoch found less or equal to offset 15 (leader epoch 3): broker end offset is -1 (offset "
    "leader epoch -1). Reset using configured policy.: Local: Partition log truncation detected"
)
NO_OFFSET = "no previously committed offset available: Local: No offset stored"
OUT_OF_RANGE = (
    "fetch failed due to requested offset not available on the broker: Broker: Offset out of range (broker 2)"
)
BASE = {"name": "s", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/x"}
WORKER = WorkerConfig.parse({"bootstrap.servers": "127.0.0.1:9092"})


def test_detected_truncation_gives_partition_committed_and_divergence_offsets() -> None:
    t = parse_truncation(DETECTED, "orders", 3)
    assert t is not None
    assert (t.topic, t.partition, t.consumed_offset, t.consumed_epoch) == ("orders", 3, 15, 0)
    assert (t.divergence_offset, t.divergence_epoch, t.broker) == (10, 0, 2)
    text = t.describe("committed")
    assert "topic 'orders' partition 3" in text and "committed position is offset 15 (leader epoch 0)" in text
    assert "diverges at offset 10" in text and "broker 2" in text
    assert t.records_affected == 5 and t.affected_range() == "5 records (offsets 10..14)"
    assert t.divergence == OffsetAndMetadata(10, leader_epoch=0)


def test_truncation_without_a_known_divergence_says_so() -> None:
    t = parse_truncation(NO_EPOCH, "orders", 0)
    assert t is not None
    assert (t.consumed_offset, t.consumed_epoch, t.divergence_offset, t.divergence_epoch) == (
        15,
        3,
        None,
        None,
    )
    assert "divergence offset is unknown" in t.describe()
    assert t.divergence is None and t.records_affected is None


@pytest.mark.parametrize("text", [NO_OFFSET, OUT_OF_RANGE, ""])
def test_other_resets_are_not_truncations(text: str) -> None:
    assert parse_truncation(text, "t", 0) is None


def test_unrecognised_truncation_text_is_still_a_truncation() -> None:
    t = parse_truncation("Partition log truncation detected somewhere new", "t", 1)
    assert t is not None and t.divergence_offset is None and t.consumed_offset is None


def test_policy_defaults_to_fail_and_parses_case_insensitively() -> None:
    assert SinkConnectorConfig.parse(BASE).log_truncation_policy is LogTruncationPolicy.FAIL
    config = SinkConnectorConfig.parse({**BASE, "log.truncation.policy": "Continue-From-Divergence"})
    assert config.log_truncation_policy is LogTruncationPolicy.CONTINUE_FROM_DIVERGENCE


def test_bad_policy_is_a_field_error_naming_the_allowed_values() -> None:
    with pytest.raises(ConfigException) as info:
        SinkConnectorConfig.parse({**BASE, "log.truncation.policy": "ignore"})
    assert set(info.value.errors) == {"log.truncation.policy"}
    problem = info.value.errors["log.truncation.policy"][0]
    assert "fail" in problem and "continue-from-divergence" in problem and "ignore" in problem
    assert '"log.truncation.policy"' in str(info.value)


@pytest.mark.parametrize(
    ("value", "reset", "logical"),
    [
        ("earliest", OffsetReset.EARLIEST, OFFSET_BEGINNING),
        ("smallest", OffsetReset.EARLIEST, OFFSET_BEGINNING),
        ("latest", OffsetReset.LATEST, OFFSET_END),
        ("none", OffsetReset.ERROR, None),
        ("error", OffsetReset.ERROR, None),
    ],
)
def test_auto_offset_reset_is_applied_by_the_runtime(
    value: str, reset: OffsetReset, logical: int | None
) -> None:
    config, parsed = sink_consumer_settings(
        WORKER, SinkConnectorConfig.parse({**BASE, "consumer.override.auto.offset.reset": value})
    )
    assert parsed is reset and parsed.logical_offset == logical
    assert config["auto.offset.reset"] == "error", "librdkafka must report truncations, not repair them"


def test_default_reset_is_earliest_and_a_bad_one_names_the_setting() -> None:
    assert sink_consumer_settings(WORKER, SinkConnectorConfig.parse(BASE))[1] is OffsetReset.EARLIEST
    with pytest.raises(ConfigException) as info:
        sink_consumer_settings(
            WORKER, SinkConnectorConfig.parse({**BASE, "consumer.override.auto.offset.reset": "oldest"})
        )
    assert set(info.value.errors) == {"consumer.override.auto.offset.reset"}
    assert "earliest" in info.value.errors["consumer.override.auto.offset.reset"][0]


def test_the_validating_consumer_shares_connection_settings_but_never_commits_or_repairs() -> None:
    task_consumer = {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.username": "u",
        "group.id": "connect-s",
        "group.instance.id": "member-1",
        "auto.offset.reset": "error",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    }
    config = validation_consumer_config(task_consumer)
    assert {k: config[k] for k in ("bootstrap.servers", "security.protocol", "sasl.username")} == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.username": "u",
    }
    assert config["group.id"] == "connect-s", "the group the principal is authorised for; never joined"
    assert "group.instance.id" not in config
    assert config["auto.offset.reset"] == "error" and config["enable.auto.commit"] is False
    assert config["enable.partition.eof"] is True


def test_positions_without_a_leader_epoch_are_not_validated() -> None:
    """No epoch, nothing to ask the leader: no consumer is even created (the address is bogus)."""
    positions = {
        TopicPartition("t", 0): OffsetAndMetadata(15),
        TopicPartition("t", 1): OffsetAndMetadata(3, leader_epoch=-1),
    }
    assert validate_positions({"bootstrap.servers": "192.0.2.1:1", "group.id": "g"}, positions) == {}


def test_a_rewind_can_carry_the_leader_epoch_to_validate() -> None:
    context = SinkTaskContext()
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    context.offset({tp0: OffsetAndMetadata(15, leader_epoch=3), tp1: 7})
    assert context.requested_offsets == {tp0: 15, tp1: 7}, "plain offsets for tasks that read them"
    assert context.requested_position(tp0) == OffsetAndMetadata(15, leader_epoch=3)
    assert context.requested_position(tp1) == OffsetAndMetadata(7)
    assert context.requested_position(tp0) is None and not context.requested_epochs
    context.offset({tp0: OffsetAndMetadata(4, leader_epoch=1)})
    context.offset([(tp0, 5)])  # a later plain rewind drops the epoch
    assert context.requested_position(tp0) == OffsetAndMetadata(5)


MIRROR = {
    "name": "mm",
    "connector.class": "MirrorSink",
    "topics": "orders",
    "target.cluster.bootstrap.servers": "127.0.0.1:9999",
}


class _RecordingWriter:
    """Stands in for the mirror's TransactionalWriter: what it was asked to commit."""

    def __init__(self, committed: dict[TopicPartition, OffsetAndMetadata] | None = None) -> None:
        self.commits: list[dict[TopicPartition, OffsetAndMetadata]] = []
        self._committed = committed or {}

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        self.commits.append(dict(offsets))

    def committed(self, partitions: Any) -> dict[TopicPartition, OffsetAndMetadata]:
        return {tp: om for tp, om in self._committed.items() if tp in set(partitions)}


def _mirror_task(writer: _RecordingWriter) -> MirrorSinkTask:
    task = MirrorSinkTask()
    task.initialize(SinkTaskContext())
    task.start(dict(MIRROR))
    task.writer = writer  # type: ignore[assignment]
    task._target_partitions = {"source.orders": 2}
    return task


def test_the_mirror_commits_the_source_leader_epoch_into_the_target_transaction() -> None:
    writer = _RecordingWriter()
    task = _mirror_task(writer)
    returned = task.pre_commit({TopicPartition("orders", 1): OffsetAndMetadata(15, leader_epoch=4)})
    # The target's transaction holds the offsets; the runtime copies them to the source group (KIP-656).
    assert returned == {TopicPartition("orders", 1): OffsetAndMetadata(15, leader_epoch=4)}
    assert writer.commits == [{TopicPartition("source.orders", 1): OffsetAndMetadata(15, leader_epoch=4)}]


def test_the_mirror_rewinds_with_the_committed_source_epoch_so_the_runtime_validates_it() -> None:
    writer = _RecordingWriter({TopicPartition("source.orders", 1): OffsetAndMetadata(15, leader_epoch=4)})
    task = _mirror_task(writer)
    task.open([TopicPartition("orders", 1)])
    assert task.context.requested_position(TopicPartition("orders", 1)) == OffsetAndMetadata(
        15, leader_epoch=4
    )


class _RetryingWriter(_RecordingWriter):
    """A writer whose commit was ended by a new producer: the rewind holds the transaction's first
    record (a source partition) and the group's committed offset (a target partition)."""

    def commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        raise TransactionRetry(
            "a new producer ended the transaction",
            {TopicPartition("orders", 1): 10, TopicPartition("source.orders", 1): 15},
        )


def test_a_rewind_to_the_targets_committed_offsets_reaches_the_source_partition() -> None:
    """The group's committed offsets are named by the target's partitions; the task consumes the
    source's. Unmapped, the rewind was refused ("not assigned to this task; ignoring the rewind",
    seen in the chaos soak), so a transaction that had committed was written again from its first
    record, and one that had not was skipped."""
    task = _mirror_task(_RetryingWriter())
    assert task.pre_commit({TopicPartition("orders", 1): OffsetAndMetadata(20)}) == {}
    assert task.context.requested_position(TopicPartition("orders", 1)) == OffsetAndMetadata(15)
    assert task.context.requested_position(TopicPartition("source.orders", 1)) is None


class _FakeTransactionalProducer:
    def __init__(self) -> None:
        self.sent: list[Any] = []

    def begin_transaction(self) -> None:
        pass

    def send_offsets_to_transaction(self, offsets: Any, _metadata: Any, _timeout: float) -> None:
        self.sent.extend(offsets)

    def commit_transaction(self, _timeout: float) -> None:
        pass


class _FakeGroupConsumer:
    def consumer_group_metadata(self) -> object:
        return object()


def test_offsets_sent_to_the_transaction_keep_their_leader_epoch() -> None:
    """librdkafka's TxnOffsetCommit carries the epoch (checked on Kafka 4.3: committed() returns it)."""
    writer = unconnected_sink_writer()
    producer = _FakeTransactionalProducer()
    writer.session.producer, writer.offsets.consumer = producer, _FakeGroupConsumer()  # type: ignore[assignment]
    writer.commit({TopicPartition("source.orders", 1): OffsetAndMetadata(15, leader_epoch=4)})
    [sent] = producer.sent
    assert (sent.topic, sent.partition, sent.offset, sent.leader_epoch) == ("source.orders", 1, 15, 4)


# ----------------------------------------------------------------------------------- the runner
class _StandInConsumer:
    """Records what the runner asks of its consumer when it restarts stopped partitions (the real
    librdkafka behaviour is in tests/integration/test_sink_truncation.py and docs/truncation.md)."""

    def __init__(self, positions: dict[int, tuple[int, int | None]]) -> None:
        self.positions = positions
        self.calls: list[tuple[str, list[tuple[str, int, int, int | None]]]] = []

    def _record(self, call: str, partitions: list[KafkaTopicPartition]) -> None:
        self.calls.append((call, [(p.topic, p.partition, p.offset, p.leader_epoch) for p in partitions]))

    def assignment(self) -> list[KafkaTopicPartition]:
        return [KafkaTopicPartition("t", p) for p in self.positions]

    def position(self, partitions: list[KafkaTopicPartition]) -> list[KafkaTopicPartition]:
        result = []
        for p in partitions:
            offset, epoch = self.positions[p.partition]
            extra = {} if epoch is None else {"leader_epoch": epoch}
            result.append(KafkaTopicPartition(p.topic, p.partition, offset, **extra))
        return result

    def assign(self, partitions: list[KafkaTopicPartition]) -> None:
        self._record("assign", partitions)

    def incremental_assign(self, partitions: list[KafkaTopicPartition]) -> None:
        self._record("incremental_assign", partitions)

    def incremental_unassign(self, partitions: list[KafkaTopicPartition]) -> None:
        self._record("incremental_unassign", partitions)

    def pause(self, partitions: list[KafkaTopicPartition]) -> None:
        self._record("pause", partitions)

    def resume(self, partitions: list[KafkaTopicPartition]) -> None:
        self._record("resume", partitions)


def _runner(
    policy: str, positions: dict[int, tuple[int, int | None]], static: bool = False
) -> SinkTaskRunner:
    connector = {**BASE, "log.truncation.policy": policy}
    task_config = {**connector, TASK_CLASS_KEY: "eosconnect.connectors.file_stream.FileStreamSinkTask"}
    if static:
        task_config[ASSIGNED_PARTITIONS_CONFIG] = ",".join(f"t:{p}" for p in positions)
    worker = {"bootstrap.servers": "127.0.0.1:9092"}
    spec = TaskSpec("s", 0, task_config, connector, worker, control=None)  # type: ignore[arg-type]
    runner = SinkTaskRunner(spec, WorkerConfig.parse(worker), SinkConnectorConfig.parse(connector))
    consumer_config, offset_reset = sink_consumer_settings(runner.worker, runner.connector)
    runner.consumer = _StandInConsumer(positions)  # type: ignore[assignment]
    runner.restarts = runner.partition_restarts(runner.consumer, consumer_config, offset_reset)  # type: ignore[arg-type]
    runner.context.assigned.update(TopicPartition("t", p) for p in positions)
    return runner


def test_a_running_group_member_restarts_the_truncated_partition_with_its_whole_assignment() -> None:
    """Eager protocol: librdkafka refuses seek() after the error and incremental_* in a group."""
    runner = _runner("continue-from-divergence", {0: (15, 0), 1: (42, 3), 2: (-1001, None)})
    runner.restarts.starts[TopicPartition("t", 2)] = KafkaTopicPartition("t", 2, 7)  # assigned, unread
    runner._paused_by_worker = True
    moved = runner.restarts.stopped("t", 0, DETECTED)
    assert moved == OffsetAndMetadata(10, leader_epoch=0)
    assert runner.current[TopicPartition("t", 0)] == moved, "the next commit moves the group back"
    assert runner.metrics.snapshot()["sink-log-truncations-total"] == 1
    runner._restart_partitions()
    consumer = runner.consumer
    assert consumer.calls[0] == ("assign", [("t", 0, 10, 0), ("t", 1, 42, 3), ("t", 2, 7, None)])  # type: ignore[union-attr]
    assert consumer.calls[1][0] == "pause", "the worker's pause holds after the re-assignment"  # type: ignore[union-attr]


def test_a_static_assignment_restarts_only_the_truncated_partition() -> None:
    runner = _runner("continue-from-divergence", {0: (15, 0), 1: (42, 3)}, static=True)
    runner.restarts.stopped("t", 0, DETECTED)
    runner._restart_partitions()
    assert runner.consumer.calls == [  # type: ignore[union-attr]
        ("incremental_unassign", [("t", 0, -1001, None)]),
        ("incremental_assign", [("t", 0, 10, 0)]),
    ]


def test_a_running_task_with_policy_fail_fails_naming_the_offsets_and_the_fix() -> None:
    runner = _runner("fail", {0: (15, 0)})
    with pytest.raises(ConnectException) as info:
        runner.restarts.stopped("orders", 3, DETECTED)
    text = str(info.value)
    assert "topic 'orders' partition 3: the consumed position is offset 15 (leader epoch 0)" in text
    assert "the log diverges at offset 10" in text and "PATCH /connectors/s/offsets" in text
    assert '"kafka_offset": 10' in text and "log.truncation.policy=continue-from-divergence" in text
    assert runner.metrics.snapshot()["sink-log-truncations-total"] == 1


def test_other_resets_follow_the_users_auto_offset_reset() -> None:
    runner = _runner("fail", {0: (15, 0)})
    assert runner.restarts.stopped("t", 0, OUT_OF_RANGE) is None, "a logical offset: no position yet"
    runner._restart_partitions()
    assert runner.consumer.calls == [("assign", [("t", 0, OFFSET_BEGINNING, None)])]  # type: ignore[union-attr]
    assert runner.metrics.snapshot()["sink-log-truncations-total"] == 0
