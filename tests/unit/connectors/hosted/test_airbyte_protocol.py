"""Airbyte protocol lines as the host reads them: what it accepts and how it names a bad line."""

from __future__ import annotations

import json

import pytest

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.hosted.airbyte_protocol import parse_message, parse_state, state_key, trace_error
from eosconnect.connectors.hosted.process import LINE_PREVIEW_CHARS, preview

WHERE = "airbyte source x, stream users"


def test_a_record_line_is_parsed():
    line = json.dumps({"type": "RECORD", "record": {"stream": "users", "data": {"id": 1}, "emitted_at": 5}})
    assert parse_message(line, WHERE)["record"]["data"] == {"id": 1}


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("Traceback (most recent call last):", "not JSON"),
        ("[1, 2]", "not a protocol message"),
        ('{"type": "SURPRISE"}', "unknown type 'SURPRISE'"),
        ('{"type": "RECORD", "record": {"data": {}}}', "without a stream name"),
        ('{"type": "STATE"}', "without its 'state'"),
    ],
)
def test_a_bad_line_names_the_stream_and_the_line(line, says):
    with pytest.raises(ConnectException) as err:
        parse_message(line, WHERE)
    assert WHERE in str(err.value)
    assert says in str(err.value)
    assert line[:20] in str(err.value)


def test_a_long_bad_line_is_shown_truncated():
    line = "x" * 10_000
    with pytest.raises(ConnectException) as err:
        parse_message(line, WHERE)
    assert len(str(err.value)) < LINE_PREVIEW_CHARS + 300
    assert "(10000 characters)" in preview(line)


def test_stream_global_and_legacy_states():
    stream = parse_state(
        {
            "type": "STATE",
            "state": {
                "type": "STREAM",
                "stream": {
                    "stream_descriptor": {"name": "users", "namespace": "crm"},
                    "stream_state": {"c": 1},
                },
                "sourceStats": {"recordCount": 10.0},
            },
        },
        WHERE,
        "",
    )
    assert (stream.kind, stream.stream, stream.record_count) == ("STREAM", "crm.users", 10)
    assert "sourceStats" not in stream.body
    assert state_key(stream) == "crm.users"
    shared = parse_state(
        {"type": "STATE", "state": {"type": "GLOBAL", "global": {"shared_state": {}, "stream_states": []}}},
        WHERE,
        "",
    )
    assert (shared.kind, shared.stream, shared.record_count, state_key(shared)) == (
        "GLOBAL",
        None,
        None,
        "GLOBAL",
    )
    legacy = parse_state({"type": "STATE", "state": {"data": {"users": {"c": 2}}}}, WHERE, "")
    assert legacy.body == {"type": "LEGACY", "data": {"users": {"c": 2}}}


def test_trace_error_is_the_sources_own_message():
    error = {
        "type": "TRACE",
        "trace": {"type": "ERROR", "error": {"message": "bad token", "internal_message": "401"}},
    }
    assert trace_error(error) == "bad token (401)"
    assert trace_error({"type": "TRACE", "trace": {"type": "ESTIMATE"}}) is None
