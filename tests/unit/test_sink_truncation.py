"""KIP-320 in the sink runtime: librdkafka's truncation texts, the policy and reset settings."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

from eosconnect.api import ConfigException
from eosconnect.runtime.config import LogTruncationPolicy, SinkConnectorConfig, WorkerConfig
from eosconnect.runtime.sink_task import sink_consumer_settings
from eosconnect.runtime.truncation import OffsetReset, parse_truncation

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
    text = t.describe()
    assert "topic 'orders' partition 3" in text and "offset 15 (leader epoch 0)" in text
    assert "diverges at offset 10" in text


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
    assert "fail" in problem and "continue-from-divergence" in problem


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
