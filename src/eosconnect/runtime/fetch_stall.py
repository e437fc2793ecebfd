"""A sink task whose consumer stopped fetching: noticed, said once, and fetched afresh.

After broker restarts librdkafka can leave an assigned partition out of its fetch loop (e.g. stuck
in offset validation, librdkafka issue 4492) while the group membership looks healthy: the task
then copies nothing and logs nothing, for as long as the process lives. The sink loop tells this
watch how long it has had no record; after `STALL_S` of that, while a partition it reads has records
past the task's position (by the high watermark librdkafka last saw), the watch says so at WARN, once
per position, and seeks those partitions to the task's position, where librdkafka starts fetching them
again. That position is the next record the task expects, so the seek repeats and skips nothing.

librdkafka caches a partition's end only from its own fetches, so a partition it stopped fetching
before it ever fetched there (a rewind's seek into offset validation, a new assignment) shows no
end, or an old one. When the cache shows nothing past the position, the watch asks the partition's
leader (`PROBE_EVERY_S` apart at most, `PROBE_TIMEOUT_S` each: the task's loop waits meanwhile).
When the leader does not answer either, the watch seeks the partition all the same and says why: a
consumer that stopped fetching may well be the one that cannot ask (a reader of a mirror topic can
stay silent for minutes that way, its stall otherwise never reported), and seeking a
partition at the position the task expects next costs one fetch and skips nothing.

Only time spent polling counts: a task whose process was stopped (a SIGSTOPped zombie, a machine
stall) or whose loop was busy elsewhere (a slow commit) wakes up with a long "no record" time that
says nothing about its consumer, so a gap of `PAUSE_S` between two checks starts the count again.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from eosconnect.api.records import TopicPartition
from eosconnect.runtime.task import TaskLogAdapter

__all__ = ["PAUSE_S", "PROBE_EVERY_S", "STALL_S", "FetchStallWatch"]

#: How long a task may get no record while its partitions hold some before the watch acts. Longer
#: than a healthy pause: a source's open transaction holds read_committed readers back up to its
#: timeout, and a broker restart's leader moves take seconds.
STALL_S = 40.0
#: A gap this long between two checks (the loop checks after every poll of at most a second) means
#: the task was not polling meanwhile: the stall is counted again from there.
PAUSE_S = 10.0
#: How often a stalled task may ask the brokers for ends its consumer does not know, and how long
#: each ask may hold its loop up.
PROBE_EVERY_S = 60.0
PROBE_TIMEOUT_S = 2.0
#: Said of an end only the partition's leader knew.
UNSEEN = " by its leader: librdkafka knew no such end"
#: The end of a partition whose leader did not answer, for `_reported` (said once per position).
UNKNOWN_END = -1


class FetchStallWatch:
    """Decides when a sink task's consumer counts as stalled, says so, and seeks again."""

    def __init__(
        self,
        log: TaskLogAdapter,
        stall_s: float = STALL_S,
        pause_s: float = PAUSE_S,
        probe_every_s: float = PROBE_EVERY_S,
    ) -> None:
        self.log = log
        self.stall_s = stall_s
        self.pause_s = pause_s
        self.probe_every_s = probe_every_s
        self._next_check = 0.0
        self._next_probe = 0.0
        self._last_call: float | None = None
        self._polling_since = -math.inf  # until a gap: as long as the task's own idle time says
        #: Per partition, the (position, high watermark) last reported: said once, not every check.
        self._reported: dict[TopicPartition, tuple[int, int]] = {}

    def check(
        self, consumer: Consumer, idle_s: float, positions: Callable[[], Mapping[TopicPartition, int]]
    ) -> list[TopicPartition]:
        """After `stall_s` without a record (`idle_s`, of which only the time since the task last
        resumed polling counts), at most every quarter of it: the partitions of `positions()` (the
        task's unpaused ones and where it goes on) with records past their position, each sought
        there again; reported once per position. Returns those sought."""
        now = time.monotonic()
        if self._last_call is not None and now - self._last_call > self.pause_s:
            self._polling_since = now
        self._last_call = now
        if min(idle_s, now - self._polling_since) < self.stall_s or now < self._next_check:
            return []
        self._next_check = now + self.stall_s / 4
        behind: dict[TopicPartition, tuple[int, int]] = {}
        probing = now >= self._next_probe
        probed = False
        asked: set[TopicPartition] = set()  # ends the leader told, the cache did not know
        unanswered: dict[TopicPartition, str] = {}  # why the leader told nothing
        for tp, position in positions().items():
            kafka_tp = KafkaTopicPartition(tp.topic, tp.partition)
            _low, high = consumer.get_watermark_offsets(kafka_tp, cached=True)
            if high <= position + 1 and probing:  # the cache may not know: ask the leader
                probed = True
                try:
                    _low, high = consumer.get_watermark_offsets(kafka_tp, timeout=PROBE_TIMEOUT_S)
                except KafkaException as exc:
                    # Unknown is not "nothing past it": seek it anyway (module docstring).
                    unanswered[tp] = str(exc.args[0] if exc.args else exc)
                    high = UNKNOWN_END
                else:
                    asked.add(tp)
            # more than a transaction marker past the position (markers are never delivered)
            past = high > position + 1 or tp in unanswered
            if past and self._reported.get(tp) != (position, high):
                behind[tp] = (position, high)
        if probed:
            self._next_probe = now + self.probe_every_s
        if not behind:
            return []
        self._reported.update(behind)
        self.log.warning(
            "consumed nothing for %.0fs although %s hold (or may hold) records past its position; seeking "
            "them again (librdkafka can stop fetching a partition after a broker restart; a transaction "
            "left open in the topic also holds read_committed readers back until it ends)",
            idle_s,
            ", ".join(
                f"{tp} (position {p}, "
                + (
                    f"end unknown: its leader did not answer ({unanswered[tp]}))"
                    if tp in unanswered
                    else f"end {h}{UNSEEN if tp in asked else ''})"
                )
                for tp, (p, h) in sorted(behind.items())
            ),
        )
        for tp, (position, _high) in behind.items():
            consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, position))
        return list(behind)
