"""A started connector's KIP-877 metrics (cluster/live_connectors.py): tagged with its name, read
for `/metrics`, gone when it stops."""

from __future__ import annotations

from eosconnect.cluster.live_connectors import LiveConnectors

CONFIG = {
    "name": "orders",
    "connector.class": "support.monitored_connectors.MonitoredSequenceConnector",
    "tasks.max": "2",
    "topic": "t",
}


def test_a_connectors_metrics_carry_its_name_until_it_stops() -> None:
    connectors = LiveConnectors({"bootstrap.servers": "127.0.0.1:1"}, lambda: None)
    try:
        live = connectors.start("orders", CONFIG)
        assert connectors.plugin_metrics() == [
            {
                "name": "task-configs-generated",
                "group": "plugins",
                "description": "Task configs generated",
                "tags": {"connector": "orders"},
                "value": 0,
            }
        ]
        connectors.task_configs(live)
        assert [e["value"] for e in connectors.plugin_metrics()] == [2]
        connectors.start("orders", CONFIG)  # a restart: the new instance registers the name afresh
        assert [e["value"] for e in connectors.plugin_metrics()] == [0]
        connectors.stop("orders")
        assert connectors.plugin_metrics() == []
    finally:
        connectors.stop_all()
