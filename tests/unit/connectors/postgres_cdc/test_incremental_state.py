"""The pure parts of incremental snapshots: the state in the offset, and DBLog's chunk window."""

from __future__ import annotations

import json

import pytest

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.postgres_cdc.incremental_state import ChunkWindow, IncrementalState, key_identity


def test_state_round_trips_through_the_offset_under_debeziums_keys() -> None:
    state = IncrementalState("corr", ("public.a", "public.b"), {"public.b": "id > 5"}, ("10",), ("99",))
    offset = state.offset()
    assert offset["incremental_snapshot_correlation_id"] == "corr"
    collections = json.loads(str(offset["incremental_snapshot_collections"]))
    assert [c["incremental_snapshot_collections_id"] for c in collections] == ["public.a", "public.b"]
    assert collections[1]["incremental_snapshot_collections_additional_condition"] == "id > 5"
    assert json.loads(str(offset["incremental_snapshot_primary_key"])) == ["10"]
    assert "incremental_snapshot_paused" not in offset
    assert IncrementalState.of({"lsn": 5, **offset}) == state


def test_paused_state_and_composite_keys_round_trip() -> None:
    state = IncrementalState("c", ("s.t",), {}, ("1", "2024-01-01"), ("9", "2025-01-01"), paused=True)
    offset = state.offset()
    assert offset["incremental_snapshot_paused"] is True
    assert IncrementalState.of(offset) == state


def test_an_offset_without_a_snapshot_has_no_state() -> None:
    assert IncrementalState.of({"lsn": 1, "event": 0}) is None
    assert IncrementalState.of({"incremental_snapshot_collections": "[]"}) is None


def test_an_unreadable_state_names_the_key_and_the_fix() -> None:
    with pytest.raises(ConnectException, match="incremental_snapshot_collections"):
        IncrementalState.of({"incremental_snapshot_collections": "not json"})


def test_chunks_advance_then_the_next_table_starts_from_its_beginning() -> None:
    state = IncrementalState("c", ("public.a", "public.b"), {"public.a": "x", "public.b": "y"}, None, ("5",))
    state = state.after_chunk(("3",), table_done=False)
    assert state.current == "public.a" and state.last_key == ("3",) and state.max_key == ("5",)
    state = state.after_chunk(("5",), table_done=True)
    assert state.current == "public.b" and state.last_key is None and state.max_key is None
    assert state.conditions == {"public.b": "y"}
    assert state.after_chunk(None, table_done=True).tables == ()


def test_adding_tables_queues_each_once_and_stopping_some_keeps_the_rest() -> None:
    state = IncrementalState("c", ("public.a",), {}, ("3",), ("9",))
    state = state.adding(["public.a", "public.b", "public.b"], {"public.b": "z"})
    assert state.tables == ("public.a", "public.b")
    kept = state.without(["public.b"])
    assert kept.tables == ("public.a",) and kept.last_key == ("3",)
    moved = state.without(["public.a"])
    assert moved.tables == ("public.b",) and moved.last_key is None and moved.max_key is None


def test_window_drops_rows_streamed_after_its_low_watermark_only() -> None:
    rows = {key_identity([i]): f"row{i}" for i in range(1, 6)}
    window = ChunkWindow("chunk", "public.a", rows, ("5",), table_done=False)
    window.streamed("public.a", key_identity([2]))  # before the low watermark: the chunk's copy is newer
    assert len(window.rows) == 5
    window.opened = True
    window.streamed("public.a", key_identity([2]))
    window.streamed("public.a", key_identity([4]))
    window.streamed("public.other", key_identity([3]))  # another table's key 3
    window.streamed("public.a", key_identity([42]))  # a row the chunk does not hold
    assert list(window.rows.values()) == ["row1", "row3", "row5"]
    assert window.read == 5


def test_key_identity_is_hashable_for_array_keys() -> None:
    assert hash(key_identity([[1, 2], "a"])) == hash(key_identity([[1, 2], "a"]))
