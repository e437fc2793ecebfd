"""The eosconnect-kafka sink's options, parsed on the driver: every bad option is named."""

from __future__ import annotations

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.spark.sink_options import parse_sink_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "out"}


def test_defaults_wait_a_minute_for_a_broker_as_kafka_max_block_ms_does():
    options = parse_sink_options(BASE)
    assert options.broker_wait_ms == 60_000
    assert options.progress_partitions == 4 and options.replay_check


def test_broker_wait_is_an_option_in_milliseconds():
    assert parse_sink_options({**BASE, "broker.wait.ms": "2500"}).broker_wait_ms == 2500
    for bad in ("soon", "0", "-1"):
        with pytest.raises(ConfigException) as caught:
            parse_sink_options({**BASE, "broker.wait.ms": bad})
        assert "broker.wait.ms" in str(caught.value)


def test_unknown_options_and_missing_bootstrap_are_named_together():
    with pytest.raises(ConfigException) as caught:
        parse_sink_options({"toppic": "x"})
    message = str(caught.value)
    assert "toppic" in message and "kafka.bootstrap.servers" in message


def test_batch_writes_need_a_job_id():
    with pytest.raises(ConfigException, match=r"job\.id"):
        parse_sink_options(BASE, batch=True)
    assert parse_sink_options({**BASE, "job.id": "nightly"}, batch=True).job_id == "nightly"


def test_checksum_keeps_the_format_older_markers_were_committed_with():
    """Replays are compared against checksums committed by earlier versions: per row, crc32 of the
    UTF-8 value seeded with crc32 of the key, None as empty bytes, summed mod 2^64."""
    import zlib

    from eosconnect.spark.sink import CHECKSUM_MASK, _checksums

    keys = ["a", None, b"c", "é"]
    values = ["v1", b"v2", None, "ü" * 10]
    raw = [(b"a", b"v1"), (b"", b"v2"), (b"c", b""), ("é".encode(), ("ü" * 10).encode())]
    expected = sum(zlib.crc32(v, zlib.crc32(k)) for k, v in raw) & CHECKSUM_MASK
    assert _checksums(keys, values) & CHECKSUM_MASK == expected
