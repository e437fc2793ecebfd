"""MirrorMaker 2 dedicated mode and consumer-group failover, on two real clusters.

Cluster A is the session broker, cluster B a second single-broker cluster (module scope). A
transactional producer writes A's topic in transactions of random sizes, some aborted, so A's
offsets have gaps (markers, aborted records) that the copy on B does not have at the same places:
translation really has to translate. A consumer group reads A (read_committed), committing after
each batch, and stops mid-stream; the group then resumes on B from the translated offsets, and
every record must be processed exactly once over both clusters, none twice, none missed.

The same scenario runs on Apache Kafka's own MirrorMaker 2 (dedicated mode, its defaults) and the
number of records its group reprocesses is measured and printed: that is its behaviour, reported,
not asserted.
"""

from __future__ import annotations

import itertools
import json
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import javaproperties
import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.connectors.mirror_formats import Checkpoint, Heartbeat, checkpoints_topic
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.storage.topic_reader import read_to_end
from eosconnect.tools.mirror_maker_process import EosMirrorMakerProcess
from support.runtime_helpers import wait_until
from support.workers import LONG_TESTS

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PARTITIONS = 2
_aliases = itertools.count(1)
#: Records per phase of the two-way and migration scenarios: `make test` runs them bounded,
#: `make test-long` (EOSCONNECT_LONG_TESTS=1) with more records.
PHASE = 500 if LONG_TESTS else 150


@pytest.fixture(scope="module")
def cluster_b(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster = LocalKafkaCluster(tmp_path_factory.mktemp("cluster-b"), brokers=1, tie_to_parent=True)
    cluster.start()
    yield cluster.bootstrap_servers
    cluster.stop()


# ----------------------------------------------------------------------------- the scenario
def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)


def produce(bootstrap: str, topic: str, seqs: range, rng: random.Random) -> list[int]:
    """Records {"seq": n} in transactions of 1-20 records, about one in six aborted; returns the
    committed sequence numbers."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-{seqs.start}"})
    producer.init_transactions(30)
    committed: list[int] = []
    todo = list(seqs)
    while todo:
        size = rng.randint(1, 20)
        batch, todo = todo[:size], todo[size:]
        producer.begin_transaction()
        for seq in batch:
            producer.produce(topic, json.dumps({"seq": seq}).encode(), str(seq).encode(), seq % PARTITIONS)
        if rng.random() < 0.16:
            producer.flush(30)
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
            committed.extend(batch)
    return committed


def consume(
    bootstrap: str, topic: str, group: str, *, stop_after: int | None = None, idle_s: float = 8.0
) -> list[int]:
    """Process records as a group member (read_committed, a synchronous commit after each batch)
    until `stop_after` records are processed, or nothing came for `idle_s`; the processed sequence
    numbers, in order (duplicates kept)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    processed: list[int] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < idle_s:
            batch = [m for m in consumer.consume(50, 1.0) if m.error() is None]
            if not batch:
                continue
            last = time.monotonic()
            processed.extend(json.loads(m.value())["seq"] for m in batch)
            consumer.commit(asynchronous=False)
            if stop_after is not None and len(processed) >= stop_after:
                break
    finally:
        consumer.close()
    return processed


def committed_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(30)
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}


def latest_checkpoints(bootstrap: str, source_alias: str, group: str) -> dict[tuple[str, int], Checkpoint]:
    try:
        records = read_to_end({"bootstrap.servers": bootstrap}, checkpoints_topic(source_alias), timeout=30)
    except KafkaException:
        return {}
    latest: dict[tuple[str, int], Checkpoint] = {}
    for record in records:
        if record.key is not None and record.value is not None:
            checkpoint = Checkpoint.decode(record.key, record.value)
            if checkpoint.group == group:
                latest[(checkpoint.topic, checkpoint.partition)] = checkpoint
    return latest


def target_count(bootstrap: str, topic: str) -> int:
    try:
        return len(read_to_end({"bootstrap.servers": bootstrap}, topic, timeout=30))
    except KafkaException:
        return 0


@dataclass
class Failover:
    """What the group processed on each side, and what it should have."""

    committed: list[int]
    on_a: list[int]
    on_b: list[int]

    @property
    def reprocessed(self) -> int:
        """Processings beyond the first of each record (on B again, or twice on B)."""
        return len(self.on_a) + len(self.on_b) - len(set(self.on_a) | set(self.on_b))

    @property
    def missed(self) -> int:
        return len(set(self.committed) - set(self.on_a) - set(self.on_b))

    def figures(self, who: str) -> str:
        return (
            f"{who}: {len(self.committed)} committed records, {len(self.on_a)} processed on A before the "
            f"failover, {len(self.on_b)} on B after it: {self.reprocessed} reprocessed, {self.missed} missed"
        )


