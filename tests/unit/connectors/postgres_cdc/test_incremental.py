from __future__ import annotations

from dataclasses import replace

from eosconnect.connectors.postgres_cdc.incremental import IncrementalSnapshot
from eosconnect.connectors.postgres_cdc.incremental_state import ChunkWindow, IncrementalState


def snapshot(state: IncrementalState | None) -> IncrementalSnapshot:
    def no_conn() -> None:
        raise AssertionError("no SQL in these cases")

    return IncrementalSnapshot("p", no_conn, ("public", "sig"), 10, {}, lambda conn, meta: None, state)  # type: ignore[arg-type,return-value]


def test_a_lost_connection_reads_the_chunk_in_flight_again_and_ignores_its_watermarks() -> None:
    running = snapshot(IncrementalState("c", ("public.t",), last_key=("5",), max_key=("9",)))
    running.window = ChunkWindow("c-1", "public.t", {(6,): "row"}, ("9",), True)
    running.pending = False
    running.read_chunk_again()
    assert running.window is None and running.pending
    assert running.watermark("snapshot-window-close", "c-1-close") is None
    assert running.state is not None and running.state.last_key == ("5",), "the chunk is not done"


def test_a_lost_connection_leaves_a_paused_snapshot_paused_and_no_snapshot_none() -> None:
    paused = snapshot(replace(IncrementalState("c", ("public.t",)), paused=True))
    paused.read_chunk_again()
    assert not paused.pending
    idle = snapshot(None)
    idle.read_chunk_again()
    assert idle.state is None and not idle.pending and idle.offset() == {}


def test_stop_of_all_clears_the_offset_and_of_the_current_table_drops_its_chunk() -> None:
    running = snapshot(IncrementalState("c", ("public.a", "public.b"), last_key=("5",)))
    running.window = ChunkWindow("c-1", "public.a", {}, ("9",), False)
    running.stop(["public\\.a"])
    assert running.window is None and running.pending
    assert running.state is not None and running.state.tables == ("public.b",)
    assert running.state.last_key is None, "the next table starts from its beginning"
    running.stop(None)
    assert running.state is None and running.offset() == {}
