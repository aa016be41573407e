"""Running ``jobq conformance`` from tests, for every worker the kit is tested with.

    from tests.conformance.kit import CHECKS, WORKERS, run_kit

    done = run_kit(live_server.url, [sys.executable, str(WORKERS / "ref_worker.py")],
                   only=["echo"], env={"JOBQ_BROKEN": "double-ack"})
    assert done.code == 1, done.output
    assert done.line("echo").startswith("FAIL echo:"), done.output

The kit runs as a process (``python -m jobq.cli conformance``), as a user runs it: its
stdout holds one line per check and the summary; its stderr the worker's output
(``worker| ...``) and the kit's own notes, kept in ``output`` for assertion messages.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

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
    full_env = {k: v for k, v in os.environ.items() if k not in ("JOBQ_TOKEN", "JOBQ_URL", "JOBQ_BROKEN")}
    full_env.update(env or {})
    done = subprocess.run([*args, "--", *command], cwd=cwd or ROOT, env=full_env,
                          capture_output=True, text=True, timeout=timeout_s)
    return KitRun(done.returncode, done.stdout.splitlines(), done.stderr)
