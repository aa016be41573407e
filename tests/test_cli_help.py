"""Every command's ``--help``, found by walking the command tree that ``import jobq.cli``
builds (nothing listed by hand, so a new command or group is checked the day it is added):
each exits 0, names every option the command takes, and shows no typer placeholder such as
``{job_id}`` or ``<bool>``."""

from __future__ import annotations

import re
from typing import Any

import typer
from typer.testing import CliRunner


def command_tree() -> list[tuple[list[str], Any]]:
    """(path, command) for the root and every group and command under it."""
    import jobq.cli

    found: list[tuple[list[str], Any]] = []

    def walk(command: Any, path: list[str]) -> None:
        found.append((path, command))
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(jobq.cli.app), [])
    return found


def help_of(path: list[str]) -> tuple[int, str]:
    """``jobq PATH --help``, in this process (tests/test_cli_views.py runs it as a process)."""
    import jobq.cli

    done = CliRunner().invoke(jobq.cli.app, [*path, "--help"], prog_name="jobq", env={"COLUMNS": "80"})
    return done.exit_code, done.output


def test_the_walk_finds_every_group_and_command() -> None:
    paths = [p for p, _ in command_tree()]
    # A sample the walk must reach, from each kind: top-level, group, a group's command.
    for path in (["serve"], ["worker"], ["job"], ["topics"], ["topics", "publish"], ["tokens", "revoke"],
                 ["dead", "purge"], ["queues", "set"], ["schedules", "delete"]):
        assert path in paths, path
    assert len(paths) > 30, paths


def test_every_help_names_its_options_without_placeholders() -> None:
    for path, command in command_tree():
        where = " ".join(["jobq", *path])
        code, text = help_of(path)
        assert code == 0, (where, text)
        assert text.startswith(f"Usage: {where} "), (where, text)
        assert not re.search(r"\{[A-Za-z_][^}]*\}", text), (where, text)
        assert not re.search(r"<[a-z][a-z_ \[\]]*>", text), (where, text)
        assert "[default: None]" not in text, (where, text)
        for param in command.params:
            if param.param_type_name == "option" and not param.hidden:
                for opt in [*param.opts, *param.secondary_opts]:
                    assert re.search(rf"(^|[\s,/]){re.escape(opt)}\b", text, re.M), (where, opt, text)
            elif param.param_type_name == "argument":
                name = str(param.metavar or param.name).upper()
                assert re.search(rf"\b{re.escape(name)}\b", text), (where, name, text)
        # A group lists each of its commands.
        for name in getattr(command, "commands", {}):
            assert re.search(rf"^\s+{re.escape(name)}\b", text, re.M), (where, name, text)
