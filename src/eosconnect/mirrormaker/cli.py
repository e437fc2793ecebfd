"""The `eosconnect mirror-maker` and `eosconnect mirror translate-offsets` commands."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from eosconnect.api.errors import ConfigException
from eosconnect.cli_errors import CliGroup, UserError
from eosconnect.plugins.config_providers import resolve_config

if TYPE_CHECKING:
    from eosconnect.mirrormaker.config import MirrorMakerPlan

__all__ = ["mirror_app", "mirror_maker"]

mirror_app = typer.Typer(
    cls=CliGroup, help="MirrorMaker 2 tools: translated consumer-group offsets.", no_args_is_help=True
)


def _load(properties: Path, clusters: list[str] | None) -> MirrorMakerPlan:
    from eosconnect.launch import load_properties
    from eosconnect.mirrormaker.config import MirrorMakerConfigError, plan

    try:
        return plan(load_properties(properties), clusters)
    except MirrorMakerConfigError as exc:
        typer.echo(f"{properties}: settings that cannot be honoured:", err=True)
        for name, problems in (exc.errors or {}).items():
            for problem in problems:
                typer.echo(f"  {name}: {problem}", err=True)
        raise typer.Exit(2) from None


def mirror_maker(
    properties: Annotated[
        Path, typer.Argument(exists=True, dir_okay=False, help="MirrorMaker 2's mm2.properties.")
    ],
    clusters: Annotated[
        list[str] | None, typer.Option("--clusters", help="Run only the flows into these target clusters.")
    ] = None,
    log_level: Annotated[str, typer.Option(help="Python log level.")] = "INFO",
    dry_run: Annotated[
        bool, typer.Option(help="Print the workers and connector configs, run nothing.")
    ] = False,
) -> None:
    """MirrorMaker 2's dedicated mode: every enabled flow of mm2.properties on embedded workers."""
    from eosconnect.mirrormaker.driver import run_mirror_maker

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    mm2_plan = _load(properties, clusters)
    if dry_run:
        typer.echo(
            json.dumps(
                {
                    t.alias: {"worker": t.worker_props, "connectors": t.connectors}
                    for t in mm2_plan.targets.values()
                },
                indent=2,
            )
        )
        return
    raise typer.Exit(run_mirror_maker(properties, mm2_plan))


def _cluster_client(props: dict[str, str], alias: str) -> dict[str, str] | None:
    """librdkafka settings reaching cluster `alias` of an mm2.properties (None: no bootstrap)."""
    bootstrap = props.get(f"{alias}.bootstrap.servers")
    if not bootstrap:
        return None
    prefix = f"{alias}."
    client = {"bootstrap.servers": bootstrap}
    client.update(
        {
            k[len(prefix) :]: v
            for k, v in props.items()
            if k.startswith(prefix) and k[len(prefix) :].startswith(("security.", "sasl.", "ssl."))
        }
    )
    # ${provider:path:key} values, by the config.providers the file declares at its top level.
    try:
        return resolve_config(client, props)
    except ConfigException as exc:
        raise UserError(f"cluster {alias}: {exc}") from exc


@mirror_app.command("translate-offsets")
def translate_offsets_command(
    group: Annotated[str, typer.Option(help="The consumer group.")],
    source: Annotated[str, typer.Option(help="Alias of the cluster the group consumed.")],
    target: Annotated[str, typer.Option(help="Alias of the cluster to resume on.")],
    config: Annotated[Path, typer.Option(help="mm2.properties naming both clusters.")] = Path(
        "mm2.properties"
    ),
    commit: Annotated[bool, typer.Option(help="Also commit them to the group on the target.")] = False,
) -> None:
    """Where GROUP resumes on TARGET: the latest checkpoints (RemoteClusterUtils.translateOffsets).

    A partition whose committed offset on SOURCE no offset sync covers is named on stderr and left
    out (no exact translation exists); the exit status is then 1."""
    from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
    from confluent_kafka.admin import AdminClient

    from eosconnect.connectors.mirror_topics import policy_of
    from eosconnect.launch import load_properties
    from eosconnect.mirrormaker.client import translate_offsets, untranslatable

    props = load_properties(config)
    client = _cluster_client(props, target)
    if client is None:
        typer.echo(f"{config} has no {target}.bootstrap.servers", err=True)
        raise typer.Exit(2)
    offsets = translate_offsets(client, source, group)
    uncovered: dict[tuple[str, int], tuple[int, str]] = {}
    source_client = _cluster_client(props, source)
    if source_client is not None:
        flow = f"{source}->{target}."
        policy = policy_of(
            {
                "source.cluster.alias": source,
                **{
                    name: props.get(flow + name, props.get(name, ""))
                    for name in ("replication.policy.class", "replication.policy.separator")
                },
            }
        )
        try:
            uncovered = untranslatable(source_client, client, source, group)
        except KafkaException as exc:
            typer.echo(f"could not check the group's offsets on {source}: {exc}", err=True)
        for (topic, partition), (offset, why) in sorted(uncovered.items()):
            offsets.pop((policy.target_topic(topic), partition), None)
            typer.echo(
                f"no translation for group {group!r} on {topic}-{partition}: its committed offset {offset} "
                f"cannot be translated exactly ({why}); it gets no offset on {target}",
                err=True,
            )
    if not offsets:
        if uncovered:
            typer.echo(f"no partition of group {group!r} translates exactly: nothing to resume", err=True)
        else:
            typer.echo(f"no checkpoints of group {group!r} from {source} on {target} yet", err=True)
        raise typer.Exit(1)
    typer.echo(
        json.dumps([{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(offsets.items())])
    )
    if commit:
        admin = AdminClient(dict(client))
        request = [
            ConsumerGroupTopicPartitions(
                group, [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
            )
        ]
        admin.alter_consumer_group_offsets(request)[group].result()
        typer.echo(f"committed to group {group!r} on {target}", err=True)
    if uncovered:
        raise typer.Exit(1)
