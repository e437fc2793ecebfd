"""The consumed positions of an exactly-once JdbcSink, kept in the target database itself.

One row per (connector, topic, partition): `kafka_offset` (the next offset to read, null until a
first commit), `leader_epoch` (of the record before it, KIP-320) and `generation`, the fencing
token. A task that is given a partition *claims* it: in one transaction it locks the row
(SELECT .. FOR UPDATE; SQLite: BEGIN IMMEDIATE locks the database), raises `generation` by one and
reads the position to resume from. Every later commit of that task locks the same rows again and
writes only partitions whose generation is still the one it claimed: once a successor claimed a
partition (after a rebalance, a Spark retry, a restart), a task that is still alive - SIGSTOPped,
partitioned away, a retried Spark task's predecessor - can no longer commit rows or positions for
it. The lock also makes the claim wait for a commit in flight, so the successor reads the position
after it.

A task frozen inside its flush transaction (SIGSTOP between two statements) would hold those locks
as long as it stays frozen; the server ends its session after `idle.transaction.timeout.ms` (see
`dialect.transactional_engine`). Meanwhile the claim waits in steps of `CLAIM_LOCK_WAIT_S`
(PostgreSQL `lock_timeout`; MariaDB/MySQL `innodb_lock_wait_timeout`, 50 s by default) and logs
which sessions hold the offsets table's row locks, so a long wait is visible.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError, OperationalError

from eosconnect.api.records import OffsetAndMetadata, TopicPartition

__all__ = ["CLAIM_LOCK_WAIT_S", "Claim", "Locked", "OffsetsTable"]

log = logging.getLogger(__name__)

#: How long one attempt of a claim waits for the offsets rows' locks (PostgreSQL) before it logs
#: who holds them and tries again.
CLAIM_LOCK_WAIT_S = 5


@dataclass(frozen=True)
class Claim:
    """A task's hold on a partition: the generation it raised, and where the partition resumes."""

    generation: int
    position: OffsetAndMetadata | None


@dataclass(frozen=True)
class Locked:
    """A locked row of the offsets table: its generation and the next offset stored (None: none yet)."""

    generation: int
    offset: int | None


