"""How the `eosconnect connectors` and `plugins` commands show what the REST API answers.

Tables and status lines for a terminal (rich), and JSON for `--output json`: the commands in
clients/cli.py call these and hold no layout of their own.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console
from rich.table import Column, Table
from rich.text import Text

__all__ = [
    "class_column_width",
    "dotted",
    "first_line",
    "make_console",
    "print_config",
    "print_info",
    "print_json",
    "print_status",
    "state_text",
    "trace_cause",
]


def make_console() -> Console:
    return Console(soft_wrap=False)


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False) + "\n")


def trace_cause(trace: str | None, width: int = 120) -> str:
    """What went wrong, from a status trace: a Python traceback's last line ("ValueError: boom"),
    not its first ("Traceback (most recent call last):"); other traces' first line."""
    if not trace or not trace.strip():
        return ""
    lines = [line.strip() for line in trace.strip().splitlines() if line.strip()]
    if lines[0].startswith("Traceback (most recent call last)"):
        exception_lines = [line for line in lines if not line.startswith(("File ", "Traceback", "^", "~"))]
        cause = exception_lines[-1] if exception_lines else lines[-1]
    else:
        cause = lines[0]
    return cause if len(cause) <= width else cause[: width - 1] + "…"


def first_line(text: str | None, width: int = 80) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def class_column_width(console: Console, others: list[list[str]]) -> int:
    """What a table's last column (class names) gets of the terminal: its width minus the other
    columns (each as wide as its widest cell) and the borders and padding (3 per column, plus 1)."""
    used = sum(max(len(cell) for cell in column) for column in others)
    return max(20, console.width - used - 3 * (len(others) + 1) - 1)


def dotted(name: str, width: int) -> Text:
    """A dotted class name that breaks after its dots, not mid-word, when it is wider than `width`
    (a single part that is wider still is folded by the table)."""
    lines: list[str] = []
    line = ""
    for part in name.split("."):
        piece = part if not line else "." + part
        if line and len(line) + len(piece) > width:
            lines.append(line + ".")
            line = part
        else:
            line += piece
    lines.append(line)
    return Text("\n".join(lines))


STATE_STYLE = {
    "RUNNING": "green",
    "PAUSED": "yellow",
    "STOPPED": "yellow",
    "FAILED": "bold red",
    "UNASSIGNED": "magenta",
    "RESTARTING": "cyan",
}


def state_text(state: str | None) -> Text:
    state = state or "?"
    return Text(state, style=STATE_STYLE.get(state, ""))


def print_info(info: dict[str, Any]) -> None:
    console = make_console()
    tasks = info.get("tasks") or []
    console.print(
        f"[bold]{info.get('name')}[/bold]  type: {info.get('type') or '?'}  tasks: {len(tasks)}",
        highlight=False,
    )
    print_config(info.get("config") or {})


def print_config(config: dict[str, Any]) -> None:
    table = Table(
        Column("Key", no_wrap=True),
        Column("Value", overflow="fold"),
        title="Configuration",
        title_justify="left",
    )
    for key in sorted(config):
        table.add_row(key, Text(str(config[key])))
    make_console().print(table)


def print_status(status: dict[str, Any]) -> None:
    console = make_console()
    conn = status.get("connector") or {}
    line = Text.assemble(
        (str(status.get("name")), "bold"),
        f"  type: {status.get('type') or '?'}  connector: ",
        state_text(conn.get("state")),
        f"  worker: {conn.get('worker_id') or '-'}",
    )
    console.print(line)
    if conn.get("trace"):
        console.print(Text(f"  {trace_cause(conn['trace'], 200)}", style="red"))
    table = Table(
        Column("Task", no_wrap=True),
        Column("State", no_wrap=True),
        Column("Worker", overflow="fold"),
        "Trace",
    )
    for task in status.get("tasks") or []:
        table.add_row(
            str(task.get("id")),
            state_text(task.get("state")),
            task.get("worker_id") or "-",
            Text(trace_cause(task.get("trace")), style="red"),
        )
    console.print(table)
