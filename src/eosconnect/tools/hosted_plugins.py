"""The Airbyte sources and Singer taps installed on this machine, for `eosconnect plugins list`:
found from installed package metadata (the venvs under the default venv directory and the
worker's environment), without running any of them."""

from __future__ import annotations

from typing import Annotated

import typer

from eosconnect.connectors.hosted.executables import DEFAULT_VENV_DIR, install_package, installed_sources

__all__ = ["hosted_plugin_rows", "install_hosted"]


def hosted_plugin_rows(venv_dir: str = DEFAULT_VENV_DIR) -> tuple[str, list[tuple[str, str, str, str]]]:
    rows = [(i.protocol, i.version, i.package, i.executable) for i in installed_sources(venv_dir)]
    title = f"AirbyteSource / SingerSource programs on this machine (venvs under {venv_dir})"
    return title, rows


def install_hosted(
    requirement: Annotated[str, typer.Argument(help="The package, e.g. airbyte-source-faker or tap-x==1.2")],
    venv_dir: Annotated[
        str,
        typer.Option(
            "--venv-dir", help="The directory of source venvs (airbyte.venv.dir / singer.venv.dir)."
        ),
    ] = DEFAULT_VENV_DIR,
) -> None:
    """Install an Airbyte source or Singer tap into a venv of its own, where AirbyteSource and
    SingerSource find it by its package name."""
    executable = install_package(requirement, venv_dir)
    typer.echo(f"{requirement}: {executable}")
