"""Interleaved rounds of the side-by-side benches: which side runs first, and the per-round pairs.

Odd rounds run Java first, even rounds eosconnect first, so that neither side always meets a warmer
(or a busier) machine; a job's result is the median over rounds of the per-round eos/java ratio.
"""

from __future__ import annotations

import argparse
import os
import statistics
from collections.abc import Callable, Iterator, Sequence
from typing import Protocol, TypeVar

from rich.table import Table

__all__ = ["SIDES", "paired_rounds", "per_round_table", "round_arguments", "side_order"]

SIDES = ("java", "eos")


class _Run(Protocol):
    job: str
    side: str
    round: int
    load: float

    @property
    def rate(self) -> float: ...


R = TypeVar("R", bound=_Run)


def round_arguments(description: str, records: int, jobs: Sequence[str]) -> argparse.ArgumentParser:
    """A parser with the options every side-by-side bench takes: `--records` (default `records`, or
    EOSCONNECT_BENCH_RECORDS), `--rounds` (3, or EOSCONNECT_BENCH_ROUNDS) and `--jobs` (a
    comma-separated subset of `jobs`, all by default)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--records", type=int, default=int(os.environ.get("EOSCONNECT_BENCH_RECORDS", records))
    )
    parser.add_argument("--rounds", type=int, default=int(os.environ.get("EOSCONNECT_BENCH_ROUNDS", 3)))
    parser.add_argument("--jobs", default=",".join(jobs), help=f"comma-separated subset of {tuple(jobs)}")
    return parser


def side_order(round_no: int) -> tuple[str, ...]:
    """The sides in the order round `round_no` runs them."""
    return SIDES if round_no % 2 else tuple(reversed(SIDES))


def paired_rounds(runs: Sequence[R], job: str, rounds: int) -> Iterator[tuple[int, dict[str, R], float]]:
    """Each round in which both sides ran `job`: its number, its runs by side and the eos/java ratio
    of their rates."""
    for round_no in range(1, rounds + 1):
        pair = {run.side: run for run in runs if run.job == job and run.round == round_no}
        if len(pair) == len(SIDES):
            yield round_no, pair, pair["eos"].rate / pair["java"].rate


def per_round_table(
    title: str,
    runs: Sequence[R],
    jobs: Sequence[str],
    rounds: int,
    *,
    java: str = "java",
    unit: str = "rec/s",
    extra: Sequence[tuple[str, Callable[[dict[str, R]], str]]] = (),
) -> tuple[Table, dict[str, float]]:
    """The per-round table (round, job, each side's rate, eos/java, the `extra` columns, the higher
    load average of the two runs) and each job's median eos/java ratio over the rounds."""
    table = Table(title=title)
    for col in ("round", "job", f"{java} {unit}", f"eos {unit}", "eos/java", *(h for h, _ in extra), "load"):
        table.add_column(col, justify="right")
    ratios: dict[str, list[float]] = {}
    for job in jobs:
        for round_no, pair, ratio in paired_rounds(runs, job, rounds):
            ratios.setdefault(job, []).append(ratio)
            table.add_row(
                str(round_no),
                job,
                f"{pair['java'].rate:,.0f}",
                f"{pair['eos'].rate:,.0f}",
                f"{ratio:.2f}",
                *(cell(pair) for _, cell in extra),
                f"{max(pair['java'].load, pair['eos'].load):.1f}",
            )
    return table, {job: statistics.median(values) for job, values in ratios.items()}
