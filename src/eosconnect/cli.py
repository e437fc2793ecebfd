"""The `eosconnect` command line: one Typer app composed of each layer's own sub-commands."""

from __future__ import annotations

import typer

from eosconnect.devkafka.cli import app as kafka_app

app = typer.Typer(
    help="eosconnect: Kafka Connect-style connectors on Spark, exactly once into Kafka.", no_args_is_help=True
)
app.add_typer(kafka_app, name="kafka")


@app.command()
def version() -> None:
    """Print the eosconnect version."""
    from eosconnect import __version__

    print(__version__)


@app.command()
def demo(
    tasks: int = typer.Option(4, help="Number of Spark tasks."),
    records: int = typer.Option(5000, help="Records per task."),
) -> None:
    """Run the pipeline end to end on a local broker and Spark local[*]; exit 1 unless verified."""
    from eosconnect.tools.demo import run_demo

    if not run_demo(tasks=tasks, records_per_task=records):
        raise typer.Exit(1)


if __name__ == "__main__":
    app()
