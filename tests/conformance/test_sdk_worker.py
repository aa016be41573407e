"""The Python SDK's worker passes ``jobq conformance``: ``jobq worker`` serving the kit's three
job types (workers/sdk_handlers.py), the URL, token and queue from the environment the kit
gives it (JOBQ_URL, JOBQ_TOKEN, JOBQ_QUEUES)."""

from __future__ import annotations

import sys

import pytest

from tests.conformance.kit import CHECKS, WORKERS, run_kit
from tests.conftest import LiveServer


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_jobq_worker_holds_every_check(kit_server: LiveServer) -> None:
    # --grace-period 5: the stop check's job runs two minutes and the kit wants the worker
    # gone within 30 s; with the default 30 s of grace it would release the job too late.
    worker = [sys.executable, "-m", "jobq.cli", "worker", "sdk_handlers:handlers", "--grace-period", "5"]
    done = run_kit(kit_server.url, worker, cwd=WORKERS)
    assert done.code == 0, done.output
    assert done.held() == list(CHECKS), done.output
    assert done.lines[-1] == f"conformance: {len(CHECKS)} of {len(CHECKS)} checks hold", done.output
