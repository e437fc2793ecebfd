"""What a packed task's status says when its slot host died (cluster/host_loss.py)."""

from __future__ import annotations

import os

from eosconnect.cluster.host_loss import HostMemory, host_loss_detail, memory_sign
from eosconnect.runtime.task_group import host_memory

MB = 2**20


def test_spark_reasons_that_mean_out_of_memory_are_recognised() -> None:
    for reason in (
        "Job aborted due to stage failure: ... MemoryError",
        "ExecutorLostFailure (executor 3 exited caused by one of the running tasks) Reason: Container "
        "killed by YARN for exceeding physical memory limits. 2.1 GB of 2 GB physical memory used.",
        "The executor with id 2 exited with exit code 137(SIGKILL, possible container OOM).",
        "Pod reason: OOMKilled",
        "java.lang.OutOfMemoryError: Java heap space",
    ):
        assert memory_sign(reason, None) is not None, reason
    crashed = "Job aborted due to stage failure: ... Python worker exited unexpectedly (crashed)"
    assert memory_sign(crashed, None) is None
    assert memory_sign(crashed, HostMemory(7, 300 * MB, None)) is None  # no limit known: no claim


def test_a_host_last_seen_near_its_limit_ran_out_of_memory() -> None:
    near = HostMemory(42, 1900 * MB, 2048 * MB)
    far = HostMemory(42, 500 * MB, 2048 * MB)
    assert near.near_limit() and not far.near_limit()
    assert memory_sign("Python worker exited unexpectedly (crashed)", near) == (
        "it was last seen at 1,900 MB resident of its 2,048 MB limit"
    )
    assert (
        HostMemory.from_report({"pid": 42, "rss_bytes": 1900 * MB, "memory_limit_bytes": 2048 * MB}) == near
    )
    assert HostMemory.from_report({"attempt": 0}) is None  # a host of an older version reports no size


def test_the_trace_names_the_host_its_mates_and_the_settings() -> None:
    trace = host_loss_detail(
        "h1",
        ["other-0", "seq-1"],
        4,
        "Python worker exited unexpectedly",
        HostMemory(42, 1950 * MB, 2048 * MB),
    )
    assert "slot host h1 (Python worker pid 42)" in trace
    assert "2 other task(s) sharing its Python worker: other-0, seq-1" in trace
    assert (
        "most likely ran out of memory (it was last seen at 1,950 MB resident of its 2,048 MB limit)" in trace
    )
    for setting in (
        "spark.executor.pyspark.memory",
        "eosconnect.tasks.per.slot, now 4",
        "eosconnect.own.slot=true",
    ):
        assert setting in trace, setting

    plain = host_loss_detail(
        "h2", [], 4, "Python worker exited unexpectedly (crashed)", HostMemory(9, 80 * MB)
    )
    assert "slot host h2 (Python worker pid 9) alone" in plain
    assert "out of memory" not in plain and "last seen at 80 MB resident" in plain
    assert "eosconnect.own.slot=true" in plain


def test_a_host_reports_its_own_size_and_limit() -> None:
    memory = host_memory()
    assert memory["pid"] == os.getpid()
    assert memory["rss_bytes"] and memory["rss_bytes"] > 10 * MB
    parsed = HostMemory.from_report(memory)
    assert parsed is not None and parsed.rss_bytes == memory["rss_bytes"]
