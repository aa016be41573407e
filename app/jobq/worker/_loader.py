"""Finding handlers by name, and the one call the ``jobq worker`` command makes."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import httpx

from jobq.client import APIError
from jobq.worker._worker import (
    DEFAULT_CONCURRENCY,
    DEFAULT_GRACE_PERIOD_S,
    DEFAULT_PREFETCH,
    DEFAULT_WAIT_MS,
    Handler,
    Worker,
    _hint,
)

log = logging.getLogger("jobq.worker")

# What `jobq worker` serves without --queues: the queue a job goes to without one.
DEFAULT_QUEUE = "default"


def load_handlers(spec: str) -> dict[str, Handler]:
    """Import ``"package.module:attribute"`` and return its handlers.

    The attribute (a dotted path is allowed: ``"myapp.jobs:registry.handlers"``) is either
    a mapping of job type to callable, or a callable taking no arguments that returns one,
    so a factory can build handlers that need set-up. Raises ``ValueError`` saying what is
    wrong with the spec.
    """
    module_name, sep, attr_path = spec.partition(":")
    if not sep or not module_name or not attr_path:
        raise ValueError(
            f"handler spec {spec!r}: expected 'package.module:attribute' "
            f"(for example '{_dotted(module_name) or 'myapp.jobs'}:handlers')"
        )
    try:
        target: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(
            f"handler spec {spec!r}: cannot import {module_name!r}: {exc}{_dotted_hint(module_name, attr_path)}"
        ) from exc
    except Exception as exc:
        # The module itself raised while importing: say what and where, in one line.
        raise ValueError(
            f"handler spec {spec!r}: importing {module_name!r} raised {_where(exc)}"
        ) from exc
    for part in attr_path.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise ValueError(f"handler spec {spec!r}: {part!r} not found") from exc
    if callable(target) and not isinstance(target, Mapping):
        try:
            target = target()
        except Exception as exc:
            raise ValueError(f"handler spec {spec!r}: calling {attr_path} raised {_where(exc)}") from exc
    if not isinstance(target, Mapping):
        raise ValueError(
            f"handler spec {spec!r}: expected a mapping of job type to handler "
            f"(or a function returning one), got {type(target).__name__}"
        )
    handlers: dict[str, Handler] = {}
    for job_type, fn in target.items():
        if not isinstance(job_type, str) or not callable(fn):
            raise ValueError(
                f"handler spec {spec!r}: entry {job_type!r}: {fn!r} is not a job type "
                "(str) mapped to a callable"
            )
        handlers[job_type] = fn
    if not handlers:
        raise ValueError(f"handler spec {spec!r}: the mapping is empty")
    return handlers


def _dotted_hint(module_name: str, attr_path: str) -> str:
    """For a spec written as a file path (``myapp/jobs.py:handlers``): the dotted module
    name it means, since Python imports modules, not files."""
    if not any(mark in module_name for mark in ("/", "\\")) and not module_name.endswith(".py"):
        return ""
    dotted = _dotted(module_name)
    top = dotted.split(".")[0]
    holds = f"{top}/" if "." in dotted else f"{top}.py"
    return (f"; the spec is a dotted module name, not a file path: '{dotted}:{attr_path}', "
            f"run from the folder that holds {holds}")


def _dotted(module_name: str) -> str:
    """``myapp/jobs.py`` -> ``myapp.jobs``; a dotted name stays as it is."""
    return module_name.removesuffix(".py").replace("\\", "/").strip("/").replace("/", ".")


def _where(exc: BaseException) -> str:
    """``TypeError: message (at file.py:12)``: an exception and where it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def run_worker(
    url: str,
    spec: str,
    queues: Sequence[str] | str | None,
    concurrency: int = DEFAULT_CONCURRENCY,
    *,
    token: str | None = None,
    lease_ms: int | None = None,
    worker_id: str | None = None,
    grace_period: float = DEFAULT_GRACE_PERIOD_S,
    wait_ms: int = DEFAULT_WAIT_MS,
    app_dir: str | None = ".",
    transport: httpx.AsyncBaseTransport | None = None,
    on_ready: Callable[[Worker], None] | None = None,
    prefetch: int = DEFAULT_PREFETCH,
    url_source: str = "the url argument",
    log_level: str | int = logging.INFO,
) -> int:
    """Load ``spec`` with ``load_handlers``, run a ``Worker`` until SIGTERM/SIGINT and
    return the process exit status (``log_level`` applies when logging is not set up yet;
    below DEBUG, httpx's per-request lines are silenced): 0 after a graceful stop, 1 when the service refused
    to hand out work (bad token, forbidden queue). ``queues`` may be ``"default,email"``;
    ``None`` serves ``default`` and the start line says that neither ``--queues`` nor
    ``JOBQ_QUEUES`` was given.

    ``app_dir`` goes first on ``sys.path`` (the current directory by default), since a
    console script does not put it there and ``myapp.jobs`` would not be found.
    """
    if app_dir is not None:
        path = os.path.abspath(app_dir)
        if path not in sys.path:
            sys.path.insert(0, path)
    queues_source = None
    if queues is None:
        queues, queues_source = [DEFAULT_QUEUE], "no --queues or JOBQ_QUEUES given"
    elif isinstance(queues, str):
        queues = [q.strip() for q in queues.split(",") if q.strip()]
    if not logging.getLogger().handlers:
        logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        # httpx logs every request at INFO: one line per claim, ack and heartbeat would bury
        # the one line per job outcome. They are for DEBUG.
        for name in ("httpx", "httpcore"):
            logging.getLogger(name).setLevel(logging.WARNING)
    worker = Worker(
        url,
        queues=queues,
        handlers=load_handlers(spec),
        concurrency=concurrency,
        lease_ms=lease_ms,
        token=token,
        worker_id=worker_id,
        grace_period=grace_period,
        wait_ms=wait_ms,
        transport=transport,
        prefetch=prefetch,
        url_source=url_source,
        queues_source=queues_source,
    )
    if on_ready is not None:
        on_ready(worker)
    try:
        worker.run()
    except APIError as exc:
        # The worker logged the refusal as it stopped, naming the call: a second ERROR line
        # for the same answer would read as a second problem.
        if exc is not worker.refusal:
            log.error("worker stopped: %s%s", exc, _hint(exc))
        return 1
    return 0
