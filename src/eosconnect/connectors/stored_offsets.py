"""Reading numbers out of the source offsets a connector stored.

Offsets come back from the offsets topic as JSON maps of primitives (`Primitive`): a position
the task wrote as an int is an int again, but an offset altered over REST
(`PATCH /connectors/<name>/offsets`) may hold it as a digit string. `offset_int` takes either and
fails naming the offset when neither is there, rather than deep in the task's start-up.
"""

from __future__ import annotations

from collections.abc import Mapping

from eosconnect.api.errors import ConnectException
from eosconnect.api.records import Primitive

__all__ = ["offset_int"]


def offset_int(offset: Mapping[str, Primitive], key: str, connector: str) -> int:
    """`offset[key]` as an int, or a ConnectException naming `connector`'s offset and the key."""
    value = offset.get(key)
    if value is not None:
        try:
            return int(value)
        except ValueError:
            pass
    raise ConnectException(f"stored {connector} offset {dict(offset)!r} has no integer {key!r}")
