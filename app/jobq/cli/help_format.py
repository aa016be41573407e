"""The one way every ``jobq`` command is declared, and the help it prints.

Each command module makes its commands on a ``CommandGroup`` (a ``typer.Typer``) with
decorators; ``jobq.cli`` adds them all to the root. A ``CommandGroup`` gives its groups and
commands the classes below (typer's public ``cls=``), whose ``--help`` is click's plain
layout without typer's placeholders: ``Usage: jobq job [OPTIONS] JOB_ID``, not
``{job_id}``, and option values as words (``--limit INTEGER``), nothing after a flag, not
``<int>`` or ``<bool>``.

Typer draws those placeholders in its rich panels from methods of its parameter classes,
which only private code could change; so the help is click's plain layout (rich markup
off), and the two pieces that show placeholders, the usage line and the name column, are
written here from click's public parameter attributes. Everything else in a row (help,
env var, default, range, required) is the parameter's own ``get_help_record``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

import typer
from typer.core import TyperCommand, TyperGroup

# Typer's type names (``bare_type()``) as the words click always wrote.
_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN"}


def usage_name(param: Any) -> str:
    """An argument as the usage line and the help name it: ``JOB_ID``, ``[NAME]``, ``SPEC...``."""
    name = str(param.metavar or param.name).upper()
    name = name if param.required else f"[{name}]"
    return name if param.nargs == 1 else f"{name}..."


def value_word(param: Any) -> str:
    """What an option's value is: its metavar when it has one, else ``TEXT``, ``INTEGER``...
    (a range says its bounds in the help beside; a repeatable option adds ``...``)."""
    if param.metavar:
        return str(param.metavar)
    bare = str(param.bare_type()) if hasattr(param, "bare_type") else "text"
    if bare.startswith("list[") and bare.endswith("]"):
        bare = bare[5:-1]
    word = _WORDS.get(bare, bare.upper())
    return word if param.nargs == 1 and not param.multiple else f"{word}..."


def help_label(param: Any) -> str:
    """The name column of a parameter's help row: ``--paused / --resumed``, ``--limit INTEGER``,
    ``JOB_ID``."""
    if param.param_type_name == "argument":
        return usage_name(param)
    label = ", ".join(param.opts)
    if param.secondary_opts:
        label += " / " + ", ".join(param.secondary_opts)
    return label if param.is_flag else f"{label} {value_word(param)}"


def write_params(command: Any, ctx: typer.Context, formatter: Any) -> None:
    """The Arguments and Options sections of ``command``'s help."""
    sections: dict[str, list[tuple[str, str]]] = {"argument": [], "option": []}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is not None and param.param_type_name in sections:
            sections[param.param_type_name].append((help_label(param), record[1]))
    for title, kind in (("Arguments", "argument"), ("Options", "option")):
        if sections[kind]:
            with formatter.section(title):
                formatter.write_dl(sections[kind])


def usage_pieces(command: Any, ctx: typer.Context) -> list[str]:
    """``[OPTIONS]`` and the arguments, as the usage line names them."""
    pieces = [command.options_metavar] if command.options_metavar else []
    pieces += [usage_name(p) for p in command.get_params(ctx) if p.param_type_name == "argument"]
    return pieces


class PlainHelpCommand(TyperCommand):
    """A command whose ``--help`` names its arguments and option values plainly."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return usage_pieces(self, ctx)

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        write_params(self, ctx, formatter)


class PlainHelpGroup(TyperGroup):
    """A group whose ``--help`` names its options plainly, then lists its commands."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:  # type: ignore[override]
        return [*usage_pieces(self, ctx), self.subcommand_metavar]

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:  # type: ignore[override]
        write_params(self, ctx, formatter)
        self.format_commands(ctx, formatter)


class CommandGroup(typer.Typer):
    """A ``typer.Typer`` whose groups and commands print the plain help above. Every command
    module declares its commands on one, with ``@group.command()`` at import time."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cls", PlainHelpGroup)
        # Rich markup off: typer's rich panels would draw the placeholders again.
        kwargs.setdefault("rich_markup_mode", None)
        kwargs.setdefault("add_completion", False)
        super().__init__(**kwargs)

    def command(  # type: ignore[override]
        self, name: str | None = None, *, cls: type[TyperCommand] | None = None, **kwargs: Any
    ) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return super().command(name, cls=cls or PlainHelpCommand, **kwargs)


def print_help_and_exit(ctx: typer.Context) -> NoReturn:
    """What a group does when given no subcommand and it has no listing of its own: its help
    on stdout, exit 2 (as click's ``no_args_is_help``, without its private exception)."""
    typer.echo(ctx.get_help())
    raise typer.Exit(2)
