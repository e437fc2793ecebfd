"""`eosconnect connectors ...` and `eosconnect plugins ...`: the REST API from the command line.

Two Typer apps, wired into the main CLI with::

    app.add_typer(connectors_app, name="connectors")
    app.add_typer(plugins_app, name="plugins")

Every command takes `--url` (default http://localhost:8083, env `EOSCONNECT_URL`), `--auth
user:password` (env `EOSCONNECT_AUTH`), `--insecure` / `--cacert FILE` for HTTPS, and `--output
table|json`. A failed request prints the server's message and exits 1; a mistake in the input (a
file, an option) exits 2 (both as one line, by `cli_errors.CliGroup`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.table import Column, Table
from rich.text import Text

from eosconnect.cli_errors import CliGroup, UserError
from eosconnect.clients.cli_render import (
    class_column_width,
    dotted,
    first_line,
    make_console,
    print_config,
    print_info,
    print_json,
    print_status,
    state_text,
)
from eosconnect.clients.rest import ConnectClient, ConnectError

__all__ = ["LOCAL_PLUGIN_LISTERS", "connectors_app", "plugins_app"]

#: Listers of plugins installed on this machine outside the worker's connector classes (hosted
#: Airbyte sources and Singer taps, each in a venv of its own): `plugins list` shows their rows
#: (title, then (kind, version, name, where) rows) under the worker's table. The command line
#: registers them; this module knows no connector.
LOCAL_PLUGIN_LISTERS: list[Callable[[], tuple[str, list[tuple[str, str, str, str]]]]] = []

connectors_app = typer.Typer(
    cls=CliGroup, help="Manage connectors through a worker's REST API.", no_args_is_help=True
)
plugins_app = typer.Typer(
    cls=CliGroup, help="List connector plugins and validate configurations.", no_args_is_help=True
)


class Output(StrEnum):
    table = "table"
    json = "json"


UrlOpt = Annotated[
    str, typer.Option("--url", envvar="EOSCONNECT_URL", help="The worker's REST URL.", show_default=True)
]
AuthOpt = Annotated[
    str | None,
    typer.Option("--auth", envvar="EOSCONNECT_AUTH", help="user:password for basic authentication."),
]
InsecureOpt = Annotated[bool, typer.Option("--insecure", help="Do not verify the server's TLS certificate.")]
CaOpt = Annotated[
    Path | None, typer.Option("--cacert", help="CA certificate (PEM) to verify the server with.")
]
OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table (readable) or json.")]
NameArg = Annotated[str, typer.Argument(help="The connector's name.")]
DEFAULT_URL = "http://localhost:8083"
#: How long `connectors create` waits for the new connector's tasks to be listed.
CREATE_WAIT_S = 5.0


def _fail(message: str) -> NoReturn:
    """A mistake in the command's input: one line, exit 2 (cli_errors.CliGroup prints it)."""
    raise UserError(message)


def _client(url: str, auth: str | None, insecure: bool, cacert: Path | None) -> ConnectClient:
    credentials = None
    if auth:
        user, sep, password = auth.partition(":")
        if not sep:
            _fail("--auth must be user:password")
        credentials = (user, password)
    verify: bool | str = False if insecure else (str(cacert) if cacert else True)
    return ConnectClient(url, auth=credentials, verify=verify)


