"""eosconnect on a real Spark standalone cluster whose workers act like other machines.

The Spark master and workers are started from Spark's own classes (tests/support/spark_standalone.py);
the workers run in a private mount namespace that hides the checkout and the worker's virtualenv,
with a pyspark install of their own. The eosconnect worker gets only `spark.master` (and a plugin.path
holding the connector): what the tasks run must be shipped by the worker.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from eosconnect.connectors.sequence import parse_value
from eosconnect.tools.verify import check_sequences
from support.spark_standalone import StandaloneCluster, descendants, unshare_available
from support.workers import LONG_TESTS

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.spark,
    pytest.mark.skipif(not unshare_available(), reason="needs mount namespaces (unshare -m), e.g. root"),
]

PLUGIN = '''
"""A connector that exists only on the worker's plugin.path: executors import it from the shipped zip."""
from eosconnect.connectors.sequence import SequenceSourceConnector, SequenceSourceTask


class ShippedSequenceTask(SequenceSourceTask):
    pass


class ShippedSequenceConnector(SequenceSourceConnector):
    def task_class(self):
        return ShippedSequenceTask
'''


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster.start(workers=2, cores=3)
    finally:
        cluster.stop()


@pytest.fixture
def plugin_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins"
    directory.mkdir()
    (directory / "cluster_plugin.py").write_text(PLUGIN)
    return directory


def source_config(topic: str, tasks: int, per_task: int, rate: int) -> dict[str, str]:
    return {
        "connector.class": "cluster_plugin.ShippedSequenceConnector",
        "tasks.max": str(tasks),
        "topic": topic,
        "records.per.task": str(per_task),
        "batch.size": "20",
        "rate.per.task": str(rate),
        "payload.bytes": "10",
    }


def per_task_highest(read_committed, topic: str) -> dict[int, int]:
    highest: dict[int, int] = {}
    for record in read_committed(topic):
        task, seq = parse_value(record.value)
        highest[task] = max(highest.get(task, -1), seq)
    return highest


def cores_by_app(standalone: StandaloneCluster) -> dict[str, int]:
    """Cores each running application holds, as the master reports them (0: no executors)."""
    return {app["name"]: int(app["cores"]) for app in standalone.active_apps()}


def cluster_worker(workers, standalone: StandaloneCluster, plugin_dir: Path, name: str = "w1"):
    return workers(
        name,
        **{
            "spark.master": standalone.url,
            "plugin.path": str(plugin_dir),
            "spark.executor.memory": "768m",
            "task.heartbeat.timeout.ms": "4000",
        },
    )


def test_standalone_cluster_ships_code_and_reports_lost_tasks_truthfully(
    standalone, workers, plugin_dir, topic_name, create_topic, read_committed
):
    data = create_topic(topic_name("data"), partitions=4)
    worker = cluster_worker(workers, standalone, plugin_dir)
    assert worker.status("none") == {}  # the REST API answers before any Spark application exists

    # One slot per task (eosconnect.own.slot): the slot accounting below is the point; packed tasks
    # on the cluster are the last test's.
    own_slot = {"eosconnect.own.slot": "true"}
    source = {**source_config(data, 4, 3000, 100), **own_slot}
    posted = time.monotonic()
    assert worker.create_connector("src", source).status_code == 201
    worker.wait_for(lambda: worker.task_states("src") == ["RUNNING"] * 4, 240, "4 RUNNING source tasks")
    post_to_running = time.monotonic() - posted
    mirror = {
        "connector.class": "MirrorSink",
        "tasks.max": "1",
        "topics": data,
        "target.cluster.bootstrap.servers": worker.props["bootstrap.servers"],
        "source.cluster.alias": "mirror",
        "transaction.producer": "true",
        "transaction.commit.interval.ms": "1000",
        **own_slot,
    }
    assert worker.create_connector("mm", mirror).status_code == 201
    worker.wait_for(lambda: worker.task_states("mm") == ["RUNNING"], 180, "the mirror task RUNNING")
    worker.wait_for(lambda: len(per_task_highest(read_committed, data)) == 4, 60, "all tasks writing")
    print(f"POST -> 4 tasks RUNNING on the standalone cluster: {post_to_running:.1f}s")

    # The executors run the shipped environment, not the driver's interpreter.
    pids = {name: info["pid"] for name, info in worker.request("GET", "/internal/tasks").json().items()}
    cmdline = Path(f"/proc/{pids['src-0']}/cmdline").read_bytes().decode()
    assert "eosconnect-env/bin/python" in cmdline, cmdline

    # kill -9 the Spark worker that runs the most tasks, with its executors and Python workers.
    def hosted(spark_worker) -> set[str]:
        below = set(descendants(spark_worker.proc.pid))
        return {task for task, pid in pids.items() if pid in below}

    victim = max(standalone.workers[:2], key=lambda w: len(hosted(w)))
    lost = hosted(victim)
    assert lost, f"no task ran on either Spark worker: {pids}"
    victim.kill()
    killed_at = time.monotonic()

    def waiting() -> set[str]:
        """Tasks shown not RUNNING, each with the heartbeat reason: no slot is free for them."""
        entries = [(f"src-{t['id']}", t) for t in worker.status("src")["tasks"]]
        entries += [(f"mm-{t['id']}", t) for t in worker.status("mm")["tasks"]]
        not_running = {name: t for name, t in entries if t["state"] != "RUNNING"}
        assert all("no heartbeat" in t.get("trace", "") for t in not_running.values()), not_running
        return set(not_running)

    # 5 tasks, 3 slots left: Spark re-runs at once what fits on the survivor; at least two lost tasks
    # have no slot and must be shown not RUNNING, with the reason, for as long as none is free.
    worker.wait_for(lambda: len(waiting()) >= 2, 15, "lost tasks shown not RUNNING")
    shown_after = time.monotonic() - killed_at
    assert waiting() <= lost
    time.sleep(3)
    assert len(waiting()) >= 2 and waiting() <= lost, (worker.status("src"), worker.status("mm"))
    print(
        f"lost tasks {sorted(lost)}; {sorted(waiting())} shown not RUNNING {shown_after:.1f}s after the kill"
    )

    replaced = time.monotonic()
    standalone.add_worker(cores=3)
    worker.wait_for(
        lambda: worker.task_states("src") == ["RUNNING"] * 4 and worker.task_states("mm") == ["RUNNING"],
        180,
        "every task RUNNING again on the replacement Spark worker",
    )
    print(f"replacement Spark worker -> all tasks RUNNING: {time.monotonic() - replaced:.1f}s")

    worker.wait_for(lambda: len(read_committed(data)) >= 12000, 240, "all 12000 records")
    observed = [parse_value(r.value) for r in read_committed(data)]
    report = check_sequences(observed, dict.fromkeys(range(4), 3000))
    assert report.ok, report.anomalies
    mirrored = f"mirror.{data}"
    worker.wait_for(lambda: len(read_committed(mirrored)) >= 12000, 120, "the mirror to catch up")
    mirror_report = check_sequences(
        [parse_value(r.value) for r in read_committed(mirrored)], dict.fromkeys(range(4), 3000)
    )
    assert mirror_report.ok, mirror_report.anomalies


@pytest.mark.long
def test_leader_failover_on_the_cluster_standby_holds_no_executors(
    standalone, workers, plugin_dir, topic_name, create_topic, read_committed
):
    data = create_topic(topic_name("data"), partitions=2)
    leader = cluster_worker(workers, standalone, plugin_dir, "w1")
    assert leader.create_connector("ha", source_config(data, 2, -1, 100)).status_code == 201
    leader.wait_for(lambda: leader.task_states("ha") == ["RUNNING"] * 2, 240, "tasks RUNNING")
    standby = cluster_worker(workers, standalone, plugin_dir, "w2")
    leader.wait_for(lambda: len(per_task_highest(read_committed, data)) == 2, 60, "both tasks writing")
    leader_app = f"eosconnect-worker-{leader.url.rsplit(':', 1)[1]}"
    standby_app = f"eosconnect-worker-{standby.url.rsplit(':', 1)[1]}"
    standby.wait_for(  # registered, and created on the driver's side too (it takes a while)
        lambda: f"Spark application {standby_app} started" in standby.log_path.read_text(errors="replace"),
        180,
        "the standby's Spark application",
    )
    time.sleep(3)
    cores = cores_by_app(standalone)
    assert cores[leader_app] > 0 and cores[standby_app] == 0, cores  # the standby holds no executors

    leader.kill()
    killed_at = time.monotonic()
    killed_wall_ms = time.time() * 1000
    print(f"leader SIGKILLed at {time.strftime('%H:%M:%S')} (wall clock, to read the logs against)")
    # Once the master has dropped the dead leader's application its executors are gone: what is
    # committed after that was written by the new leader's tasks.
    standby.wait_for(
        lambda: leader_app not in [a["name"] for a in standalone.active_apps()],
        60,
        "the old application gone",
    )
    before = per_task_highest(read_committed, data)
    standby_id = standby.url.split("://", 1)[1]

    def producing_again() -> bool:
        tasks = standby.request("GET", "/internal/tasks").json()  # heartbeats the new leader received
        if [tasks.get(f"ha-{t}", {}).get("state") for t in range(2)] != ["RUNNING"] * 2:
            return False
        status = standby.status("ha")
        if [(t["state"], t["worker_id"]) for t in status["tasks"]] != [("RUNNING", standby_id)] * 2:
            return False
        now = per_task_highest(read_committed, data)
        return all(now.get(t, -1) > before.get(t, -1) for t in range(2))

    standby.wait_for(producing_again, 180, "every task RUNNING and producing on the new leader")
    failover_s = time.monotonic() - killed_at
    print(f"leader SIGKILL -> every task RUNNING and producing again on the standby: {failover_s:.1f}s")
    # The same without this test's polling: when each task produced its first record after the old
    # application was gone (record create times), the later of the two.
    committed = [(parse_value(r.value), r.timestamp) for r in read_committed(data)]
    resumed_ms = max(
        min(ts for (task, seq), ts in committed if task == t and seq > before.get(t, -1)) for t in range(2)
    )
    resumed_s = (resumed_ms - killed_wall_ms) / 1000
    print(f"leader SIGKILL -> both tasks' first new record (record create times): {resumed_s:.1f}s")
    cores = cores_by_app(standalone)
    assert leader_app not in cores and cores[standby_app] > 0, cores
    assert standby.request("DELETE", "/connectors/ha").status_code == 204
    time.sleep(2)
    highest = per_task_highest(read_committed, data)
    report = check_sequences(
        [parse_value(r.value) for r in read_committed(data)], {t: n + 1 for t, n in highest.items()}
    )
    assert report.ok, report.anomalies


#: Task groups on the cluster: N tasks packed into the 4 slots of 2 executors of 2 cores.
PACKED_TASKS = 100 if LONG_TESTS else 16


def test_packed_tasks_on_the_cluster_come_back_exactly_once_after_a_spark_worker_is_killed(
    tmp_path_factory, workers, plugin_dir, topic_name, create_topic, read_committed
):
    """`eosconnect.tasks.per.slot`: PACKED_TASKS tasks on 2 executors of 2 cores (4 slot hosts); a Spark
    worker is killed with its executor, its hosts' Python workers and their tasks; on a replacement
    worker Spark runs the hosts again and every task is back, exactly once."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-packed"))
    try:
        cluster.start(workers=2, cores=2)
        data = create_topic(topic_name("data"), partitions=4)
        per_slot = -(-PACKED_TASKS // 4)
        worker = workers(
            "w1",
            **{
                "spark.master": cluster.url,
                "plugin.path": str(plugin_dir),
                "spark.executor.memory": "768m",
                "spark.executor.cores": "2",
                "spark.task.maxFailures": "8",
                "task.heartbeat.timeout.ms": "4000",
                "eosconnect.tasks.per.slot": str(per_slot),
            },
        )
        config = source_config(data, PACKED_TASKS, 2000, 20)

        # The first request creates the Spark application (and packs the shipped environment):
        # minutes on a loaded machine, more than WorkerProcess.request's 60 s.
        def create() -> httpx.Response | None:
            body = {"name": "many", "config": config}
            response = httpx.post(f"{worker.url}/connectors", json=body, timeout=600)
            return None if response.status_code == 409 and "leader" in response.text else response

        created = worker.wait_for(create, 120, "a leader to take the connector")
        assert created.status_code == 201, created.text
        everyone = ["RUNNING"] * PACKED_TASKS
        worker.wait_for(lambda: worker.task_states("many") == everyone, 600, f"{PACKED_TASKS} RUNNING tasks")
        pids = {info["pid"] for info in worker.request("GET", "/internal/tasks").json().values()}
        assert len(pids) <= 4, f"{PACKED_TASKS} tasks in more than 4 Python workers: {pids}"

        victim = max(cluster.workers, key=lambda w: len(pids & set(descendants(w.proc.pid))))
        assert pids & set(descendants(victim.proc.pid)), "no task ran on either Spark worker"
        victim.kill()
        worker.wait_for(lambda: worker.task_states("many") != everyone, 60, "lost tasks shown not RUNNING")
        cluster.add_worker(cores=2)
        worker.wait_for(
            lambda: worker.task_states("many") == everyone, 600, "every task RUNNING again after the kill"
        )
        total = PACKED_TASKS * 2000
        worker.wait_for(lambda: len(read_committed(data)) >= total, 600, f"all {total} records")
        observed = [parse_value(r.value) for r in read_committed(data)]
        report = check_sequences(observed, dict.fromkeys(range(PACKED_TASKS), 2000))
        assert report.ok, report.anomalies
    finally:
        cluster.stop()
