"""`eosconnect topics consume|produce` and `eosconnect groups describe`: day-to-day checks of a topic
and of a consumer group, without Kafka's shell scripts or a script of one's own.

Every command takes `-b/--bootstrap-server` (env `EOSCONNECT_BOOTSTRAP_SERVERS`) and `-X KEY=VALUE`
client settings (librdkafka's, e.g. `-X security.protocol=SSL`), as `eosconnect verify` does.

- `topics consume T` reads T from the beginning (or `--from-offsets`) to its current end with
  read_committed (what consumers of exactly-once output see; records of aborted transactions are
  never shown) and prints a table of partition, offset, timestamp, key and value (`--json`: one
  JSON object a line); `--max N` keeps the first N records read.
- `topics create T` creates T (`--partitions`, `--replication-factor`, `-c KEY=VALUE`);
- `topics produce T` sends each line of standard input (or of `--file`) as one record's value,
  `--key-separator SEP` splitting `key SEP value`, with acks=all, and says how many were written.
- `groups describe G` shows the group's state and members and, per partition, the committed
  offset, the end offset, the lag and the records really left to read: the lag counts offsets, and
  each transaction's commit or abort marker takes one, so a consumer that read everything a
  transactional producer wrote lags by 1 per marker after its position (`records_left` tells them
  apart, read with read_committed, for partitions lagging by at most `COUNTED_LAG`).
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

from eosconnect.cli_errors import CliGroup, PlainHelpCommand, UserError
from eosconnect.storage.topic_reader import TopicRecord, read_to_end
from eosconnect.tools.verify import parse_start_offsets
from eosconnect.tools.verify_cli import (
    DEFAULT_BOOTSTRAP,
    BootstrapOpt,
    ClientSettingsOpt,
    CommandConfigOpt,
    client_settings,
    key_values,
)

__all__ = ["groups_app", "topics_app"]

topics_app = typer.Typer(cls=CliGroup, help="Read and write records of a topic.", no_args_is_help=True)
groups_app = typer.Typer(cls=CliGroup, help="Inspect consumer groups.", no_args_is_help=True)
TopicArg = Annotated[str, typer.Argument(help="The topic.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="One JSON object a line instead of a table.")]


def _text(data: bytes | None, limit: int | None = 120) -> str:
    if data is None:
        return "null"
    text = data.decode("utf-8", errors="replace")
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _when(timestamp_ms: int) -> str:
    if timestamp_ms <= 0:
        return "-"
    return dt.datetime.fromtimestamp(timestamp_ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


@topics_app.command("consume", cls=PlainHelpCommand)
def consume(
    topic: TopicArg,
    bootstrap_servers: BootstrapOpt = DEFAULT_BOOTSTRAP,
    settings: ClientSettingsOpt = None,
    command_config: CommandConfigOpt = None,
    max_records: Annotated[
        int | None, typer.Option("--max", "-n", help="Stop after this many records.", min=1)
    ] = None,
    from_offsets: Annotated[
        str | None, typer.Option(help="Start at PARTITION:OFFSET,... (other partitions: the beginning).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to reach the end of the topic.", min=1)] = 60.0,
    as_json: JsonOpt = False,
) -> None:
    """Print the records of TOPIC, from the beginning to its current end (read_committed)."""
    try:
        start = parse_start_offsets(from_offsets)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--from-offsets") from None
    config = client_settings(bootstrap_servers, settings, command_config=command_config)
    if str(config.get("isolation.level", "read_committed")) != "read_committed":
        raise UserError(
            "topics consume reads with isolation.level=read_committed only; remove -X isolation.level"
        )
    records: list[TopicRecord] = []

    def keep(record: TopicRecord) -> None:
        if max_records is None or len(records) < max_records:
            records.append(record)

    read_to_end(config, topic, start_offsets=start, timeout=timeout, on_record=keep)
    records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
    if as_json:
        for r in records:
            row = {
                "partition": r.partition,
                "offset": r.offset,
                "timestamp": r.timestamp,
                "key": None if r.key is None else _text(r.key, None),
                "value": None if r.value is None else _text(r.value, None),
            }
            sys.stdout.write(json.dumps(row) + "\n")
        return
    table = Table(
        "Partition",
        "Offset",
        Column("Timestamp (UTC)", no_wrap=True),
        Column("Key", overflow="fold"),
        Column("Value", overflow="fold"),
        title=f"{topic} (read_committed)",
        title_justify="left",
    )
    for r in records:
        table.add_row(
            str(r.partition), str(r.offset), _when(r.timestamp), Text(_text(r.key)), Text(_text(r.value))
        )
    console = Console()
    console.print(table)
    console.print(f"{len(records)} record(s)", highlight=False)


@topics_app.command("create", cls=PlainHelpCommand)
def create_topic(
    topic: TopicArg,
    bootstrap_servers: BootstrapOpt = DEFAULT_BOOTSTRAP,
    settings: ClientSettingsOpt = None,
    command_config: CommandConfigOpt = None,
    partitions: Annotated[int, typer.Option(help="Number of partitions.", min=1)] = 1,
    replication_factor: Annotated[int, typer.Option(help="-1: the broker's default.", min=-1)] = -1,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="A topic setting KEY=VALUE (repeatable).")
    ] = None,
) -> None:
    """Create TOPIC (the local broker does not create topics on first use)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    topic_config = key_values(config, "--config")
    admin = AdminClient(client_settings(bootstrap_servers, settings, command_config=command_config))
    new = NewTopic(topic, partitions, replication_factor, config=topic_config)
    admin.create_topics([new], request_timeout=30)[topic].result()
    Console(stderr=True).print(f"Created topic {topic} ({partitions} partition(s)).", highlight=False)