def _read_file(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")  # a missing file: one line from CliGroup
    if path.suffix == ".properties":
        props: dict[str, str] = {}
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", "!")):
                continue
            sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
            if sep < 0:
                props[line] = ""
            else:
                props[line[:sep].strip()] = line[sep + 1 :].strip()
        return props
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(f"{path} is not valid JSON: {exc}")


def _done(output: Output, message: str, **fields: Any) -> None:
    if output is Output.json:
        print_json({"message": message, **fields})
    else:
        make_console().print(message, highlight=False)


# ---------------------------------------------------------------------- connectors


@connectors_app.command("list")
def list_connectors(
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """List connectors with their type, state and tasks."""
    with _client(url, auth, insecure, cacert) as client:
        expanded = client.list_connectors(["status", "info"])
    if output is Output.json:
        print_json(expanded)
        return
    rows = []
    for name in sorted(expanded):
        entry = expanded[name] or {}
        status = entry.get("status") or {}
        info = entry.get("info") or {}
        tasks = status.get("tasks") or []
        running = sum(1 for t in tasks if t.get("state") == "RUNNING")
        state = str((status.get("connector") or {}).get("state") or "?")
        kind = str(status.get("type") or info.get("type") or "?")
        rows.append(
            (
                name,
                kind,
                state,
                f"{running}/{len(tasks)}",
                str((info.get("config") or {}).get("connector.class", "")),
            )
        )
    # The short columns never wrap; class names break after a dot when the terminal is narrow
    # (never mid-word, never cut with an ellipsis).
    headers = ("Name", "Type", "State", "Tasks running")
    width = class_column_width(make_console(), [[h, *(r[i] for r in rows)] for i, h in enumerate(headers)])
    table = Table(*(Column(h, no_wrap=True) for h in headers), Column("Class", overflow="fold"))
    for name, kind, state, tasks_running, cls in rows:
        table.add_row(name, kind, state_text(state), tasks_running, dotted(cls, width))
    console = make_console()
    console.print(table)
    if not expanded:
        console.print("No connectors.")


@connectors_app.command("create")
def create_connector(
    file: Annotated[
        Path,
        typer.Option("--file", "-f", help='JSON {"name", "config"}, a flat JSON config, or .properties.'),
    ],
    name: Annotated[str | None, typer.Option("--name", help="The name (default: from the file).")] = None,
    initial_state: Annotated[
        str | None, typer.Option("--initial-state", help="RUNNING (default), PAUSED or STOPPED.")
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Create a connector from a file."""
    data = _read_file(file)
    if not isinstance(data, dict):
        _fail(f"{file} must hold a JSON object")
    if isinstance(data.get("config"), dict):
        config = dict(data["config"])
        name = name or data.get("name") or config.get("name")
        initial_state = initial_state or data.get("initial_state")
    else:
        config = dict(data)
        name = name or config.get("name")
    if not name:
        _fail(f"no connector name: put one in {file} or pass --name")
    with _client(url, auth, insecure, cacert) as client:
        info = client.create_connector(str(name), config, initial_state)
        if output is Output.json:
            print_json(info)
            return
        # The answer lists no tasks yet (the leader makes them next); show what is true a moment later.
        status = _first_status(client, str(name), wait=(initial_state or "RUNNING").upper() == "RUNNING")
    console = make_console()
    console.print(
        f"Created connector [bold]{info.get('name')}[/bold] (type: {info.get('type') or '?'}).",
        highlight=False,
    )
    if status is not None and status.get("tasks"):
        print_status(status)
    else:
        state = ((status or {}).get("connector") or {}).get("state") or "starting"
        console.print(
            f"Connector state: {state}; its tasks are being started. "
            f"Follow them with: eosconnect connectors status {name}",
            highlight=False,
        )
    print_config(info.get("config") or {})


def _first_status(client: ConnectClient, name: str, wait: bool, seconds: float = CREATE_WAIT_S) -> Any:
    """The connector's status once it lists tasks (within `seconds`, when `wait`), else the last
    one read (None when the worker has none yet)."""
    deadline = time.monotonic() + (seconds if wait else 0)
    status = None
    while True:
        try:
            status = client.status(name)
        except ConnectError:
            status = None  # not written to the status topic yet
        if (status and status.get("tasks")) or time.monotonic() >= deadline:
            return status
        time.sleep(0.25)


@connectors_app.command("get")
def get_connector(
    name: NameArg,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Show a connector's type, tasks and configuration."""
    with _client(url, auth, insecure, cacert) as client:
        info = client.get_connector(name)
    if output is Output.json:
        print_json(info)
    else:
        print_info(info)


@connectors_app.command("config")
def connector_config(
    name: NameArg,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Show a connector's configuration."""
    with _client(url, auth, insecure, cacert) as client:
        config = client.get_config(name)
    if output is Output.json:
        print_json(config)
    else:
        print_config(config)


@connectors_app.command("acls")
def connector_acls(
    name: NameArg,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """The Kafka ACLs the worker and this connector need (KIP-618), and the kafka-acls.sh commands."""
    with _client(url, auth, insecure, cacert) as client:
        answer = client.get_acls(name)
    if output is Output.json:
        print_json(answer)
        return
    table = Table("Principal", "Operation", "Resource type", Column("Resource name", overflow="fold"), "For")
    for row in answer.get("acls", []):
        table.add_row(
            row["principal"],
            row["operation"],
            row["resource_type"],
            row["resource_name"],
            row.get("role", ""),
        )
    console = make_console()
    console.print(table)
    console.print("Grant them with:")
    for command in answer.get("commands", []):
        print(command)


@connectors_app.command("status")
def connector_status(
    name: NameArg,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Show the state of a connector and of each of its tasks."""
    with _client(url, auth, insecure, cacert) as client:
        status = client.status(name)
    if output is Output.json:
        print_json(status)
    else:
        print_status(status)


def _action(verb: str, past: str) -> Any:
    def command(
        name: NameArg,
        url: UrlOpt = DEFAULT_URL,
        output: OutputOpt = Output.table,
        auth: AuthOpt = None,
        insecure: InsecureOpt = False,
        cacert: CaOpt = None,
    ) -> None:
        with _client(url, auth, insecure, cacert) as client:
            getattr(client, verb)(name)
        _done(output, f"{past} connector {name}.", name=name)

    command.__doc__ = {
        "pause": "Pause a connector and its tasks.",
        "resume": "Resume a paused or stopped connector.",
        "stop": "Stop a connector (its tasks shut down; offsets can then be changed).",
        "delete": "Delete a connector.",
    }[verb]
    command.__name__ = f"{verb}_connector"
    return command


connectors_app.command("pause")(_action("pause", "Paused"))
connectors_app.command("resume")(_action("resume", "Resumed"))
connectors_app.command("stop")(_action("stop", "Stopped"))
connectors_app.command("delete")(_action("delete", "Deleted"))


@connectors_app.command("restart")
def restart_connector(
    name: NameArg,
    include_tasks: Annotated[bool, typer.Option("--include-tasks", help="Restart the tasks too.")] = False,
    only_failed: Annotated[bool, typer.Option("--only-failed", help="Only what has FAILED.")] = False,
    task: Annotated[int | None, typer.Option("--task", help="Restart only this task.")] = None,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Restart a connector (optionally its tasks, or only the failed ones), or one task."""
    with _client(url, auth, insecure, cacert) as client:
        if task is not None:
            client.restart_task(name, task)
            _done(output, f"Restarted task {task} of connector {name}.", name=name, task=task)
            return
        status = client.restart(name, include_tasks, only_failed)
    if status is None:
        _done(output, f"Restarted connector {name}.", name=name)
    elif output is Output.json:
        print_json(status)
    else:
        make_console().print(f"Restart of connector {name} accepted.", highlight=False)
        print_status(status)


@connectors_app.command("signal")
def connector_signal(
    name: NameArg,
    signal_type: Annotated[
        str,
        typer.Argument(
            metavar="TYPE",
            help="execute-snapshot, stop-snapshot, pause-snapshot, resume-snapshot or log.",
        ),
    ],
    data: Annotated[
        str | None,
        typer.Argument(
            help='The signal\'s data as JSON, e.g. \'{"data-collections": ["public\\\\.orders"]}\'.'
        ),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Send a signal to a connector's running task (Debezium's signals: incremental snapshots, log)."""
    parsed: Any = None
    if data is not None:
        try:
            parsed = json.loads(data)
        except ValueError as exc:
            _fail(f"DATA is not JSON ({exc}): {data}")
        if not isinstance(parsed, dict):
            _fail(f"DATA must be a JSON object, not {data}")
    with _client(url, auth, insecure, cacert) as client:
        result = client.signal(name, signal_type, parsed)
    _done(output, str(result.get("message", "Signal sent.")), name=name, type=signal_type)


@connectors_app.command("offsets")
def connector_offsets(
    name: NameArg,
    reset: Annotated[
        bool, typer.Option("--reset", help="Delete all offsets (the connector must be STOPPED).")
    ] = False,
    alter: Annotated[
        Path | None,
        typer.Option(
            "--alter", help='JSON file {"offsets": [{"partition": {...}, "offset": {...}}]} (or the list).'
        ),
    ] = None,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Show, alter or reset a connector's offsets."""
    if reset and alter is not None:
        _fail("--reset and --alter exclude each other")
    with _client(url, auth, insecure, cacert) as client, _stopped_first(name):
        if reset:
            result = client.reset_offsets(name)
            _done(output, str(result.get("message", "Offsets reset.")), name=name)
            return
        if alter is not None:
            data = _read_file(alter)
            entries = data.get("offsets") if isinstance(data, dict) else data
            if not isinstance(entries, list):
                _fail(f'{alter} must hold {{"offsets": [...]}} or a JSON list')
            result = client.alter_offsets(name, entries)
            _done(output, str(result.get("message", "Offsets altered.")), name=name)
            return
        offsets = client.offsets(name)
    if output is Output.json:
        print_json(offsets)
        return
    table = Table("Partition", "Offset", title=f"Offsets of {name}", title_justify="left")
    for entry in offsets.get("offsets") or []:
        table.add_row(
            Text(json.dumps(entry.get("partition"), sort_keys=True)),
            Text(json.dumps(entry.get("offset"), sort_keys=True)),
        )
    make_console().print(table)


@contextlib.contextmanager
def _stopped_first(name: str) -> Iterator[None]:
    """Offsets change only on a STOPPED connector: say so with the command that stops it (the
    server's answer names its REST endpoint)."""
    try:
        yield
    except ConnectError as exc:
        if "STOPPED" not in exc.message:
            raise
        raise ConnectError(
            exc.status,
            f"connector {name} must be STOPPED before its offsets change: run "
            f"`eosconnect connectors stop {name}` first (and `eosconnect connectors resume {name}` after)",
        ) from None


# ---------------------------------------------------------------------- plugins


@plugins_app.command("list")
def list_plugins(
    all_plugins: Annotated[
        bool, typer.Option("--all", help="Also transformations, predicates and converters.")
    ] = False,
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """List the installed connector plugins and their versions."""
    with _client(url, auth, insecure, cacert) as client:
        plugins = client.plugins(not all_plugins)
    if output is Output.json:
        print_json(plugins)
        return
    console = make_console()
    rows = [(str(p.get("type")), str(p.get("version") or ""), str(p.get("class"))) for p in plugins]
    width = class_column_width(console, [["Type", *(r[0] for r in rows)], ["Version", *(r[1] for r in rows)]])
    table = Table(
        Column("Type", no_wrap=True), Column("Version", no_wrap=True), Column("Class", overflow="fold")
    )
    for kind, version, name in rows:
        table.add_row(kind, version, dotted(name, width))
    console.print(table)
    for lister in LOCAL_PLUGIN_LISTERS:
        title, local = lister()
        if not local:
            continue
        extra = Table(
            Column("Protocol", overflow="fold"),
            Column("Version", overflow="fold"),
            Column("Package", overflow="fold"),
            Column("Executable", overflow="fold"),
            title=title,
        )
        for row in local:
            extra.add_row(*row)
        console.print(extra)


@plugins_app.command("config")
def plugin_config(
    plugin: Annotated[str, typer.Argument(help="The plugin's class or alias.")],
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Show a plugin's configuration definitions."""
    with _client(url, auth, insecure, cacert) as client:
        definitions = client.plugin_config(plugin)
    if output is Output.json:
        print_json(definitions)
        return
    table = Table(
        Column("Name", no_wrap=True, overflow="fold"),
        "Type",
        "Required",
        Column("Default", overflow="fold"),
        "Importance",
        "Documentation",
    )
    for d in definitions:
        table.add_row(
            str(d.get("name")),
            str(d.get("type") or ""),
            "yes" if d.get("required") else "",
            Text(str(d.get("default_value") if d.get("default_value") is not None else "")),
            str(d.get("importance") or ""),
            Text(first_line(d.get("documentation"), 60)),
        )
    make_console().print(table)


@plugins_app.command("validate")
def validate_config(
    plugin: Annotated[
        str | None,
        typer.Argument(help="The connector class (or alias); default: connector.class from the file."),
    ] = None,
    *,
    file: Annotated[
        Path, typer.Option("--file", "-f", help="The config: flat JSON, {name, config} or .properties.")
    ],
    url: UrlOpt = DEFAULT_URL,
    output: OutputOpt = Output.table,
    auth: AuthOpt = None,
    insecure: InsecureOpt = False,
    cacert: CaOpt = None,
) -> None:
    """Validate a configuration; exits 1 when it has errors."""
    data = _read_file(file)
    if not isinstance(data, dict):
        _fail(f"{file} must hold a JSON object")
    config = dict(data["config"]) if isinstance(data.get("config"), dict) else dict(data)
    plugin = plugin or str(config.get("connector.class") or "").strip()
    if not plugin:
        _fail(
            f"{file} has no connector.class: add it, or name the plugin: plugins validate <class> -f {file}"
        )
    with _client(url, auth, insecure, cacert) as client:
        result = client.validate(plugin, config)
    errors = int(result.get("error_count") or 0)
    if output is Output.json:
        print_json(result)
    else:
        table = Table(
            Column("Name", no_wrap=True, overflow="fold"), Column("Value", overflow="fold"), "Errors"
        )
        for item in result.get("configs") or []:
            value = item.get("value") or {}
            problems = value.get("errors") or []
            if problems or value.get("name") in config:
                table.add_row(
                    str(value.get("name")),
                    Text(str(value.get("value") if value.get("value") is not None else "")),
                    Text("\n".join(problems), style="red"),
                )
        console = make_console()
        console.print(table)
        if errors:
            console.print(
                Text(f"{errors} error(s) in the configuration of {result.get('name')}.", style="bold red")
            )
        else:
            console.print(Text(f"The configuration of {result.get('name')} is valid.", style="green"))
    if errors:
        raise typer.Exit(1)
