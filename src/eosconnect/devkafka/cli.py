"""`eosconnect kafka ...` and `eosconnect registry ...`: start, stop and inspect local Apache Kafka
clusters and a local schema registry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from eosconnect.cli_errors import CliGroup
from eosconnect.devkafka.cluster import ClusterError, LocalKafkaCluster
from eosconnect.devkafka.distribution import KafkaSetupError
from eosconnect.devkafka.processes import pid_alive
from eosconnect.devkafka.registry import (
    APICURIO_VERSION,
    STATE_FILE,
    LocalSchemaRegistry,
    RegistryError,
)
from eosconnect.devkafka.security import SECURITY_MODES, SecurityMode

DEFAULT_DIR = Path(".eosconnect/kafka")

app = typer.Typer(
    cls=CliGroup, help="Run real Apache Kafka KRaft brokers on loopback (tests, demo, development)."
)
console = Console()
DirOption = Annotated[Path, typer.Option("--dir", help="Run directory of the cluster (configs, data, logs).")]


def _attach(run_dir: Path) -> LocalKafkaCluster:
    try:
        return LocalKafkaCluster.attach(run_dir)
    except ClusterError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc


@app.command()
def start(
    run_dir: DirOption = DEFAULT_DIR,
    brokers: Annotated[
        int, typer.Option(help="1 (combined broker+controller) or 3 (plus a controller).")
    ] = 1,
    config: Annotated[
        list[str] | None, typer.Option("--config", "-c", help="Extra broker setting KEY=VALUE (repeatable).")
    ] = None,
    security: Annotated[
        str,
        typer.Option(
            help="plaintext, or sasl_ssl | sasl_plaintext | ssl: SCRAM-SHA-512 users or TLS client "
            "certificates, a CA made for the run, StandardAuthorizer (no ACL, no access)."
        ),
    ] = "plaintext",
) -> None:
    """Start a cluster in the background; prints `bootstrap.servers=...`, then for a secured cluster
    the super user's client settings as KEY=VALUE lines (for `-X` or a worker's properties)."""
    mode = security.strip().lower()
    if mode not in SECURITY_MODES:
        raise typer.BadParameter(f"--security must be one of {', '.join(SECURITY_MODES)}, got {security!r}")
    extra = {}
    for item in config or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise typer.BadParameter(f"--config expects KEY=VALUE, got {item!r}")
        extra[key.strip()] = value.strip()
    # _attach gives a cluster whose state was read from cluster.json, which exists here
    if (run_dir / "cluster.json").exists() and any(pid_alive(n.pid) for n in _attach(run_dir).state.nodes):  # type: ignore[union-attr]
        cluster = _attach(run_dir)
        console.print(f"A cluster is already running in {run_dir}.")
        _print_client_settings(cluster)
        return
    secured: SecurityMode = mode
    cluster = LocalKafkaCluster(run_dir, brokers=brokers, extra_config=extra, security=secured)
    try:
        with console.status(f"Starting {brokers} Kafka broker(s) in {run_dir} ..."):
            cluster.start()
    except (ClusterError, KafkaSetupError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(f"Apache Kafka {cluster.version} is running ({mode}); logs in {run_dir}/node-*/logs")
    _print_client_settings(cluster)


def _print_client_settings(cluster: LocalKafkaCluster) -> None:
    """`bootstrap.servers=` first (scripts read that line), then the super user's settings."""
    for key, value in cluster.client_config().items():
        print(f"{key}={value}")


@app.command()
def stop(run_dir: DirOption = DEFAULT_DIR) -> None:
    """Stop every node of the cluster cleanly (SIGKILL for any that hang)."""
    cluster = _attach(run_dir)
    cluster.stop()
    console.print(f"Stopped the Kafka cluster in {run_dir}.")


@app.command()
def status(run_dir: DirOption = DEFAULT_DIR) -> None:
    """Show each node, its role, port, pid and whether it runs."""
    cluster = _attach(run_dir)
    assert cluster.state is not None
    table = Table(title=f"Apache Kafka {cluster.state.version} in {run_dir}")
    for col in ("node", "roles", "port", "controller port", "pid", "state"):
        table.add_column(col)
    for n in cluster.state.nodes:
        alive = pid_alive(n.pid)
        table.add_row(
            str(n.node_id),
            n.roles,
            str(n.port or "-"),
            str(n.controller_port or "-"),
            str(n.pid or "-"),
            "[green]running[/green]" if alive else "[red]stopped[/red]",
        )
    console.print(table)
    _print_client_settings(cluster)