@topics_app.command("produce", cls=PlainHelpCommand)
def produce(
    topic: TopicArg,
    bootstrap_servers: BootstrapOpt = DEFAULT_BOOTSTRAP,
    settings: ClientSettingsOpt = None,
    command_config: CommandConfigOpt = None,
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="Read the records from this file (default: stdin).")
    ] = None,
    key_separator: Annotated[
        str | None, typer.Option(help="Each line is KEY<SEP>VALUE (default: the line is the value, no key).")
    ] = None,
    partition: Annotated[int | None, typer.Option(help="Write to this partition.", min=0)] = None,
) -> None:
    """Write each line of standard input (or --file) as one record of TOPIC (acks=all)."""
    from confluent_kafka import KafkaError, Message, Producer

    lines = (file.read_text(encoding="utf-8") if file is not None else sys.stdin.read()).splitlines()
    config = {
        **client_settings(bootstrap_servers, settings, command_config=command_config),
        "acks": "all",
        "allow.auto.create.topics": False,
    }
    failures: list[str] = []

    def delivered(error: KafkaError | None, _message: Message) -> None:
        if error is not None:
            failures.append(error.str())

    producer = Producer(config)
    sent = 0
    for number, line in enumerate(lines, 1):
        key: str | None = None
        value = line
        if key_separator is not None:
            key, sep, value = line.partition(key_separator)
            if not sep:
                raise UserError(f"line {number} has no key separator {key_separator!r}: {line[:80]!r}")
        extra: dict[str, Any] = {} if partition is None else {"partition": partition}
        producer.produce(
            topic,
            value=value.encode(),
            key=None if key is None else key.encode(),
            on_delivery=delivered,
            **extra,
        )
        producer.poll(0)
        sent += 1
    remaining = producer.flush(30)
    if failures or remaining:
        problem = failures[0] if failures else f"{remaining} record(s) not acknowledged within 30 s"
        raise UserError(
            f"{sent - len(failures) - remaining} of {sent} record(s) written to {topic}: {problem}", 1
        )
    Console(stderr=True).print(f"Produced {sent} record(s) to {topic}.", highlight=False)


#: `groups describe` reads a partition lagging by at most this many offsets to count the records
#: left (what a read_committed consumer would still get); a larger lag is not read ("?").
COUNTED_LAG = 10_000


