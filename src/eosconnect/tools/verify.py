"""Exactly-once accounting: what is missing, what is duplicated.

The verifier is the referee of every exactly-once claim in this project, so it counts plainly:
for each key (one source partition), the sequence numbers seen against the numbers expected
(`check_sequences`, for SequenceSource data), or every row of a table against the records that
carry its id (`check_ids`, for JdbcSource data). `verify_sequence_topic` and `verify_jdbc_topic`
read a topic with read_committed and run those checks; `verify_field_topic` checks any topic by
the record key or a field of its JSON value (`check_identities`: count, distinct, duplicates, and
gaps when the values are integers). `eosconnect verify` (tools/verify_cli.py) is their command line.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import uuid
from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from eosconnect.connectors.sequence import parse_value
from eosconnect.storage.topic_reader import TopicRecord, read_to_end

__all__ = [
    "FieldReport",
    "SequenceCollector",
    "SequenceReport",
    "check_contiguous",
    "check_identities",
    "check_ids",
    "check_sequences",
    "parse_start_offsets",
    "record_id",
    "record_identity",
    "table_ids",
    "verify_field_topic",
    "verify_jdbc_topic",
    "verify_sequence_records",
    "verify_sequence_topic",
]


@dataclass
class SequenceReport:
    expected: int = 0
    seen: int = 0
    duplicates: int = 0
    missing: int = 0
    unexpected: int = 0
    anomalies: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.duplicates == 0 and self.missing == 0 and self.unexpected == 0

    def summary_rows(self) -> list[tuple[str, str]]:
        return [
            ("expected", str(self.expected)),
            ("seen", str(self.seen)),
            ("duplicates", str(self.duplicates)),
            ("missing", str(self.missing)),
            ("unexpected", str(self.unexpected)),
            ("verdict", "OK: exactly once" if self.ok else "FAILED"),
        ]


def check_sequences(
    observed: Iterable[tuple[Hashable, int]],
    expected_counts: Mapping[Hashable, int],
    max_anomalies: int = 10,
    *,
    starts: Mapping[Hashable, int] | None = None,
) -> SequenceReport:
    """Compare observed (key, seq) pairs with `expected_counts[key]` = N meaning seqs 0..N-1
    (or `starts[key]`..`starts[key]`+N-1 for keys in `starts`).

    Keys not in `expected_counts` and sequence numbers outside the expected range count as unexpected.
    """
    counts: dict[Hashable, Counter[int]] = {}
    report = SequenceReport(expected=sum(expected_counts.values()))

    def note(text: str) -> None:
        if len(report.anomalies) < max_anomalies:
            report.anomalies.append(text)

    for key, seq in observed:
        report.seen += 1
        counts.setdefault(key, Counter())[seq] += 1
    for key in sorted(set(counts) | set(expected_counts), key=str):
        n = expected_counts.get(key)
        seen = counts.get(key, Counter())
        if n is None:
            report.unexpected += sum(seen.values())
            note(f"key {key!r}: {sum(seen.values())} records for a key that was not expected")
            continue
        first = (starts or {}).get(key, 0)
        for seq, times in sorted(seen.items()):
            if not first <= seq < first + n:
                report.unexpected += times
                note(f"key {key!r}: sequence {seq} outside {first}..{first + n - 1}")
            elif times > 1:
                report.duplicates += times - 1
                note(f"key {key!r}: sequence {seq} seen {times} times")
        gaps = [s for s in range(first, first + n) if s not in seen]
        report.missing += len(gaps)
        if gaps:
            note(f"key {key!r}: {len(gaps)} missing, first {gaps[:5]}")
    return report


def check_contiguous(
    observed: Iterable[tuple[Hashable, int]], max_anomalies: int = 10, *, from_zero: bool = True
) -> SequenceReport:
    """Without expected counts: per key, every sequence number from 0 (or, with `from_zero=False`,
    from the lowest one seen) up to the highest one seen, each exactly once.

    A gap at the end (records lost after the last one seen) cannot be detected this way; give the
    expected counts to `check_sequences` when they are known.
    """
    pairs = list(observed)
    low: dict[Hashable, int] = {}
    high: dict[Hashable, int] = {}
    for key, seq in pairs:
        low[key] = min(seq, low.get(key, seq))
        high[key] = max(seq, high.get(key, seq))
    starts = {key: 0 if from_zero else low[key] for key in high}
    counts = {key: max(0, high[key] - starts[key] + 1) for key in high}
    return check_sequences(pairs, counts, max_anomalies, starts=starts)


def _normalize_id(value: Any) -> Hashable:
    """One form for ids read from a database and from JSON, so 5, 5.0 and Decimal(5) match."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float | decimal.Decimal):
        try:
            return int(value) if value == int(value) else float(value)
        except (ValueError, OverflowError, decimal.InvalidOperation):  # nan, inf
            return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    return value if isinstance(value, str) else str(value)