@app.command()
def broker(
    action: Annotated[str, typer.Argument(help="stop | kill | start | restart")],
    node_id: Annotated[int, typer.Argument(help="Node id (brokers are 1..N).")],
    run_dir: DirOption = DEFAULT_DIR,
) -> None:
    """Control one node: clean stop, SIGKILL, start, or restart."""
    cluster = _attach(run_dir)
    actions = {
        "stop": cluster.stop_node,
        "kill": cluster.kill_node,
        "start": cluster.start_node,
        "restart": cluster.restart_node,
    }
    if action not in actions:
        raise typer.BadParameter(f"action must be one of {', '.join(actions)}, got {action!r}")
    try:
        with console.status(f"{action}: node {node_id} (waiting until it is done) ..."):
            actions[action](node_id)
    except (ClusterError, KeyError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(f"node {node_id}: {action} done")


# ---------------------------------------------------------------------- eosconnect registry
REGISTRY_DIR = Path(".eosconnect/registry")

registry_app = typer.Typer(
    help="Run a real schema registry (Apicurio Registry, Confluent-compatible API) on loopback."
)
RegistryDirOption = Annotated[Path, typer.Option("--dir", help="Run directory of the registry (state, log).")]


def _attach_registry(run_dir: Path) -> LocalSchemaRegistry:
    try:
        return LocalSchemaRegistry.attach(run_dir)
    except RegistryError as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc


@registry_app.command("start")
def registry_start(
    run_dir: RegistryDirOption = REGISTRY_DIR,
    port: Annotated[int | None, typer.Option(help="HTTP port (default: a free one).")] = None,
    compatibility: Annotated[
        str | None,
        typer.Option(help="Global compatibility rule, e.g. BACKWARD (Apicurio's default is NONE)."),
    ] = None,
    basic_auth: Annotated[
        str | None,
        typer.Option(help="USER:PASSWORD required on every API call (HTTP basic auth; for tests only)."),
    ] = None,
) -> None:
    """Start the registry in the background; the last line printed is `schema.registry.url=...`."""
    if (run_dir / STATE_FILE).exists() and pid_alive(_attach_registry(run_dir).pid):
        console.print(f"A schema registry is already running in {run_dir}.")
        print(f"schema.registry.url={_attach_registry(run_dir).url}")
        return
    try:
        auth = None
        if basic_auth is not None:
            user, sep, password = basic_auth.partition(":")
            if not (sep and user and password):
                raise typer.BadParameter(f"--basic-auth expects USER:PASSWORD, got {basic_auth!r}")
            auth = (user, password)
        registry = LocalSchemaRegistry(run_dir, port=port, compatibility=compatibility, basic_auth=auth)
        with console.status(f"Starting Apicurio Registry {APICURIO_VERSION} in {run_dir} ..."):
            url = registry.start()
    except (RegistryError, KafkaSetupError, ValueError) as exc:
        console.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from exc
    console.print(
        f"Apicurio Registry {APICURIO_VERSION} is running (pid {registry.pid}); log {registry.log_file}"
    )
    print(f"schema.registry.url={url}")


@registry_app.command("stop")
def registry_stop(run_dir: RegistryDirOption = REGISTRY_DIR) -> None:
    """Stop the registry (SIGTERM, SIGKILL if it hangs); its in-memory schemas are gone."""
    _attach_registry(run_dir).stop()
    console.print(f"Stopped the schema registry in {run_dir}.")


@registry_app.command("status")
def registry_status(run_dir: RegistryDirOption = REGISTRY_DIR) -> None:
    """Whether the registry runs, its pid and URL."""
    registry = _attach_registry(run_dir)
    state = "[green]running[/green]" if registry.is_running() else "[red]stopped[/red]"
    console.print(f"Apicurio Registry {APICURIO_VERSION} in {run_dir}: {state} (pid {registry.pid or '-'})")
    print(f"schema.registry.url={registry.url}")
    if not registry.is_running():
        raise typer.Exit(1)
