"""`eosconnect connectors ...` / `eosconnect plugins ...` with typer's CliRunner against the served app."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from eosconnect.clients.cli import connectors_app, plugins_app
from eosconnect.rest import create_app
from support.fake_herder import SOURCE_CLASS, FakeHerder, served

cli = typer.Typer()
cli.add_typer(connectors_app, name="connectors")
cli.add_typer(plugins_app, name="plugins")


@pytest.fixture
def herder() -> FakeHerder:
    return FakeHerder()


@pytest.fixture
def url(herder: FakeHerder) -> Iterator[str]:
    with served(create_app(herder)) as server:
        yield server.url


@pytest.fixture
def run(url: str) -> Any:
    runner = CliRunner()

    def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
        return runner.invoke(cli, list(args), env={"EOSCONNECT_URL": url, "COLUMNS": "200", **(env or {})})

    return invoke


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "seq.json"
    path.write_text(json.dumps({"name": "seq", "config": {"connector.class": SOURCE_CLASS, "tasks.max": 2}}))
    return path


def ok(result: Any) -> str:
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_connector_lifecycle(run: Any, herder: FakeHerder, config_file: Path) -> None:
    assert "No connectors" in ok(run("connectors", "list"))
    out = ok(run("connectors", "create", "-f", str(config_file)))
    assert "Created connector seq" in out
    assert SOURCE_CLASS in out
    assert "tasks: 0" not in out and "RUNNING" in out, "create shows the tasks' states, not a count of 0"

    listing = ok(run("connectors", "list"))
    assert "seq" in listing and "RUNNING" in listing and "2/2" in listing

    as_json = json.loads(ok(run("connectors", "list", "--output", "json")))
    assert as_json["seq"]["status"]["connector"]["state"] == "RUNNING"

    assert "tasks.max" in ok(run("connectors", "config", "seq"))
    assert json.loads(ok(run("connectors", "config", "seq", "-o", "json")))["tasks.max"] == "2"
    assert json.loads(ok(run("connectors", "get", "seq", "-o", "json")))["type"] == "source"
    assert "type: source" in ok(run("connectors", "get", "seq"))

    status = ok(run("connectors", "status", "seq"))
    assert "RUNNING" in status and "fake-worker:8083" in status
    assert json.loads(ok(run("connectors", "status", "seq", "-o", "json")))["name"] == "seq"

    assert "Paused connector seq" in ok(run("connectors", "pause", "seq"))
    assert herder.target["seq"] == "PAUSED"
    assert "Resumed" in ok(run("connectors", "resume", "seq"))
    assert herder.target["seq"] == "STARTED"

    assert "Restarted connector seq" in ok(run("connectors", "restart", "seq"))
    herder.task_state[("seq", 1)] = "FAILED"
    restarted = ok(run("connectors", "restart", "seq", "--include-tasks", "--only-failed"))
    assert "RESTARTING" in restarted
    assert herder.calls[-1] == ("restart_connector", ("seq", True, True))
    assert "Restarted task 1" in ok(run("connectors", "restart", "seq", "--task", "1"))

    assert "Stopped" in ok(run("connectors", "stop", "seq"))
    assert herder.target["seq"] == "STOPPED"
    assert json.loads(ok(run("connectors", "delete", "seq", "-o", "json"))) == {
        "message": "Deleted connector seq.",
        "name": "seq",
    }
    assert herder.configs == {}


def test_offsets(run: Any, herder: FakeHerder, config_file: Path, tmp_path: Path) -> None:
    ok(run("connectors", "create", "-f", str(config_file)))
    ok(run("connectors", "stop", "seq"))
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps({"offsets": [{"partition": {"task": 0}, "offset": {"seq": 41}}]}))
    assert "altered" in ok(run("connectors", "offsets", "seq", "--alter", str(offsets)))
    table = ok(run("connectors", "offsets", "seq"))
    assert '{"task": 0}' in table and '{"seq": 41}' in table
    assert json.loads(ok(run("connectors", "offsets", "seq", "-o", "json")))["offsets"][0]["offset"] == {
        "seq": 41
    }
    assert "reset" in ok(run("connectors", "offsets", "seq", "--reset"))
    assert herder.offsets["seq"] == []


def test_server_errors_print_the_message_and_exit_1(run: Any, config_file: Path, tmp_path: Path) -> None:
    result = run("connectors", "status", "missing")
    assert result.exit_code == 1
    assert "Connector missing not found" in result.output
    assert "404" in result.output

    ok(run("connectors", "create", "-f", str(config_file)))
    again = run("connectors", "create", "-f", str(config_file))
    assert again.exit_code == 1
    assert "already exists" in again.output

    running = run("connectors", "offsets", "seq", "--reset")
    assert running.exit_code == 1
    assert "STOPPED" in running.output
    offsets = tmp_path / "offsets.json"
    offsets.write_text(json.dumps([{"partition": {"task": 0}, "offset": {"seq": 1}}]))
    alter = run("connectors", "offsets", "seq", "--alter", str(offsets))
    assert alter.exit_code == 1 and "eosconnect connectors stop seq" in alter.output, alter.output
    assert "/connectors/seq/stop" not in alter.output, "the CLI names its own command, not the endpoint"

    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert run("connectors", "create", "-f", str(bad)).exit_code == 2  # a mistake in the input
    nameless = tmp_path / "nameless.json"
    nameless.write_text(json.dumps({"connector.class": SOURCE_CLASS}))
    result = run("connectors", "create", "-f", str(nameless))
    assert result.exit_code == 2
    assert "--name" in result.output
    missing = run("connectors", "create", "-f", str(tmp_path / "nope.json"))
    assert missing.exit_code == 2 and "nope.json: No such file or directory" in missing.output
    assert "Traceback" not in missing.output and len(missing.output.strip().splitlines()) == 1


def test_create_from_flat_json_and_properties(run: Any, herder: FakeHerder, tmp_path: Path) -> None:
    flat = tmp_path / "flat.json"
    flat.write_text(json.dumps({"connector.class": SOURCE_CLASS, "tasks.max": "1"}))
    ok(run("connectors", "create", "-f", str(flat), "--name", "flat"))
    props = tmp_path / "p.properties"
    props.write_text(f"# comment\nname=props\nconnector.class={SOURCE_CLASS}\ntasks.max = 3\n")
    ok(run("connectors", "create", "-f", str(props)))
    assert herder.configs["props"]["tasks.max"] == "3"
    assert sorted(herder.configs) == ["flat", "props"]


def test_unreachable_server_exits_1(run: Any) -> None:
    result = run("connectors", "list", "--url", "http://127.0.0.1:9")
    assert result.exit_code == 1
    assert "cannot reach" in result.output


def test_plugins(run: Any, tmp_path: Path) -> None:
    listing = ok(run("plugins", "list"))
    assert SOURCE_CLASS in listing and "0.1.0" in listing
    assert "transformation" not in listing
    assert "transformation" in ok(run("plugins", "list", "--all"))
    assert json.loads(ok(run("plugins", "list", "-o", "json")))[0]["class"] == SOURCE_CLASS
    assert "tasks.max" in ok(run("plugins", "config", "SequenceSource"))

    good = tmp_path / "good.json"
    good.write_text(json.dumps({"connector.class": SOURCE_CLASS, "tasks.max": "1"}))
    assert "is valid" in ok(run("plugins", "validate", "SequenceSource", "-f", str(good)))

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"connector.class": SOURCE_CLASS, "tasks.max": "0"}))
    result = run("plugins", "validate", "SequenceSource", "-f", str(bad))
    assert result.exit_code == 1
    assert "1 error(s)" in result.output and "at least 1" in result.output
    as_json = run("plugins", "validate", "SequenceSource", "-f", str(bad), "-o", "json")
    assert as_json.exit_code == 1
    assert json.loads(as_json.output)["error_count"] == 1

    assert "is valid" in ok(run("plugins", "validate", "-f", str(good)))  # the class from the file
    classless = tmp_path / "classless.json"
    classless.write_text(json.dumps({"tasks.max": "1"}))
    missing = run("plugins", "validate", "-f", str(classless))
    assert missing.exit_code == 2 and "connector.class" in missing.output
    narrow = run("plugins", "list", env={"COLUMNS": "50"})
    assert narrow.exit_code == 0 and "…" not in narrow.output  # class names fold, never cut

    mismatch = run("plugins", "validate", "FakeSink", "-f", str(good))
    assert mismatch.exit_code == 1
    assert "does not match" in mismatch.output


def test_basic_auth_option(herder: FakeHerder) -> None:
    runner = CliRunner()
    with served(create_app(herder, basic_auth="admin:pw")) as server:
        denied = runner.invoke(cli, ["connectors", "list", "--url", server.url])
        assert denied.exit_code == 1
        assert "401" in denied.output
        allowed = runner.invoke(
            cli, ["connectors", "list", "--url", server.url], env={"EOSCONNECT_AUTH": "admin:pw"}
        )
        assert allowed.exit_code == 0, allowed.output


def test_plugins_list_shows_the_hosted_sources_installed_here(
    run: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eosconnect.clients import cli as clients_cli
    from eosconnect.tools.hosted_plugins import hosted_plugin_rows

    site = tmp_path / "airbyte-source-faker" / "lib" / "python3.11" / "site-packages"
    (site / "airbyte_source_faker-7.2.1.dist-info").mkdir(parents=True)
    monkeypatch.setattr(clients_cli, "LOCAL_PLUGIN_LISTERS", [lambda: hosted_plugin_rows(str(tmp_path))])
    listing = ok(run("plugins", "list"))
    assert SOURCE_CLASS in listing
    assert "airbyte-source-faker" in listing and "7.2.1" in listing and "airbyte" in listing
    assert "airbyte-source-faker" not in ok(run("plugins", "list", "-o", "json")), "the worker's answer only"


def test_signal_sends_the_type_and_data_and_says_why_it_was_refused(
    run: Any, herder: FakeHerder, config_file: Path
) -> None:
    ok(run("connectors", "create", "-f", str(config_file)))
    refused = run("connectors", "signal", "seq", "log", '{"message": "hi"}')
    assert refused.exit_code == 1 and "takes no signals" in refused.output, refused.output
    bad = run("connectors", "signal", "seq", "execute-snapshot", "{nope")
    assert bad.exit_code == 2 and "DATA is not JSON" in bad.output, bad.output
    listed = run("connectors", "signal", "seq", "log", "[1]")
    assert listed.exit_code == 2 and "DATA must be a JSON object" in listed.output
