"""`Checkpoints`: when a transaction may end, with which offsets, and the source's counts checked."""

from __future__ import annotations

import json

import pytest

from eosconnect.api import InMemoryOffsetStorageReader
from eosconnect.api.errors import ConnectException
from eosconnect.connectors.hosted.airbyte_protocol import StateMessage
from eosconnect.connectors.hosted.checkpoints import Checkpoints


def stream_state(stream: str, position: int, count: int | None) -> StateMessage:
    body = {
        "type": "STREAM",
        "stream": {"stream_descriptor": {"name": stream}, "stream_state": {"p": position}},
    }
    return StateMessage("STREAM", stream, body, count)


def test_a_transaction_ends_only_where_every_stream_is_covered():
    cp = Checkpoints("airbyte", ["a", "b"], None)
    cp.record("a", "w")
    cp.record("b", "w")
    cp.state(stream_state("a", 1, 1), "w")
    assert not cp.covered and cp.uncovered == {"b"}
    cp.state(stream_state("b", 1, 1), "w")
    assert cp.covered
    offsets = cp.close()
    assert {dict(p)["airbyte.stream"] for p in offsets} == {"a", "b"}
    assert json.loads(offsets[cp.partition("a")]["state"])["stream"]["stream_state"] == {"p": 1}
    assert cp.close() == {}, "a state is committed once"


def test_a_count_that_disagrees_names_the_stream():
    cp = Checkpoints("airbyte", ["users"], None)
    cp.record("users", "w")
    with pytest.raises(ConnectException, match=r"stream 'users' counts 2 record\(s\).*but 1 arrived"):
        cp.state(stream_state("users", 1, 2), "w")


def test_records_of_a_stream_the_task_does_not_read_fail():
    cp = Checkpoints("airbyte", ["users"], None)
    with pytest.raises(ConnectException, match="stream 'orders'"):
        cp.record("orders", "w")


def test_committed_states_are_read_back_for_the_restart():
    first = Checkpoints("airbyte", ["a", "b"], None)
    first.record("a", "w")
    first.state(stream_state("a", 7, 1), "w")
    stored = InMemoryOffsetStorageReader(first.close())
    again = Checkpoints("airbyte", ["a", "b"], stored)
    assert again.restart_state() == [first.latest["a"]]
    partition, offset = again.record_offset("a")
    assert dict(partition) == {"airbyte.stream": "a"} and offset == dict(stored.offset(partition) or {})
    assert again.record_offset("b")[1] is None


def test_a_global_state_is_one_partition_for_all_streams():
    cp = Checkpoints("airbyte", ["a", "b"], None)
    cp.record("a", "w")
    cp.record("b", "w")
    cp.state(StateMessage("GLOBAL", None, {"type": "GLOBAL", "global": {"shared_state": {"lsn": 5}}}, 2), "w")
    assert cp.covered
    (partition,) = cp.close()
    assert dict(partition) == {"airbyte.state": "GLOBAL"}
    assert dict(cp.record_offset("a")[0]) == {"airbyte.state": "GLOBAL"}
    assert cp.restart_state() == [{"type": "GLOBAL", "global": {"shared_state": {"lsn": 5}}}]
    with pytest.raises(ConnectException, match="STREAM state after GLOBAL"):
        cp.state(stream_state("a", 1, None), "w")
