"""Config topic records → ConfigSnapshot, and the zombie fencing plan derived from it."""

from __future__ import annotations

import json
import logging

import pytest

from eosconnect.storage.config_state import (
    ConfigStateBuilder,
    TargetState,
    build_snapshot,
    encode_commit,
    encode_connector_config,
    encode_session_key,
    encode_target_state,
    encode_task_config,
    encode_task_count,
)
from eosconnect.storage.fencing_round import ConnectorNotFoundError, fencing_plan
from eosconnect.storage.session_key import SessionKey


def conn(name: str, **props: str) -> tuple[str, bytes]:
    return f"connector-{name}", encode_connector_config({"name": name, **props})


def task(name: str, i: int, **props: str) -> tuple[str, bytes]:
    return f"task-{name}-{i}", encode_task_config({"task.id": str(i), **props})


def commit(name: str, n: int) -> tuple[str, bytes]:
    return f"commit-{name}", encode_commit(n)


def count(name: str, n: int) -> tuple[str, bytes]:
    return f"tasks-fencing-{name}", encode_task_count(n)


def generation_records(name: str, n: int, tag: str = "") -> list[tuple[str, bytes]]:
    return [*(task(name, i, tag=tag) for i in range(n)), commit(name, n)]


# ---------------------------------------------------------------------------------------- formats


