"""The package's layering as one table: what each part of eosconnect is for and which parts it may import.

A part is a package or a top-level module under `src/eosconnect`. Imports go down the table only,
never up, not even lazily inside a function. A unit test checks every module's
imports against `LAYERS` (scanned with `ast`), that every part has a row and that the table has no
cycle; docs/architecture.md shows the same table, rendered by `markdown_table()` (run
`python -m eosconnect.layers` after changing it; the test fails while the page differs).

"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LAYERS", "Layer", "markdown_table", "write_docs"]


@dataclass(frozen=True)
class Layer:
    """One part: what it holds, and the parts it may import."""

    holds: str
    imports: frozenset[str] = frozenset()


def _layer(holds: str, *imports: str) -> Layer:
    return Layer(holds, frozenset(imports))


#: From the bottom up: each part, what it holds and which parts it may import.
LAYERS: dict[str, Layer] = {
    "__init__": _layer("the package's version"),
    "layers": _layer("this table"),
    "api": _layer(
        "the connector author's contract, as Kafka's `connect-api`: connectors, tasks, records, the data "
        "model, `ConfigDef`, and the `Converter`, `Transformation`, `Predicate` and `ConfigProvider` "
        "interfaces"
    ),
    "plugins": _layer(
        "finding plugins by name: `connector.class` (the built-in connectors' short names, entry points, "
        "Python paths), `plugin.path`, which modules may load; the worker's config providers (KIP-297)",
        "api",
    ),
    "policies": _layer(
        "the worker's limits on what connectors reach: `file.allowed.dirs`, `database.allowed.hosts`",
        "api",
        "plugins",
    ),
    "converters": _layer(
        "the built-in converters: Kafka's JSON, string, bytes and number converters, the Schema Registry "
        "formats (Avro, JSON Schema, Protobuf) and their registry client; converters by name",
        "api",
        "plugins",
    ),
    "transforms": _layer(
        "the built-in transformations and predicates (Kafka's SMTs, Debezium's `ExtractNewRecordState`) "
        "and the chain that runs them (`transforms/chain.py`)",
        "api",
        "converters",
        "plugins",
    ),
    "worker_config": _layer("the worker's settings (`WorkerConfig`, `worker.properties`)", "api"),
    "cli_errors": _layer(
        "how every command reports an error: one `Error:` line and an exit status (2: input, 1: failure)",
        "api",
    ),
    "storage": _layer(
        "Kafka-backed state and Kafka client primitives: read-to-end, config / offsets / status stores, "
        "client settings, topics, transactional ids and fencing them",
        "api",
        "plugins",
        "worker_config",
    ),
    "runtime": _layer(
        "what runs inside a Spark task: exactly-once and at-least-once source loops, sink loops, Kafka "
        "transactions (`transactions/`: one `TransactionSession` under the exactly-once source runner "
        "and the KIP-656 sink writer, the offsets that commit with a transaction, recovery, boundaries), "
        "the records a connector adds to its transactions (`api.transactions.TransactionParticipant`), "
        "the connectors' framework settings, metrics; the host's cache directory",
        "api",
        "converters",
        "plugins",
        "policies",
        "storage",
        "transforms",
        "worker_config",
    ),
    "connectors": _layer(
        "the built-in connectors (file, sequence, JDBC, PostgreSQL and MySQL CDC, lake sinks, hosted "
        "Airbyte and Singer sources, MirrorMaker 2's, with MM2's record formats and exact offset "
        "translation in `mirror*.py`)",
        "__init__",
        "api",
        "policies",
        "runtime",
        "storage",
        "transforms",
    ),
    "cluster": _layer(
        "the worker's control plane: the herder and its leader, election, fencing rounds, Spark jobs "
        "(its Spark daemon preloads the built-in connectors, and validation knows some of their rules)",
        "__init__",
        "api",
        "connectors",
        "converters",
        "plugins",
        "policies",
        "runtime",
        "storage",
        "transforms",
        "worker_config",
    ),
    "spark": _layer(
        "connectors as Spark data sources and sinks (the Python Data Source API)",
        "api",
        "cluster",
        "plugins",
        "runtime",
        "storage",
    ),
    "rest": _layer(
        "Kafka Connect's REST API over the herder's `Herder` protocol (`cluster/herder_api.py`)",
        "__init__",
        "api",
        "cluster",
        "plugins",
        "storage",
    ),
    "preflight": _layer(
        "the worker's start-up checks before Spark starts: settings, brokers reachable, REST port bound",
        "api",
        "cli_errors",
        "storage",
        "worker_config",
    ),
    "launch": _layer(
        "the worker-launch API: `load_properties`, `run_worker`, which wires the herder, the REST "
        "server and the Spark application (used by `eosconnect worker` and MirrorMaker's dedicated mode), "
        "and `run_standalone_worker` (the standalone herder and the REST server, no Spark)",
        "api",
        "cli_errors",
        "cluster",
        "plugins",
        "preflight",
        "rest",
        "runtime",
    ),
    "distributed": _layer(
        "the `eosconnect worker` command (`run_distributed`), on the launch API",
        "launch",
    ),
    "standalone": _layer(
        "the `eosconnect standalone` command (`run_standalone`): connector files read as Kafka's "
        "standalone worker reads them, on the launch API",
        "cli_errors",
        "launch",
    ),
    "mirrormaker": _layer(
        "MirrorMaker 2's dedicated mode: its config, driver and command line, on the launch API",
        "api",
        "cli_errors",
        "connectors",
        "launch",
        "plugins",
        "runtime",
        "storage",
        "worker_config",
    ),
    "clients": _layer("the REST API's client and its command line", "cli_errors"),
    "devkafka": _layer(
        "development tools: local Kafka brokers, Kafka Connect and the schema registry, fetched from Maven",
        "cli_errors",
        "runtime",
        "storage",
    ),
    "tools": _layer(
        "demos, verification, the connector docs generator, process launchers for tests",
        "api",
        "cli_errors",
        "cluster",
        "connectors",
        "converters",
        "devkafka",
        "launch",
        "plugins",
        "preflight",
        "runtime",
        "spark",
        "storage",
        "transforms",
    ),
    "cli": _layer(
        "the `eosconnect` command",
        "__init__",
        "cli_errors",
        "clients",
        "devkafka",
        "distributed",
        "mirrormaker",
        "runtime",
        "standalone",
        "tools",
    ),
}

_BEGIN = "<!-- layers: generated by `python -m eosconnect.layers` from src/eosconnect/layers.py -->"
_END = "<!-- /layers -->"


def _name(part: str) -> str:
    return "`__init__.py`" if part == "__init__" else f"`{part}/`" if _is_package(part) else f"`{part}.py`"


def _is_package(part: str) -> bool:
    return (Path(__file__).parent / part / "__init__.py").is_file()


def markdown_table() -> str:
    """The table as docs/architecture.md shows it, between its markers."""
    rows = ["| part | what it holds | may import |", "| --- | --- | --- |"]
    for part, layer in LAYERS.items():
        allowed = ", ".join(f"`{p}`" for p in sorted(layer.imports)) or "nothing of eosconnect"
        rows.append(f"| {_name(part)} | {layer.holds} | {allowed} |")
    return "\n".join([_BEGIN, *rows, _END])


def write_docs(path: Path) -> bool:
    """Put the table into the page between its markers; True if the page changed."""
    text = path.read_text()
    pattern = re.compile(re.escape(_BEGIN) + r".*?" + re.escape(_END), re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"{path}: the markers {_BEGIN!r} ... {_END!r} are missing")
    updated = pattern.sub(lambda _: markdown_table(), text)
    if updated != text:
        path.write_text(updated)
    return updated != text


if __name__ == "__main__":
    docs = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/architecture.md")
    print(f"{docs}: {'updated' if write_docs(docs) else 'up to date'}")
