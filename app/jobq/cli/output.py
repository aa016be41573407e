"""What every command writes: ``--json`` for scripts, rich for people, and a mistake as one
line on stderr (a JSON object with ``--json``) with its exit code."""

from __future__ import annotations

import dataclasses
import json
import sys
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console, RenderableType

AsJson = Annotated[bool, typer.Option("--json", help="print JSON for scripts")]
Wide = Annotated[bool, typer.Option(
    "--wide", help="print every value whole, however wide (always so when stdout is not a terminal)")]

console = Console()


def plain(value: Any) -> Any:
    """An SDK value (dataclasses, enums, datetimes) as the JSON the service sent."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        extra = out.pop("extra", None) or {}
        return {**out, **extra}
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    if isinstance(value, Enum):
        return value.value
    return value


def table_width(wide: bool) -> int | None:
    """The width a listing is fitted to: the terminal's, or None (every value whole) with
    ``--wide`` or when stdout is not a terminal. A pipe or a file has no width to fit, and a
    cut there loses what tells rows apart (`jobq queues | cat` showed two rows
    `tenant-a.slo…`) from the very programs, grep or a diff, that read it."""
    return None if wide or not console.is_terminal else console.width


def print_table(table: RenderableType, width: int | None, *, highlight: bool | None = None) -> None:
    """Print a listing built for ``width`` (``table_width``): when None, on a console as wide
    as the table, which rich would otherwise squeeze into the 80 columns it assumes for a
    pipe."""
    if width is not None:
        console.print(table, highlight=highlight)
        return
    whole = console.measure(table, options=console.options.update_width(UNBOUNDED)).maximum
    Console(width=max(whole, console.width)).print(table, highlight=highlight)


def show(view: RenderableType, *, highlight: bool | None = None) -> None:
    """One thing for a person (a job, a queue, a schedule, a line saying what was done): on
    a terminal, fitted to it; into a pipe or a file, whole, as the listings are. rich folds
    at the 80 columns it assumes for a pipe, so `jobq job ID | cat` broke a payload's long
    string across lines and `jobq queues delete` its own message mid-sentence."""
    print_table(view, table_width(wide=False), highlight=highlight)


# Wide enough for any table a listing makes (a measure needs some bound).
UNBOUNDED = 1_000_000


def print_json(value: Any) -> None:
    sys.stdout.write(json.dumps(plain(value), indent=2, default=str) + "\n")


def fail(message: str, code: int = 1, *, as_json: bool = False, fields: dict[str, Any] | None = None) -> NoReturn:
    """One line on stderr, then exit ``code``: ``jobq: message``, or with ``--json``
    (``as_json``) a JSON object (``{"error": message, ...fields}``) so that a script never
    parses prose. Exit 2 is for what the command line itself refuses, 1 for the rest."""
    if as_json:
        sys.stderr.write(json.dumps({"error": message, **(fields or {})}, default=str) + "\n")
    else:
        # Plain, unwrapped: rich would wrap it at 80 columns when stderr is not a terminal.
        typer.secho(f"jobq: {message}", fg="red", err=True)
    raise typer.Exit(code)