CHECKPOINTS_OF_LAST_COMMIT = "checkpoints of the group's last commit on A"


def run_failover(
    a: str,
    b: str,
    topic: str,
    group: str,
    source_alias: str,
    target_topic: str,
    start_mirror: Callable[[], object],
    resume_on_b: Callable[[dict[tuple[str, int], Checkpoint]], None],
    seed: int,
    checkpoint_timeout: float = 120,
) -> Failover:
    rng = random.Random(seed)
    create_topic(a, topic)
    committed = produce(a, topic, range(0, 600), rng)
    # The group exists on A before the mirror starts (MM2 lists groups only every
    # refresh.groups.interval.seconds); it reads part of the first records.
    on_a = consume(a, topic, group, stop_after=120)
    start_mirror()
    on_a += consume(a, topic, group, stop_after=200)  # mid-stream: it stops here for good
    committed += produce(a, topic, range(600, 1000), rng)
    wait_until(lambda: target_count(b, target_topic) >= len(committed), 180, "the copy on B")
    on_a_offsets = committed_offsets(a, group)

    def caught_up() -> dict[tuple[str, int], Checkpoint] | None:
        latest = latest_checkpoints(b, source_alias, group)
        upstream = {(topic, p): cp.upstream_offset for (_t, p), cp in latest.items()}
        return latest if upstream == on_a_offsets else None

    wait_until(lambda: caught_up() is not None, checkpoint_timeout, CHECKPOINTS_OF_LAST_COMMIT)
    resume_on_b(caught_up() or {})
    on_b = consume(b, target_topic, group)
    return Failover(committed, on_a, on_b)


def wait_for_group_offsets(b: str, group: str, wanted: dict[tuple[str, int], int]) -> None:
    wait_until(lambda: committed_offsets(b, group) == wanted, 120, f"group {group} synced on B: {wanted}")


# ----------------------------------------------------------------------------- eosconnect
def mm2_properties(aliases: tuple[str, str], a: str, b: str, tmp: str, **extra: str) -> dict[str, str]:
    x, y = aliases
    props = {
        "clusters": f"{x}, {y}",
        f"{x}.bootstrap.servers": a,
        f"{y}.bootstrap.servers": b,
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        "refresh.topics.interval.seconds": "5",
        "spark.master": "local[6,4]",
        "spark.driver.memory": "768m",
        "task.shutdown.graceful.timeout.ms": "3000",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "status.storage.partitions": "1",
        "offset.storage.partitions": "1",
    }
    for alias in aliases:
        props[f"{alias}.exactly.once.source.support"] = "enabled"
        props[f"{alias}.offset.flush.interval.ms"] = "1000"
        props[f"{alias}.group.id"] = f"eosconnect-mm2-{alias}-{tmp}"
    props.update(extra)
    return props