def check_ids(
    observed: Iterable[Hashable], expected: Iterable[Hashable], max_anomalies: int = 10
) -> SequenceReport:
    """Every expected id exactly once: ids seen twice are duplicates, ids never seen are missing,
    ids that are not expected (or records without an id: pass None) are unexpected."""
    wanted = {_normalize_id(i) for i in expected}
    seen: Counter[Hashable] = Counter(_normalize_id(i) for i in observed)
    report = SequenceReport(expected=len(wanted), seen=sum(seen.values()))

    def note(text: str) -> None:
        if len(report.anomalies) < max_anomalies:
            report.anomalies.append(text)

    for ident, times in sorted(seen.items(), key=lambda item: (str(type(item[0])), str(item[0]))):
        if ident is None or ident not in wanted:
            report.unexpected += times
            note(f"{times} record(s) with an id that is not in the table: {ident!r}")
        elif times > 1:
            report.duplicates += times - 1
            note(f"id {ident!r} seen {times} times")
    missing = sorted((i for i in wanted if i not in seen), key=lambda i: (str(type(i)), i))
    report.missing = len(missing)
    if missing:
        note(f"{len(missing)} row(s) missing, first ids {missing[:5]}")
    return report


def parse_start_offsets(text: str | None) -> dict[int, int] | None:
    """`"0:120,1:97"` -> {0: 120, 1: 97}: where to start reading each partition (others: the beginning)."""
    if not text or not text.strip():
        return None
    offsets: dict[int, int] = {}
    for item in text.split(","):
        partition, sep, offset = item.strip().partition(":")
        try:
            if not sep:
                raise ValueError
            p, o = int(partition), int(offset)
            if p < 0 or o < 0:
                raise ValueError
        except ValueError:
            raise ValueError(
                f"{item.strip()!r} is not PARTITION:OFFSET; write the start offsets as e.g. 0:120,1:97"
            ) from None
        offsets[p] = o
    return offsets


@dataclass
class SequenceCollector:
    """Gathers (task, seq) from SequenceSource records (an `on_record` callback for `read_to_end`)."""

    observed: list[tuple[int, int]] = field(default_factory=list)
    malformed: list[str] = field(default_factory=list)
    count: int = 0

    def __call__(self, record: TopicRecord) -> None:
        self.count += 1
        try:
            self.observed.append(parse_value(record.value))
        except (ValueError, KeyError, TypeError) as exc:
            self.malformed.append(
                f"partition {record.partition} offset {record.offset}: not a SequenceSource value ({exc!r})"
            )


def verify_sequence_records(
    collector: SequenceCollector,
    *,
    tasks: int | None = None,
    records_per_task: int | None = None,
    commit_every: int | None = None,
    abort_every: int = 0,
    from_zero: bool = True,
    max_anomalies: int = 10,
) -> SequenceReport:
    """Check collected SequenceSource data.

    With `tasks` and `records_per_task`: keys 0..tasks-1 must each hold exactly the sequence numbers
    a SequenceSource with `records.per.task` would commit (minus the transactions it aborts on
    purpose when `abort_every` is set). Without them: per key, no gap and no duplicate, starting at
    0 (`from_zero`) or at the lowest number seen.
    """
    from eosconnect.connectors.sequence import expected_sequences

    if (tasks is None) != (records_per_task is None):
        raise ValueError("give both tasks and records_per_task, or neither")
    if tasks is None or records_per_task is None:
        report = check_contiguous(collector.observed, max_anomalies, from_zero=from_zero)
    elif abort_every:
        survivors = expected_sequences(records_per_task, commit_every or 1, abort_every)
        index = {seq: i for i, seq in enumerate(survivors)}
        mapped = [(t, index.get(s, -1)) for t, s in collector.observed]
        report = check_sequences(mapped, {t: len(survivors) for t in range(tasks)}, max_anomalies)
    else:
        report = check_sequences(
            collector.observed, {t: records_per_task for t in range(tasks)}, max_anomalies
        )
    _add_malformed(report, collector.malformed, max_anomalies)
    return report


