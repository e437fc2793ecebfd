import pytest

from eosconnect.api import SourceRecord
from eosconnect.connectors.sequence import parse_value
from eosconnect.runtime.pipeline import RecordPipeline
from eosconnect.storage.topic_reader import TopicRecord
from eosconnect.tools.verify import SequenceCollector, check_sequences, record_identity


def test_exact_sequences_pass():
    report = check_sequences([("a", 0), ("a", 1), ("b", 0)], {"a": 2, "b": 1})
    assert report.ok and report.seen == 3 and report.expected == 3


def test_duplicate_is_reported():
    report = check_sequences([("a", 0), ("a", 1), ("a", 1)], {"a": 2})
    assert not report.ok and report.duplicates == 1 and report.missing == 0
    assert "sequence 1 seen 2 times" in report.anomalies[0]


def test_gap_is_reported():
    report = check_sequences([("a", 0), ("a", 2)], {"a": 3})
    assert not report.ok and report.missing == 1 and report.duplicates == 0


def test_unknown_key_and_out_of_range_are_unexpected():
    report = check_sequences([("a", 0), ("a", 5), ("zzz", 0)], {"a": 1})
    assert not report.ok and report.unexpected == 2


def _written(schemas_enable: str) -> TopicRecord:
    """A SequenceSource record as the runtime writes it with the JSON converter."""
    config = {
        "key.converter.schemas.enable": schemas_enable,
        "value.converter.schemas.enable": schemas_enable,
    }
    record = SourceRecord({"task": 1}, {"seq": 4}, "t", {"task": 1, "seq": 4, "payload": "xx"}, key="task-1")
    out = RecordPipeline(config).convert(record)
    assert out is not None
    return TopicRecord("t", 0, 0, out.key, out.value, 0, None)


@pytest.mark.parametrize("schemas_enable", ["true", "false"])
def test_sequence_records_are_read_with_or_without_the_envelope(schemas_enable: str) -> None:
    """Topics written with either setting (the default's envelope, or plain JSON) check the same."""
    record = _written(schemas_enable)
    assert (record.value or b"").startswith(b'{"schema":' if schemas_enable == "true" else b'{"task":')
    assert parse_value(record.value) == (1, 4)
    collector = SequenceCollector()
    collector(record)
    assert collector.observed == [(1, 4)] and not collector.malformed
    assert record_identity(record, None) == "task-1"
    assert record_identity(record, "seq") == 4