class OffsetsTable:
    """Reads, claims and writes the positions of one connector's partitions."""

    def __init__(self, name: str, connector: str) -> None:
        schema, dot, table = name.rpartition(".")
        self.connector = connector
        self.table = sa.Table(
            table,
            sa.MetaData(),
            sa.Column("connector", sa.String(255), primary_key=True),
            sa.Column("kafka_topic", sa.String(255), primary_key=True),
            sa.Column("kafka_partition", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("kafka_offset", sa.BigInteger, nullable=True),
            sa.Column("leader_epoch", sa.Integer, nullable=True),
            sa.Column("generation", sa.BigInteger, nullable=False),
            schema=schema if dot else None,
        )

    def create(self, engine: sa.Engine) -> None:
        """Create the table unless it exists; tasks starting together race here (PostgreSQL's
        CREATE TABLE IF NOT EXISTS is not safe against that), so losing the race is fine."""
        try:
            with engine.begin() as conn:
                self.table.create(conn, checkfirst=True)
        except sa.exc.DBAPIError:
            if not sa.inspect(engine).has_table(self.table.name, schema=self.table.schema):
                raise

    def _where(self, partitions: Iterable[TopicPartition]) -> sa.ColumnElement[bool]:
        c = self.table.c
        pairs = sorted({(tp.topic, tp.partition) for tp in partitions})
        return sa.and_(c.connector == self.connector, sa.tuple_(c.kafka_topic, c.kafka_partition).in_(pairs))

    def lock(self, conn: sa.Connection, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Locked]:
        """Lock these partitions' rows in `conn`'s transaction; their generations and stored offsets
        (a partition without a row is absent)."""
        c = self.table.c
        rows = conn.execute(
            sa.select(c.kafka_topic, c.kafka_partition, c.generation, c.kafka_offset)
            .where(self._where(partitions))
            .order_by(c.kafka_topic, c.kafka_partition)  # one lock order: no deadlock between tasks
            .with_for_update()
        )
        return {TopicPartition(t, p): Locked(g, o) for t, p, g, o in rows}

    def claim(self, engine: sa.Engine, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, Claim]:
        """Raise each partition's generation (fencing every earlier holder); return the claims."""
        partitions = sorted(set(partitions))
        if not partitions:
            return {}
        inserted_first = 0
        began = time.monotonic()
        while True:
            try:
                return self._claim_once(engine, partitions)
            except IntegrityError:  # another task inserted the same new row first: lock it now
                inserted_first += 1
                if inserted_first == 3:
                    raise
            except OperationalError as exc:
                if not _lock_wait_timed_out(exc):
                    raise
                log.warning(
                    "claiming %s: waited %.0f s for the offsets table's row locks in %s, still waiting; "
                    "held by: %s",
                    ", ".join(f"{tp.topic}-{tp.partition}" for tp in partitions),
                    time.monotonic() - began,
                    self.table.fullname,
                    self._lock_holders(engine),
                )

    def _lock_holders(self, engine: sa.Engine) -> str:
        """The other sessions holding row locks on the offsets table (PostgreSQL), for the log."""
        if engine.dialect.name != "postgresql":
            return "(not known for this database)"
        name = engine.dialect.identifier_preparer.format_table(self.table)
        try:
            with engine.connect() as conn:
                rows = conn.execute(
                    sa.text(
                        "SELECT a.pid, a.state, a.application_name, a.client_addr, "
                        "EXTRACT(EPOCH FROM now() - a.state_change) FROM pg_locks l "
                        "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.relation = CAST(:t AS regclass) "
                        "AND l.mode = 'RowShareLock' AND l.granted AND a.pid <> pg_backend_pid()"
                    ),
                    {"t": name},
                ).all()
        except sa.exc.SQLAlchemyError as exc:
            return f"(unknown: {str(exc).splitlines()[0]})"
        return (
            "; ".join(
                f"pid {pid} ({state} for {float(secs or 0):.0f} s, application_name={app!r}, client {addr})"
                for pid, state, app, addr, secs in rows
            )
            or "(nobody now)"
        )

    def _claim_once(self, engine: sa.Engine, partitions: list[TopicPartition]) -> dict[TopicPartition, Claim]:
        c = self.table.c
        claims: dict[TopicPartition, Claim] = {}
        with engine.begin() as conn:
            if engine.dialect.name == "postgresql":
                conn.exec_driver_sql(f"SET LOCAL lock_timeout = '{CLAIM_LOCK_WAIT_S}s'")
            current = self.lock(conn, partitions)
            new = [tp for tp in partitions if tp not in current]
            if new:
                conn.execute(
                    sa.insert(self.table),
                    [
                        {
                            "connector": self.connector,
                            "kafka_topic": tp.topic,
                            "kafka_partition": tp.partition,
                            "kafka_offset": None,
                            "leader_epoch": None,
                            "generation": 1,
                        }
                        for tp in new
                    ],
                )
            if current:
                conn.execute(
                    sa.update(self.table).where(self._where(current)).values(generation=c.generation + 1)
                )
            rows = conn.execute(
                sa.select(
                    c.kafka_topic, c.kafka_partition, c.kafka_offset, c.leader_epoch, c.generation
                ).where(self._where(partitions))
            )
            for topic, partition, offset, epoch, generation in rows:
                position = None if offset is None else OffsetAndMetadata(offset, leader_epoch=epoch)
                claims[TopicPartition(topic, partition)] = Claim(generation, position)
        return claims

    def write(self, conn: sa.Connection, positions: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """Store these positions in `conn`'s transaction (whose `lock` checked the generations)."""
        if not positions:
            return
        c = self.table.c
        stmt = (
            sa.update(self.table)
            .where(
                c.connector == self.connector,
                c.kafka_topic == sa.bindparam("b_topic"),
                c.kafka_partition == sa.bindparam("b_partition"),
            )
            .values(kafka_offset=sa.bindparam("b_offset"), leader_epoch=sa.bindparam("b_epoch"))
        )
        conn.execute(
            stmt,
            [
                {
                    "b_topic": tp.topic,
                    "b_partition": tp.partition,
                    "b_offset": om.offset,
                    "b_epoch": om.leader_epoch,
                }
                for tp, om in sorted(positions.items())
            ],
        )

    def positions(self, engine: sa.Engine) -> dict[TopicPartition, OffsetAndMetadata]:
        """Every stored position of the connector (for tools and tests)."""
        c = self.table.c
        with engine.connect() as conn:
            rows = conn.execute(
                sa.select(c.kafka_topic, c.kafka_partition, c.kafka_offset, c.leader_epoch).where(
                    c.connector == self.connector, c.kafka_offset.is_not(None)
                )
            )
            return {TopicPartition(t, p): OffsetAndMetadata(o, leader_epoch=e) for t, p, o, e in rows}

    def set(self, engine: sa.Engine, offsets: Mapping[TopicPartition, int]) -> None:
        """Store these positions (KIP-875's PATCH /offsets on a stopped connector), without epochs."""
        claims = self.claim(engine, offsets)  # creates missing rows; fences any task still around
        with engine.begin() as conn:
            self.lock(conn, claims)
            self.write(conn, {tp: OffsetAndMetadata(offset) for tp, offset in offsets.items()})

    def delete(self, engine: sa.Engine) -> None:
        """Forget the connector's positions (a reset: partitions start per auto.offset.reset)."""
        with engine.begin() as conn:
            conn.execute(sa.delete(self.table).where(self.table.c.connector == self.connector))


def _lock_wait_timed_out(exc: OperationalError) -> bool:
    """PostgreSQL's lock_timeout (SQLSTATE 55P03) or InnoDB's lock wait timeout (error 1205)."""
    orig = exc.orig
    if getattr(orig, "sqlstate", None) == "55P03" or getattr(orig, "pgcode", None) == "55P03":
        return True
    args: tuple[object, ...] = tuple(getattr(orig, "args", ()))
    return bool(args) and args[0] == 1205