def _records_left(client: dict[str, Any], row: dict[str, Any]) -> int | None:
    """The committed records after the group's position in the row's partition (None: not read)."""
    from eosconnect.storage.topic_reader import read_to_end

    lag = row["lag"]
    if lag is None or lag > COUNTED_LAG:
        return None
    if lag == 0:
        return 0
    seen = [0]

    def count(_record: object) -> None:
        seen[0] += 1

    read_to_end(
        client,
        row["topic"],
        start_offsets={row["partition"]: row["committed"]},
        partitions=[row["partition"]],
        timeout=30,
        on_record=count,
    )
    return seen[0]


@groups_app.command("describe", cls=PlainHelpCommand)
def describe_group(
    group: Annotated[str, typer.Argument(help="The consumer group.")],
    bootstrap_servers: BootstrapOpt = DEFAULT_BOOTSTRAP,
    settings: ClientSettingsOpt = None,
    command_config: CommandConfigOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show GROUP's state, members, and per partition its committed offset, end offset and lag."""
    from confluent_kafka import ConsumerGroupTopicPartitions
    from confluent_kafka.admin import AdminClient

    from eosconnect.storage.topic_reader import end_offsets

    client = client_settings(bootstrap_servers, settings, command_config=command_config)
    admin = AdminClient(client)
    description = admin.describe_consumer_groups([group], request_timeout=30)[group].result()
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=30)
    partitions = [tp for tp in committed[group].result().topic_partitions if tp.offset >= 0]
    ends = end_offsets(admin, partitions, timeout=30) if partitions else {}
    rows = [
        {
            "topic": tp.topic,
            "partition": tp.partition,
            "committed": tp.offset,
            "end": ends.get((tp.topic, tp.partition)),
            "lag": None
            if ends.get((tp.topic, tp.partition)) is None
            else max(0, ends[(tp.topic, tp.partition)] - tp.offset),
        }
        for tp in sorted(partitions, key=lambda tp: (tp.topic, tp.partition))
    ]
    for row in rows:
        row["records_left"] = _records_left(client, row)
    members = [
        {
            "member": m.member_id,
            "client": m.client_id,
            "host": m.host,
            "partitions": [
                f"{tp.topic}-{tp.partition}" for tp in (m.assignment.topic_partitions if m.assignment else [])
            ],
        }
        for m in description.members
    ]
    state = str(getattr(description.state, "name", description.state))
    if as_json:
        sys.stdout.write(
            json.dumps({"group": group, "state": state, "members": members, "offsets": rows}) + "\n"
        )
        return
    console = Console()
    console.print(f"[bold]{group}[/bold]  state: {state}  members: {len(members)}", highlight=False)
    if members:
        table = Table(
            Column("Member", overflow="fold"), "Client", "Host", Column("Partitions", overflow="fold")
        )
        for m in members:
            table.add_row(m["member"], m["client"], m["host"], ", ".join(m["partitions"]))
        console.print(table)
    offsets = Table(
        Column("Topic", no_wrap=True, overflow="fold"), "Partition", "Committed", "End", "Lag", "Records left"
    )
    for row in rows:
        left = "?" if row["records_left"] is None else str(row["records_left"])
        offsets.add_row(
            row["topic"], str(row["partition"]), str(row["committed"]), str(row["end"]), str(row["lag"]), left
        )
    console.print(offsets)
    markers = [r for r in rows if r["records_left"] is not None and r["lag"] and r["records_left"] < r["lag"]]
    if markers:
        console.print(
            f"Lag counts offsets, not records: {len(markers)} partition(s) lag by more than the records left "
            "to read, by transaction markers (a commit or abort takes one offset, so a consumer that read "
            "everything a transactional producer wrote lags by 1 per marker after its position) or by "
            "aborted records, which a read_committed consumer skips.",
            highlight=False,
        )
    if not rows:
        console.print(f"Group {group} has no committed offsets.", highlight=False)
