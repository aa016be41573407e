"""Help text without typer's placeholders: ``Usage: jobq job JOB_ID``, not ``{job_id}``,
and option types as words (``TEXT``, ``INTEGER``) with nothing after a flag, not
``<str>`` and ``<bool>``. Applied once to the whole command tree by ``jobq.cli.main``."""

from __future__ import annotations

from typing import Any

try:
    from typer.core import TyperArgument, TyperOption
except ImportError:  # pragma: no cover - older typer has neither class nor the placeholders
    TyperArgument = TyperOption = None  # type: ignore[assignment,misc]


_WORDS = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN"}


def _type_word(param: Any) -> str:
    """``TEXT``, ``INTEGER``, ``FLOAT``, as click always wrote them (a range says its bounds
    in the help beside; a list is the same word, repeated with ``...``)."""
    bare = str(param.bare_type())
    if bare.startswith("list[") and bare.endswith("]"):
        bare = bare[5:-1]
    return _WORDS.get(bare, bare.upper())


if TyperArgument is not None:

    class _Argument(TyperArgument):  # type: ignore[misc,valid-type]
        def _usage_display_name(self) -> str:
            name = self.display_name_raw.upper()
            name = name if self.required else f"[{name}]"
            return name if self.nargs == 1 else f"{name}..."

        def display_type_rich(self, ctx: Any) -> str | None:
            return None  # the name says what it is; the help says more

    class _Option(TyperOption):  # type: ignore[misc,valid-type]
        def display_type_rich(self, ctx: Any) -> str | None:
            if self.metavar is not None:
                return str(self.metavar)
            if self.is_flag:
                return None
            word = _type_word(self)
            return word if self.nargs == 1 and not self.multiple else f"{word}..."

    try:
        from typer._click.core import Context
    except ImportError:  # pragma: no cover - depends on typer's version
        from click import Context  # type: ignore[assignment]


def tidy(command: Any) -> None:
    """Give every parameter of ``command`` and its subcommands the plain help display."""
    if TyperArgument is None:  # pragma: no cover
        return
    # --help is made on first use: make it now, so that it is tidied too.
    help_option = command.get_help_option(Context(command))
    for param in [*getattr(command, "params", []), help_option]:
        if type(param) is TyperArgument:
            param.__class__ = _Argument
        elif type(param) is TyperOption:
            param.__class__ = _Option
    for sub in getattr(command, "commands", {}).values():
        tidy(sub)
