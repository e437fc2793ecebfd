"""Debezium's include/exclude lists (`table.include.list`, `column.exclude.list`, ...), as every
Debezium connector matches them."""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["TableFilter"]


@dataclass(frozen=True)
class TableFilter:
    """Debezium's include/exclude lists: full matches on the dotted name (`<schema>.<table>` for
    tables, `<schema>.<table>.<column>` for columns); the include list wins when both are set."""

    include: tuple[re.Pattern[str], ...]
    exclude: tuple[re.Pattern[str], ...]

    def __call__(self, *parts: str) -> bool:
        name = ".".join(parts)
        if self.include:
            return any(p.fullmatch(name) for p in self.include)
        return not any(p.fullmatch(name) for p in self.exclude)

    def rank(self, *parts: str) -> tuple[int, str]:
        """Sort key: the position of the first include pattern matching, then the dotted name."""
        name = ".".join(parts)
        first = next((i for i, p in enumerate(self.include) if p.fullmatch(name)), len(self.include))
        return first, name
