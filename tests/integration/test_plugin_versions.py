"""KIP-891 on a real worker: plugin.path holds two versions of one connector, the older first;
`connector.plugin.version` runs the one it names, a connector without it runs the newest (as Kafka
loads it), each task in Spark's Python worker being that version's code; status and
`/connector-plugins` say which, and a range no installed version is in is refused naming them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from eosconnect.tools.worker_process import WorkerProcess
from support.workers import create_topics, delete_connector, sequence_config, wait_running, worker_settings

pytestmark = [pytest.mark.kafka, pytest.mark.spark]

PACKAGE = "acme_versions"

PLUGIN = '''
from pathlib import Path

from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask

from .release import VERSION


class AcmeTask(SequenceSourceTask):
    """Leaves a file named after its version: which copy ran, seen from outside."""

    def version(self):
        return VERSION

    def start(self, config):
        Path(config["marker.dir"], f"task-{VERSION}").write_text("ran")
        super().start(config)


class AcmeSource(SequenceSourceConnector):
    def version(self):
        return VERSION

    def task_class(self):
        return AcmeTask
'''


@pytest.fixture(scope="module")
def plugin_dirs(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    base = tmp_path_factory.mktemp("plugin-versions")
    entries = []
    for version in ("1.0.0", "2.3.1"):
        package = base / f"acme-{version}" / PACKAGE
        package.mkdir(parents=True)
        (package / "__init__.py").write_text("")
        (package / "release.py").write_text(f"VERSION = {version!r}\n")
        (package / "source.py").write_text(PLUGIN)
        entries.append(package.parent)
    return entries


@pytest.fixture(scope="module")
def worker(
    bootstrap: str, plugin_dirs: list[Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[WorkerProcess]:
    props = worker_settings(
        bootstrap,
        f"plugin-versions-{uuid.uuid4().hex[:8]}",
        **{"spark.master": "local[2,2]", "plugin.path": ",".join(str(p) for p in plugin_dirs)},
    )
    process = WorkerProcess(props, tmp_path_factory.mktemp("plugin-versions-worker") / "w1").start(
        timeout=300
    )
    yield process
    process.stop()


def test_the_chosen_version_runs_and_is_reported(
    worker: WorkerProcess, bootstrap: str, tmp_path: Path
) -> None:
    listed = worker.request("GET", "/connector-plugins").json()
    assert [p for p in listed if p["class"] == f"{PACKAGE}.source.AcmeSource"] == [
        {"class": f"{PACKAGE}.source.AcmeSource", "type": "source", "version": "1.0.0"},
        {"class": f"{PACKAGE}.source.AcmeSource", "type": "source", "version": "2.3.1"},
    ]
    name = f"acme-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, (name, 1))
    config = {
        **sequence_config(name),
        "connector.class": f"{PACKAGE}.source.AcmeSource",
        "connector.plugin.version": "(,2.0)",
        "marker.dir": str(tmp_path / "pinned"),
    }
    unpinned = {k: v for k, v in config.items() if k != "connector.plugin.version"}
    unpinned["marker.dir"] = str(tmp_path / "default")
    for directory in ("pinned", "default"):
        (tmp_path / directory).mkdir()
    refused = worker.create_connector(f"{name}-none", {**config, "connector.plugin.version": "[3.0,)"})
    assert refused.status_code == 400, refused.text
    assert "installed: 1.0.0, 2.3.1" in refused.text and "connector.plugin.version" in refused.text
    assert worker.create_connector(name, config).status_code == 201
    assert worker.create_connector(f"{name}-newest", unpinned).status_code == 201
    try:
        for connector, version, other in ((name, "1.0.0", "2.3.1"), (f"{name}-newest", "2.3.1", "1.0.0")):
            status = wait_running(worker, connector)
            assert status["connector"]["version"] == version, connector
            assert status["tasks"][0]["version"] == version, connector
            marker = Path(config["marker.dir"] if connector == name else unpinned["marker.dir"])
            ran = marker / f"task-{version}"
            worker.wait_for(ran.exists, 60, f"the {version} task's marker")
            assert not (marker / f"task-{other}").exists()
    finally:
        delete_connector(worker, name)
        delete_connector(worker, f"{name}-newest")