def _add_malformed(report: SequenceReport, malformed: list[str], max_anomalies: int) -> None:
    report.seen += len(malformed)
    report.unexpected += len(malformed)
    for text in malformed[: max(0, max_anomalies - len(report.anomalies))]:
        report.anomalies.append(text)


def verify_sequence_topic(
    client_config: Mapping[str, Any],
    topic: str,
    *,
    start_offsets: dict[int, int] | None = None,
    timeout: float = 120.0,
    on_record: Callable[[TopicRecord], None] | None = None,
    **checks: Any,
) -> SequenceReport:
    """Read `topic` with read_committed and check it as SequenceSource output (`checks`: the
    keyword arguments of `verify_sequence_records`). Without expected counts and with
    `start_offsets`, numbering is checked from the lowest number seen per key."""
    collector = SequenceCollector()

    def handle(record: TopicRecord) -> None:
        collector(record)
        if on_record is not None:
            on_record(record)

    read_to_end(dict(client_config), topic, start_offsets=start_offsets, timeout=timeout, on_record=handle)
    checks.setdefault("from_zero", not start_offsets)
    return verify_sequence_records(collector, **checks)


def record_id(record: TopicRecord, id_column: str) -> Hashable:
    """The row id a JdbcSource record carries: `value[id_column]`, else its key (the incrementing
    id); None when it has neither."""
    try:
        value = _payload(json.loads(record.value)) if record.value else None
    except ValueError:
        value = None
    if isinstance(value, dict) and id_column in value:
        return _normalize_id(value[id_column])
    try:
        key = _payload(json.loads(record.key)) if record.key else None
    except ValueError:
        return None
    return None if isinstance(key, dict | list) else _normalize_id(key)


def _payload(value: Any) -> Any:
    """The payload of a JsonConverter `schemas.enable=true` envelope, or the value itself."""
    if isinstance(value, dict) and value.keys() == {"schema", "payload"}:
        return value["payload"]
    return value


def table_ids(url: str, table: str, id_column: str) -> list[Hashable]:
    """Every id in `table` (schema.table for another schema), read with SQLAlchemy."""
    from sqlalchemy import create_engine, select

    from eosconnect.connectors.jdbc import reflect_table

    engine = create_engine(url)
    try:
        reflected = reflect_table(engine, table)
        if id_column not in reflected.columns:
            columns = ", ".join(c.name for c in reflected.columns)
            raise ValueError(f"table {table!r} has no column {id_column!r} (its columns: {columns})")
        with engine.connect() as conn:
            return [_normalize_id(v) for v in conn.execute(select(reflected.columns[id_column])).scalars()]
    finally:
        engine.dispose()


def verify_jdbc_topic(
    client_config: Mapping[str, Any],
    topic: str,
    url: str,
    table: str,
    id_column: str = "id",
    *,
    start_offsets: dict[int, int] | None = None,
    timeout: float = 120.0,
    max_anomalies: int = 10,
    on_record: Callable[[TopicRecord], None] | None = None,
    decode: Callable[[TopicRecord], TopicRecord] | None = None,
) -> SequenceReport:
    """Every row of `table` exactly once in `topic` (read_committed), matched by `id_column`.

    `decode` turns records of another converter into JSON first (tools/verify_decode.py).

    Meant for insert-only tables: in the timestamp modes an updated row is legitimately written
    again and shows up here as a duplicate. The table is read after the topic, so rows inserted
    meanwhile show up as missing: stop the writers first.
    """
    ids: list[Hashable] = []

    def handle(record: TopicRecord) -> None:
        ids.append(record_id(decode(record) if decode is not None else record, id_column))
        if on_record is not None:
            on_record(record)

    read_to_end(dict(client_config), topic, start_offsets=start_offsets, timeout=timeout, on_record=handle)
    return check_ids(ids, table_ids(url, table, id_column), max_anomalies)


