"""A conformance run from start to end: check the service and the token, set up the queue,
start the proxy and the worker, run the checks chosen, print a line for each and the summary,
stop the worker, and clean up. ``run`` returns the exit code: 0 when every check run holds,
1 when one fails; a usage error (before any check) raises ``UsageError``.
"""

from __future__ import annotations

import os
import secrets
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TextIO

from jobq.client import APIError, Client, Forbidden, JobqError, NotFound, TransportError, Unauthorized
from jobq.conformance.checks import CHECKS, RUNS, CheckFailed, Run
from jobq.conformance.process import WorkerProcess
from jobq.conformance.proxy import RecordingProxy

# The queue settings the checks rely on: a short lease (so the heartbeat check is short), and
# nothing that would keep jobs from the worker.
LEASE_MS = 2000
# How long a worker may take from its start to its first claim (a compiled language may build).
STARTUP_S = 30.0


class UsageError(Exception):
    """Nothing was checked: the command line, the service or the token is wrong."""


@dataclass
class Options:
    url: str
    command: Sequence[str]
    token: str | None = None
    worker_token: str | None = None  # what the worker gets; without it, ``token``
    queue: str | None = None  # without it, a fresh queue, deleted at the end
    only: Sequence[str] = field(default_factory=tuple)
    skip: Sequence[str] = field(default_factory=tuple)
    stop_within_s: float = 30.0
    url_source: str = "--url"  # what chose ``url``, for the message when it cannot be reached


def chosen(only: Sequence[str], skip: Sequence[str]) -> list[str]:
    """The checks to run, in their fixed order."""
    unknown = [n for n in [*only, *skip] if n not in CHECKS]
    if unknown:
        raise UsageError(f"no check named {', '.join(map(repr, unknown))}: the checks are "
                         + ", ".join(CHECKS))
    names = [n for n in CHECKS if (not only or n in only) and n not in skip]
    if not names:
        raise UsageError("--only and --skip leave no check to run")
    return names


def run(options: Options, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    names = chosen(options.only, options.skip)
    if not options.command:
        raise UsageError("no worker command: give it after --, as in "
                         "`jobq conformance --url URL -- python worker.py`")
    try:
        client = Client(options.url, token=options.token, url_source=options.url_source)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    with client:
        queue = options.queue or f"conformance-{secrets.token_hex(4)}"
        given = bool(options.token or os.environ.get("JOBQ_TOKEN"))
        restore = _prepare_queue(client, queue, fresh=options.queue is None, token_given=given)
        try:
            return _run_worker(options, client, queue, names, out, err)
        finally:
            _clean_up(client, queue, restore, err)


def _prepare_queue(client: Client, queue: str, fresh: bool,
                   token_given: bool = True) -> dict[str, object] | None:
    """Set the queue up; what to set back at the end (None: delete the queue)."""
    try:
        restore: dict[str, object] | None = None
        if not fresh:
            try:
                before = client.queue(queue).settings
                restore = {"lease_ms": before.lease_ms, "paused": before.paused,
                           "max_running": before.max_running}
            except NotFound:
                pass  # made by the kit: deleted at the end like a fresh one
        client.update_queue(queue, lease_ms=LEASE_MS, paused=False, max_running=None)
        return restore
    except TransportError as exc:
        raise UsageError(f"{exc}") from None
    except Unauthorized as exc:
        if not token_given:
            raise UsageError(f"the service has access tokens and none was given ({exc}): give an "
                             "admin token with --token (or JOBQ_TOKEN)") from None
        raise UsageError(f"the service refused the token ({exc}): give an admin token with "
                         "--token (or JOBQ_TOKEN)") from None
    except Forbidden as exc:
        raise UsageError(f"the token may not set queue {queue}'s settings ({exc}): the kit needs "
                         "an admin token; the worker may have its own (--worker-token)") from None
    except APIError as exc:
        raise UsageError(f"the service refused queue {queue!r}: {exc}") from None


def _clean_up(client: Client, queue: str, restore: dict[str, object] | None, err: TextIO) -> None:
    try:
        if restore is None:
            client.delete_queue(queue, purge=True)
        else:
            client.update_queue(queue, **restore)  # type: ignore[arg-type]
    except JobqError as exc:
        err.write(f"jobq conformance: could not clean up queue {queue}: {exc}\n")


def _worker_env(proxy_url: str, queue: str, token: str | None) -> dict[str, str]:
    env = {**os.environ, "JOBQ_URL": proxy_url, "JOBQ_QUEUES": queue}
    if token:
        env["JOBQ_TOKEN"] = token
    else:
        env.pop("JOBQ_TOKEN", None)
    return env


def _run_worker(options: Options, client: Client, queue: str, names: list[str],
                out: TextIO, err: TextIO) -> int:
    with RecordingProxy(options.url) as proxy:
        token = options.worker_token or options.token
        worker = WorkerProcess(options.command, _worker_env(proxy.url, queue, token), err)
        err.write(f"jobq conformance: {shlex.join(options.command)} on queue {queue}, "
                  f"through {proxy.url} to {options.url}\n")
        try:
            worker.start()
        except OSError as exc:
            raise UsageError(f"cannot start {shlex.join(options.command)}: {exc}") from None
        try:
            return _run_checks(options, client, proxy, worker, queue, names, out)
        finally:
            worker.stop(options.stop_within_s)


def _run_checks(options: Options, client: Client, proxy: RecordingProxy, worker: WorkerProcess,
                queue: str, names: list[str], out: TextIO) -> int:
    state = Run(client=client, proxy=proxy, worker=worker, queue=queue,
                queue_lease_ms=LEASE_MS, stop_within_s=options.stop_within_s)
    started = proxy.wait_for(lambda: proxy.claims() or worker.exit_code is not None, STARTUP_S)
    failed: list[str] = []
    for name in names:
        begun = time.monotonic()
        try:
            if not started:
                raise CheckFailed(f"the worker made no claim within {STARTUP_S:.0f} s of starting")
            state.alive("before this check")
            evidence, ok = RUNS[name](state), True
        except CheckFailed as exc:
            evidence, ok = str(exc), False
        except JobqError as exc:
            # The service failed the kit's own call: this check proves nothing either way.
            evidence, ok = f"the kit's call to the service failed: {exc}", False
        if not ok:
            failed.append(name)
        took = time.monotonic() - begun
        out.write(f"{'ok  ' if ok else 'FAIL'} {name}: {evidence} [{took:.1f} s]\n")
        out.flush()
    if failed:
        out.write(f"conformance: {len(failed)} of {len(names)} checks failed ({', '.join(failed)})\n")
        return 1
    out.write(f"conformance: {len(names)} of {len(names)} checks hold\n")
    return 0