def test_record_formats_match_kafka_connect() -> None:
    assert encode_connector_config({"a": "b"}) == b'{"properties":{"a":"b"}}'
    assert encode_commit(3) == b'{"tasks":3}'
    assert encode_task_count(2) == b'{"task-count":2}'
    assert json.loads(encode_target_state("STOPPED")) == {"state": "PAUSED", "state.v2": "STOPPED"}
    assert json.loads(encode_target_state(TargetState.PAUSED)) == {"state": "PAUSED", "state.v2": "PAUSED"}
    key = SessionKey(b"\x01" * 32, 1234)
    assert json.loads(encode_session_key(key)) == {
        "key": "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=",
        "algorithm": "HmacSHA256",
        "creation-timestamp": 1234,
    }
    with pytest.raises(ValueError):
        encode_connector_config({"a": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        encode_commit(-1)


# ---------------------------------------------------------------------------------------- snapshot


def test_empty_snapshot() -> None:
    snap = build_snapshot([])
    assert snap.connectors() == []
    assert snap.generation("c") is None
    assert snap.task_count("c") == 0
    assert snap.task_count_record("c") is None
    assert not snap.pending_fencing("c")
    assert snap.session_key is None
    assert snap.target_state("c") is None


def test_generations_count_commits_and_task_configs_apply_on_commit() -> None:
    records = [conn("c"), *generation_records("c", 2, "g0")]
    snap = build_snapshot(records)
    assert snap.connectors() == ["c"]
    assert snap.target_state("c") is TargetState.STARTED
    assert snap.generation("c") == 0
    assert snap.task_count("c") == 2
    assert [t["tag"] for t in snap.task_configs("c")] == ["g0", "g0"]
    assert snap.pending_fencing("c")
    assert snap.offset == 4

    snap = build_snapshot([*records, count("c", 2), *generation_records("c", 3, "g1")])
    assert snap.generation("c") == 1
    assert snap.task_count("c") == 3
    assert snap.task_count_record("c") == 2
    assert snap.pending_fencing("c")
    assert snap.task_config("c", 2) is not None and snap.task_config("c", 2)["tag"] == "g1"
    assert snap.task_config("c", 3) is None


def test_pending_fencing_follows_record_order() -> None:
    # KIP-618's two examples, with the shipped key name.
    fenced = build_snapshot([conn("r"), task("r", 0), task("r", 1), commit("r", 2), count("r", 2)])
    assert not fenced.pending_fencing("r")
    unfenced = build_snapshot([conn("r"), count("r", 2), task("r", 0), task("r", 1), commit("r", 2)])
    assert unfenced.pending_fencing("r")
    assert unfenced.task_count_record("r") == 2


def test_task_configs_without_commit_are_held_back() -> None:
    base = [conn("c"), *generation_records("c", 2, "old"), count("c", 2)]
    snap = build_snapshot([*base, task("c", 0, tag="new"), task("c", 1, tag="new")])
    assert [t["tag"] for t in snap.task_configs("c")] == ["old", "old"]
    assert snap.generation("c") == 0
    assert not snap.pending_fencing("c")
    assert snap.has_uncommitted_task_configs("c")
    assert not snap.is_inconsistent("c")

    snap = build_snapshot([*base, task("c", 0, tag="new"), task("c", 1, tag="new"), commit("c", 2)])
    assert [t["tag"] for t in snap.task_configs("c")] == ["new", "new"]
    assert not snap.has_uncommitted_task_configs("c")
    assert snap.generation("c") == 1


def test_incomplete_commit_marks_connector_inconsistent_until_a_complete_one() -> None:
    # Compaction removed task-c-1 of the only generation: the commit closes an incomplete set.
    snap = build_snapshot([conn("c"), task("c", 0), commit("c", 2)])
    assert snap.is_inconsistent("c")
    assert snap.task_configs("c") == ()
    assert snap.task_count("c") == 2
    assert snap.generation("c") == 0

    snap = build_snapshot([conn("c"), task("c", 0), commit("c", 2), *generation_records("c", 1, "fixed")])
    assert not snap.is_inconsistent("c")
    assert [t["tag"] for t in snap.task_configs("c")] == ["fixed"]


def test_stale_higher_task_ids_left_by_compaction_are_ignored() -> None:
    snap = build_snapshot([conn("c"), task("c", 2), task("c", 0, tag="x"), commit("c", 1)])
    assert not snap.is_inconsistent("c")
    assert [t["tag"] for t in snap.task_configs("c")] == ["x"]


def test_zero_task_commit() -> None:
    snap = build_snapshot([conn("c"), commit("c", 0)])
    assert snap.task_count("c") == 0 and snap.generation("c") == 0 and snap.pending_fencing("c")
    assert not snap.is_inconsistent("c")


def test_connector_deletion_keeps_generation_and_task_count_record() -> None:
    records = [
        conn("c"),
        *generation_records("c", 2),
        count("c", 2),
        ("connector-c", None),
        ("target-state-c", None),
    ]
    snap = build_snapshot(records)
    assert not snap.contains("c")
    assert snap.task_configs("c") == ()
    assert snap.task_count("c") == 0
    assert snap.target_state("c") is None
    assert snap.task_count_record("c") == 2  # a recreated connector must still fence its old producers
    snap = build_snapshot([*records, conn("c"), *generation_records("c", 1)])
    assert snap.generation("c") == 1
    assert snap.pending_fencing("c")


def test_target_states() -> None:
    snap = build_snapshot(
        [
            conn("a"),
            ("target-state-a", encode_target_state("PAUSED")),
            ("target-state-b", b'{"state":"PAUSED"}'),  # older worker, no state.v2
            ("target-state-c", encode_target_state("STOPPED")),
            conn("c"),
        ]
    )
    assert snap.target_state("a") is TargetState.PAUSED
    assert snap.target_state("b") is TargetState.PAUSED  # known before its connector (KIP-980)
    assert snap.target_state("c") is TargetState.STOPPED
    snap = build_snapshot(
        [conn("a"), ("target-state-a", encode_target_state("PAUSED")), ("target-state-a", None)]
    )
    assert snap.target_state("a") is TargetState.STARTED


def test_session_key_rotation_keeps_previous() -> None:
    k1, k2 = SessionKey(b"1" * 32, 1), SessionKey(b"2" * 32, 2)
    snap = build_snapshot([("session-key", encode_session_key(k1))])
    assert snap.session_key == k1 and snap.previous_session_key is None
    snap = build_snapshot([("session-key", encode_session_key(k1)), ("session-key", encode_session_key(k2))])
    assert snap.session_key == k2 and snap.previous_session_key == k1
    assert snap.session_keys() == [k2, k1]


GARBAGE = [
    ("connector-g", b"not json"),
    ("connector-g", b"[1, 2]"),
    ("connector-g", b'{"properties": "x"}'),
    ("connector-g", b'{"properties": {"a": 1}}'),
    ("task-g-0", None),
    ("task-g-x", b'{"properties": {}}'),
    ("commit-g", b'{"tasks": "2"}'),
    ("commit-g", b'{"tasks": -1}'),
    ("commit-g", b'{"tasks": true}'),
    ("tasks-fencing-g", b'{"tasks": 2}'),
    ("tasks-fencing-g", None),
    ("target-state-g", b'{"state": "SLEEPING"}'),
    ("session-key", b'{"key": "***", "algorithm": "HmacSHA256", "creation-timestamp": 1}'),
    ("session-key", None),
    ("whatever", b"{}"),
    (None, b"{}"),
    (b"\xff\xfe", b"{}"),
    ("connector-g", b"\xff"),
]


def test_garbage_is_skipped_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    good = [conn("c"), *generation_records("c", 1), count("c", 1)]
    builder = ConfigStateBuilder()
    with caplog.at_level(logging.WARNING, logger="eosconnect.storage.config_state"):
        for offset, (key, value) in enumerate([good[0], *GARBAGE, *good[1:]]):
            builder.apply(key, value, offset)
    snap = builder.snapshot()
    assert snap.skipped == len(GARBAGE)
    assert snap.connectors() == ["c"]
    assert snap.task_count("c") == 1 and not snap.pending_fencing("c")
    assert snap.offset == len(GARBAGE) + len(good)
    assert snap.task_count_record("g") is None and snap.generation("g") is None
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == len(GARBAGE)
    assert "'connector-g'" in warnings[0] and "offset 1" in warnings[0]


def test_foreign_kafka_records_are_ignored_quietly(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        snap = build_snapshot(
            [
                ("restart-connector-c", b'{"include-tasks":true,"only-failed":false}'),
                ("logger-cluster-x", b"{}"),
            ]
        )
    assert snap.skipped == 0 and not caplog.records


def test_cluster_logger_levels_are_kept_latest_first() -> None:
    snap = build_snapshot(
        [
            ("logger-cluster-a.b", b'{"level":"DEBUG"}'),
            ("logger-cluster-c", b'{"level":"WARN"}'),
            ("logger-cluster-a.b", b'{"level":"ERROR"}'),
        ]
    )
    assert snap.logger_levels == {"a.b": ("ERROR", 2), "c": ("WARN", 1)}


def test_json_null_value_is_a_tombstone() -> None:
    snap = build_snapshot([conn("c"), ("connector-c", b"null")])
    assert not snap.contains("c")


def test_snapshot_is_immutable() -> None:
    snap = build_snapshot([conn("c"), *generation_records("c", 1)])
    with pytest.raises(TypeError):
        snap.connector_configs["x"] = {}  # type: ignore[index]
    with pytest.raises(TypeError):
        snap.connector_config("c")["name"] = "y"  # type: ignore[index]
    with pytest.raises(AttributeError):
        snap.offset = 3  # type: ignore[misc]


def test_connector_and_task_names_with_dashes() -> None:
    snap = build_snapshot(
        [conn("my-conn-1"), task("my-conn-1", 0), task("my-conn-1", 1), commit("my-conn-1", 2)]
    )
    assert snap.task_count("my-conn-1") == 2 and len(snap.task_configs("my-conn-1")) == 2


# ---------------------------------------------------------------------------------------- fencing plan


def test_plan_unknown_connector() -> None:
    with pytest.raises(ConnectorNotFoundError):
        fencing_plan(build_snapshot([]), "nope", "g")


def test_plan_not_needed_when_record_follows_commit() -> None:
    plan = fencing_plan(build_snapshot([conn("c"), *generation_records("c", 3), count("c", 3)]), "c", "g")
    assert not plan.needed and plan.ids_to_fence == () and plan.new_task_count == 3


def test_plan_first_time_writes_record_without_fencing() -> None:
    plan = fencing_plan(build_snapshot([conn("c"), *generation_records("c", 3)]), "c", "g")
    assert plan.needed and plan.ids_to_fence == () and plan.new_task_count == 3
    assert plan.previous_task_count is None and plan.generation == 0


def test_plan_one_to_one_needs_no_fencing() -> None:
    snap = build_snapshot(
        [conn("c"), *generation_records("c", 1), count("c", 1), *generation_records("c", 1, "b")]
    )
    plan = fencing_plan(snap, "c", "g")
    assert plan.needed and plan.ids_to_fence == () and plan.new_task_count == 1 and plan.generation == 1


def test_plan_three_to_two_fences_the_three_old_ids() -> None:
    snap = build_snapshot(
        [conn("c"), *generation_records("c", 3), count("c", 3), *generation_records("c", 2, "b")]
    )
    plan = fencing_plan(snap, "c", "grp")
    assert plan.needed
    assert plan.ids_to_fence == ("grp-c-0", "grp-c-1", "grp-c-2")
    assert plan.new_task_count == 2 and plan.previous_task_count == 3


@pytest.mark.parametrize(("old", "new", "fenced"), [(1, 3, 1), (2, 2, 2), (2, 1, 2), (0, 1, 0)])
def test_plan_multi_task_counts_fence_previous_count(old: int, new: int, fenced: int) -> None:
    snap = build_snapshot(
        [conn("c"), *generation_records("c", old), count("c", old), *generation_records("c", new, "b")]
    )
    plan = fencing_plan(snap, "c", "g")
    assert plan.ids_to_fence == tuple(f"g-c-{i}" for i in range(fenced))
    assert plan.new_task_count == new