@pytest.mark.parametrize("connector_type", ["source", "sink"])
def test_group_fails_over_to_b_exactly_once(
    connector_type: str, bootstrap: str, cluster_b: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """source: MirrorSource, offsets synced to the idle group on B by MirrorCheckpoint
    (sync.group.offsets.enabled). sink: exactly-once MirrorSink (transaction.producer=true), offsets
    moved by `eosconnect mirror translate-offsets --commit`."""
    n = next(_aliases)
    x, y = f"a{n}", f"b{n}"
    topic, group = f"orders{n}", f"dr-group-{n}"
    flow = {
        f"{x}->{y}.enabled": "true",
        f"{x}->{y}.topics": topic,
        f"{x}->{y}.connector.type": connector_type,
    }
    if connector_type == "source":
        flow["sync.group.offsets.enabled"] = "true"
    else:
        flow[f"{x}->{y}.transaction.producer"] = "true"
        flow[f"{x}->{y}.transaction.commit.interval.ms"] = "1000"
    props = mm2_properties((x, y), bootstrap, cluster_b, str(n), **flow)
    mirror = EosMirrorMakerProcess(tmp_path / "mm", props, [y])
    target_topic = f"{x}.{topic}"

    def resume_on_b(latest: dict[tuple[str, int], Checkpoint]) -> None:
        wanted = {(cp.topic, cp.partition): cp.downstream_offset for cp in latest.values()}
        if connector_type == "source":
            wait_for_group_offsets(cluster_b, group, wanted)
        else:
            config = tmp_path / "mm2.properties"
            config.write_text(javaproperties.dumps(props, timestamp=False))
            out = subprocess.run(
                [sys.executable, "-m", "eosconnect.cli", "mirror", "translate-offsets", "--group", group,
                 "--source", x, "--target", y, "--config", str(config), "--commit"],
                capture_output=True, text=True, timeout=120, check=True,
            )  # fmt: skip
            translated = {(e["topic"], e["partition"]): e["offset"] for e in json.loads(out.stdout)}
            assert translated == wanted
            assert committed_offsets(cluster_b, group) == wanted
        mirror.stop()

    try:
        result = run_failover(
            bootstrap, cluster_b, topic, group, x, target_topic, mirror.start, resume_on_b, seed=n
        )
        heartbeats = read_to_end({"bootstrap.servers": cluster_b}, "heartbeats", timeout=30)
    finally:
        mirror.stop()
    with capsys.disabled():
        print("\n" + result.figures(f"eosconnect MirrorMaker ({connector_type})"))
    assert result.on_b, "the group resumed on B"
    assert result.reprocessed == 0 and result.missed == 0, result.figures("eosconnect")
    assert sorted(result.on_a + result.on_b) == sorted(result.committed)
    assert any(Heartbeat.decode(r.key, r.value).source_alias == x for r in heartbeats if r.key)


@pytest.mark.timeout(900)
def test_dedicated_mode_both_ways_with_a_worker_sigkilled(
    bootstrap: str, cluster_b: str, tmp_path: Path
) -> None:
    """A->B (MirrorSource) and B->A (exactly-once MirrorSink) from one mm2.properties, one
    mirror-maker process per target; B's is SIGKILLed mid-stream and restarted. Both copies hold
    every committed record once, and nothing is copied back (no cycles)."""
    n = next(_aliases)
    x, y = f"a{n}", f"b{n}"
    topic = f"both{n}"
    props = mm2_properties(
        (x, y),
        bootstrap,
        cluster_b,
        str(n),
        **{
            f"{x}->{y}.enabled": "true",
            f"{y}->{x}.enabled": "true",
            "topics": f"{topic}|heartbeats",
            f"{y}->{x}.connector.type": "sink",
            f"{y}->{x}.transaction.producer": "true",
            f"{y}->{x}.transaction.commit.interval.ms": "1000",
        },
    )
    create_topic(bootstrap, topic)
    create_topic(cluster_b, topic)
    rng = random.Random(n)
    into_a = EosMirrorMakerProcess(tmp_path / "into-a", props, [x])
    into_b = EosMirrorMakerProcess(tmp_path / "into-b", props, [y])
    try:
        into_a.launch()
        into_b.launch().wait_ready()
        into_a.wait_ready()
        from_a = produce(bootstrap, topic, range(0, PHASE), rng)
        from_b = produce(cluster_b, topic, range(10_000, 10_000 + PHASE), rng)
        wait_until(lambda: target_count(cluster_b, f"{x}.{topic}") > 0, 120, "copying into B")
        into_b.kill()
        from_a += produce(bootstrap, topic, range(PHASE, 2 * PHASE), rng)
        into_b.start()
        from_b += produce(cluster_b, topic, range(10_000 + PHASE, 10_000 + 2 * PHASE), rng)
        wait_until(lambda: target_count(cluster_b, f"{x}.{topic}") >= len(from_a), 180, "A's records on B")
        wait_until(lambda: target_count(bootstrap, f"{y}.{topic}") >= len(from_b), 180, "B's records on A")
        time.sleep(3)  # anything extra (a duplicate) would arrive now
        for where, copy, wanted in ((cluster_b, f"{x}.{topic}", from_a), (bootstrap, f"{y}.{topic}", from_b)):
            seqs = [json.loads(r.value)["seq"] for r in read_to_end({"bootstrap.servers": where}, copy)]
            assert sorted(seqs) == sorted(wanted), f"{copy}: duplicates or gaps"
        admin_b = AdminClient({"bootstrap.servers": cluster_b})
        assert f"{y}.{x}.{topic}" not in admin_b.list_topics(timeout=30).topics, "a cycle"
        # Each side's heartbeats reached the other side, MM2's way of showing the topology.
        assert target_count(cluster_b, f"{x}.heartbeats") > 0
    finally:
        into_a.stop()
        into_b.stop()
        for proc in (into_a, into_b):
            proc.signal(signal.SIGKILL)


# ----------------------------------------------------------------------------- Apache Kafka's MM2
@pytest.mark.skipif(
    not LONG_TESTS,
    reason="the Apache MirrorMaker 2 yardstick (figures printed, not judged) runs in `make test-long`: "
    "in the last CI runs its checkpoints never came (skipped after 240 s and 120 s)",
)
def test_apache_mirror_maker_2_on_the_same_failover(
    bootstrap: str, cluster_b: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Apache Kafka's MirrorMaker 2, dedicated mode, default (approximate) translation with
    sync.group.offsets: how many records does the group reprocess after the same failover?"""
    from eosconnect.devkafka.kafka_connect import MirrorMakerProcess

    n = next(_aliases)
    x, y = f"m{n}", f"n{n}"
    topic, group = f"orders{n}", f"dr-group-{n}"
    props = {
        "clusters": f"{x}, {y}",
        f"{x}.bootstrap.servers": bootstrap,
        f"{y}.bootstrap.servers": cluster_b,
        f"{x}->{y}.enabled": "true",
        f"{x}->{y}.topics": topic,
        "replication.factor": "1",
        "checkpoints.topic.replication.factor": "1",
        "heartbeats.topic.replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "true",
        "sync.group.offsets.interval.seconds": "1",
        "refresh.groups.interval.seconds": "1",
        "refresh.topics.interval.seconds": "5",
    }
    mirror = MirrorMakerProcess(tmp_path / "mm2", mm2_props=props, clusters=[y])

    def resume_on_b(latest: dict[tuple[str, int], Checkpoint]) -> None:
        wanted = {(cp.topic, cp.partition): cp.downstream_offset for cp in latest.values()}
        wait_for_group_offsets(cluster_b, group, wanted)
        mirror.stop()

    try:
        result = run_failover(
            bootstrap,
            cluster_b,
            topic,
            group,
            x,
            f"{x}.{topic}",
            mirror.start,
            resume_on_b,
            seed=n,
            checkpoint_timeout=120,
        )
    except pytest.fail.Exception as timed_out:
        # The yardstick, not eosconnect: Apache MM2's checkpoint task sometimes emits nothing for
        # a group that stopped committing (seen in CI runs after 120 s and after 240 s alike). There
        # is then no failover of Java's to measure; eosconnect's own forms above still assert.
        if CHECKPOINTS_OF_LAST_COMMIT not in str(timed_out):
            raise
        pytest.skip(f"Apache MirrorMaker 2 gave no figures to compare: {timed_out}")
    finally:
        mirror.stop()
    with capsys.disabled():
        print("\n" + result.figures("Apache Kafka MirrorMaker 2"))
    # Measured, not judged: Java's reprocessed/missed figures are printed above; what must hold is
    # that the group resumed on B at all.
    assert result.on_b, "the group read nothing on B after Apache MirrorMaker 2's failover"


@pytest.mark.long
@pytest.mark.timeout(900)
def test_migration_source_to_sink_and_at_least_once_to_exactly_once(
    bootstrap: str, cluster_b: str, tmp_path: Path
) -> None:
    """KIP-656's migrations, with records produced all along: x->y goes from connector.type=source
    to sink (transaction.producer=true), resuming from the offset syncs the source mirror committed;
    z->y (the same cluster under a second alias) goes from transaction.producer=false to true,
    resuming from the source group the at-least-once mirror committed when it stopped. Each copy
    holds every committed record once."""
    n = next(_aliases)
    x, y, z = f"a{n}", f"b{n}", f"c{n}"
    t1, t2 = f"migrate-type{n}", f"migrate-txn{n}"

    def props(second_phase: bool) -> dict[str, str]:
        base = mm2_properties((x, y), bootstrap, cluster_b, str(n))
        base["clusters"] = f"{x}, {y}, {z}"
        base[f"{z}.bootstrap.servers"] = bootstrap
        base.update(
            {
                f"{x}->{y}.enabled": "true",
                f"{x}->{y}.topics": t1,
                f"{x}->{y}.connector.type": "sink" if second_phase else "source",
                f"{z}->{y}.enabled": "true",
                f"{z}->{y}.topics": t2,
                f"{z}->{y}.connector.type": "sink",
                f"{z}->{y}.transaction.producer": "true" if second_phase else "false",
                "emit.checkpoints.enabled": "false",
            }
        )
        if second_phase:
            base[f"{x}->{y}.transaction.producer"] = "true"
        return base

    create_topic(bootstrap, t1)
    create_topic(bootstrap, t2)
    rng = random.Random(n)
    committed: dict[str, list[int]] = {t1: [], t2: []}
    stop = threading.Event()

    def keep_producing() -> None:
        start = 0
        while not stop.is_set() and start < 4000:  # bounded
            for topic in (t1, t2):
                committed[topic] += produce(bootstrap, topic, range(start, start + 40), rng)
            start += 40
            time.sleep(0.5)

    first = EosMirrorMakerProcess(tmp_path / "first", props(False), [y])
    second = EosMirrorMakerProcess(tmp_path / "second", props(True), [y])
    producer = threading.Thread(target=keep_producing, daemon=True)
    copies = ((t1, f"{x}.{t1}"), (t2, f"{z}.{t2}"))
    try:
        first.start()
        producer.start()
        for _topic, copy in copies:
            wait_until(lambda c=copy: target_count(cluster_b, c) > 50, 180, f"the first phase copying {copy}")
        first.stop()  # gracefully, as the migration guide says, while records keep coming
        stop.set()
        producer.join(120)
        # Records written while no mirror runs, and after the new one started: phase two must copy.
        for topic in (t1, t2):
            committed[topic] += produce(bootstrap, topic, range(5000, 5200), rng)
        before = {copy: target_count(cluster_b, copy) for _topic, copy in copies}
        second.start()
        for topic in (t1, t2):
            committed[topic] += produce(bootstrap, topic, range(6000, 6200), rng)
        for topic, copy in copies:
            wait_until(lambda c=copy, t=topic: target_count(cluster_b, c) >= len(committed[t]), 180, copy)
            assert before[copy] < len(committed[topic]), f"{copy}: the second phase had nothing to copy"
        time.sleep(3)  # a duplicate would arrive now
        for topic, copy in copies:
            seqs = [json.loads(r.value)["seq"] for r in read_to_end({"bootstrap.servers": cluster_b}, copy)]
            assert len(seqs) == len(set(seqs)), f"{copy}: {len(seqs) - len(set(seqs))} duplicates"
            assert sorted(seqs) == sorted(committed[topic]), f"{copy}: records missing"
    finally:
        stop.set()
        first.stop()
        second.stop()


# ----------------------------------------------------------------------------- late enable
def every_offset_translates_exactly_or_not(a: str, b: str, topic: str, alias: str, target_topic: str) -> int:
    """For every offset C of every partition of `topic` on A (a group committed there): the offset
    syncs on B translate it to a T from which a read_committed consumer of the copy reads exactly
    the records at and after C - none skipped, none read twice, none from before C - or refuse it
    with a reason. Returns how many offsets translated."""
    from eosconnect.connectors.mirror_syncs import read_sync_index

    index = read_sync_index({"bootstrap.servers": b}, alias)
    source = read_to_end({"bootstrap.servers": a}, topic)
    copy = read_to_end({"bootstrap.servers": b}, target_topic)
    translated = 0
    for partition in range(PARTITIONS):
        on_a = [(r.offset, json.loads(r.value)["seq"]) for r in source if r.partition == partition]
        on_b = [(r.offset, json.loads(r.value)["seq"]) for r in copy if r.partition == partition]
        for c in range(0, on_a[-1][0] + 2):
            result = index.lookup(topic, partition, c)
            if result.offset is None:
                continue
            translated += 1
            read = [seq for offset, seq in on_b if offset >= result.offset]
            wanted = {seq for offset, seq in on_a if offset >= c}
            skipped, repeated = len(wanted - set(read)), len(read) - len(set(read) & wanted)
            assert (skipped, repeated) == (0, 0), f"{topic}-{partition} offset {c} -> {result.offset}"
    return translated


@pytest.mark.parametrize("connector_type", ["source", pytest.param("sink", marks=pytest.mark.long)])
def test_late_enabled_exactly_once_fails_over_exactly_or_not_at_all(
    connector_type: str, bootstrap: str, cluster_b: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 24's finding: a flow mirrored without exactly once (so without offset syncs), then
    restarted with it. Group `app` committed on A before the first sync: it gets no checkpoint and
    no offset on B, a WARN names it, `translate-offsets` refuses it; group `late`, committed after
    the restart, fails over with 0 skipped and 0 reprocessed; and every offset of the topic either
    translates exactly or not at all."""
    n = next(_aliases)
    x, y = f"a{n}", f"b{n}"
    topic, target_topic = f"late{n}", f"{x}.late{n}"
    app, late = f"app{n}", f"late-group{n}"
    rng = random.Random(n)
    flow = {
        f"{x}->{y}.enabled": "true",
        f"{x}->{y}.topics": topic,
        f"{x}->{y}.connector.type": connector_type,
    }
    without = mm2_properties((x, y), bootstrap, cluster_b, str(n), **flow)
    with_eos = dict(without, **{"sync.group.offsets.enabled": "true"})
    if connector_type == "source":
        del without[f"{y}.exactly.once.source.support"]
    else:
        with_eos[f"{x}->{y}.transaction.producer"] = "true"
        with_eos[f"{x}->{y}.transaction.commit.interval.ms"] = "1000"
    first = EosMirrorMakerProcess(tmp_path / "first", without, [y])
    second = EosMirrorMakerProcess(tmp_path / "second", with_eos, [y])
    create_topic(bootstrap, topic)
    committed = produce(bootstrap, topic, range(0, 150), rng)
    consume(bootstrap, topic, app, stop_after=40)
    app_on_a = committed_offsets(bootstrap, app)
    assert app_on_a, "group app committed on A"
    try:
        first.start()
        assert "writes no offset syncs" in first.log_path.read_text(), "no start-up warning"
        wait_until(lambda: target_count(cluster_b, target_topic) >= len(committed), 180, "the first copy")
        time.sleep(3)  # the at-least-once mirror's offsets flush (offset.flush.interval.ms=1000)
        first.stop()
        second.start()
        committed += produce(bootstrap, topic, range(150, 300), rng)
        wait_until(lambda: target_count(cluster_b, target_topic) >= len(committed), 180, "the second copy")
        late_on_a = consume(bootstrap, topic, late, idle_s=4)
        # Records after the group's last commit: an offset past the last copy (a caught-up group
        # commits past the transaction markers) waits for the mirror's next copy.
        committed += produce(bootstrap, topic, range(300, 360), rng)
        wait_until(lambda: target_count(cluster_b, target_topic) >= len(committed), 180, "the third copy")
        late_offsets = committed_offsets(bootstrap, late)

        def upstream() -> dict[tuple[str, int], int]:
            latest = latest_checkpoints(cluster_b, x, late)
            return {(topic, p): cp.upstream_offset for (_t, p), cp in latest.items()}

        wait_until(lambda: upstream() == late_offsets, 120, "checkpoints of group late")
        for (_topic, partition), offset in app_on_a.items():
            line = f"no checkpoint for group {app} on {topic}-{partition}: its committed offset {offset} "
            wait_until(lambda line=line: line in second.log_path.read_text(), 60, f"the WARN: {line}")
        config = tmp_path / "mm2.properties"
        config.write_text(javaproperties.dumps(with_eos, timestamp=False))
        command = [sys.executable, "-m", "eosconnect.cli", "mirror", "translate-offsets", "--source", x,
                   "--target", y, "--config", str(config)]  # fmt: skip
        refused = subprocess.run([*command, "--group", app], capture_output=True, text=True, timeout=120)
        if connector_type == "sink":
            subprocess.run([*command, "--group", late, "--commit"], check=True, timeout=120)
        latest = latest_checkpoints(cluster_b, x, late)
        wait_for_group_offsets(cluster_b, late, {key: cp.downstream_offset for key, cp in latest.items()})
        second.stop()
        translated = every_offset_translates_exactly_or_not(bootstrap, cluster_b, topic, x, target_topic)
        warned = [
            line
            for line in second.log_path.read_text().splitlines()
            if f"no checkpoint for group {app} " in line and "committed offset" in line
        ]
    finally:
        first.stop()
        second.stop()
    with capsys.disabled():
        print(f"\n{connector_type}: {warned[0]}")
        print(f"translate-offsets --group app (exit {refused.returncode}):\n{refused.stderr}")
    # Group app: nothing on B, said once per partition.
    assert latest_checkpoints(cluster_b, x, app) == {}
    assert committed_offsets(cluster_b, app) == {}
    assert len(warned) == len(app_on_a), warned
    assert refused.returncode == 1 and refused.stdout == ""
    for (_topic, partition), offset in app_on_a.items():
        assert f"{topic}-{partition}: its committed offset {offset} cannot be translated" in refused.stderr
    # Group late fails over exactly; the translation rule holds for every offset of the topic.
    result = Failover(committed, late_on_a, consume(cluster_b, target_topic, late, idle_s=4))
    assert result.reprocessed == 0 and result.missed == 0, result.figures(late)
    assert translated > 0
