"""``jobq conformance``: run a worker, in any language, through the kit's checks
(jobq.conformance)."""

from __future__ import annotations

from typing import Annotated

import typer

from jobq.cli.help_format import CommandGroup
from jobq.cli.output import fail
from jobq.cli.remote import DEFAULT_URL, Token, Url

app = CommandGroup()


def _names(value: str | None) -> list[str]:
    return [n.strip() for n in (value or "").split(",") if n.strip()]


# Stop at the worker's command: its own options (`node w.mjs --verbose`) are not the kit's.
@app.command(context_settings={"allow_interspersed_args": False})
def conformance(
    command: Annotated[list[str] | None, typer.Argument(
        metavar="COMMAND", help="the worker to test, with its arguments, after --")] = None,
    url: Url = DEFAULT_URL,
    token: Token = None,
    worker_token: Annotated[str | None, typer.Option(
        envvar="JOBQ_WORKER_TOKEN",
        help="the token the worker gets as JOBQ_TOKEN; without it, --token")] = None,
    queue: Annotated[str | None, typer.Option(
        help="the queue to use; without it, a fresh conformance-XXXXXXXX, deleted at the end")] = None,
    only: Annotated[str | None, typer.Option(
        help="comma-separated checks to run alone: echo, fail, heartbeat, idle, retry-after, stop")] = None,
    skip: Annotated[str | None, typer.Option(help="comma-separated checks to leave out")] = None,
    stop_within: Annotated[float, typer.Option(
        min=0.1, help="seconds the worker has to exit after SIGTERM")] = 30.0,
) -> None:
    """Prove a worker follows the rules: start COMMAND with JOBQ_URL (a recording proxy),
    JOBQ_TOKEN and JOBQ_QUEUES, run the checks, print a line for each. Exit 0 when all hold,
    1 when one fails, 2 for a usage error. The token must be an admin's."""
    from jobq.conformance import Options, UsageError, run

    options = Options(url=url, command=command or [], token=token, worker_token=worker_token,
                      queue=queue, only=_names(only), skip=_names(skip), stop_within_s=stop_within)
    try:
        code = run(options)
    except UsageError as exc:
        fail(str(exc), code=2)
    raise typer.Exit(code)
