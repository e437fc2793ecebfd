"""Both mirrors on Spark between two real clusters, exactly once across crashes and zombies.

MirrorSink (KIP-656): the session broker is the source cluster; a second single-node cluster (the
session's `second_kafka`, fixture `target`) is the target, so the target group's offsets really
live elsewhere than the consumer's cluster. MirrorSource (KIP-618): the other way round, the second
cluster is the source and the session broker, where the runtime writes, the target.
"""

from __future__ import annotations

import bisect
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, NewPartitions, ResourceType

from eosconnect.connectors.mirror_formats import OffsetSync, offset_syncs_topic
from eosconnect.connectors.mirror_translation import OffsetSyncIndex, covered_from
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.storage.topic_reader import read_to_end
from eosconnect.storage.topics import ensure_topic
from eosconnect.storage.transactional_ids import task_transactional_id
from support.runtime_helpers import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PARTITIONS = 3


@pytest.fixture(scope="module")
def target(second_kafka: LocalKafkaCluster) -> str:
    return second_kafka.bootstrap_servers


def produce_sequences(bootstrap: str, topic: str, start: int, count: int) -> None:
    """`count` records per partition, values {"p": partition, "seq": start..start+count-1}."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for seq in range(start, start + count):
        for p in range(PARTITIONS):
            value = json.dumps({"p": p, "seq": seq}).encode()
            producer.produce(topic, value, f"k{seq}".encode(), p, headers=[("h", b"%d" % seq)])
    assert producer.flush(30) == 0


class KeepProducing:
    """Keeps producing `produce_sequences` batches (20 per partition) to a source topic while the
    block runs, so that a transaction is open whenever a fault comes; `produced` per partition."""

    def __init__(self, bootstrap: str, topic: str, pause_s: float) -> None:
        self.bootstrap, self.topic, self.pause_s = bootstrap, topic, pause_s
        self.produced = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            produce_sequences(self.bootstrap, self.topic, self.produced, 20)
            self.produced += 20
            self._stop.wait(self.pause_s)

    def __enter__(self) -> KeepProducing:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(30)


def produce_aborted(bootstrap: str, topic: str, count: int) -> None:
    """`count` records per partition in a transaction that aborts: they must never be mirrored."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-aborter"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(count):
        for p in range(PARTITIONS):
            producer.produce(topic, json.dumps({"p": p, "aborted": i}).encode(), None, p)
    producer.flush(30)
    producer.abort_transaction(30)


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions if tp.offset >= 0}


#: Set on source topics; min.insync.replicas is in MirrorMaker 2's default exclusions.
SOURCE_TOPIC_SETTINGS = {
    "retention.ms": "123456789",
    "max.message.bytes": "2000000",
    "min.insync.replicas": "1",
}
COPIED_SETTINGS = {"retention.ms": "123456789", "max.message.bytes": "2000000"}


