"""The ``jobq`` command: every group and command, added to one root at import time.

One module per group of commands, each declaring its own ``CommandGroup`` with decorators:

- ``service``: ``serve``, ``migrate``, ``bench``, ``openapi`` (the server extra's)
- ``worker``: ``worker``
- ``conformance``: ``conformance`` (the kit that proves a worker, jobq.conformance)
- ``jobs``: ``enqueue``, ``job``, ``jobs``, ``cancel``, ``retry``
- ``dead``, ``queues``, ``schedules``, ``topics``: the groups of those names, over HTTP
- ``tokens``: ``jobq tokens``, straight on the database

and what they share: ``remote`` (``--url``/``--token``, the HTTP call and its one-line
errors), ``output`` (``--json``, the one-line failure), ``views`` (the 80-column tables and
detail views), ``server_setup`` (settings, database, migrations) and ``help_format`` (the
declaration style and the help it prints). ``main()`` runs the tree, every mistake one line.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import typer

from jobq.cli import conformance, dead, jobs, queues, schedules, service, tokens, topics, worker
from jobq.cli.help_format import CommandGroup, print_help_and_exit

app = CommandGroup(help="jobq: a durable job queue over HTTP, on PostgreSQL.", invoke_without_command=True)


def _print_version(value: bool) -> None:
    if value:
        from jobq import __version__

        typer.echo(f"jobq {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option(
        "--version", callback=_print_version, is_eager=True, help="print the version and exit")] = False,
) -> None:
    """jobq: a durable job queue over HTTP, on PostgreSQL."""
    if ctx.invoked_subcommand is None:
        print_help_and_exit(ctx)


# In the order `jobq --help` lists them: the service, then its users.
app.add_typer(service.app)
app.add_typer(worker.app)
app.add_typer(conformance.app)
app.add_typer(jobs.app)
app.add_typer(dead.app, name="dead")
app.add_typer(queues.app, name="queues")
app.add_typer(schedules.app, name="schedules")
app.add_typer(tokens.app, name="tokens")
app.add_typer(topics.app, name="topics")


def _error_line(message: str, code: int) -> int:
    """A mistake is one line on stderr (a JSON object with --json), never a box or a trace."""
    message = " ".join(message.split())
    if "--json" in sys.argv[1:]:
        sys.stderr.write(json.dumps({"error": message}) + "\n")
    else:
        sys.stderr.write(f"jobq: {message}\n")
    return code


def main() -> int:
    command = typer.main.get_command(app)
    try:
        # Not standalone: click's usage errors come back here instead of becoming rich's
        # multi-line panels, and typer's pretty traceback never prints.
        result = command.main(prog_name="jobq", standalone_mode=False)
    except typer.TyperException as exc:
        # Typer's root of click's errors (typer carries its own click, whose exception
        # classes it does not export). Exit 2 is click's usage error: it names the command
        # whose help says more.
        if exc.exit_code == 2:
            ctx = getattr(exc, "ctx", None)
            where = ctx.command_path if ctx is not None else "jobq"
            return _error_line(f"{exc.format_message()} (see `{where} --help`)", exc.exit_code)
        return _error_line(exc.format_message(), exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        return 130
    except Exception as exc:
        if os.environ.get("JOBQ_TRACEBACK"):
            raise
        return _error_line(f"unexpected {type(exc).__name__}: {exc} (a bug in jobq: please "
                           "report it; JOBQ_TRACEBACK=1 shows where)", 1)
    return result if isinstance(result, int) else 0
