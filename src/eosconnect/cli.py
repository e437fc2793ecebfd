"""The `eosconnect` command line: one Typer app composed of each layer's own sub-commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from eosconnect.cli_errors import CliGroup, PlainHelpCommand
from eosconnect.clients.cli import LOCAL_PLUGIN_LISTERS, connectors_app, plugins_app
from eosconnect.devkafka.cli import app as kafka_app
from eosconnect.devkafka.cli import registry_app
from eosconnect.mirrormaker.cli import mirror_app, mirror_maker
from eosconnect.tools.hosted_plugins import hosted_plugin_rows, install_hosted
from eosconnect.tools.kafka_cli import groups_app, topics_app
from eosconnect.tools.verify_cli import verify

app = typer.Typer(
    cls=CliGroup,
    help="eosconnect: Kafka Connect-style connectors on Spark, exactly once into Kafka.",
    no_args_is_help=True,
)
app.add_typer(kafka_app, name="kafka")
app.add_typer(registry_app, name="registry")
app.add_typer(connectors_app, name="connectors")
app.add_typer(plugins_app, name="plugins")
LOCAL_PLUGIN_LISTERS.append(hosted_plugin_rows)
plugins_app.command("install")(install_hosted)
app.command("verify", cls=PlainHelpCommand)(verify)
app.add_typer(topics_app, name="topics")
app.add_typer(groups_app, name="groups")
app.add_typer(mirror_app, name="mirror")
app.command("mirror-maker")(mirror_maker)


@app.callback()
def main(
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            help="Also print an error's traceback (anywhere on the command line, or EOSCONNECT_DEBUG=1). "
            "Errors are one line: exit 2 for a mistake in the input, 1 when the operation failed.",
        ),
    ] = False,
) -> None:
    """eosconnect: Kafka Connect-style connectors on Spark, exactly once into Kafka."""


@app.command()
def version() -> None:
    """Print the eosconnect version."""
    from eosconnect import __version__

    print(__version__)


@app.command()
def worker(
    properties: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="worker.properties file.")],
    ready_file: Annotated[Path | None, typer.Option(help="Write the URL and pid here when ready.")] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "INFO",
) -> None:
    """Run a worker: Spark driver, herder (leader election, fencing) and the REST API.

    Before Spark starts, the settings are checked (settings that have no effect are warned by
    name), the brokers must answer and the REST port is bound: a mistake is one line, exit 2."""
    import logging

    from eosconnect.distributed import run_distributed
    from eosconnect.runtime.log_repeats import install_repeat_filter

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    install_repeat_filter()
    run_distributed(properties, ready_file)


@app.command()
def standalone(
    properties: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="worker.properties file.")],
    connectors: Annotated[
        list[Path],
        typer.Argument(
            exists=True,
            dir_okay=False,
            help="Connector files: .properties, or .json ({name, config} or flat).",
        ),
    ],
    ready_file: Annotated[Path | None, typer.Option(help="Write the URL and pid here when ready.")] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "INFO",
) -> None:
    """Run a standalone worker, as Kafka's connect-standalone.sh: the connectors of the files and
    their tasks in this process (no Spark, no config or status topic), with the REST API.

    Source offsets are kept in offset.storage.file.filename (at least once), or in the offsets
    topic inside each transaction with exactly.once.source.support=enabled. The settings, the
    brokers, the REST port and every connector file are checked first: a mistake is one line, exit 2."""
    import logging

    from eosconnect.runtime.log_repeats import install_repeat_filter
    from eosconnect.standalone import run_standalone

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    install_repeat_filter()
    run_standalone(properties, connectors, ready_file)


@app.command()
def demo(
    seconds: Annotated[float, typer.Option(help="Seconds of streaming between the demo's steps.")] = 8.0,
) -> None:
    """The pipeline end to end: broker, worker, JdbcSource, a SIGKILL and a reconfiguration, verified."""
    from eosconnect.tools.demo import run_demo

    if not run_demo(seconds_per_phase=seconds):
        raise typer.Exit(1)


@app.command("demo-spark")
def demo_spark(
    seconds: Annotated[float, typer.Option(help="Seconds of streaming before the driver is killed.")] = 6.0,
) -> None:
    """JdbcSource -> Spark join -> eosconnect-kafka; the driver is SIGKILLed and restarted, then verified."""
    from eosconnect.tools.demo_spark import run_spark_demo

    if not run_spark_demo(seconds=seconds):
        raise typer.Exit(1)


@app.command("demo-db")
def demo_db(
    seconds: Annotated[float, typer.Option(help="Seconds of streaming after the sink task is killed.")] = 6.0,
) -> None:
    """JdbcSource (SQLite) -> Kafka -> JdbcSink (PostgreSQL) through a SIGKILL of the sink task, compared."""
    from eosconnect.tools.demo_db import run_db_demo

    if not run_db_demo(seconds=seconds):
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
