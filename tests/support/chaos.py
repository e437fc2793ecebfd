"""Helpers for the chaos tests (tests/soak, tests/integration/test_broker_restart.py): a live
read_committed follower of SequenceSource output, replication checks for the three-broker cluster,
and the worker-log scan for tracebacks.

The follower is the live half of the referee: it sees a gap, a duplicate or a reordering the
moment it is committed and notes the wall-clock time, so that an anomaly can be matched with the
fault that caused it. The final verdict is still `eosconnect.tools.verify`'s, over the whole topic.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic

from eosconnect.api.records import TopicPartition as OurTopicPartition
from eosconnect.connectors.sequence import parse_value
from eosconnect.devkafka import LocalKafkaCluster
from eosconnect.runtime.fetch_stall import FetchStallWatch
from eosconnect.runtime.task import TaskLogAdapter
from eosconnect.tools.verify import verify_sequence_topic
from eosconnect.tools.worker_process import WorkerProcess

__all__ = [
    "Client",
    "SequenceFollower",
    "Timeline",
    "client_settings",
    "clock",
    "committed_offsets",
    "create_replicated_topic",
    "data_leaders",
    "endless_sequence",
    "group_coordinator",
    "holds_exactly_the_committed",
    "log_problems",
    "replicated_worker_settings",
    "tracebacks",
    "under_replicated",
    "unexpected_problems",
    "wait_for_progress",
    "wait_fully_replicated",
]


#: How the helpers reach the cluster: bootstrap servers (plaintext), or librdkafka client settings
#: (`LocalKafkaCluster.client_config()`: a secured cluster's principal).
Client = str | Mapping[str, str]


def client_settings(client: Client) -> dict[str, str]:
    """librdkafka settings of `client` (bootstrap servers alone, or settings as they are)."""
    return {"bootstrap.servers": client} if isinstance(client, str) else dict(client)


def endless_sequence(topic: str, tasks: int, rate: int) -> dict[str, str]:
    """An unbounded SequenceSource config: task i writes (i, 0), (i, 1), ... at `rate` records/s."""
    return {
        "connector.class": "SequenceSource",
        "tasks.max": str(tasks),
        "topic": topic,
        "records.per.task": "-1",
        "batch.size": "20",
        "rate.per.task": str(rate),
        "payload.bytes": "10",
    }


def replicated_worker_settings(cluster: LocalKafkaCluster, replication: int = 3) -> dict[str, str]:
    """Worker overrides (for the `workers` fixture) that put its internal topics on `cluster`
    with `replication` replicas each."""
    return {
        "bootstrap.servers": cluster.bootstrap_servers,
        "offset.storage.replication.factor": str(replication),
        "config.storage.replication.factor": str(replication),
        "status.storage.replication.factor": str(replication),
    }


def create_replicated_topic(
    client: Client,
    name: str,
    partitions: int,
    replication: int = 3,
    min_isr: int = 2,
    compacted: bool = False,
) -> str:
    admin = AdminClient({**client_settings(client), "log_level": 0})
    config = {"min.insync.replicas": str(min_isr)}
    if compacted:
        config["cleanup.policy"] = "compact"
    for future in admin.create_topics([NewTopic(name, partitions, replication, config=config)]).values():
        future.result(30)
    return name


def under_replicated(client: Client) -> list[str]:
    """Partitions (of every topic) without a leader or with fewer in-sync replicas than replicas."""
    admin = AdminClient({**client_settings(client), "log_level": 0})
    metadata = admin.list_topics(timeout=10)
    short = []
    for topic in metadata.topics.values():
        for p in topic.partitions.values():
            if p.leader < 0 or len(p.isrs) < len(p.replicas):
                short.append(f"{topic.topic}-{p.id} (leader {p.leader}, isr {p.isrs}, replicas {p.replicas})")
    return short


def wait_fully_replicated(client: Client, timeout: float = 120.0) -> None:
    """Every partition has a leader and all its replicas in sync: a broker may be taken down."""
    deadline = time.monotonic() + timeout
    short: list[str] = []
    while time.monotonic() < deadline:
        try:
            short = under_replicated(client)
        except Exception as exc:  # metadata request timed out while a broker restarts
            short = [repr(exc)]
        if not short:
            return
        time.sleep(0.5)
    raise AssertionError(f"the cluster did not get fully replicated within {timeout:.0f}s: {short[:10]}")


def data_leaders(client: Client, topic: str) -> dict[int, int]:
    """Partition -> leader broker id of `topic`."""
    admin = AdminClient({**client_settings(client), "log_level": 0})
    metadata = admin.list_topics(topic, timeout=10)
    return {p.id: p.leader for p in metadata.topics[topic].partitions.values()}


def group_coordinator(client: Client, group: str) -> int:
    """The broker id coordinating consumer group `group` (for a group with committed offsets only)."""
    admin = AdminClient({**client_settings(client), "log_level": 0})
    return admin.describe_consumer_groups([group], request_timeout=10)[group].result(15).coordinator.id


def _close_quietly(consumer: Consumer) -> None:
    with contextlib.suppress(Exception):
        consumer.close()


def clock() -> str:
    return datetime.now().strftime("%H:%M:%S.%f")[:-3]


class SequenceFollower:
    """Follows a SequenceSource topic with read_committed from a background thread.

    Per task (= source partition = record key) it keeps the highest committed sequence number and
    checks, record by record, that each one is the previous one plus one: one task's records all go
    to one Kafka partition, in order, so anything else is a gap, a duplicate or a reordering. Those
    are collected in `anomalies` with the wall-clock time they were read.

    Its librdkafka consumer can stop fetching a partition after a broker restart, as the sink tasks'
    consumers can (runtime/fetch_stall.py): the 20-minute soak then failed for want of progress it
    could not see, while the topic held minutes of committed records (seed 1350680724's second
    replay). The runtime's own `FetchStallWatch` seeks such partitions again here too; each time is
    kept in `reseeks`, which the soak reports. A seek did not always help: a soak-long run
    (seed 635431205) failed at its end because this reader got nothing for five minutes while the
    mirror topic held every record, committed (read back from the kept segments). So after
    `RECREATE_AFTER_S` without a record the reader also starts a new consumer at its positions (the
    soak's own instrument, not the runtime under test; harmless when the topic was just quiet).
    """

    #: No record for this long (more than twice the stall watch's `STALL_S`, less than the soak's
    #: recovery window): a new consumer takes over at the positions reached.
    RECREATE_AFTER_S = 90.0

    def __init__(self, client: Client, topic: str, partitions: int) -> None:
        self.topic = topic
        self._settings = {
            **client_settings(client),
            "group.id": f"chaos-follower-{uuid.uuid4().hex[:8]}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": False,
            "log_level": 0,
        }
        self._consumer = Consumer(self._settings)
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self._recreated = time.monotonic()
        self._lock = threading.Lock()
        self._highest: dict[int, int] = {}
        self.count = 0
        self.anomalies: list[str] = []
        self.errors: list[str] = []
        #: When the stall watch sought partitions again, and which.
        self.reseeks: list[str] = []
        self._next_offsets = dict.fromkeys(range(partitions), 0)  # per partition, the next to read
        self._last_record = time.monotonic()
        log = TaskLogAdapter(logging.getLogger(__name__), {"id": f"follower of {topic}"})
        self._stall_watch = FetchStallWatch(log)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sequence-follower", daemon=True)

    def start(self) -> SequenceFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)
        self._consumer.close()

    def highest(self) -> dict[int, int]:
        with self._lock:
            return dict(self._highest)

    def _run(self) -> None:
        while not self._stop.is_set():
            messages = self._consumer.consume(500, 0.5)
            with self._lock:
                for message in messages:
                    error = message.error()
                    if error is not None:
                        if error.code() != KafkaError._PARTITION_EOF and len(self.errors) < 20:
                            self.errors.append(f"{clock()} {error}")
                        continue
                    self._last_record = time.monotonic()
                    self._next_offsets[message.partition()] = message.offset() + 1
                    self._note(message)
            self._watch_fetching()
            if time.monotonic() - max(self._last_record, self._recreated) > self.RECREATE_AFTER_S:
                self._recreate_consumer()

    def _recreate_consumer(self) -> None:
        """A new consumer at the positions reached; the old one closed (see the class docstring)."""
        idle_s = time.monotonic() - self._last_record
        old, self._consumer = self._consumer, Consumer(self._settings)
        # closed aside: a wedged client could take its time, and the reader must go on now
        threading.Thread(target=_close_quietly, args=(old,), name="follower-close", daemon=True).start()
        self._consumer.assign([TopicPartition(self.topic, p, o) for p, o in self._next_offsets.items()])
        self._recreated = time.monotonic()
        self.reseeks.append(
            f"{clock()} after {idle_s:.0f}s without a record: a new consumer at {self._next_offsets}"
        )

    def _watch_fetching(self) -> None:
        idle_s = time.monotonic() - self._last_record
        with contextlib.suppress(KafkaException):  # no leader answering now: the next check asks again
            sought = self._stall_watch.check(
                self._consumer,
                idle_s,
                lambda: {OurTopicPartition(self.topic, p): o for p, o in self._next_offsets.items()},
            )
            if sought:
                where = {tp.partition: self._next_offsets[tp.partition] for tp in sought}
                self.reseeks.append(f"{clock()} after {idle_s:.0f}s without a record: {where}")

    def _note(self, message: Message) -> None:
        """Check one committed record (under the lock); a subclass checks another topic's records."""
        partition, offset, value = message.partition(), message.offset(), message.value()
        self.count += 1
        try:
            task, seq = parse_value(value)
        except (ValueError, KeyError, TypeError) as exc:
            note = f"{clock()} partition {partition} offset {offset}: not a sequence ({exc!r})"
            self.anomalies.append(note)
            return
        expected = self._highest.get(task, -1) + 1
        if seq != expected:
            kind = "duplicate or reordering" if seq < expected else f"gap of {seq - expected}"
            if len(self.anomalies) < 50:
                self.anomalies.append(
                    f"{clock()} task {task}: read seq {seq} after {expected - 1} ({kind}) "
                    f"at partition {partition} offset {offset}"
                )
        self._highest[task] = max(seq, self._highest.get(task, -1))

    def wait_for_progress(
        self,
        tasks: Iterable[int],
        advance: int,
        timeout: float,
        what: str,
        alive: Callable[[], str | None] = lambda: None,
        since: dict[int, int] | None = None,
    ) -> float:
        """Wait until each task's committed sequence moved `advance` past `since` (default: now).

        Returns the seconds it took; fails naming `what` and the stuck tasks. `alive()` returns a
        reason to give up early (a dead worker), or None.
        """
        return wait_for_progress(
            self.highest,
            tasks,
            advance,
            timeout,
            what,
            alive,
            since,
            lambda: f"follower errors: {self.errors[-3:]}, sought again: {self.reseeks[-3:]}",
        )


class Timeline:
    """Prints each phase of a scenario with the seconds since the fault and the follower's view."""

    def __init__(self, follower: SequenceFollower) -> None:
        self.follower = follower
        self.began = time.monotonic()

    def restart(self) -> None:
        self.began = time.monotonic()

    def __call__(self, text: str) -> None:
        elapsed = time.monotonic() - self.began
        print(f"+{elapsed:5.1f}s {text}; committed {self.follower.highest()}", flush=True)


def committed_offsets(worker: WorkerProcess, source: str) -> dict[int, int]:
    """A source connector's committed source offsets: task -> last sequence number."""
    response = worker.request("GET", f"/connectors/{source}/offsets")
    assert response.status_code == 200, response.text
    return {e["partition"]["task"]: e["offset"]["seq"] for e in response.json()["offsets"]}


def holds_exactly_the_committed(
    client: Client, topic: str, follower: SequenceFollower, committed: dict[int, int]
) -> int:
    """After the source stopped: the topic (read_committed, from the start) holds every sequence
    number from 0 to each task's committed source offset once, and nothing more; the follower, read
    all along, ends at the same place (it may lag the stop by a moment). Returns the records seen."""
    report = verify_sequence_topic(client_settings(client), topic)  # no gap, no duplicate
    assert report.ok, report.anomalies
    assert report.seen == sum(seq + 1 for seq in committed.values()), (
        f"the topic holds {report.seen} records, the committed source offsets {committed} say otherwise"
    )
    follower.wait_for_progress(committed, 0, 60, "to the committed source offsets", since=committed)
    assert follower.highest() == committed, "the follower read past the committed source offsets"
    assert not follower.anomalies, follower.anomalies
    return report.seen


def wait_for_progress(
    highest: Callable[[], dict[int, int]],
    tasks: Iterable[int],
    advance: int,
    timeout: float,
    what: str,
    alive: Callable[[], str | None] = lambda: None,
    since: dict[int, int] | None = None,
    errors: Callable[[], str] = lambda: "",
) -> float:
    """Wait until each task's sequence as `highest()` sees it (a topic's, a table's) moved `advance`
    past `since` (default: now); the seconds it took. Fails naming `what`, the stuck tasks and
    `errors()`; `alive()` returns a reason to give up early (a dead worker), or None."""
    tasks = sorted(tasks)
    start = highest() if since is None else since
    began = time.monotonic()
    deadline = began + timeout
    while True:
        now = highest()
        stuck = {t: now.get(t, -1) for t in tasks if now.get(t, -1) < start.get(t, -1) + advance}
        if not stuck:
            return time.monotonic() - began
        reason = alive()
        if reason:
            raise AssertionError(f"{what}: {reason}")
        if time.monotonic() > deadline:
            detail = ", ".join(f"task {t} at seq {s} (from {start.get(t, -1)})" for t, s in stuck.items())
            raise AssertionError(
                f"no committed progress within {timeout:.0f}s {what}: {detail} "
                f"(need +{advance} each; {errors()})"
            )
        time.sleep(0.5)


TRACEBACK_START = "Traceback (most recent call last):"
#: Log lines at these levels are problems; librdkafka's own ERROR lines (eosconnect.kafka.*: connection
#: refused, transaction state) are expected whenever a broker goes away, its CRITICAL ones are not.
_PROBLEM = re.compile(r" (ERROR|CRITICAL) ")


def tracebacks(text: str) -> list[str]:
    """The exception line of every Python traceback in a log: `module.Error: message`."""
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip().endswith(TRACEBACK_START):
            j = i + 1
            while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
                j += 1
            # chained tracebacks ("During handling ...", "The above exception ...") are separate entries
            found.append(lines[j].strip() if j < len(lines) else "(truncated traceback)")
            i = j
        i += 1
    return found


def log_problems(text: str) -> list[str]:
    """Python tracebacks (their exception lines) and ERROR/CRITICAL lines of a worker log (the
    worker's, Spark's and the tasks' loggers), except librdkafka's ERROR chatter."""
    problems = [f"Traceback: {line}" for line in tracebacks(text)]
    for line in text.splitlines():
        if _PROBLEM.search(line) and " ERROR eosconnect.kafka." not in line:
            problems.append(line.strip())
    return problems


def unexpected_problems(problems: Iterable[str], expected: Iterable[str]) -> list[str]:
    """The problems that match none of the `expected` regular expressions."""
    patterns = [re.compile(p) for p in expected]
    return [p for p in problems if not any(pattern.search(p) for pattern in patterns)]
