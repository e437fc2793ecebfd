"""Electing one leader among the workers of a `group.id`, through Kafka's group coordinator.

Every worker joins the consumer group `group.id` subscribed to the single-partition config topic;
the group coordinator assigns that one partition to exactly one live member, and that member is the
leader. A dead or frozen leader stops heartbeating, its session expires (`session.timeout.ms`), and
the partition moves to another worker within seconds. The consumer never reads or commits: the
partition is paused as soon as it is assigned.

The assignment is cooperative-sticky: a worker that joins (or a frozen ex-leader that rejoins) does
not take the partition from the current leader, and the leader keeps it through the rebalances of
other members, so leadership, and with it every running task, moves only when the leader leaves or
dies. (With the range assignor the member whose id sorts first wins every rebalance: all tasks would
migrate to it, and the leader would briefly lose leadership at every join.)

A leader whose membership is *lost* (its group coordinator died, or could not be reached for
`session.timeout.ms`) is not demoted at once: it is "in doubt" for up to
`scheduled.rebalance.max.delay.ms`. It takes no leader action then (REST writes are forwarded, no
task is started or restarted, no status is published) but keeps its tasks running while it rejoins.
If the group gives it the partition back, it leads on without having stopped a task: a broker
restart under a lone worker restarts no task. If another worker is elected instead,
that worker fences these tasks before starting its own (KIP-618), so they can commit nothing, and
they are stopped when the grace ends. A partition *revoked* in an orderly rebalance, or a
`step_down()`, demotes at once.

A frozen ex-leader that wakes up may still believe it leads until its consumer notices the
rebalance; that is why every config-topic write of the leader goes through its transactional
producer, which the new leader fenced (docs/architecture.md).

Followers find the leader's REST URL in the group's description: each member's `client.id`
carries its URL. They do not ask while their own consumer is out of the group: one out of the group
knows no leader anyway, and its coordinator may be unreachable, where librdkafka 2.16's
DescribeConsumerGroups can abort the process once the connection comes back (use after free of the
request's `eonce`, rdkafka_queue.h `rd_kafka_enq_once_del_source_return: Assertion
'eonce->refcnt > 0' failed`: librdkafka issue 4605, whose fix is librdkafka PR 5397).

A consumer that has not been a settled member of the group for `STUCK_MEMBERSHIP_S` is replaced by a
new one (`MembershipWatch`): librdkafka's group state machine can stay stuck after its coordinator's
broker died and came back (it never sent a JoinGroup to the new coordinator for minutes in the chaos
soak, so a lone worker had no leader and ran no task); a new consumer looks the coordinator up afresh.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from eosconnect.storage.clients import client_config
from eosconnect.worker_config import WorkerConfig

log = logging.getLogger(__name__)

CLIENT_ID_PREFIX = "eosconnect-worker|"
#: How long the election's consumer may be out of a settled group membership (librdkafka's group
#: state `up` with join state `steady`) before a new consumer replaces it: well above the time a
#: rebalance or a coordinator move takes (seconds), well below the leader's doubt grace (60 s).
STUCK_MEMBERSHIP_S = 20.0
#: How often librdkafka reports the group state (its statistics) to `MembershipWatch`.
STATS_INTERVAL_MS = 2000


class MembershipWatch:
    """Whether a consumer has been out of a settled group membership for too long, from
    librdkafka's statistics (`statistics.interval.ms`): its `cgrp` object's `state` and
    `join_state`. Not thread-safe: its `on_stats` is served by `poll()` on the polling thread."""

    def __init__(self, stuck_after_s: float) -> None:
        self.stuck_after_s = stuck_after_s
        self.settled_at = time.monotonic()
        self.last_state = "unknown"

    def on_stats(self, stats_json: str) -> None:
        try:
            group = json.loads(stats_json).get("cgrp") or {}
        except ValueError:
            return
        state, join_state = group.get("state", "?"), group.get("join_state", "?")
        self.last_state = f"{state}/{join_state}"
        if state == "up" and join_state == "steady":
            self.settled_at = time.monotonic()

    @property
    def unsettled(self) -> bool:
        """The last statistics showed the consumer out of a settled membership (before the first
        ones, two seconds after the consumer's start, nothing is known: not unsettled)."""
        return self.last_state not in ("unknown", "up/steady")

    def stuck_for(self) -> float | None:
        """Seconds out of a settled membership, once that is longer than `stuck_after_s`."""
        out = time.monotonic() - self.settled_at
        return out if out > self.stuck_after_s else None


class LeaderElection:
    def __init__(
        self,
        worker: WorkerConfig,
        rest_url: str,
        on_elected: Callable[[], None],
        on_demoted: Callable[[], None],
        session_timeout_ms: int = 6000,
        stuck_membership_s: float = STUCK_MEMBERSHIP_S,
    ) -> None:
        """`on_elected`/`on_demoted` are also called when a doubt begins or ends, so that the herder
        looks at the state again at once."""
        self.worker = worker
        self.rest_url = rest_url
        self.topic = str(worker.values["config.storage.topic"])
        self._on_elected = on_elected
        self._on_demoted = on_demoted
        self._session_timeout_ms = session_timeout_ms
        self._stuck_membership_s = stuck_membership_s
        self._leader = False
        self._doubt_grace_s = int(worker.values.get("scheduled.rebalance.max.delay.ms", 60_000)) / 1000
        #: When the membership of this (still) leader was lost; None when not in doubt.
        self._in_doubt_since: float | None = None
        #: Increases each time this worker becomes leader; lets the herder tell one term from the next.
        self.term = 0
        self._rejoin = threading.Event()
        #: Counts the election's retired consumers (`_retire`): their callbacks no longer act.
        self._consumers = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._leader_url_cache: tuple[float, str | None] = (0.0, None)
        self._admin = AdminClient(client_config("admin", worker.originals))
        #: The current consumer's membership, as its statistics report it (`_join`).
        self._membership = MembershipWatch(stuck_membership_s)

    @property
    def is_leader(self) -> bool:
        """True while this worker may act as the leader: never while in doubt."""
        return self._leader and self._in_doubt_since is None

    @property
    def in_doubt(self) -> bool:
        """The leader lost its membership and is rejoining: keep its tasks, take no leader action."""
        return self._leader and self._in_doubt_since is not None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(15)

    def leader_url(self, max_age_s: float = 2.0) -> str | None:
        """The current leader's REST URL, from the group description (cached briefly); None while
        this worker's own consumer is out of a settled membership (see the module's docstring)."""
        if self._leader:
            return self.rest_url
        if self._membership.unsettled:
            return None
        fetched_at, url = self._leader_url_cache
        if time.monotonic() - fetched_at < max_age_s:
            return url
        url = None
        try:
            future = self._admin.describe_consumer_groups([self.worker.group_id], request_timeout=5)
            description = future[self.worker.group_id].result(timeout=10)
            for member in description.members:
                assignment = member.assignment.topic_partitions if member.assignment else []
                if any(tp.topic == self.topic for tp in assignment) and member.client_id.startswith(
                    CLIENT_ID_PREFIX
                ):
                    url = member.client_id.removeprefix(CLIENT_ID_PREFIX)
        except (KafkaException, KeyError) as exc:
            log.debug("could not describe group %s: %s", self.worker.group_id, exc)
        self._leader_url_cache = (time.monotonic(), url)
        return url

    # ------------------------------------------------------------------------------------------
    def _run(self) -> None:
        config = client_config("consumer", self.worker.originals)
        config.update(
            {
                "group.id": self.worker.group_id,
                "client.id": CLIENT_ID_PREFIX + self.rest_url,
                "enable.auto.commit": False,
                "session.timeout.ms": self._session_timeout_ms,
                # A standby learns of the dead leader's expiry at its next heartbeat: 0.5 s, not 1 s.
                "heartbeat.interval.ms": max(300, self._session_timeout_ms // 12),
                "partition.assignment.strategy": "cooperative-sticky",
                "auto.offset.reset": "latest",
                "statistics.interval.ms": STATS_INTERVAL_MS,
            }
        )
        consumer, watch = self._join(config)
        try:
            while not self._stop.is_set():
                consumer.poll(0.2)
                since = self._in_doubt_since
                if since is not None and time.monotonic() - since > self._doubt_grace_s:
                    self._end_doubt(regained=False)
                if self._rejoin.is_set():
                    self._rejoin.clear()
                    self._set_leader(False)
                    consumer.unsubscribe()
                    consumer.subscribe([self.topic], **self._callbacks())
                stuck_for = watch.stuck_for()
                if stuck_for is not None:
                    log.warning(
                        "worker %s: its consumer of group %s has not been a settled member for %.0fs "
                        "(librdkafka's group state %s); a new consumer joins the group",
                        self.rest_url,
                        self.worker.group_id,
                        stuck_for,
                        watch.last_state,
                    )
                    if self.is_leader:  # its membership goes with the old consumer: as if lost
                        self._lose_membership()
                    self._retire(consumer)
                    consumer, watch = self._join(config)
        finally:
            self._set_leader(False)
            consumer.close()

    def _join(self, config: dict[str, object]) -> tuple[Consumer, MembershipWatch]:
        watch = MembershipWatch(self._stuck_membership_s)
        self._membership = watch
        consumer = Consumer({**config, "stats_cb": watch.on_stats})
        consumer.subscribe([self.topic], **self._callbacks())
        return consumer, watch

    def _retire(self, consumer: Consumer) -> None:
        """Close a replaced consumer on a thread of its own (closing waits for its coordinator, which
        may be what is missing); from here on its rebalance callbacks do nothing (`_callbacks`)."""
        self._consumers += 1
        threading.Thread(target=consumer.close, name="leader-election-retired", daemon=True).start()

    def _callbacks(self) -> dict[str, Callable[[Consumer, list[TopicPartition]], None]]:
        """The rebalance callbacks of the current consumer; they do nothing once a new consumer
        replaced it, so that its closing (which revokes what it held) cannot demote the worker its
        successor serves."""
        mine = self._consumers

        def current() -> bool:
            return mine == self._consumers

        def assigned(c: Consumer, partitions: list[TopicPartition]) -> None:
            if partitions and current():
                c.pause(partitions)
                if self.in_doubt:
                    self._end_doubt(regained=True)
                else:
                    self._set_leader(True)

        def revoked(_c: Consumer, partitions: list[TopicPartition]) -> None:
            if partitions and current():
                self._set_leader(False)

        def lost(_c: Consumer, partitions: list[TopicPartition]) -> None:
            if partitions and current():
                self._lose_membership()

        return {"on_assign": assigned, "on_revoke": revoked, "on_lost": lost}

    def _lose_membership(self) -> None:
        """The group no longer counts this worker's consumer as the partition's owner: a leader is
        in doubt while it rejoins (or demoted at once without a grace)."""
        if self._leader and self._doubt_grace_s > 0:
            self._begin_doubt()
        else:
            self._set_leader(False)

    def step_down(self) -> None:
        """A fenced leader gives up leadership and rejoins the group (KIP-618: a fenced leader
        steps down and re-reads); the group coordinator then decides who leads."""
        self._rejoin.set()

    def _begin_doubt(self) -> None:
        self._in_doubt_since = time.monotonic()
        self._leader_url_cache = (0.0, None)
        log.warning(
            "worker %s lost its membership of group %s (its group coordinator died or was unreachable); "
            "it keeps its tasks running for up to %.0fs (scheduled.rebalance.max.delay.ms) while it "
            "rejoins, and takes no leader action until then",
            self.rest_url,
            self.worker.group_id,
            self._doubt_grace_s,
        )
        self._notify(self._on_demoted)

    def _end_doubt(self, regained: bool) -> None:
        since = self._in_doubt_since
        self._in_doubt_since = None
        waited = time.monotonic() - since if since is not None else 0.0
        if regained:
            log.info(
                "worker %s is the leader of group %s again after %.1fs; its tasks kept running",
                self.rest_url,
                self.worker.group_id,
                waited,
            )
            self._notify(self._on_elected)
        else:
            log.warning(
                "worker %s did not get the leadership of group %s back within %.0fs; stopping its tasks",
                self.rest_url,
                self.worker.group_id,
                self._doubt_grace_s,
            )
            self._set_leader(False)

    def _notify(self, handler: Callable[[], None]) -> None:
        try:
            handler()
        except Exception:
            log.exception("leadership change handler failed")

    def _set_leader(self, leader: bool) -> None:
        self._in_doubt_since = None
        if leader == self._leader:
            return
        if leader:
            self.term += 1
        self._leader = leader
        self._leader_url_cache = (0.0, None)
        log.info(
            "worker %s %s the leader of group %s",
            self.rest_url,
            "is now" if leader else "is no longer",
            self.worker.group_id,
        )
        self._notify(self._on_elected if leader else self._on_demoted)
