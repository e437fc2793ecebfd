"""Pure logic of the control-plane hardening: name rules, task bounds, repeated-log filtering."""

from __future__ import annotations

import logging

import pytest

from eosconnect.cluster.names import connector_name_errors, max_placeable_tasks, tasks_max_errors
from eosconnect.runtime import log_repeats
from eosconnect.runtime.log_repeats import RepeatFilter
from eosconnect.runtime.task import TaskLogAdapter


@pytest.mark.parametrize("name", ["a/b", ".", "..", "", "tab\there", "back\\slash"])
def test_unaddressable_names_have_a_reason(name: str) -> None:
    assert connector_name_errors(name)


@pytest.mark.parametrize("name", ["orders", "50%off", "with space", "a.b", "...", "ünïcode"])
def test_addressable_names_pass(name: str) -> None:
    assert connector_name_errors(name) == []


def test_placeable_tasks_by_master() -> None:
    assert max_placeable_tasks({"spark.master": "local[6,4]"}, 6) == 6
    assert max_placeable_tasks({"spark.master": "spark://h:7077"}, 2) is None
    conf = {"spark.master": "yarn", "spark.executor.instances": "3", "spark.executor.cores": "4"}
    assert max_placeable_tasks(conf, 12) == 12
    dynamic = {"spark.master": "yarn", "spark.dynamicAllocation.enabled": "true", "spark.executor.cores": "2"}
    assert max_placeable_tasks(dynamic, 2) is None
    assert max_placeable_tasks({**dynamic, "spark.dynamicAllocation.maxExecutors": "10"}, 2) == 20


def test_tasks_max_bounds() -> None:
    assert tasks_max_errors({"tasks.max": "4"}, {}, 4) == []
    assert "Spark task slots" in tasks_max_errors({"tasks.max": "5"}, {}, 4)[0]
    # tasks sharing slots: 4 slots of 4 tasks place 16
    assert tasks_max_errors({"tasks.max": "16"}, {}, 4, per_slot=4) == []
    packed = tasks_max_errors({"tasks.max": "17"}, {}, 4, per_slot=4)[0]
    assert "the 16 tasks this worker can ever place (4 Spark task slots, 4 tasks per slot)" in packed
    assert "raise eosconnect.tasks.per.slot" in packed
    assert "eosconnect.tasks.max.limit=1000" in tasks_max_errors({"tasks.max": "100000"}, {}, None)[0]
    assert tasks_max_errors({"tasks.max": "50"}, {"eosconnect.tasks.max.limit": "10"}, None)
    assert tasks_max_errors({"tasks.max": "x"}, {}, 4) == []  # the config definition reports it


def _record(msg: str, level: int = logging.ERROR, *args: object) -> logging.LogRecord:
    return logging.LogRecord("eosconnect.kafka.producer", level, __file__, 1, msg, args, None)


