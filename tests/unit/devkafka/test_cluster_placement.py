"""Nodes placed on hosts of their own (`NodePlacement`): each listens on and advertises its own
address, the brokers find the controller at its address, clients bootstrap from every broker's, and
each node is launched under its own command prefix."""

from __future__ import annotations

from pathlib import Path

import pytest

from eosconnect.devkafka import CONTROLLER_NODE_ID, LocalKafkaCluster, NodePlacement
from eosconnect.devkafka.cluster import ClusterState
from eosconnect.devkafka.security import SecurityState


def placed_cluster(run_dir: Path) -> LocalKafkaCluster:
    placement = {
        CONTROLLER_NODE_ID: NodePlacement("10.9.1.2", ("ip", "netns", "exec", "ctl")),
        **{i: NodePlacement(f"10.9.{i + 1}.2", ("ip", "netns", "exec", f"b{i}")) for i in (1, 2, 3)},
    }
    cluster = LocalKafkaCluster(run_dir, brokers=3, placement=placement)
    cluster.state = ClusterState(
        run_dir=str(run_dir),
        version="4.0.0",
        libs_dir=str(run_dir),
        cluster_id="x",
        nodes=cluster._plan_nodes(),
        security=SecurityState(),
    )
    for node in cluster.state.nodes:
        cluster._write_config(node)
    return cluster


def properties(cluster: LocalKafkaCluster, node_id: int) -> dict[str, str]:
    text = (cluster.run_dir / f"node-{node_id}" / "server.properties").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if line)


def test_each_node_listens_on_and_advertises_its_own_address(tmp_path: Path) -> None:
    cluster = placed_cluster(tmp_path)
    assert cluster.state is not None
    controller_port = cluster.node(CONTROLLER_NODE_ID).controller_port
    for i in (1, 2, 3):
        props = properties(cluster, i)
        port = cluster.node(i).port
        assert props["listeners"] == props["advertised.listeners"] == f"PLAINTEXT://10.9.{i + 1}.2:{port}"
        assert props["controller.quorum.voters"] == f"{CONTROLLER_NODE_ID}@10.9.1.2:{controller_port}"
        assert cluster.broker_bootstrap(i) == f"10.9.{i + 1}.2:{port}"
    assert properties(cluster, CONTROLLER_NODE_ID)["listeners"] == f"CONTROLLER://10.9.1.2:{controller_port}"
    assert cluster.bootstrap_servers.split(",") == [cluster.broker_bootstrap(i) for i in (1, 2, 3)]
    assert cluster._launcher(cluster.node(2)) == ("ip", "netns", "exec", "b2")


def test_the_placement_survives_the_state_file(tmp_path: Path) -> None:
    cluster = placed_cluster(tmp_path)
    assert cluster.state is not None
    cluster.state.save()
    attached = LocalKafkaCluster.attach(tmp_path)
    assert attached.bootstrap_servers == cluster.bootstrap_servers


def test_a_placement_of_a_node_the_cluster_does_not_have_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"placement names nodes \[100\]"):
        LocalKafkaCluster(tmp_path, brokers=1, placement={CONTROLLER_NODE_ID: NodePlacement("10.9.1.2")})
