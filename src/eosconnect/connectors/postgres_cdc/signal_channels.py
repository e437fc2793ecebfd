"""Where `PostgresCdcTask`'s signals come from and what they do: the Kafka signal topic's consumer,
the dispatcher acting on a parsed signal, and the sender behind `POST /connectors/<name>/signals`."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from eosconnect.api.errors import ConfigException
from eosconnect.connectors.postgres_cdc import catalog
from eosconnect.connectors.postgres_cdc.config import CdcConfig
from eosconnect.connectors.postgres_cdc.incremental import IncrementalSnapshot
from eosconnect.connectors.postgres_cdc.signals import (
    EXECUTE_SNAPSHOT,
    LOG,
    PAUSE_SNAPSHOT,
    RESUME_SNAPSHOT,
    SIGNAL_TYPES,
    STOP_SNAPSHOT,
    BadSignal,
    ExecuteSnapshot,
    Signal,
    parse_signal,
    signal_insert,
)

__all__ = ["KafkaSignals", "SignalDispatcher", "send_signal"]

log = logging.getLogger(__name__)


class SignalDispatcher:
    """Acts on signals (all but the watermarks, which the task matches with its records). A bad
    one is logged as a WARNING naming the field and is otherwise ignored: it never fails the task."""

    def __init__(
        self, prefix: str, incremental: IncrementalSnapshot, captured: Callable[[], list[tuple[str, str]]]
    ) -> None:
        self.prefix = prefix
        self.incremental = incremental
        self.captured = captured

    def parse(self, signal_id: Any, signal_type: Any, data: Any, channel: str) -> Signal | None:
        try:
            return parse_signal(signal_id, signal_type, data, channel)
        except BadSignal as exc:
            self._bad(signal_id, channel, exc)
            return None

    def handle(self, signal: Signal) -> None:
        try:
            self._handle(signal)
        except BadSignal as exc:
            self._bad(signal.id, signal.channel, exc)

    def _handle(self, signal: Signal) -> None:
        why = f"(signal {signal.id!r} from the {signal.channel} channel)"
        if signal.type == EXECUTE_SNAPSHOT:
            self.incremental.execute(signal.execute_snapshot(), self.captured(), why)
        elif signal.type == STOP_SNAPSHOT:
            tables = signal.data.get("data-collections") or []
            if isinstance(tables, str):
                tables = [tables]
            if not isinstance(tables, list) or not all(isinstance(t, str) for t in tables):
                raise BadSignal(
                    "data.data-collections must be a list of regular expressions (or left out: all)"
                )
            self.incremental.stop(tables)
        elif signal.type == PAUSE_SNAPSHOT:
            self.incremental.pause()
        elif signal.type == RESUME_SNAPSHOT:
            self.incremental.resume()
        elif signal.type == LOG:
            log.info("PostgresCdcSource %s: signal %s: %s", self.prefix, signal.id, signal.data["message"])

    def execute(self, request: ExecuteSnapshot, why: str) -> None:
        """An incremental snapshot the connector itself asks for (snapshot.new.tables)."""
        try:
            self.incremental.execute(request, self.captured(), why)
        except BadSignal as exc:
            log.warning("PostgresCdcSource %s: no incremental snapshot %s: %s", self.prefix, why, exc)

    def _bad(self, signal_id: Any, channel: str, exc: BadSignal) -> None:
        log.warning(
            "PostgresCdcSource %s: ignored signal %r from the %s channel: %s",
            self.prefix,
            signal_id,
            channel,
            exc,
        )


class KafkaSignals:
    """The Kafka signal channel: records of `signal.kafka.topic` keyed by topic.prefix (others are
    for other connectors), value `{"type": ..., "data": {...}}`. Its consumer group's committed
    offset (committed once a signal was acted on) says where the next task starts reading."""

    def __init__(self, cfg: CdcConfig) -> None:
        from confluent_kafka import Consumer

        self.prefix: str = cfg["topic.prefix"]
        self.topic: str = cfg["signal.kafka.topic"]
        self.consumer = Consumer(
            {
                "bootstrap.servers": cfg["signal.kafka.bootstrap.servers"],
                "group.id": cfg["signal.kafka.groupId"],
                "enable.auto.commit": False,
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        self.consumer.subscribe([self.topic])

    def poll(self, dispatcher: SignalDispatcher) -> list[Signal]:
        """The signals that arrived (without waiting), parsed; bad ones logged and dropped."""
        out: list[Signal] = []
        for message in self.consumer.consume(num_messages=16, timeout=0):
            if message.error() is not None:
                log.warning(
                    "PostgresCdcSource %s: signal topic %s: %s", self.prefix, self.topic, message.error()
                )
                continue
            key = message.key()
            if key is None or key.decode("utf-8", "replace") != self.prefix:
                continue
            signal_id = f"{self.topic}-{message.partition()}-{message.offset()}"
            try:
                value = json.loads(message.value() or b"")
            except ValueError as exc:
                dispatcher._bad(signal_id, "kafka", BadSignal(f"the value is not JSON ({exc})"))
                continue
            if not isinstance(value, dict):
                dispatcher._bad(
                    signal_id, "kafka", BadSignal('the value must be {"type": ..., "data": {...}}')
                )
                continue
            found = dispatcher.parse(
                value.get("id", signal_id), value.get("type"), value.get("data"), "kafka"
            )
            if found is not None:
                out.append(found)
        return out

    def done(self) -> None:
        """The signals handed out were acted on: commit the group's position past them."""
        try:
            self.consumer.commit(asynchronous=False)
        except Exception as exc:  # nothing consumed yet, or the broker away: the next poll commits
            log.debug("PostgresCdcSource %s: signal offsets not committed: %s", self.prefix, exc)

    def close(self) -> None:
        self.consumer.close()


def send_signal(cfg: CdcConfig, signal_type: str, data: Mapping[str, Any] | None) -> str:
    """Send a signal to the connector of `cfg` through the signal table (or, without one, the
    Kafka signal topic); a ConfigException naming the setting when it has no channel."""
    if signal_type not in SIGNAL_TYPES:
        raise ConfigException(f"signal type {signal_type!r} is not one of {', '.join(SIGNAL_TYPES)}")
    table = cfg.signal_table
    if table is not None and "source" in cfg.signal_channels:
        statement, params = signal_insert(table, signal_type, data)
        with catalog.connect(cfg) as conn:
            conn.execute(statement, params)
        return f"signal {params[0]} ({signal_type}) written to {table[0]}.{table[1]}"
    if "kafka" in cfg.signal_channels and cfg["signal.kafka.topic"] and cfg["signal.kafka.bootstrap.servers"]:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": cfg["signal.kafka.bootstrap.servers"]})
        value = json.dumps({"type": signal_type, "data": dict(data or {})})
        producer.produce(cfg["signal.kafka.topic"], key=cfg["topic.prefix"].encode(), value=value.encode())
        if producer.flush(15) != 0:
            raise ConfigException(f"signal not delivered to {cfg['signal.kafka.topic']} within 15 s")
        return f"signal ({signal_type}) sent to topic {cfg['signal.kafka.topic']}"
    raise ConfigException(
        "this connector has no signal channel: set signal.data.collection to its signal table "
        "(or signal.enabled.channels=source,kafka with signal.kafka.topic and signal.kafka.bootstrap.servers)"
    )