def test_repeated_errors_are_logged_once_then_with_a_count(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    monkeypatch.setattr(log_repeats.time, "monotonic", lambda: clock[0])
    repeat_filter = RepeatFilter(interval_s=60)
    passed = []
    for i in range(100):
        clock[0] = i
        record = _record("Connect to 127.0.0.1:%d failed (after %dms)", logging.ERROR, 9092, i)
        if repeat_filter.filter(record):
            passed.append(record.getMessage())
    assert len(passed) == 2
    assert passed[0] == "Connect to 127.0.0.1:9092 failed (after 0ms)"
    assert passed[1].endswith("(repeated 59 more times in the last 60 s)")
    assert repeat_filter.filter(_record("a different problem"))  # a new message passes at once
    assert all(repeat_filter.filter(_record("routine", logging.INFO)) for _ in range(5))


@pytest.mark.parametrize(("raw", "expected"), [(None, 60.0), ("4", 4.0), ("0", 60.0), ("soon", 60.0)])
def test_repeat_interval_comes_from_the_environment(
    monkeypatch: pytest.MonkeyPatch, raw: str | None, expected: float
) -> None:
    if raw is None:
        monkeypatch.delenv(log_repeats.INTERVAL_ENV, raising=False)
    else:
        monkeypatch.setenv(log_repeats.INTERVAL_ENV, raw)
    assert RepeatFilter().interval_s == expected
    assert RepeatFilter(interval_s=2).interval_s == 2


def test_task_log_prefix_is_not_a_format_string(caplog: pytest.LogCaptureFixture) -> None:
    adapter = TaskLogAdapter(logging.getLogger("eosconnect.test"), {"id": "50%off-0"})
    with caplog.at_level(logging.INFO, logger="eosconnect.test"):
        adapter.info("polled %d records", 3)
        adapter.info("no args, 100%")
    assert [r.getMessage() for r in caplog.records] == [
        "[50%off-0] polled 3 records",
        "[50%off-0] no args, 100%",
    ]


def test_file_stream_connectors_are_confined_to_file_allowed_dirs(tmp_path) -> None:
    from eosconnect.cluster.validation import config_errors, validate_connector_config
    from eosconnect.worker_config import WorkerConfig

    inside = tmp_path / "allowed"
    inside.mkdir()
    base = {"bootstrap.servers": "localhost:9092", "group.id": "g", "offset.storage.topic": "o"}
    worker = WorkerConfig.parse({**base, "file.allowed.dirs": str(inside)})
    config = {"name": "f", "connector.class": "FileStreamSource", "topic": "t"}
    ok = validate_connector_config({**config, "file": str(inside / "in.txt")}, worker)
    assert "file" not in config_errors(ok)
    for escape in ("/etc/passwd", str(inside / ".." / "secret.txt")):
        errors = config_errors(validate_connector_config({**config, "file": escape}, worker))
        assert "file.allowed.dirs" in errors["file"][0]
    sink = {"name": "s", "connector.class": "FileStreamSink", "topics": "t", "file": "/tmp/out.txt"}
    assert "file" in config_errors(validate_connector_config(sink, worker))
    unconfined = WorkerConfig.parse(base)
    assert "file" not in config_errors(
        validate_connector_config({**config, "file": "/etc/passwd"}, unconfined)
    )


def test_file_stream_validation_refuses_what_fails_only_at_run_time(tmp_path) -> None:
    """A NUL byte (was a 500), a directory, a FIFO, a sink's missing parent directory: refused at
    validation on the `file` field, naming the problem, with or without file.allowed.dirs."""
    import os

    from eosconnect.cluster.validation import config_errors, validate_connector_config
    from eosconnect.worker_config import WorkerConfig

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    base = {"bootstrap.servers": "localhost:9092", "group.id": "g", "offset.storage.topic": "o"}
    source = {"name": "f", "connector.class": "FileStreamSource", "topic": "t"}
    sink = {"name": "s", "connector.class": "FileStreamSink", "topics": "t"}
    for worker in (
        WorkerConfig.parse(base),
        WorkerConfig.parse({**base, "file.allowed.dirs": str(tmp_path)}),
    ):
        cases = {
            "NUL byte": {**source, "file": str(tmp_path / "a\x00b")},
            "is a directory": {**source, "file": str(tmp_path)},
            "not a regular file": {**sink, "file": str(fifo)},
            "does not exist": {**sink, "file": str(tmp_path / "missing" / "out.txt")},
        }
        for expected, config in cases.items():
            errors = config_errors(validate_connector_config(config, worker))
            assert expected in errors["file"][0], (expected, errors)
        fine = config_errors(validate_connector_config({**sink, "file": str(tmp_path / "out.txt")}, worker))
        assert "file" not in fine
        waits = config_errors(
            validate_connector_config({**source, "file": str(tmp_path / "later.txt")}, worker)
        )
        assert "file" not in waits  # a source waits for its file to appear


def test_a_config_larger_than_a_config_topic_record_is_refused_naming_the_limit() -> None:
    from eosconnect.cluster.validation import CONFIG_RECORD_LIMIT_BYTES, config_size_problem

    assert config_size_problem({"connector.class": "FileStreamSource", "file": "/tmp/x"}) is None
    problem = config_size_problem({"connector.class": "FileStreamSource", "blob": "x" * 10_000_000})
    assert (
        problem is not None and str(CONFIG_RECORD_LIMIT_BYTES) in problem and "message.max.bytes" in problem
    )


def test_auto_restart_backs_off_and_gives_up() -> None:
    from eosconnect.cluster.auto_restart import AutoRestarts, RestartPolicy

    assert RestartPolicy.of({}) is None  # opt-in
    policy = RestartPolicy.of(
        {
            "errors.restart.enable": "true",
            "errors.restart.backoff.initial.ms": "1000",
            "errors.restart.backoff.max.ms": "3000",
            "errors.restart.max.attempts": "3",
        }
    )
    assert policy is not None and [policy.delay(n) for n in (1, 2, 3, 4)] == [1, 2, 3, 3]
    restarts = AutoRestarts()
    now = 0.0
    assert restarts.observe("c", 0, "FAILED", policy, now) == ("schedule", 1)
    assert restarts.observe("c", 0, "FAILED", policy, now + 0.5) is None
    assert restarts.observe("c", 0, "FAILED", policy, now + 1) == ("restart", None)
    assert restarts.observe("c", 0, "FAILED", policy, now + 2) == ("schedule", 2)
    assert restarts.observe("c", 0, "FAILED", policy, now + 4) == ("restart", None)
    assert restarts.observe("c", 0, "FAILED", policy, now + 5) == ("schedule", 3)
    assert restarts.observe("c", 0, "FAILED", policy, now + 8) == ("restart", None)
    assert restarts.observe("c", 0, "FAILED", policy, now + 9) == ("exhausted", None)
    assert restarts.observe("c", 0, "FAILED", policy, now + 99) is None
    assert restarts.total[("c", 0)] == 3
    fresh = AutoRestarts()  # a task up for errors.restart.backoff.max.ms starts afresh
    fresh.observe("c", 1, "FAILED", policy, 0)
    fresh.observe("c", 1, "FAILED", policy, 1)
    fresh.observe("c", 1, "RUNNING", policy, 2)
    fresh.observe("c", 1, "RUNNING", policy, 6)
    assert fresh.attempts("c", 1) == 0
