"""What `eosconnect standalone` reads before anything starts: connector files in each form Kafka's
standalone worker accepts, its offsets file, and the quickstart worker settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eosconnect.api.errors import ConfigException
from eosconnect.api.records import SourceOffset, SourcePartition
from eosconnect.cli_errors import UserError
from eosconnect.launch import load_properties, run_standalone_worker
from eosconnect.standalone import load_connector_file
from eosconnect.storage.offsets import FileOffsetStore
from eosconnect.worker_config import unknown_worker_settings

QUICKSTART = Path(__file__).parent.parent / "support" / "kafka_quickstart"
FILE_SOURCE = {
    "connector.class": "FileStreamSource",
    "tasks.max": "1",
    "file": "test.txt",
    "topic": "connect-test",
}


def test_kafka_quickstart_connector_file_is_read_as_kafka_reads_it() -> None:
    name, config = load_connector_file(QUICKSTART / "connect-file-source.properties")
    assert (name, config) == ("local-file-source", {"name": "local-file-source", **FILE_SOURCE})


def test_json_create_request_and_flat_json_give_the_same_connector(tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"name": "src", "config": {**FILE_SOURCE, "tasks.max": 1}}))
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"name": "src", **FILE_SOURCE}))
    assert (
        load_connector_file(request) == load_connector_file(flat) == ("src", {**FILE_SOURCE, "name": "src"})
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"config": FILE_SOURCE}), "no connector name"),
        (json.dumps({"name": "a", "config": {**FILE_SOURCE, "name": "b"}}), "differs from 'name'"),
        (json.dumps(["a"]), "must hold a JSON object"),
    ],
)
def test_a_bad_connector_file_is_refused_naming_it(tmp_path: Path, text: str, needle: str) -> None:
    path = tmp_path / "connector.json"
    path.write_text(text)
    with pytest.raises(UserError) as raised:
        load_connector_file(path)
    assert str(raised.value).startswith(f"{path}: ") and needle in str(raised.value)


def test_kafka_quickstart_worker_settings_warn_about_nothing() -> None:
    props = load_properties(QUICKSTART / "connect-standalone.properties")
    props.pop("offset.storage.file.filename")  # the standalone worker's own (launch.run_standalone_worker)
    assert unknown_worker_settings({**props, "plugin.path": "/usr/local/share/java,/opt/connectors,"}) == []
    changed = unknown_worker_settings(
        {**props, "value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    )
    assert [note.name for note in changed] == ["value.converter", "value.converter.schemas.enable"]


def test_standalone_without_an_offsets_file_or_exactly_once_names_the_setting() -> None:
    with pytest.raises(UserError) as raised:
        run_standalone_worker({"bootstrap.servers": "127.0.0.1:1"}, [], source="w.properties")
    assert str(raised.value).startswith("w.properties: offset.storage.file.filename is required")


def test_offsets_file_keeps_what_the_last_write_committed(tmp_path: Path) -> None:
    path = tmp_path / "connect.offsets"
    store = FileOffsetStore(path)
    x, y = SourcePartition.of({"file": "x"}), SourcePartition.of({"file": "y"})
    store.write("a", {x: SourceOffset.of({"position": 3}), y: SourceOffset.of({"position": 9})})
    store.write("a", {y: None})
    store.write("b", {x: SourceOffset.of({"position": 1})})
    again = FileOffsetStore(path)
    assert {p.to_dict()["file"]: o.to_dict() for p, o in again.connector_offsets("a").items() if o} == {
        "x": {"position": 3}
    }
    view = again.view("b")
    assert view.offset({"file": "x"}) == {"position": 1} and view.offset({"file": "y"}) is None


def test_a_file_that_is_not_an_offsets_file_is_refused_not_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "connect.offsets"
    path.write_bytes(
        b"\xac\xed\x00\x05sr\x00\x11java.util.HashMap"
    )  # what Kafka's FileOffsetBackingStore writes
    with pytest.raises(
        ConfigException, match=r"offset\.storage\.file\.filename=.*point the setting at a new file"
    ):
        FileOffsetStore(path)
    assert path.read_bytes().startswith(b"\xac\xed")