def topic_settings(bootstrap: str, topic: str) -> dict[str, str]:
    """The settings set on the topic itself (not inherited from the broker)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    resource = ConfigResource(ResourceType.TOPIC, topic)
    futures = admin.describe_configs([resource])
    entries = futures[resource].result(30)
    own = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    return {k: e.value for k, e in entries.items() if int(getattr(e.source, "value", e.source)) == own}


def rewind_group(bootstrap: str, group: str, topic: str) -> None:
    """Set the (memberless) group's offsets of every partition of `topic` to 0."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    zero = [KafkaTopicPartition(topic, p, 0) for p in range(PARTITIONS)]
    request = ConsumerGroupTopicPartitions(group, zero)
    admin.alter_consumer_group_offsets([request])[group].result(30)
    assert group_offsets(bootstrap, group) == {(topic, p): 0 for p in range(PARTITIONS)}


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "probe"})
    try:
        return {
            p: consumer.get_watermark_offsets(KafkaTopicPartition(topic, p), 30)[1] for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def mirrored(target: str, topic: str) -> list:
    return read_to_end({"bootstrap.servers": target}, topic, timeout=60)


def mirrored_count(target: str, topic: str) -> int:
    """How many records are committed on the target so far (0 while the topic does not exist)."""
    try:
        return len(mirrored(target, topic))
    except KafkaException:
        return 0


def assert_exactly_once(records: list, per_partition: int) -> None:
    """Each target partition holds its source partition's sequence 0..n-1, in order, once each."""
    by_partition: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for r in records:
        value = json.loads(r.value)
        assert "aborted" not in value, f"a record of an aborted transaction was mirrored: {value}"
        assert value["p"] == r.partition, "every record goes to the same partition number"
        assert r.key == f"k{value['seq']}".encode() and dict(r.headers)["h"] == b"%d" % value["seq"]
        by_partition[r.partition].append(value["seq"])
    for p, seqs in by_partition.items():
        assert seqs == list(range(per_partition)), f"partition {p}: duplicates, gaps or disorder"


def mirror_config(name: str, topic: str, target: str, **extra: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "support.connectors.CrashingMirrorSinkConnector",
        "tasks.max": "2",
        "topics": topic,
        "target.cluster.bootstrap.servers": target,
        "source.cluster.alias": "src",
        "transaction.producer": "true",
        **{k.replace("_", "."): v for k, v in extra.items()},
    }


def test_sigkilled_tasks_resume_from_the_target_offsets_exactly_once(
    run_job, worker_props, topic_name, create_topic, bootstrap, target, tmp_path: Path
):
    source = create_topic(topic_name("src"), partitions=PARTITIONS)
    produce_sequences(bootstrap, source, 0, 1000)
    produce_aborted(bootstrap, source, 25)
    produce_sequences(bootstrap, source, 1000, 1000)
    markers = tmp_path / "markers"
    markers.mkdir()
    name = topic_name("mm")
    worker = worker_props("enabled")
    config = mirror_config(
        name, source, target, put_delay_ms="300", crash_after_commits="1", crash_marker_dir=str(markers)
    )
    mirror_topic = f"src.{source}"

    job = run_job(config, worker)
    wait_until(
        lambda: mirrored_count(target, mirror_topic) >= 2000 * PARTITIONS, 180, "everything mirrored", job
    )
    outcomes = job.stop()
    assert sorted(p.name for p in markers.iterdir()) == ["crashed-0", "crashed-1"], "both tasks crashed"
    assert [o["state"] for o in outcomes] == ["STOPPED", "STOPPED"], outcomes
    assert_exactly_once(mirrored(target, mirror_topic), 2000)

    source_end = end_offsets(bootstrap, source)
    group = f"connect-{name}"
    assert group_offsets(target, group) == {(mirror_topic, p): source_end[p] for p in range(PARTITIONS)}
    # KIP-656: after each target commit the source group gets the same positions, to show the lag.
    assert group_offsets(bootstrap, group) == {(source, p): source_end[p] for p in range(PARTITIONS)}

    # Restart with more data after rewinding the source group to 0: were its offsets the truth,
    # everything would be copied again; only the target's offsets keep the copy exactly once.
    rewind_group(bootstrap, group, source)
    produce_sequences(bootstrap, source, 2000, 100)
    job = run_job(mirror_config(name, source, target), worker)
    wait_until(lambda: mirrored_count(target, mirror_topic) >= 2100 * PARTITIONS, 120, "the new records", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED", "STOPPED"], outcomes
    assert_exactly_once(mirrored(target, mirror_topic), 2100)
    source_end = end_offsets(bootstrap, source)
    assert group_offsets(target, group) == {(mirror_topic, p): source_end[p] for p in range(PARTITIONS)}
    assert group_offsets(bootstrap, group) == {(source, p): source_end[p] for p in range(PARTITIONS)}


def test_zombie_is_fenced_and_none_of_its_writes_become_visible(
    run_job, worker_props, topic_name, create_topic, bootstrap, target
):
    """A second instance of the same task (same transactional id) starts while the first is still
    copying: the first is fenced on its next write, fails as a zombie, and its open transaction
    never becomes visible; the second resumes from the target's offsets."""
    source = create_topic(topic_name("src"), partitions=PARTITIONS)
    produce_sequences(bootstrap, source, 0, 1500)
    name = topic_name("mm")
    worker = worker_props("enabled")
    mirror_topic = f"src.{source}"

    zombie = run_job(mirror_config(name, source, target, tasks_max="1", put_delay_ms="1500"), worker)
    wait_until(lambda: mirrored_count(target, mirror_topic) > 0, 120, "the first instance to commit", zombie)
    successor = run_job(mirror_config(name, source, target, tasks_max="1"), worker)
    (zombie_outcome,) = zombie.wait(120)
    assert zombie_outcome["state"] == "FAILED", zombie_outcome
    assert "fenced" in zombie_outcome["trace"] and "zombie" in zombie_outcome["trace"]

    wait_until(
        lambda: mirrored_count(target, mirror_topic) >= 1500 * PARTITIONS, 120, "everything", successor
    )
    (outcome,) = successor.stop()
    assert outcome["state"] == "STOPPED", outcome
    assert_exactly_once(mirrored(target, mirror_topic), 1500)


def test_at_least_once_mirror_commits_on_the_source_cluster(
    run_job, worker_props, topic_name, create_topic, bootstrap, target
):
    """transaction.producer=false: group subscription, idempotent producer, offsets on the source.
    The target topic is created with the source topic's own settings, minus the excluded ones."""
    source = create_topic(topic_name("src"), partitions=PARTITIONS, config=SOURCE_TOPIC_SETTINGS)
    produce_sequences(bootstrap, source, 0, 200)
    name = topic_name("mm")
    config = {
        **mirror_config(name, source, target, replication_policy_class="identity"),
        "connector.class": "MirrorSink",
        "transaction.producer": "false",
    }
    job = run_job(config, worker_props("disabled"))
    wait_until(lambda: mirrored_count(target, source) >= 200 * PARTITIONS, 120, "everything mirrored", job)
    outcomes = job.stop()
    assert [o["state"] for o in outcomes] == ["STOPPED", "STOPPED"], outcomes
    assert_exactly_once(mirrored(target, source), 200)
    source_end = end_offsets(bootstrap, source)
    assert group_offsets(bootstrap, f"connect-{name}") == {
        (source, p): source_end[p] for p in range(PARTITIONS)
    }
    assert group_offsets(target, f"connect-{name}") == {}
    assert topic_settings(target, source) == COPIED_SETTINGS


def test_worker_mirrors_exactly_once_across_a_new_generation(
    workers, topic_name, create_topic, bootstrap, target
):
    """Through a real worker: the leader's fencing endpoint and task-count records, a
    reconfiguration from 2 to 3 tasks (new static assignment) in the middle of the stream."""
    source = create_topic(topic_name("src"), partitions=PARTITIONS)
    produce_sequences(bootstrap, source, 0, 500)
    worker = workers()
    mirror_topic = f"src.{source}"
    config = mirror_config("mm", source, target)
    config["connector.class"] = "MirrorSink"

    created = worker.create_connector("mm", config)
    assert created.status_code == 201, created.text
    worker.wait_for(
        lambda: mirrored_count(target, mirror_topic) >= 500 * PARTITIONS, 120, "the first records"
    )
    assert worker.task_states("mm") == ["RUNNING", "RUNNING"]

    updated = worker.request("PUT", "/connectors/mm/config", json={**config, "tasks.max": "3"})
    assert updated.status_code == 200, updated.text
    worker.wait_for(lambda: worker.task_states("mm") == ["RUNNING"] * 3, 120, "three RUNNING tasks")
    produce_sequences(bootstrap, source, 500, 300)
    worker.wait_for(lambda: mirrored_count(target, mirror_topic) >= 800 * PARTITIONS, 120, "the new records")

    assert_exactly_once(mirrored(target, mirror_topic), 800)
    source_end = end_offsets(bootstrap, source)
    expected = {(mirror_topic, p): source_end[p] for p in range(PARTITIONS)}
    worker.wait_for(
        lambda: group_offsets(target, "connect-mm") == expected, 30, "the target offsets at the end"
    )


def test_a_stalled_target_makes_the_mirror_abort_and_rewrite_its_transaction_in_time(
    workers, topic_name, create_topic, bootstrap, target, second_kafka: LocalKafkaCluster
):
    """The target broker freezes (SIGSTOP) for longer than half the producer's transaction timeout
    while a mirror task's transaction is open: the task aborts it before the broker would, says so
    once at WARN, rewinds to the transaction's first records and writes them again. No task fails,
    nothing is lost or doubled, and no ERROR is logged."""
    log_text = stall_the_target(workers, topic_name, create_topic, bootstrap, target, second_kafka, 18)
    warnings = [line for line in log_text.splitlines() if "aborted its transaction of" in line]
    assert warnings and all(" WARNING " in line for line in warnings), log_text[-3000:]
    assert len(warnings) <= 3, f"one WARN per aborted transaction, not a stream: {warnings}"


def test_a_target_stalled_past_the_transaction_timeout_renews_the_producer_in_place(
    workers, topic_name, create_topic, bootstrap, target, second_kafka: LocalKafkaCluster
):
    """Issue 25: the target freezes for longer than the whole transaction timeout, so the task's own
    abort cannot end the transaction in time. The leader confirms the instance current, so the task
    renews its producer in place (a new init_transactions() ends the transaction and fences the old
    epoch), rewinds and goes on: RUNNING, exactly once, no ERROR."""
    log_text = stall_the_target(workers, topic_name, create_topic, bootstrap, target, second_kafka, 36)
    assert "the leader confirms this instance current" in log_text, log_text[-3000:]
    # How long the new producer waited for the coordinator (`init_in_time`; shown with -rP).
    print("\n".join(line for line in log_text.splitlines() if "transactional producer again" in line))


def stall_the_target(
    workers, topic_name, create_topic, bootstrap, target, second_kafka: LocalKafkaCluster, freeze_s: float
) -> str:
    """A mirror sink copying while its target broker is frozen for `freeze_s` (the transaction
    timeout is 30 s); checks the task stays RUNNING, copies exactly once and logs no ERROR, and
    returns the worker's log."""
    source = create_topic(topic_name("src"), partitions=PARTITIONS)
    worker = workers()
    mirror_topic = f"src.{source}"
    config = mirror_config(
        "mm",
        source,
        target,
        tasks_max="1",
        transaction_commit_interval_ms="500",
        # 30 s: the rewritten transaction after the thaw gets the whole budget, which a loaded
        # machine's broker needs to answer again (with 20 s it ran out once under a load of 12).
        target_cluster_transaction_timeout_ms="30000",
    )
    config["connector.class"] = "MirrorSink"
    assert worker.create_connector("mm", config).status_code == 201
    # a transaction is open whenever the broker freezes
    with KeepProducing(bootstrap, source, 0.1) as producing:
        worker.wait_for(lambda: mirrored_count(target, mirror_topic) >= 100 * PARTITIONS, 120, "copying")
        (broker,) = second_kafka.broker_ids()
        pid = second_kafka.node(broker).pid
        assert pid is not None
        os.kill(pid, signal.SIGSTOP)
        try:
            time.sleep(freeze_s)
        finally:
            os.kill(pid, signal.SIGCONT)
        time.sleep(2)
    return copied_on_exactly_once(worker, target, mirror_topic, producing.produced)


def copied_on_exactly_once(worker, target: str, mirror_topic: str, produced: int, tasks: int = 1) -> str:
    """After a fault: the mirror's `tasks` tasks ("mm") copied everything, are RUNNING, wrote each
    record exactly once and logged no runtime ERROR. Returns the worker's log."""
    worker.wait_for(
        lambda: mirrored_count(target, mirror_topic) >= produced * PARTITIONS, 120, "everything copied"
    )
    assert worker.task_states("mm") == ["RUNNING"] * tasks
    assert_exactly_once(mirrored(target, mirror_topic), produced)
    log_text = worker.log_path.read_text(errors="replace")
    errors = [line for line in log_text.splitlines() if " ERROR eosconnect.runtime" in line]
    assert not errors, errors
    return log_text


def test_a_replaced_mirror_task_ends_quietly_when_its_successor_fences_it(
    workers, topic_name, create_topic, bootstrap, target
):
    """Issue 25: a mirror task frozen (SIGSTOP) in the middle of its transactions is replaced by a
    new generation (tasks.max 1 -> 2): it does not stop in time, is abandoned, and the new
    generation fences it. Woken up, it ends at INFO: no ERROR line, no FAILED status, and none of
    its writes become visible."""
    source = create_topic(topic_name("src"), partitions=PARTITIONS)
    worker = workers()
    mirror_topic = f"src.{source}"
    config = mirror_config("mm", source, target, tasks_max="1", transaction_commit_interval_ms="200")
    config["connector.class"] = "MirrorSink"
    assert worker.create_connector("mm", config).status_code == 201
    # the frozen task holds an open transaction
    with KeepProducing(bootstrap, source, 0.05) as producing:
        worker.wait_for(lambda: mirrored_count(target, mirror_topic) >= 100 * PARTITIONS, 120, "copying")
        (zombie,) = [r["pid"] for r in worker.request("GET", "/internal/tasks").json().values()]
        os.kill(zombie, signal.SIGSTOP)
        try:
            updated = worker.request("PUT", "/connectors/mm/config", json={**config, "tasks.max": "2"})
            assert updated.status_code == 200, updated.text
            worker.wait_for(lambda: worker.task_states("mm") == ["RUNNING"] * 2, 120, "the new generation")
            worker.wait_for(
                lambda: "fencing 1 producers of connector 'mm'" in worker.log_path.read_text(), 60, "fencing"
            )
        finally:
            os.kill(zombie, signal.SIGCONT)
        worker.wait_for(
            lambda: (
                "[mm-0] ending: a newer instance" in worker.log_path.read_text()
                or "[mm-0] stopped after" in worker.log_path.read_text()
            ),
            60,
            "the zombie to end",
        )
    log_text = copied_on_exactly_once(worker, target, mirror_topic, producing.produced, tasks=2)
    problems = [line for line in log_text.splitlines() if " ERROR eosconnect" in line or " CRITICAL " in line]
    assert not [p for p in problems if "eosconnect.kafka" not in p or " CRITICAL " in p], problems


def test_a_mirror_task_fenced_while_current_renews_its_producer_and_copies_on(
    workers, topic_name, create_topic, bootstrap, target
):
    """Issue 25: a replaced instance, thawed, can fence the task's current instance: its producer
    asks for a KIP-360 epoch bump with its old epoch, and the coordinator aborts the open
    transaction and bumps the epoch before it checks that epoch. Here a second producer with the
    task's transactional id fences it the same way (a real fence on the real target) while the
    leader still runs this instance: the task waits for the leader's word, renews its producer,
    rewinds to the group's committed offsets and copies on. RUNNING, exactly once, no ERROR."""
    source = create_topic(topic_name("src"), partitions=PARTITIONS)
    worker = workers()
    mirror_topic = f"src.{source}"
    config = mirror_config("mm", source, target, tasks_max="1", transaction_commit_interval_ms="1000")
    config["connector.class"] = "MirrorSink"
    assert worker.create_connector("mm", config).status_code == 201
    # a transaction is open whenever the fence comes
    with KeepProducing(bootstrap, source, 0.05) as producing:
        worker.wait_for(lambda: mirrored_count(target, mirror_topic) >= 100 * PARTITIONS, 120, "copying")
        fencer = Producer(
            {
                "bootstrap.servers": target,
                "transactional.id": task_transactional_id(worker.props["group.id"], "mm", 0),
            }
        )
        fencer.init_transactions(30)
        fencer.flush(0)
        worker.wait_for(
            lambda: "the leader confirms this instance current" in worker.log_path.read_text(),
            60,
            "the renewal",
        )
        time.sleep(2)
    copied_on_exactly_once(worker, target, mirror_topic, producing.produced)


def test_a_mirror_task_renewed_after_another_instance_committed_rewinds_past_that_commit(
    workers, topic_name, create_topic, bootstrap, target
):
    """The sink side of a zombie that commits (issue 25): another instance of the task fences the
    running one and commits copies of the next source records with the group's offsets past them,
    as a thawed zombie renewing on an old word can. The running instance, fenced, confirmed current
    and renewed, must rewind to the group's committed offsets, not to its aborted transaction's
    first records: those were copied by the other instance meanwhile and would be copied twice.
    RUNNING, exactly once, no ERROR. (This is the fenced path, `produce`/`commit`; a renewal after
    a failed or hung abort, `_abort_and_rewind`, reads the group's offsets the same way but is not
    reached here.)"""
    source = create_topic(topic_name("src"), partitions=PARTITIONS)
    worker = workers()
    mirror_topic = f"src.{source}"
    config = mirror_config("mm", source, target, tasks_max="1", transaction_commit_interval_ms="1000")
    config["connector.class"] = "MirrorSink"
    assert worker.create_connector("mm", config).status_code == 201
    with KeepProducing(bootstrap, source, 0.05) as producing:
        worker.wait_for(lambda: mirrored_count(target, mirror_topic) >= 100 * PARTITIONS, 120, "copying")
        other = Producer(
            {
                "bootstrap.servers": target,
                "transactional.id": task_transactional_id(worker.props["group.id"], "mm", 0),
            }
        )
        other.init_transactions(30)  # fences the running instance and aborts its open transaction
        committed = group_offsets(target, "connect-mm")
        # The running instance waits for the leader's word (up to 10 s, `superseded`) before it
        # renews: time enough for the other instance to commit its copies.
        group = Consumer({"bootstrap.servers": target, "group.id": "connect-mm"})  # names the group
        reader = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
        reader.assign(
            [KafkaTopicPartition(source, p, committed[(mirror_topic, p)]) for p in range(PARTITIONS)]
        )
        copies = {p: [] for p in range(PARTITIONS)}
        deadline = time.monotonic() + 20
        while min(len(c) for c in copies.values()) < 20 and time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is not None and message.error() is None and len(copies[message.partition()]) < 20:
                copies[message.partition()].append(message)
        reader.close()
        other.begin_transaction()
        for p, messages in copies.items():
            for m in messages:
                other.produce(mirror_topic, m.value(), m.key(), p, headers=m.headers())
        moved = [
            KafkaTopicPartition(mirror_topic, p, messages[-1].offset() + 1)
            for p, messages in copies.items()
            if messages
        ]
        other.send_offsets_to_transaction(moved, group.consumer_group_metadata(), 30)
        other.commit_transaction(30)
        group.close()
        worker.wait_for(
            lambda: "the leader confirms this instance current" in worker.log_path.read_text(),
            60,
            "the renewal",
        )
        time.sleep(2)
    assert sum(len(c) for c in copies.values()) > 0, "the other instance copied nothing"
    copied_on_exactly_once(worker, target, mirror_topic, producing.produced)


def test_worker_offsets_of_an_exactly_once_mirror_are_altered_and_reset_on_the_target(
    workers, topic_name, create_topic, bootstrap, target
):
    """KIP-875's endpoints on a KIP-656 mirror: its tasks resume from the target group, so PATCH and
    DELETE of the stopped connector's offsets must reach that group (the source group's copy alone
    would change nothing), after fencing the last generation's zombies."""
    source = create_topic(topic_name("src"), partitions=PARTITIONS)
    produce_sequences(bootstrap, source, 0, 300)
    worker = workers()
    mirror_topic = f"src.{source}"
    config = {**mirror_config("mm-offsets", source, target), "connector.class": "MirrorSink"}
    group = "connect-mm-offsets"
    assert worker.create_connector("mm-offsets", config).status_code == 201
    worker.wait_for(lambda: mirrored_count(target, mirror_topic) >= 300 * PARTITIONS, 120, "the records")

    assert worker.request("PUT", "/connectors/mm-offsets/stop").status_code == 204
    source_end = end_offsets(bootstrap, source)
    worker.wait_for(
        lambda: group_offsets(target, group) == {(mirror_topic, p): source_end[p] for p in range(PARTITIONS)},
        60,
        "the final commit on stop",
    )
    rewind = {"partition": {"kafka_topic": source, "kafka_partition": 0}, "offset": {"kafka_offset": 200}}
    patched = worker.request("PATCH", "/connectors/mm-offsets/offsets", json={"offsets": [rewind]})
    assert patched.status_code == 200, patched.text
    assert group_offsets(target, group)[(mirror_topic, 0)] == 200, "the target group was altered"
    assert group_offsets(bootstrap, group)[(source, 0)] == 200, "and the source group, as for any sink"

    assert worker.request("PUT", "/connectors/mm-offsets/resume").status_code == 202
    worker.wait_for(
        lambda: mirrored_count(target, mirror_topic) >= 300 * PARTITIONS + 100, 120, "the re-copied records"
    )
    seqs = [json.loads(r.value)["seq"] for r in mirrored(target, mirror_topic) if r.partition == 0]
    assert seqs == [*range(300), *range(200, 300)], "partition 0 was copied again from offset 200"
    assert len(mirrored(target, mirror_topic)) == 300 * PARTITIONS + 100, "the other partitions were not"

    assert worker.request("PUT", "/connectors/mm-offsets/stop").status_code == 204
    worker.wait_for(
        lambda: worker.request("DELETE", "/connectors/mm-offsets/offsets").status_code == 200,
        60,
        "the offsets reset of the stopped connector",
    )
    assert group_offsets(target, group) == {}, "the target group was reset"
    assert group_offsets(bootstrap, group) == {}, "and the source group"


def test_worker_mirror_finds_new_source_partitions_by_itself(
    workers, topic_name, create_topic, bootstrap, admin, target
):
    """The connector stays started on the leader and watches the source: a partition added there
    gets a new generation of tasks (fenced hand-over) without any REST call, and is mirrored exactly
    once like the others."""
    source = create_topic(topic_name("grow"), partitions=PARTITIONS)
    produce_sequences(bootstrap, source, 0, 200)
    worker = workers()
    mirror_topic = f"src.{source}"
    config = {**mirror_config("grow", source, target), "connector.class": "MirrorSink"}
    config["refresh.topics.interval.seconds"] = "1"
    created = worker.create_connector("grow", config)
    assert created.status_code == 201, created.text
    first_records = 200 * PARTITIONS
    worker.wait_for(lambda: mirrored_count(target, mirror_topic) >= first_records, 120, "the first records")
    first = worker.request("GET", "/connectors/grow/tasks").json()

    admin.create_partitions([NewPartitions(source, PARTITIONS + 1)])[source].result(30)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for seq in range(200):
        value = json.dumps({"p": PARTITIONS, "seq": seq}).encode()
        producer.produce(source, value, f"k{seq}".encode(), PARTITIONS, headers=[("h", b"%d" % seq)])
    assert producer.flush(30) == 0

    total = 200 * (PARTITIONS + 1)
    worker.wait_for(lambda: mirrored_count(target, mirror_topic) >= total, 120, "the new partition's records")
    tasks = worker.request("GET", "/connectors/grow/tasks").json()
    assert tasks != first, "the watcher's request must have produced new task configs"
    assigned = " ".join(t["config"]["task.assigned.partitions"] for t in tasks)
    assert f"{source}:{PARTITIONS}" in assigned, assigned

    records = mirrored(target, mirror_topic)
    by_partition: dict[int, list[int]] = {}
    for r in records:
        value = json.loads(r.value)
        assert value["p"] == r.partition
        by_partition.setdefault(r.partition, []).append(value["seq"])
    assert by_partition == {p: list(range(200)) for p in range(PARTITIONS + 1)}, "exactly once, in order"
    assert worker.task_states("grow") == ["RUNNING", "RUNNING"]
    assert "asked for new task configs" in worker.log_path.read_text(errors="replace")


# ============================================================================ MirrorSource


def test_mirror_source_copies_another_cluster_exactly_once_across_crashes(
    run_job, worker_props, topic_name, target, read_committed, bootstrap, tmp_path: Path
):
    """Both tasks SIGKILL their Python worker with records in an open transaction; Spark retries
    them. Every committed record of the source cluster arrives once, in order, none of an aborted
    transaction; a new generation started later copies only what is new."""
    source = topic_name("remote")
    admin = AdminClient({"bootstrap.servers": target})
    ensure_topic(admin, source, PARTITIONS, 1, config=SOURCE_TOPIC_SETTINGS, compacted=False)
    produce_sequences(target, source, 0, 300)
    produce_aborted(target, source, 20)
    markers = tmp_path / "markers"
    markers.mkdir()
    connector = {
        "name": "mm-source",
        "connector.class": "support.connectors.CrashingMirrorSourceConnector",
        "tasks.max": "2",
        "topics": source,
        "source.cluster.bootstrap.servers": target,
        "source.cluster.alias": "remote",
        "max.poll.records": "40",
        "transaction.boundary": "interval",
        "transaction.boundary.interval.ms": "500",
        "crash.after.polls": "3",
        "crash.marker.dir": str(markers),
        "exactly.once.support": "required",
    }
    worker = worker_props("enabled")
    mirror_topic = f"remote.{source}"
    job = run_job(connector, worker)
    wait_until(lambda: len(read_committed(mirror_topic)) >= 300 * PARTITIONS, 180, "the first records", job)
    produce_sequences(target, source, 300, 200)
    wait_until(lambda: len(read_committed(mirror_topic)) >= 500 * PARTITIONS, 120, "the new records", job)
    assert all(o["state"] == "STOPPED" for o in job.stop())
    assert len(list(markers.iterdir())) == 2, "both tasks must have crashed once"
    assert_exactly_once(read_committed(mirror_topic), 500)

    produce_sequences(target, source, 500, 100)
    job = run_job(connector, worker, generation=1, previous_task_count=2)
    wait_until(lambda: len(read_committed(mirror_topic)) >= 600 * PARTITIONS, 120, "the last records", job)
    job.stop()
    assert_exactly_once(read_committed(mirror_topic), 600)
    assert topic_settings(bootstrap, mirror_topic) == COPIED_SETTINGS


def test_mirror_source_offset_syncs_stay_exact_while_another_producer_writes_the_target(
    run_job, worker_props, topic_name, target, read_committed, bootstrap
):
    """A columnar batch's offset syncs come from its first and last record's delivery reports, valid
    only if its records landed contiguously. With another producer writing into the same target
    partition and the mirror's producer sending one record per request, the two interleave; every
    committed sync must still map a source offset to the target offset of that very record's copy,
    the copies are exactly once, and every source offset translates exactly."""
    source = topic_name("remote")
    ensure_topic(AdminClient({"bootstrap.servers": target}), source, 1, 1, compacted=False)
    count = 1500
    producer = Producer({"bootstrap.servers": target, "enable.idempotence": True})
    for seq in range(count):
        producer.produce(source, json.dumps({"seq": seq}).encode(), None, 0)
    assert producer.flush(30) == 0
    mirror_topic = f"remote.{source}"
    ensure_topic(AdminClient({"bootstrap.servers": bootstrap}), mirror_topic, 1, 1, compacted=False)
    stop = threading.Event()

    def foreign_writes() -> None:
        other = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        n = 0
        while not stop.is_set():
            other.produce(mirror_topic, json.dumps({"foreign": n}).encode(), None, 0)
            n += 1
            other.poll(0.001)
        other.flush(30)

    writer = threading.Thread(target=foreign_writes, daemon=True)
    writer.start()
    connector = {
        "name": "mm-interleaved",
        "connector.class": "MirrorSource",
        "tasks.max": "1",
        "topics": source,
        "source.cluster.bootstrap.servers": target,
        "source.cluster.alias": "remote",
        "max.poll.records": "100",
        "transaction.boundary": "poll",
        "producer.override.linger.ms": "0",
        "producer.override.batch.size": "1",
        "exactly.once.support": "required",
    }

    def ours() -> list:
        return [r for r in read_committed(mirror_topic) if "seq" in json.loads(r.value)]

    try:
        job = run_job(connector, worker_props("enabled"))
        wait_until(lambda: len(ours()) >= count, 180, "the copies", job)
        job.stop()
    finally:
        stop.set()
        writer.join(60)
    copies = ours()
    assert [json.loads(r.value)["seq"] for r in copies] == list(range(count)), "duplicates, gaps or disorder"
    seq_at = {r.offset: json.loads(r.value)["seq"] for r in copies}
    foreign = [r.offset for r in read_committed(mirror_topic) if "foreign" in json.loads(r.value)]
    assert any(copies[0].offset < f < copies[-1].offset for f in foreign), "the writers did not overlap"
    index = OffsetSyncIndex()
    records = [
        (OffsetSync.decode(r.key, r.value), covered_from(r.headers))
        for r in read_committed(offset_syncs_topic("remote"))
        if r.key is not None and r.value is not None
    ]
    records = [(s, start) for s, start in records if s.topic == source]
    syncs = [s for s, _start in records]
    assert syncs and max(s.upstream_offset for s in syncs) == count - 1
    for sync, start in records:
        # The source was written in one go by an idempotent producer: source offset == seq.
        assert seq_at.get(sync.downstream_offset) == sync.upstream_offset, f"{sync} is not exact"
        index.add(sync, start)  # with its coverage (transactions sent again after an abort too)
    copy_offsets = [r.offset for r in copies]
    for committed in range(count):
        translated = index.translate(source, 0, committed)
        assert translated is not None
        first_at_or_after = bisect.bisect_left(copy_offsets, translated)
        assert first_at_or_after == committed, f"source offset {committed} translates to {translated}"


def test_at_least_once_mirror_stopped_before_any_offset_flush_repeats_nothing(
    run_job, worker_props, topic_name, target, read_committed
):
    """Issue 24's finding, at the runtime: a mirror without exactly once, stopped cleanly before
    `offset.flush.interval.ms` came round, then restarted with exactly once on, copied everything
    again. The clean stop commits its source offsets, so the restart copies only what is new."""
    source = topic_name("remote")
    ensure_topic(AdminClient({"bootstrap.servers": target}), source, PARTITIONS, 1, compacted=False)
    produce_sequences(target, source, 0, 400)
    connector = {
        "name": "mm-clean-stop",
        "connector.class": "MirrorSource",
        "tasks.max": "2",
        "topics": source,
        "source.cluster.bootstrap.servers": target,
        "source.cluster.alias": "remote",
    }
    worker = worker_props("disabled", offset_flush_interval_ms="3600000")
    mirror_topic = f"remote.{source}"
    job = run_job(connector, worker)
    wait_until(lambda: len(read_committed(mirror_topic)) >= 400 * PARTITIONS, 180, "the copy", job)
    assert all(o["state"] == "STOPPED" for o in job.stop())

    produce_sequences(target, source, 400, 100)
    exactly_once = {**worker, "exactly.once.source.support": "enabled", "offset.flush.interval.ms": "500"}
    job = run_job(connector, exactly_once, generation=1, previous_task_count=2)
    wait_until(lambda: len(read_committed(mirror_topic)) >= 500 * PARTITIONS, 120, "the new records", job)
    job.stop()
    assert_exactly_once(read_committed(mirror_topic), 500)
