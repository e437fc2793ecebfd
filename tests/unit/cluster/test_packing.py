"""The leader's packing of connector tasks onto slot hosts (cluster/packing.py): placement, the end
of a task, idle hosts, cancelling a zombie's host, and the setting's checks. Hosts' Spark jobs are
stand-ins here: what is tested is the bookkeeping; tests/integration/test_task_groups.py runs it
on Spark."""

from __future__ import annotations

import time
from dataclasses import dataclass

import pytest

from eosconnect.cluster import packing
from eosconnect.cluster.packing import SlotHost, SlotHosts, wants_own_slot
from eosconnect.cluster.task_channel import RestTaskControl
from eosconnect.runtime.task import TaskSpec
from eosconnect.worker_config import relaunch_min_attempt_s, tasks_per_slot, zombie_cancel_timeout_s


@dataclass
class JobStandIn:
    job_group: str
    alive: bool = True
    cancelled: bool = False
    error: BaseException | None = None
    outcomes: list | None = None

    def running(self) -> bool:
        return self.alive

    def cancel(self) -> None:
        self.cancelled, self.alive = True, False

    def failure_reason(self) -> str:
        return ""


class Pool(SlotHosts):
    def _new_host(self) -> SlotHost:
        host_id = f"h{len(self.hosts)}"
        host = SlotHost(host_id, JobStandIn(f"host-{host_id}"), self.capacity)  # type: ignore[arg-type]
        self.hosts[host_id] = host
        return host


def spec(connector: str, task: int = 0) -> TaskSpec:
    control = RestTaskControl("http://w", {}, connector, task, 1, instance=f"{connector}-{task}")
    return TaskSpec(connector, task, {}, {}, {}, control, None, 1)


def pool(per_slot: int = 3) -> Pool:
    return Pool(lambda: None, "http://w", {"eosconnect.tasks.per.slot": str(per_slot)})  # type: ignore[arg-type]


def test_tasks_fill_hosts_up_to_the_setting_and_a_new_host_takes_a_slot():
    hosts = pool(3)
    assert hosts.new_slots_needed(4) == 2
    placed = hosts.place([spec("a"), spec("b"), spec("c"), spec("d")])
    assert hosts.slots_held() == 2
    assert sorted(len(h.assigned) for h in hosts.hosts.values()) == [1, 3]
    assert hosts.new_slots_needed(2) == 0 and hosts.new_slots_needed(3) == 1
    assert {s.connector for p in placed for s in p.specs} == {"a", "b", "c", "d"}


def test_a_host_is_sent_what_it_does_not_run_yet_and_an_ended_task_is_not_sent_again():
    hosts = pool(3)
    (hosted,) = hosts.place([spec("a"), spec("b")])
    host_id = hosted.host.host_id
    assert {d["connector"] for d in hosts.heartbeat(host_id, set())["start"]} == {"a", "b"}
    assert [d["connector"] for d in hosts.heartbeat(host_id, {"a-0"})["start"]] == ["b"]
    hosts.ended("a-0")
    # A new Spark attempt of the host (its Python worker died) runs nothing yet: it gets b only.
    assert [d["connector"] for d in hosts.heartbeat(host_id, set())["start"]] == ["b"]
    assert hosted.running()
    hosts.ended("b-0")
    assert not hosted.running()


def test_an_unknown_host_is_told_to_stop_and_an_idle_one_stops(monkeypatch):
    hosts = pool(2)
    assert hosts.heartbeat("nobody", set()) == {"start": [], "stop": True}
    (hosted,) = hosts.place([spec("a")])
    hosts.ended("a-0")
    host_id = hosted.host.host_id
    assert hosts.heartbeat(host_id, set())["stop"] is False
    monkeypatch.setattr(packing, "HOST_IDLE_S", -1.0)
    assert hosts.heartbeat(host_id, set())["stop"] is True
    assert hosts.new_slots_needed(1) == 1, "a stopping host takes no new task"


def test_a_zombie_host_is_cancelled_only_without_live_mates_of_other_connectors():
    hosts = pool(2)
    (shared,) = hosts.place([spec("zombie"), spec("mate")])
    zombie = packing.HostedTasks(hosts, shared.host, [shared.specs[0]])
    zombie.cancel()
    assert not shared.host.job.cancelled, "cancelling would kill the mate"
    assert not zombie.running() and "mate-0" in shared.host.assigned
    (alone,) = hosts.place([spec("z2")])
    assert alone.host is not shared.host
    alone.cancel()
    assert alone.host.job.cancelled


