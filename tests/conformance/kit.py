"""Running ``jobq conformance`` from tests, for every worker the kit is tested with.

    from tests.conformance.kit import CHECKS, WORKERS, run_kit

    done = run_kit(live_server.url, [sys.executable, str(WORKERS / "ref_worker.py")],
                   only=["echo"], env={"JOBQ_BROKEN": "double-ack"})
    assert done.code == 1, done.output
    assert done.line("echo").startswith("FAIL echo:"), done.output

A module whose tests share one service (each run of the kit makes its own queue) starts it
with ``live_service`` from a module-scoped fixture; ``worker_token`` makes a token on a service
started with ``JOBQ_ADMIN_TOKEN``.

The kit runs as a process (``python -m jobq.cli conformance``), as a user runs it: its
stdout holds one line per check and the summary; its stderr the worker's output
(``worker| ...``) and the kit's own notes, kept in ``output`` for assertion messages.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests import pg
from tests.conftest import LiveServer

# The checks, in the order they run (as jobq.conformance.CHECKS).
CHECKS = ("echo", "fail", "heartbeat", "idle", "retry-after", "stop")
# The reference workers (ref_worker.py, ref_worker.mjs) and what else a test starts.
WORKERS = Path(__file__).resolve().parent / "workers"
ROOT = Path(__file__).resolve().parent.parent.parent


@dataclass
class KitRun:
    code: int
    lines: list[str]  # stdout: `ok   <check>: …` / `FAIL <check>: …`, then `conformance: …`
    stderr: str

    @property
    def output(self) -> str:
        """Everything the run printed, for an assertion's message."""
        return "\n".join(self.lines) + "\n--- stderr ---\n" + self.stderr

    def line(self, check: str) -> str:
        """The line of ``check``; "" when it did not run."""
        return next((ln for ln in self.lines if ln.split(" ", 1)[-1].lstrip().startswith(f"{check}:")), "")

    def held(self) -> list[str]:
        return [c for c in CHECKS if self.line(c).startswith("ok ")]

    def failed(self) -> list[str]:
        return [c for c in CHECKS if self.line(c).startswith("FAIL ")]


def run_kit(url: str, command: Sequence[str], *, token: str | None = None,
            worker_token: str | None = None, only: Sequence[str] = (), skip: Sequence[str] = (),
            queue: str | None = None, stop_within: float | None = None,
            env: Mapping[str, str] | None = None, cwd: Path | None = None,
            timeout_s: float = 120) -> KitRun:
    """``jobq conformance --url URL [options] -- COMMAND``; ``env`` is added to the kit's
    environment, which the worker inherits (``JOBQ_BROKEN`` for a broken variant)."""
    args = [sys.executable, "-m", "jobq.cli", "conformance", "--url", url]
    for flag, value in (("--token", token), ("--worker-token", worker_token), ("--queue", queue),
                        ("--only", ",".join(only)), ("--skip", ",".join(skip)),
                        ("--stop-within", None if stop_within is None else str(stop_within))):
        if value:
            args += [flag, value]
    # What the test's own environment may hold must not reach the kit or the worker by chance.
    inherited = ("JOBQ_TOKEN", "JOBQ_WORKER_TOKEN", "JOBQ_URL", "JOBQ_BROKEN")
    full_env = {k: v for k, v in os.environ.items() if k not in inherited}
    full_env.update(env or {})
    done = subprocess.run([*args, "--", *command], cwd=cwd or ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout_s)
    return KitRun(done.returncode, done.stdout.splitlines(), done.stderr)


@contextlib.contextmanager
def live_service(admin_url: str, template_db: str, env: Mapping[str, str] | None = None) -> Iterator[LiveServer]:
    """A ``jobq serve`` on a database of its own, for as long as the ``with`` lasts; take
    ``admin_url`` and ``template_db`` from the fixtures of those names (session-scoped, so a
    module-scoped fixture may use them)."""
    name = pg.clone(admin_url, template_db)
    server = LiveServer(pg.with_database(admin_url, name), env=dict(env or {}))
    try:
        server.start()
        yield server
    finally:
        server.stop()
        pg.drop(admin_url, name)


def worker_token(url: str, admin_token: str, queues: str = "conformance-*") -> str:
    """A new ``worker`` token for ``queues`` (the kit's fresh queues are ``conformance-<hex>``)."""
    r = httpx.post(f"{url}/v1/tokens", json={"role": "worker", "queues": queues},
                   headers={"Authorization": f"Bearer {admin_token}"}, timeout=10)
    assert r.status_code == 201, r.text
    return str(r.json()["token"])
