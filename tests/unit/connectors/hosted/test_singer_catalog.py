"""SingerSource: streams selected in the tap's catalog, and a resumed sync's repeated bookmark rows."""

from __future__ import annotations

import json

import pytest

from eosconnect.api import InMemoryOffsetStorageReader, SourceTaskContext
from eosconnect.api.errors import ConfigException, ConnectException
from eosconnect.connectors.hosted.singer import SingerSourceTask
from eosconnect.connectors.hosted.singer_catalog import Selected, select_streams
from eosconnect.connectors.hosted.task import RecordData

CATALOG = {
    "streams": [
        {
            "tap_stream_id": "public-events",
            "stream": "events",
            "schema": {
                "type": "object",
                "properties": {"id": {"type": ["integer"]}, "name": {"type": ["string"]}},
            },
            "metadata": [
                {"breadcrumb": [], "metadata": {"table-key-properties": ["id"]}},
                {"breadcrumb": ["properties", "name"], "metadata": {"inclusion": "available"}},
            ],
        },
        {
            "tap_stream_id": "public-log",
            "stream": "log",
            "schema": {"type": "object", "properties": {"line": {"type": ["string"]}}},
            "metadata": [{"breadcrumb": [], "metadata": {"table-key-properties": []}}],
        },
    ]
}


def test_selection_sets_incremental_replication_on_the_key():
    catalog = select_streams(CATALOG, [], [])
    events, log = (Selected(e) for e in catalog["streams"])
    assert (events.stream_id, events.incremental, events.replication_key) == ("public-events", True, "id")
    assert (log.stream_id, log.incremental) == ("public-log", False)
    assert catalog["streams"][0]["metadata"][0]["metadata"]["selected"] is True
    assert catalog["streams"][0]["metadata"][1]["metadata"]["selected"] is True
    assert CATALOG["streams"][0]["metadata"][0]["metadata"] == {"table-key-properties": ["id"]}, "not changed"
    (only,) = select_streams(CATALOG, ["log"], ["log:line"])["streams"]
    assert Selected(only).replication_key == "line"
    with pytest.raises(ConfigException, match="no stream 'nope'; its streams are public-events, public-log"):
        select_streams(CATALOG, ["nope"], [])


def task_with(offsets: dict) -> SingerSourceTask:
    config = {
        "name": "sg",
        "singer.tap": "/bin/true",
        "topic.prefix": "pg",
        "singer.task.catalog": json.dumps(select_streams(CATALOG, ["public-events"], [])),
    }
    task = SingerSourceTask()
    task.initialize(
        SourceTaskContext(configs=config, offset_storage_reader=InMemoryOffsetStorageReader(offsets))
    )
    task.start(config)
    return task


def line(message: dict) -> str:
    return json.dumps(message)


def test_a_resumed_sync_drops_the_rows_delivered_with_the_bookmark():
    first = task_with({})
    for i in (1, 2, 3):
        event = first.interpret(line({"type": "RECORD", "stream": "public-events", "record": {"id": i}}), "w")
        assert isinstance(event, RecordData)
    state = first.interpret(
        line({"type": "STATE", "value": {"bookmarks": {"public-events": {"replication_key_value": 3}}}}), "w"
    )
    assert state.body["delivered"] == {"public-events": {"value": 3, "keys": [[3]]}}
    first.checkpoints.state(state, "w")
    offsets = first.checkpoints.close()

    again = task_with(offsets)
    assert again.sync_files(None)["state"] == {"bookmarks": {"public-events": {"replication_key_value": 3}}}
    repeated = again.interpret(line({"type": "RECORD", "stream": "public-events", "record": {"id": 3}}), "w")
    assert repeated is None, "delivered before the bookmark: the tap repeats it inclusively"
    fresh = again.interpret(line({"type": "RECORD", "stream": "public-events", "record": {"id": 4}}), "w")
    assert isinstance(fresh, RecordData) and fresh.data == {"id": 4}


def test_schema_messages_set_the_value_schema_and_key():
    task = task_with({})
    schema = {"type": "object", "properties": {"id": {"type": "integer"}, "at": {"type": ["null", "string"]}}}
    task.interpret(
        line({"type": "SCHEMA", "stream": "public-events", "schema": schema, "key_properties": ["id"]}), "w"
    )
    record = task._record(RecordData("public-events", {"id": 9, "at": "x"}, None))
    assert record.key == 9 and record.value.get("at") == "x"
    assert [f.name for f in record.value_schema.fields] == ["id", "at"]


def test_a_line_that_is_not_a_singer_message_names_the_stream_and_line():
    task = task_with({})
    with pytest.raises(
        ConnectException, match=r"w printed a line that is not a Singer message.*'\{\"type\": \"LOG\"\}'"
    ):
        task.interpret('{"type": "LOG"}', "w")
