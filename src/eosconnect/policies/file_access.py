"""The worker's `file.allowed.dirs`: the directories tasks that open local files may use.

Checked twice. At validation (cluster/validation.py) a `file` outside them is refused with a 400.
That alone is not enough: a path inside an allowed directory can become a symbolic link to
somewhere else after validation, and a task may be started without any validation at all (a
`ConnectorJob`, a config written to the config topic by another tool). So the tasks check again
each time they open their file, on the path as it resolves then, and once more on the file they
actually opened (closing the window between the check and the open).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from eosconnect.api.errors import ConnectException

__all__ = ["FILE_ALLOWED_DIRS", "AllowedDirs"]

#: Worker setting: directories FileStream connectors may read and write (comma-separated).
FILE_ALLOWED_DIRS = "file.allowed.dirs"


@dataclass(frozen=True)
class AllowedDirs:
    """The parsed setting: `raw` as the operator wrote it, `dirs` resolved."""

    raw: str
    dirs: tuple[Path, ...]

    @classmethod
    def parse(cls, raw: str | None) -> AllowedDirs | None:
        """None when the setting is absent or empty: no restriction."""
        raw = (raw or "").strip()
        dirs = tuple(Path(d.strip()).resolve() for d in raw.split(",") if d.strip())
        return cls(raw, dirs) if dirs else None

    def allows(self, path: str | os.PathLike[str]) -> bool:
        resolved = Path(path).resolve()
        return any(resolved.is_relative_to(d) for d in self.dirs)

    def refusal(self, target: str) -> str | None:
        """Why `target` may not be used (for a validation error on `file`), or None if it may."""
        if self.allows(target):
            return None
        return (
            f"{target} is outside the directories this worker allows FileStream connectors to use "
            f"({FILE_ALLOWED_DIRS}={self.raw}); pick a file inside one of them"
        )

    def check(self, target: str) -> None:
        """Raise a `ConnectException` naming the file, the setting and the fix if `target`
        (followed through symbolic links as it is now) lies outside the allowed directories."""
        if not self.allows(target):
            raise self._outside(target, Path(target).resolve())

    def check_opened(self, target: str, fd: int) -> None:
        """The same for a file already open: checks what `fd` really is (Linux /proc), so a link
        swapped in between `check` and the open is caught too."""
        link = Path(f"/proc/self/fd/{fd}")
        try:
            real = Path(os.readlink(link))
        except OSError:
            return  # no /proc here: the check before the open is all there is
        if not any(real.is_relative_to(d) for d in self.dirs):
            raise self._outside(target, real)

    def _outside(self, target: str, real: Path) -> ConnectException:
        where = "" if str(real) == target else f" (it resolves to {real})"
        return ConnectException(
            f"file {target!r}{where} is outside the directories this worker allows FileStream "
            f"connectors to use ({FILE_ALLOWED_DIRS}={self.raw}). Point the connector's `file` at a "
            f"file inside one of them, or add its directory to {FILE_ALLOWED_DIRS} on every worker."
        )
