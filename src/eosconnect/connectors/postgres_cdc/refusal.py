"""Which setting a connection PostgreSQL refused is about.

libpq reports an unreachable server and a server that answered "no" with the same exception class
(OperationalError, no SQLSTATE), so a wrong password read as a wrong host. The server's answer is
told apart by its words: a refused password, a role or database that does not exist, no
pg_hba.conf line for the connection. Those are mistakes in the settings that no retry mends; the
rest (refused, timed out, unknown host, a server starting up) is the address or an outage.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eosconnect.api.errors import ConnectException
from eosconnect.connectors.postgres_cdc.config import CdcConfig

__all__ = ["ConnectionRefused", "Refusal", "refusal"]


@dataclass(frozen=True)
class Refusal:
    """The setting to fix and what to say about it."""

    setting: str
    message: str


class ConnectionRefused(ConnectException):
    """PostgreSQL answered and refused the connection: the task fails at once, naming the setting."""

    def __init__(self, found: Refusal) -> None:
        super().__init__(f"{found.setting}: {found.message}")
        self.refusal = found


_PASSWORD = re.compile(r"password authentication failed|no password supplied", re.IGNORECASE)
_ROLE = re.compile(r'role "[^"]*" does not exist|(ident|peer) authentication failed', re.IGNORECASE)
_DATABASE = re.compile(r'database "[^"]*" does not exist', re.IGNORECASE)
_HBA = re.compile(r"no pg_hba\.conf entry", re.IGNORECASE)


def refusal(error: BaseException, config: CdcConfig) -> Refusal | None:
    """The setting `error` (a psycopg or psycopg2 connection error) is about, if PostgreSQL refused
    the connection; None when it never answered."""
    reason = " ".join(str(error).split())
    user, where = config["database.user"], config.describe()
    if _PASSWORD.search(reason):
        given = config.values.get("database.password")
        return Refusal(
            "database.password",
            f"PostgreSQL at {where} refused the password of role {user!r} ({reason}). "
            + (
                "Set database.password to the role's password (PostgreSQL answers the same for a role "
                "that does not exist: check database.user too)."
                if given is not None and given.value
                else "The server asks for a password: set database.password."
            ),
        )
    if _ROLE.search(reason):
        return Refusal(
            "database.user",
            f"PostgreSQL at {where} refused role {user!r} ({reason}). Set database.user to an existing "
            "role with LOGIN and REPLICATION.",
        )
    if _DATABASE.search(reason):
        return Refusal(
            "database.dbname",
            f"PostgreSQL at {where} has no database {config['database.dbname']!r} ({reason}). Set "
            "database.dbname to the database to capture.",
        )
    if _HBA.search(reason):
        return Refusal(
            "database.user",
            f"PostgreSQL at {where} admits no connection of role {user!r} from this host ({reason}). "
            "Add lines for it to the server's pg_hba.conf (for the database, and for replication) and "
            "reload PostgreSQL (SELECT pg_reload_conf();).",
        )
    return None
