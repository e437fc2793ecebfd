"""Log truncation (KIP-320) and offset resets as the sink runtime sees them through librdkafka.

Why this exists: librdkafka only checks a position against the leader's log (OffsetForLeaderEpoch)
when the position carries a leader epoch *and* was given to it by `assign`/`seek`; a position it
fetched itself from the group's committed offsets is used unchecked (observed with librdkafka 2.16
on Kafka 4.3: the consumer silently read past the divergence point). And with any
`auto.offset.reset` other than `error` a detected truncation is silently repaired. So the runtime
assigns the committed offset with its epoch itself, runs the consumer with `auto.offset.reset=error`
and sorts the `_AUTO_OFFSET_RESET` errors here: a truncation goes to `log.truncation.policy`, every
other reset (no committed offset, offset out of range) to the user's `auto.offset.reset`.

The error texts, as librdkafka 2.16 words them (checked against a real broker):

- truncation: "Partition log truncation detected at offset 15 (leader epoch 0): broker end offset
  is 10 (offset leader epoch 0). Reset to INVALID.: Local: Partition log truncation detected
  (broker 2)"; when the leader knows no epoch that old: "No epoch found less or equal to offset 15
  (leader epoch 0): broker end offset is -1 (offset leader epoch -1). Reset using configured
  policy.: Local: Partition log truncation detected"
- no committed offset: "no previously committed offset available: Local: No offset stored"
- out of range: "fetch failed due to requested offset not available on the broker: Broker: Offset
  out of range (broker 2)"
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

from eosconnect.api.errors import ConfigException

_TRUNCATION_MARK = "log truncation detected"
_POSITION = r"offset (?P<offset>-?\d+)(?: \(leader epoch (?P<epoch>-?\d+)\))?"
_END = r"broker end offset is (?P<end>-?\d+)(?: \(offset leader epoch (?P<end_epoch>-?\d+)\))?"
_TRUNCATION_RE = re.compile(rf"(?:detected at|less or equal to) {_POSITION}: {_END}", re.IGNORECASE)
_BROKER_RE = re.compile(r"\(broker (?P<broker>-?\d+)\)\s*$")


@dataclass(frozen=True)
class LogTruncation:
    """A detected truncation of one partition: where the consumer was and where the logs diverge.

    `divergence_offset` is None when the leader could not say (no epoch that old on it); records
    from the divergence offset up to `consumed_offset` were lost from Kafka.
    """

    topic: str
    partition: int
    consumed_offset: int | None
    consumed_epoch: int | None
    divergence_offset: int | None
    divergence_epoch: int | None
    broker: int | None
    detail: str

    @property
    def where(self) -> str:
        return f"topic {self.topic!r} partition {self.partition}"

    def describe(self) -> str:
        """One sentence an operator can act on: partition, committed and divergence offsets."""
        at = "an unknown offset" if self.consumed_offset is None else f"offset {self.consumed_offset}"
        if self.consumed_epoch is not None:
            at += f" (leader epoch {self.consumed_epoch})"
        if self.divergence_offset is None:
            diverge = "the leader knows no leader epoch that old, so the divergence offset is unknown"
        else:
            diverge = f"the log diverges at offset {self.divergence_offset}"
            if self.divergence_epoch is not None:
                diverge += f" (end of leader epoch {self.divergence_epoch})"
        broker = "" if self.broker is None else f" on broker {self.broker}"
        return (
            f"log truncation detected on {self.where}: the committed position is {at}, but {diverge}{broker}"
        )


def _int(value: str | None) -> int | None:
    return None if value is None else int(value)


def _known(value: int | None) -> int | None:
    """librdkafka says -1 for "unknown" offsets and epochs."""
    return value if value is not None and value >= 0 else None


def parse_truncation(text: str, topic: str, partition: int) -> LogTruncation | None:
    """The truncation an `_AUTO_OFFSET_RESET` error text reports, or None for any other reset."""
    if _TRUNCATION_MARK not in text.lower():
        return None
    match = _TRUNCATION_RE.search(text)
    broker = _BROKER_RE.search(text)
    if match is None:
        return LogTruncation(topic, partition, None, None, None, None, None, text)
    return LogTruncation(
        topic=topic,
        partition=partition,
        consumed_offset=_known(_int(match["offset"])),
        consumed_epoch=_known(_int(match["epoch"])),
        divergence_offset=_known(_int(match["end"])),
        divergence_epoch=_known(_int(match["end_epoch"])),
        broker=_int(broker["broker"]) if broker else None,
        detail=text,
    )


class OffsetReset(StrEnum):
    """The user's `auto.offset.reset`, which the runtime applies itself (librdkafka gets `error`)."""

    EARLIEST = "earliest"
    LATEST = "latest"
    ERROR = "error"

    @classmethod
    def parse(cls, value: object, setting: str = "auto.offset.reset") -> OffsetReset:
        """librdkafka's spellings (smallest/beginning, largest/end) and Java's `none` are accepted."""
        text = str(value).strip().lower()
        for reset, names in _RESET_NAMES.items():
            if text in names:
                return reset
        allowed = sorted(n for names in _RESET_NAMES.values() for n in names)
        raise ConfigException.for_field(setting, f"must be one of {', '.join(allowed)}, got {value!r}")

    @property
    def logical_offset(self) -> int | None:
        """The librdkafka offset to seek to, or None when the task must fail instead."""
        return {OffsetReset.EARLIEST: OFFSET_BEGINNING, OffsetReset.LATEST: OFFSET_END}.get(self)


_RESET_NAMES = {
    OffsetReset.EARLIEST: ("earliest", "smallest", "beginning"),
    OffsetReset.LATEST: ("latest", "largest", "end"),
    OffsetReset.ERROR: ("error", "none"),
}