@dataclass
class FieldReport(SequenceReport):
    """`check_identities`' counts: `seen` records, `distinct` identities, `duplicates` records
    beyond the first of their identity, `missing` integers absent between the lowest and the highest
    (None when the identities are not all integers), `unexpected` records without an identity."""

    distinct: int = 0
    #: What identifies a record, for the report ("the field", "a key").
    missing_label: str = "without the field"
    missing_known: bool = True
    low: int | None = None
    high: int | None = None

    def summary_rows(self) -> list[tuple[str, str]]:
        if not self.missing_known:
            gaps = "n/a (not all integers)"
        elif self.low is None:
            gaps = "0"
        else:
            gaps = f"{self.missing} (in {self.low}..{self.high})"
        return [
            ("records", str(self.seen)),
            ("distinct", str(self.distinct)),
            ("duplicates", str(self.duplicates)),
            ("gaps", gaps),
            (self.missing_label, str(self.unexpected)),
            ("verdict", "OK: each once, no gap" if self.ok else "FAILED"),
        ]


def _as_integer(value: Hashable) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def check_identities(
    observed: Iterable[Hashable | None], max_anomalies: int = 10, *, missing_label: str = ""
) -> FieldReport:
    """Each identity (a key, a field's value) once: records with the same identity are duplicates,
    records without one (None) unexpected; when every identity is an integer (or a string of
    digits), the integers missing between the lowest and the highest are gaps."""
    counts: Counter[Hashable] = Counter()
    report = FieldReport(missing_label=missing_label or FieldReport.missing_label)

    def note(text: str) -> None:
        if len(report.anomalies) < max_anomalies:
            report.anomalies.append(text)

    for identity in observed:
        report.seen += 1
        if identity is None:
            report.unexpected += 1
        else:
            counts[_normalize_id(identity)] += 1
    report.distinct = len(counts)
    report.expected = report.distinct
    for identity, times in sorted(counts.items(), key=lambda item: (str(type(item[0])), str(item[0]))):
        if times > 1:
            report.duplicates += times - 1
            note(f"{identity!r} seen {times} times")
    if report.unexpected:
        note(f"{report.unexpected} record(s) {report.missing_label}")
    numbers = [_as_integer(i) for i in counts]
    if any(n is None for n in numbers):
        report.missing_known = False
    elif numbers:
        present = set(n for n in numbers if n is not None)
        report.low, report.high = min(present), max(present)
        report.missing = report.high - report.low + 1 - len(present)
        if report.missing:
            first = [n for n in range(report.low, report.high + 1) if n not in present][:5]
            note(f"{report.missing} integer(s) missing between {report.low} and {report.high}, first {first}")
    return report


def record_identity(record: TopicRecord, field: str | None) -> Hashable | None:
    """What identifies `record`: its key (`field` None: the JSON value of the key if it parses,
    else its text), or the value of `field` in its JSON value (a dotted path for nested objects);
    None when it has none."""
    if field is None:
        if record.key is None:
            return None
        try:
            key = _payload(json.loads(record.key))
        except ValueError:
            return record.key.decode("utf-8", errors="replace")
        return json.dumps(key, sort_keys=True) if isinstance(key, dict | list) else key
    try:
        value: Any = json.loads(record.value) if record.value else None
    except ValueError:
        return None
    if isinstance(value, dict) and "payload" in value and "schema" in value:
        value = value["payload"]  # JsonConverter with schemas.enable=true
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    if value is None or isinstance(value, dict | list):
        return None if value is None else json.dumps(value, sort_keys=True)
    return value


def verify_field_topic(
    client_config: Mapping[str, Any],
    topic: str,
    field: str | None,
    *,
    start_offsets: dict[int, int] | None = None,
    timeout: float = 120.0,
    max_anomalies: int = 10,
    on_record: Callable[[TopicRecord], None] | None = None,
    decode: Callable[[TopicRecord], TopicRecord] | None = None,
) -> FieldReport:
    """Read `topic` with read_committed and check that each record key (`field` None) or value of
    `field` occurs once, and, for integers, that none is missing (`check_identities`). `decode` turns
    records of another converter into JSON first (tools/verify_decode.py)."""
    identities: list[Hashable | None] = []

    def handle(record: TopicRecord) -> None:
        identities.append(record_identity(decode(record) if decode is not None else record, field))
        if on_record is not None:
            on_record(record)

    read_to_end(dict(client_config), topic, start_offsets=start_offsets, timeout=timeout, on_record=handle)
    return check_identities(identities, max_anomalies, missing_label="without a key" if field is None else "")
