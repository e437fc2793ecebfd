"""`eosconnect mirror-maker mm2.properties [--clusters B]`: MirrorMaker 2's dedicated mode.

Each target cluster gets one embedded worker (a Spark driver, herder and REST server, with its
internal topics on that cluster, as MM2's herders have) running the flows into it. With one target
selected the worker runs in this process; with several, one child process per target (each
`--clusters <alias>`), so a worker can die and restart on its own, which is also how several
MirrorMaker processes share the load: run the same file with the same `--clusters` on several
machines and their workers form one group per target.

The connector configs are (re)applied through the worker's REST API once it is up: PUT is
idempotent, so a restart with an unchanged file changes nothing and a changed file reconfigures
the flows. The REST API listens on loopback at a free port unless `<alias>.listeners` says
otherwise (it also carries the tasks' heartbeats, so it is always on).
"""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

import httpx

from eosconnect.launch import run_worker
from eosconnect.mirrormaker.config import MirrorMakerPlan, TargetPlan
from eosconnect.runtime.host import die_with_parent

__all__ = ["apply_connectors", "run_mirror_maker"]

log = logging.getLogger(__name__)

#: How long applying the connector configs may keep retrying (rebalances answer 409 meanwhile).
APPLY_TIMEOUT_S = 300.0
#: How long deleted connectors' tasks are given to finish their last transaction.
GRACE_AFTER_DELETE_S = 10.0


def apply_connectors(
    url: str, connectors: Mapping[str, Mapping[str, str]], timeout: float = APPLY_TIMEOUT_S
) -> None:
    """PUT every connector config, retrying while the worker is not ready for it (409, 5xx)."""
    deadline = time.monotonic() + timeout
    with httpx.Client(base_url=url, timeout=60) as client:
        _remove_obsolete(client, connectors, deadline)
        for name, config in connectors.items():
            while True:
                try:
                    response = client.put(f"/connectors/{quote(name, safe='')}/config", json=dict(config))
                except httpx.HTTPError as exc:
                    response, problem = None, str(exc)
                if response is not None and response.status_code < 300:
                    log.info("connector %s configured", name)
                    break
                if response is not None:
                    problem = f"{response.status_code} {response.text}"
                    if response.status_code == 400:
                        raise RuntimeError(f"connector {name} was refused: {problem}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"connector {name} could not be configured: {problem}")
                time.sleep(1.0)


#: Names this driver gives its connectors (`MirrorSourceConnector-A-B`, ...).
OWN_NAME = re.compile(r"Mirror(Source|Sink|Checkpoint|Heartbeat)Connector-.+")


def _remove_obsolete(client: httpx.Client, connectors: Mapping[str, object], deadline: float) -> None:
    """Delete the connectors of earlier runs that the file no longer has (a flow disabled, or
    connector.type switched: the old mirror must stop before the new one reads where it got to),
    and wait until they are gone."""
    while True:
        try:
            response = client.get("/connectors")
            if response.status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("the worker did not list its connectors")
        time.sleep(1.0)
    obsolete = [n for n in response.json() if OWN_NAME.fullmatch(n) and n not in connectors]
    for name in obsolete:
        while client.delete(f"/connectors/{quote(name, safe='')}").status_code not in (200, 204, 404):
            if time.monotonic() > deadline:
                raise RuntimeError(f"connector {name} could not be deleted")
            time.sleep(1.0)
        log.info("deleted connector %s: no longer in the file", name)
    for name in obsolete:
        while client.get(f"/connectors/{quote(name, safe='')}/status").status_code != 404:
            time.sleep(0.5)
    if obsolete:
        # Tasks stop gracefully after their connector is gone (committing their last transaction).
        time.sleep(GRACE_AFTER_DELETE_S)


def _run_worker_here(target: TargetPlan, properties: Path) -> None:
    for warning in target.warnings:
        log.warning("mirror-maker: %s", warning)

    with tempfile.TemporaryDirectory(prefix=f"eosconnect-mm2-{target.alias}-") as tmp:
        ready = Path(tmp) / "ready"

        def configure() -> None:
            while not ready.exists():
                time.sleep(0.2)
            url = ready.read_text().splitlines()[0]
            try:
                apply_connectors(url, target.connectors)
                print(
                    f"mirror-maker: {len(target.connectors)} connectors into {target.alias} at {url}",
                    flush=True,
                )
            except Exception as exc:
                log.error("mirror-maker: %s; stopping", exc)
                signal.raise_signal(signal.SIGTERM)

        threading.Thread(target=configure, name=f"mm2-configure-{target.alias}", daemon=True).start()
        # plan() checked every setting of the file already: no second round of warnings.
        run_worker(
            dict(target.worker_props),
            ready,
            source=f"{properties} (cluster {target.alias})",
            warn_unknown=False,
        )


def run_mirror_maker(properties: Path, mm2_plan: MirrorMakerPlan) -> int:
    """Run the plan's workers until SIGTERM/SIGINT; returns the exit code."""
    targets = list(mm2_plan.targets.values())
    if not targets:
        print(
            "mirror-maker: no enabled flow into the selected clusters (set <source>-><target>.enabled = true)"
        )
        return 1
    if len(targets) == 1:
        _run_worker_here(targets[0], properties)
        return 0
    children = [
        subprocess.Popen(
            [sys.executable, "-m", "eosconnect.cli", "mirror-maker", str(properties), "--clusters", t.alias],
            preexec_fn=die_with_parent,
        )
        for t in targets
    ]
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    while not stop.is_set() and all(c.poll() is None for c in children):
        stop.wait(1.0)
    for child in children:
        if child.poll() is None:
            child.terminate()
    codes = [child.wait() for child in children]
    return max(codes) if not stop.is_set() else 0
