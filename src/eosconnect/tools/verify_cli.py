"""`eosconnect verify`: check a topic against its source of truth, exactly once, read_committed.

Three checks:

* `--sequence`: SequenceSource output. With `--tasks N --records-per-task M`, every task's key must
  hold the sequence numbers 0..M-1 exactly once (minus the transactions SequenceSource aborts on
  purpose with `--abort-every`/`--commit-every`); without counts, per key no gap and no duplicate
  from 0 (from the lowest number seen when reading `--from-offsets`).
* `--jdbc URL --table T --id-column id`: JdbcSource output. Every row of the table exactly once,
  matched by its id.
* `--key-field F` or `--by key`: any topic. Each value of the JSON field F (a dotted path; the
  record key with `--by key`) once: records, distinct, duplicates, and gaps when the values are
  integers (a sequence numbered by the producer).

Keys and values are read as JSON (plain, or JsonConverter envelopes); `--value-converter`/
`--key-converter` (with `--converter-setting KEY=VALUE`) read topics written through another converter,
e.g. `--value-converter avro --converter-setting schema.registry.url=...` (tools/verify_decode.py).

Prints a summary table (expected, seen, duplicates, missing, unexpected, the first anomalies) and
exits 0 when the topic is exactly right, 1 on any anomaly, 2 on bad usage, 3 when the topic or the
table cannot be read. The checks themselves live in `eosconnect.tools.verify`; `print_report` is
shared with the demo.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from eosconnect.cli_errors import PlainHelpCommand, error_text
from eosconnect.preflight import check_brokers
from eosconnect.storage.topic_reader import TopicRecord
from eosconnect.tools.verify import (
    SequenceReport,
    parse_start_offsets,
    verify_field_topic,
    verify_jdbc_topic,
    verify_sequence_topic,
)

if TYPE_CHECKING:
    from eosconnect.tools.verify_decode import RecordDecoder

__all__ = [
    "EXIT_ANOMALIES",
    "EXIT_UNREADABLE",
    "BootstrapOpt",
    "ClientSettingsOpt",
    "CommandConfigOpt",
    "client_settings",
    "key_values",
    "print_report",
    "render_report",
    "verify",
    "verify_app",
]

EXIT_ANOMALIES = 1
EXIT_USAGE = 2
EXIT_UNREADABLE = 3
#: Topics with at least this many records to read get a progress bar.
PROGRESS_THRESHOLD = 10_000

verify_app = typer.Typer(
    help="Check a topic against its source of truth: every record exactly once (read_committed).",
    no_args_is_help=True,
)
console = Console()


def render_report(report: SequenceReport, title: str) -> Table:
    """The summary table: counts, the verdict, and the first anomalies."""
    table = Table(title=title, show_header=True, min_width=60)
    table.add_column("check")
    table.add_column("value", justify="right")
    for name, value in report.summary_rows():
        style = "" if name != "verdict" else ("bold green" if report.ok else "bold red")
        table.add_row(name, f"[{style}]{value}[/]" if style else value)
    if report.anomalies:
        table.add_section()
        text = Text("\n".join(report.anomalies), style="red", justify="left")
        table.add_row("first anomalies", text)
    return table


def print_report(report: SequenceReport, title: str, out: Console | None = None) -> None:
    """Print the summary table (what the demo and the CLI show)."""
    (out or console).print(render_report(report, title))


def key_values(settings: list[str] | None, option: str) -> dict[str, str]:
    """`KEY=VALUE` items of a repeatable option."""
    config: dict[str, str] = {}
    for item in settings or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise typer.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        config[key.strip()] = value.strip()
    return config


def client_settings(
    bootstrap_servers: str,
    settings: list[str] | None,
    *,
    check: bool = True,
    command_config: Path | None = None,
) -> dict[str, Any]:
    """`bootstrap.servers`, the `--command-config FILE` settings (tools/command_config.py), then the
    `-X KEY=VALUE` client settings (librdkafka's; they win), with librdkafka's own log lines kept
    off the terminal (the command reports what failed). With `check`, a broker must answer within
    seconds, else one line naming `-b` and the address (preflight.check_brokers)."""
    from eosconnect.preflight import QUIET
    from eosconnect.tools.command_config import load_command_config

    from_file = load_command_config(command_config) if command_config is not None else {}
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap_servers,
        **from_file,
        **key_values(settings, "-X"),
    }
    if check:
        check_brokers(config, bootstrap_servers, setting="--bootstrap-server")
    return {**config, "logger": QUIET}


class By(StrEnum):
    key = "key"


BootstrapOpt = Annotated[
    str,
    typer.Option(
        "--bootstrap-server",
        "--bootstrap-servers",
        "-b",
        envvar="EOSCONNECT_BOOTSTRAP_SERVERS",
        help="The Kafka cluster (what `eosconnect kafka start` prints).",
    ),
]
_CLIENT_SETTING_HELP = "A client setting KEY=VALUE (librdkafka's), e.g. security.protocol=SSL; repeatable."
ClientSettingsOpt = Annotated[
    list[str] | None,
    typer.Option("-X", "--client-setting", metavar="KEY=VALUE", help=_CLIENT_SETTING_HELP),
]
#: verify's spelling: -X, and the --consumer-config/-c it always had.
ConsumerSettingsOpt = Annotated[
    list[str] | None,
    typer.Option("-X", "--consumer-config", "-c", metavar="KEY=VALUE", help=_CLIENT_SETTING_HELP),
]
CommandConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        metavar="FILE",
        help="A properties file of client settings (security.protocol, sasl.*, ssl.*; config "
        "providers allowed), as Kafka's tools take it; -X settings win over it.",
    ),
]
DEFAULT_BOOTSTRAP = "localhost:9092"


def _records_to_read(config: dict[str, Any], topic: str, start: dict[int, int] | None) -> int:
    """Records between the start offsets and the high watermarks (an upper bound: control records
    and aborted records are counted too), for the progress bar."""
    from confluent_kafka.admin import AdminClient

    from eosconnect.storage.topic_reader import end_offsets, topic_partitions

    # Never auto-create the topic being checked (brokers with auto.create.topics.enable=true would).
    admin = AdminClient({**config, "allow.auto.create.topics": False, "log_level": 0})
    partitions = topic_partitions(admin, topic, 30)
    ends = end_offsets(admin, partitions, timeout=30)
    return sum(max(0, end - (start or {}).get(p, 0)) for (_, p), end in ends.items())


def _with_progress(
    total: int, show: bool, run: Callable[[Callable[[TopicRecord], None] | None], SequenceReport]
) -> SequenceReport:
    if not show or total < PROGRESS_THRESHOLD:
        with console.status(f"Reading up to {total} records with read_committed ..."):
            return run(None)
    with Progress(
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("reading (read_committed)", total=total)
        seen = 0

        def tick(_record: TopicRecord) -> None:
            nonlocal seen
            seen += 1
            if seen % 500 == 0:
                progress.update(task, completed=seen)

        report = run(tick)
        progress.update(task, completed=total)
        return report


@verify_app.command(cls=PlainHelpCommand)
def verify(
    topic: Annotated[str, typer.Option("--topic", "-t", help="The topic to check.", show_default=False)],
    key_field: Annotated[
        str | None,
        typer.Option(
            "--key-field",
            help="Any topic: each value of this JSON value field (a.b for nested) once; gaps for integers.",
        ),
    ] = None,
    by: Annotated[
        By | None, typer.Option("--by", help="Any topic: `--by key` checks each record key once.")
    ] = None,
    sequence: Annotated[bool, typer.Option("--sequence", help="Check SequenceSource output.")] = False,
    tasks: Annotated[
        int | None, typer.Option(help="--sequence: the connector's task count (keys 0..N-1).", min=1)
    ] = None,
    records_per_task: Annotated[
        int | None, typer.Option(help="--sequence: records.per.task, so seqs 0..M-1 per key.", min=0)
    ] = None,
    commit_every: Annotated[
        int | None, typer.Option(help="--sequence: transaction.commit.every of the connector.", min=1)
    ] = None,
    abort_every: Annotated[
        int, typer.Option(help="--sequence: transaction.abort.every of the connector (0: none).", min=0)
    ] = 0,
    jdbc: Annotated[
        str | None,
        typer.Option("--jdbc", help="Check JdbcSource output against this SQLAlchemy database URL."),
    ] = None,
    table: Annotated[
        str | None, typer.Option(help="--jdbc: the table (schema.table) the topic holds.")
    ] = None,
    id_column: Annotated[str, typer.Option(help="--jdbc: the column identifying a row.")] = "id",
    key_converter: Annotated[
        str | None,
        typer.Option(
            help="--jdbc/--key-field/--by: the converter the keys were written with, as in key.converter "
            "(e.g. avro); default: JSON text.",
        ),
    ] = None,
    value_converter: Annotated[
        str | None,
        typer.Option(
            help="--jdbc/--key-field/--by: the converter the values were written with, as in "
            "value.converter (e.g. avro, protobuf, jsonschema); default: JSON text.",
        ),
    ] = None,
    converter_setting: Annotated[
        list[str] | None,
        typer.Option(
            "--converter-setting",
            metavar="KEY=VALUE",
            help="A setting of --key-converter/--value-converter, e.g. schema.registry.url=http://...; "
            "repeatable.",
        ),
    ] = None,
    bootstrap_servers: BootstrapOpt = DEFAULT_BOOTSTRAP,
    consumer_config: ConsumerSettingsOpt = None,
    command_config: CommandConfigOpt = None,
    from_offsets: Annotated[
        str | None,
        typer.Option(help="Start at these offsets, PARTITION:OFFSET,... (other partitions: beginning)."),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to reach the end of the topic.", min=1)] = 120.0,
    max_anomalies: Annotated[int, typer.Option(help="Anomalies to list.", min=0)] = 10,
    progress: Annotated[
        bool, typer.Option(help=f"Show a progress bar for topics of {PROGRESS_THRESHOLD}+ records.")
    ] = True,
) -> None:
    """Check a topic: each record once, read to its end with read_committed.

    Against SequenceSource's sequences (--sequence), a table (--jdbc), or for any topic by a field
    of the JSON value (--key-field) or the record key (--by key). Topics written through another
    converter (Avro, Protobuf, JSON Schema) are read with --value-converter/--key-converter.

    Exit codes: 0 exactly once, 1 anomalies, 2 bad usage, 3 topic or table unreadable.

    Long by its signature (one Typer option per parameter); the checks themselves are in
    tools/verify.py.
    """
    chosen = [
        name
        for name, on in (
            ("--sequence", sequence),
            ("--jdbc", jdbc is not None),
            ("--key-field", key_field is not None),
            ("--by", by is not None),
        )
        if on
    ]
    if len(chosen) != 1:
        raise typer.BadParameter(
            "choose one check: --sequence, --jdbc URL, --key-field FIELD or --by key",
            param_hint="/".join(chosen) or "--sequence/--jdbc/--key-field/--by",
        )
    if jdbc is not None and not table:
        raise typer.BadParameter("--jdbc needs --table", param_hint="--table")
    if (tasks is None) != (records_per_task is None):
        raise typer.BadParameter("give both --tasks and --records-per-task, or neither", param_hint="--tasks")
    if abort_every and (commit_every is None or tasks is None):
        raise typer.BadParameter(
            "--abort-every needs --commit-every, --tasks and --records-per-task", param_hint="--abort-every"
        )
    try:
        start = parse_start_offsets(from_offsets)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--from-offsets") from None
    decode = _decoder(key_converter, value_converter, converter_setting, sequence)
    config = client_settings(bootstrap_servers, consumer_config, check=False, command_config=command_config)

    def run(on_record: Callable[[TopicRecord], None] | None) -> SequenceReport:
        if key_field is not None or by is not None:
            return verify_field_topic(
                config,
                topic,
                key_field,
                start_offsets=start,
                timeout=timeout,
                max_anomalies=max_anomalies,
                on_record=on_record,
                decode=decode,
            )
        if jdbc is not None:
            assert table is not None
            return verify_jdbc_topic(
                config,
                topic,
                jdbc,
                table,
                id_column,
                start_offsets=start,
                timeout=timeout,
                max_anomalies=max_anomalies,
                on_record=on_record,
                decode=decode,
            )
        return verify_sequence_topic(
            config,
            topic,
            start_offsets=start,
            timeout=timeout,
            on_record=on_record,
            tasks=tasks,
            records_per_task=records_per_task,
            commit_every=commit_every,
            abort_every=abort_every,
            max_anomalies=max_anomalies,
        )

    try:
        check_brokers(config, bootstrap_servers, setting="--bootstrap-server")
        total = _records_to_read(config, topic, start)
        report = _with_progress(total, progress and not os.environ.get("EOSCONNECT_NO_PROGRESS"), run)
    except Exception as exc:  # topic missing, read timeout, database unreachable, ...
        typer.secho(f"Error: cannot verify {topic!r}: {error_text(exc)}", err=True, fg="red")
        raise typer.Exit(EXIT_UNREADABLE) from exc
    if key_field is not None or by is not None:
        title = f"{topic} by {'record key' if key_field is None else key_field}, read_committed"
    else:
        source = f"table {table} ({jdbc and _hide_password(jdbc)})" if jdbc else "SequenceSource sequences"
        title = f"{topic} against {source}, read_committed"
    print_report(report, title)
    if report.seen == 0:
        console.print(f"[yellow]note: {topic!r} holds no committed records[/]")
    if not report.ok:
        raise typer.Exit(EXIT_ANOMALIES)


def _decoder(
    key_converter: str | None, value_converter: str | None, settings: list[str] | None, sequence: bool
) -> RecordDecoder | None:
    """The record decoder of the converter options (None: JSON as written), or bad usage naming the
    option."""
    from eosconnect.api.errors import ConfigException
    from eosconnect.tools.verify_decode import record_decoder

    given = key_converter is not None or value_converter is not None
    if settings and not given:
        raise typer.BadParameter(
            "needs --key-converter or --value-converter", param_hint="--converter-setting"
        )
    if given and sequence:
        raise typer.BadParameter(
            "--sequence reads SequenceSource's JSON: leave the converters out", param_hint="--value-converter"
        )
    try:
        return record_decoder(key_converter, value_converter, key_values(settings, "--converter-setting"))
    except ConfigException as exc:
        hint = "--key-converter" if value_converter is None else "--value-converter/--converter-setting"
        raise typer.BadParameter(str(exc), param_hint=hint) from None


def _hide_password(url: str) -> str:
    from sqlalchemy.engine import make_url

    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "<url>"