def test_the_next_generation_does_not_land_on_the_host_of_an_abandoned_task(monkeypatch):
    """A task that did not stop in time may be frozen with its whole Python worker (SIGSTOP): its
    successors placed on that host would never start. Its host, and any host silent for long,
    takes no new task; its other tasks go on there."""
    hosts = pool(4)
    (old,) = hosts.place([spec("mm", 0), spec("mate")])
    zombie = packing.HostedTasks(hosts, old.host, [old.specs[0]])
    hosts.close(zombie)
    new = hosts.place([spec("mm", 1)])
    assert [h.host for h in new] != [old.host] and "mate-0" in old.host.assigned
    (fresh,) = new
    hosts.heartbeat(fresh.host.host_id, set())
    assert hosts.new_slots_needed(3) == 0
    monkeypatch.setattr(packing, "HOST_SILENT_S", -1.0)
    assert hosts.new_slots_needed(1) == 1, "a host that went silent takes no new task"


def test_a_silent_host_is_evacuated_once_and_cancelled_when_nothing_live_is_left():
    """A frozen host's live tasks are launched elsewhere (cluster/host_evacuation.py): they leave
    its assignment, it takes no new task, and its Spark job is cancelled once only zombies of
    generations being replaced are left in it, and the zombie cancel time has passed."""
    hosts = pool(4)
    (shared,) = hosts.place([spec("live"), spec("old")])
    host = shared.host
    hosts.heartbeat(host.host_id, {"live-0", "old-0"})
    assert hosts.silent_hosts(10.0) == []
    host.seen = time.monotonic() - 30
    assert hosts.silent_hosts(10.0) == [host]
    hosts.forgive_silence()  # the leader itself was stalled: silence counts from now
    assert hosts.silent_hosts(10.0) == [] and host.room() == 0, "still no new task on a silent host"
    hosts._listening_since = 0.0
    hosts.evacuate(host, ["live-0"])
    assert hosts.silent_hosts(10.0) == [], "evacuated once"
    assert "live-0" not in host.assigned and "live-0" in host.lingering and host.closed
    assert [d["connector"] for d in hosts.heartbeat(host.host_id, set())["start"]] == ["old"]
    (moved,) = hosts.place([spec("live")])
    assert moved.host is not host
    hosts.cancel_drained(-1.0)
    assert not host.job.cancelled, "the abandoned task of the replaced generation is still its own"
    hosts.ended("old-0")
    hosts.cancel_drained(3600.0)
    assert not host.job.cancelled, "not before eosconnect.zombie.cancel.timeout.ms"
    hosts.cancel_drained(-1.0)
    assert host.job.cancelled and not moved.host.job.cancelled


def test_the_settings():
    assert tasks_per_slot({}) == 4  # packing on by default (docs/architecture.md, "Task groups")
    assert tasks_per_slot({"eosconnect.tasks.per.slot": "1"}) == 1
    assert tasks_per_slot({"eosconnect.tasks.per.slot": "25"}) == 25
    for bad in ("0", "many"):
        with pytest.raises(ValueError, match=r"eosconnect\.tasks\.per\.slot"):
            tasks_per_slot({"eosconnect.tasks.per.slot": bad})
    assert wants_own_slot({"eosconnect.own.slot": "true"}) and not wants_own_slot({})
    assert not pool(1).packs({}) and pool(2).packs({}) and not pool(2).packs({"eosconnect.own.slot": "true"})
    assert relaunch_min_attempt_s({}) == 60.0
    assert relaunch_min_attempt_s({"eosconnect.relaunch.min.attempt.ms": "0"}) == 0.0  # never relaunch
    for bad in ("-1", "soon"):
        with pytest.raises(ValueError, match=r"eosconnect\.relaunch\.min\.attempt\.ms"):
            relaunch_min_attempt_s({"eosconnect.relaunch.min.attempt.ms": bad})
    assert zombie_cancel_timeout_s({}) == 60.0
    assert zombie_cancel_timeout_s({"eosconnect.zombie.cancel.timeout.ms": "120000"}) == 120.0
    for bad in ("-5", "2m"):  # named, with what it means, not a bare int() traceback in the herder
        with pytest.raises(ValueError, match=r"eosconnect\.zombie\.cancel\.timeout\.ms.*milliseconds"):
            zombie_cancel_timeout_s({"eosconnect.zombie.cancel.timeout.ms": bad})
