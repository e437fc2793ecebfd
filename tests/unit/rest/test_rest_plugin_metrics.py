"""KIP-877 plugin metrics on `GET /metrics` (rest/metrics.py): one gauge family per name, the
plugins' tags as labels."""

from __future__ import annotations

from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from eosconnect.api.metrics import PLUGIN_METRICS_KEY
from eosconnect.rest.metrics import render_prometheus


def entry(name: str, value: Any, **tags: str) -> dict[str, Any]:
    return {"name": name, "group": "plugins", "description": f"{name} help", "tags": tags, "value": value}


def samples(snapshots: list[dict[str, Any]]) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(render_prometheus(snapshots).decode()):
        for sample in family.samples:
            if sample.name.startswith("eosconnect_plugin_"):
                found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


def test_plugin_metrics_are_gauges_labelled_with_their_tags() -> None:
    task = {"connector": "c", "task": "0"}
    snapshots = [
        {
            "connector": "c",
            "task": 0,
            PLUGIN_METRICS_KEY: [
                entry("queue-size", 4, **task),
                entry("records-seen", 9, **task, transformation="t", **{"class": "Count"}),
                entry("records-seen", 2, **task, converter="value", **{"class": "Conv", "version": "1"}),
                entry("not-yet", float("nan"), **task),
                entry("state", "ok", **task),
            ],
        }
    ]
    found = samples(snapshots)
    assert set(found) == {"eosconnect_plugin_queue_size", "eosconnect_plugin_records_seen"}  # no NaN, no text
    assert found["eosconnect_plugin_queue_size"] == [(task, 4.0)]
    empty = {"transformation": "", "converter": "", "version": ""}
    assert sorted(found["eosconnect_plugin_records_seen"], key=lambda s: s[1]) == [
        ({**empty, **task, "converter": "value", "class": "Conv", "version": "1"}, 2.0),
        ({**empty, **task, "transformation": "t", "class": "Count"}, 9.0),
    ]
    assert "queue-size help" in render_prometheus(snapshots).decode()


def test_connector_metrics_outside_the_task_snapshots_are_exported_alike() -> None:
    text = render_prometheus([], plugin_metrics=[entry("tables", 3, connector="c")]).decode()
    [family] = [f for f in text_string_to_metric_families(text) if f.name == "eosconnect_plugin_tables"]
    assert [(s.labels, s.value) for s in family.samples] == [({"connector": "c"}, 3.0)]
