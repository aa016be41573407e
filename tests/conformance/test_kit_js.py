"""``jobq conformance`` against the JavaScript reference worker (workers/ref_worker.mjs, plain
Node, no package): the conforming worker holds every check, and each of its broken variants
(``JOBQ_BROKEN``) fails the one check it breaks, alone (``--only``), with exit status 1.

Node 18 or later is needed; without it these tests skip, saying so, unless
JOBQ_TEST_REQUIRE_NODE=1 (then they fail: where Node must be there, its absence is an error)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.conformance.kit import CHECKS, WORKERS, run_kit
from tests.conftest import LiveServer

WORKER = WORKERS / "ref_worker.mjs"

# Each broken variant of the reference workers, and the check that must catch it.
BROKEN = {
    "wrong-result": "echo",
    "double-ack": "echo",
    "ack-failures": "fail",
    "no-heartbeat": "heartbeat",
    "spin": "idle",
    "ignore-retry-after": "retry-after",
    "exit-without-release": "stop",
    "claim-after-term": "stop",
}


def node() -> str:
    """The path of a Node of version 18 or later (global fetch and AbortController)."""
    path = shutil.which("node")
    version = ""
    if path is not None:
        version = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
        if int(version.lstrip("v").split(".")[0] or 0) >= 18:
            return path
    why = f"Node {version} is older than 18" if path else "node is not installed"
    if os.environ.get("JOBQ_TEST_REQUIRE_NODE") == "1":
        pytest.fail(f"{why}, and JOBQ_TEST_REQUIRE_NODE=1")
    pytest.skip(f"{why}: the JavaScript reference worker needs Node 18 or later")


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_the_js_reference_worker_holds_every_check(kit_server: LiveServer) -> None:
    done = run_kit(kit_server.url, [node(), str(WORKER)])
    assert done.code == 0, done.output
    assert done.held() == list(CHECKS), done.output
    assert done.lines[-1] == f"conformance: {len(CHECKS)} of {len(CHECKS)} checks hold", done.output


@pytest.mark.parametrize(("variant", "check"), BROKEN.items())
def test_each_broken_js_variant_fails_its_check(kit_server: LiveServer, variant: str, check: str) -> None:
    done = run_kit(kit_server.url, [node(), str(WORKER)], only=[check], env={"JOBQ_BROKEN": variant})
    assert done.code == 1, done.output
    assert done.failed() == [check] and done.held() == [], done.output

