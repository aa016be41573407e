"""Talking to a running service over HTTP (the SDK), shared by the producer, worker and
operator commands: the ``--url`` (JOBQ_URL) and ``--token`` (JOBQ_TOKEN) options, the call
whose every failure is one line (``connect``), and the checks of what a command line gives
before anything is sent.

A command that calls the service takes ``ctx: typer.Context`` and the ``Url``, ``Token``
and ``AsJson`` options under those names (``url``, ``token``, ``as_json``): ``connect(ctx)``
reads them, and where they came from, from the context.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any, NoReturn

import typer

from jobq.cli.output import fail
from jobq.client import (
    APIError,
    Client,
    Forbidden,
    JobqError,
    TransportError,
    Unauthorized,
    ValidationError,
)

Url = Annotated[str, typer.Option(envvar="JOBQ_URL", help="the service's base URL")]
Token = Annotated[str | None, typer.Option(envvar="JOBQ_TOKEN", help="access token")]
DEFAULT_URL = "http://127.0.0.1:8000"


def given(ctx: typer.Context, name: str) -> bool:
    """Whether parameter ``name`` was typed on the command line (not the environment, not
    its default). Read from the source's name: click's enum of sources is not exported by
    typer."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def url_source(ctx: typer.Context) -> str:
    """What chose the service URL: the option, the environment or the default."""
    source = ctx.get_parameter_source("url")
    name = source.name if source is not None else None
    if name == "COMMANDLINE":
        return "--url"
    if name == "ENVIRONMENT":
        return "JOBQ_URL"
    return "the default; set JOBQ_URL or pass --url"


def wants_json(ctx: typer.Context) -> bool:
    """Whether the command running was given ``--json`` (its errors are JSON then too)."""
    return bool(ctx.params.get("as_json"))


def fail_in(ctx: typer.Context, message: str, code: int = 1, fields: dict[str, Any] | None = None) -> NoReturn:
    """``fail`` in the command's own output style (JSON with its ``--json``)."""
    fail(message, code, as_json=wants_json(ctx), fields=fields)


def check_job_id(ctx: typer.Context, value: str) -> str:
    """Job ids are the decimal numbers ``jobq jobs`` lists; anything else is a typo, said
    here rather than as the service's "does not exist"."""
    if not (value.isascii() and value.isdigit()):
        fail_in(ctx, f"{value!r} is not a job id: ids are numbers, as `jobq jobs` lists them", code=2)
    return value


def refuse_group_options(ctx: typer.Context) -> None:
    """Refuse the options a group such as ``jobq dead`` takes for its own listing when they
    come before a subcommand: ``jobq dead --url X --limit 5 purge`` would otherwise purge
    every dead job on the default service. Only what the command line gave counts: JOBQ_URL
    and JOBQ_TOKEN from the environment are the subcommand's too. One line, exit 2, nothing
    done (the subcommand has not even been parsed yet)."""
    if ctx.invoked_subcommand is None:
        return
    typed = [p for p in ctx.command.params if p.name and given(ctx, p.name)]
    if not typed:
        return
    group, sub = ctx.info_name, ctx.invoked_subcommand
    command = ctx.command.get_command(ctx, sub)  # type: ignore[attr-defined]  # ctx.command is the group
    takes = {o for p in (command.params if command is not None else []) for o in p.opts}

    def usage(params: list[Any]) -> str:
        return " ".join(p.opts[0] if getattr(p, "is_flag", False) else f"{p.opts[0]} ..." for p in params)

    stray = [p for p in typed if p.opts[0] not in takes]
    if stray:
        # --all or --cursor: only the listing has them; moving them would not help.
        names = ", ".join(p.opts[0] for p in stray)
        what = "they are" if len(stray) > 1 else "it is"
        fail_in(ctx, f"jobq {group} {sub} takes no {names}: {what} for the listing alone "
                f"(jobq {group} {usage(stray)})", code=2)
    names = ", ".join(p.opts[0] for p in typed)
    fail_in(ctx, f"{names} must go after the subcommand: jobq {group} {sub} {usage(typed)}", code=2)


_JSON_KIND = {list: "an array", str: "a string", int: "a number", float: "a number",
              bool: "a boolean", type(None): "null"}


def json_object(ctx: typer.Context, payload: str) -> dict[str, Any]:
    """``--payload`` as the JSON object the contract wants; anything else is one line."""
    try:
        body = json.loads(payload)
    except ValueError as exc:
        fail_in(ctx, f"--payload is not JSON: {exc}", code=2)
    if not isinstance(body, dict):
        fail_in(ctx, f"payload must be a JSON object, not {_JSON_KIND.get(type(body), 'that')} "
                f"({payload.strip()[:40]})", code=2)
    return body


def _problem(exc: APIError) -> dict[str, Any]:
    return {"status": exc.status, "code": exc.code, "problem": exc.body or None}


@contextmanager
def connect(ctx: typer.Context) -> Iterator[Client]:
    """A client for the command's ``--url`` and ``--token``; whatever goes wrong inside the
    ``with`` (no answer, a refusal, a 4xx or 5xx) ends the command with one line naming
    what to do."""
    url: str = ctx.params["url"]
    token: str | None = ctx.params["token"]
    try:
        client = Client(url, token=token, url_source=url_source(ctx))
    except ValueError as exc:
        fail_in(ctx, f"{exc} (from {url_source(ctx)})", code=2)
    try:
        with client:
            yield client
    except TransportError as exc:
        # No HTTP answer at all: the message names the URL and what chose it.
        cause = exc.__cause__
        fail_in(ctx, str(exc), fields={"url": url, "url_source": url_source(ctx),
                                       "reason": type(cause).__name__ if cause else None})
    except Unauthorized as exc:
        # Say where the token comes from: the usual cause is none given, or an old one.
        has_token = token if token is not None else os.environ.get("JOBQ_TOKEN")
        hint = "check JOBQ_TOKEN or --token" if has_token else "set JOBQ_TOKEN or pass --token"
        fail_in(ctx, f"{exc} ({hint})", fields=_problem(exc))
    except ValidationError as exc:
        # Each field the service refused, with why, in the option's spelling: one line. Exit
        # 1 as for any answer of the service (2 is for what the command line itself refuses).
        fail_in(ctx, f"refused: {invalid(exc)}", fields=_problem(exc))
    except Forbidden as exc:
        fail_in(ctx, f"{exc} (this token's role or queues do not allow it)", fields=_problem(exc))
    except APIError as exc:
        fail_in(ctx, str(exc), fields=_problem(exc))
    except JobqError as exc:
        fail_in(ctx, str(exc))


def invalid(exc: ValidationError) -> str:
    """``--lease-ms: Input should be less than or equal to 86400000; ...`` from a 422's
    ``errors`` (a body field is named as the option that sets it)."""
    parts = []
    for err in exc.errors:
        loc = [str(p) for p in err.get("loc") or [] if p not in ("body", "query", "path")]
        where = "--" + loc[0].replace("_", "-") if len(loc) == 1 else ".".join(loc)
        msg = str(err.get("msg") or "invalid").removeprefix("Value error, ")
        parts.append(f"{where}: {msg}" if where else msg)
    return "; ".join(parts) or str(exc)
