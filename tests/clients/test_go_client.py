"""The Go client (clients/go/): `go vet` is clean and its `go test ./...` passes against a live
`jobq serve`.

The Go tests themselves (clients/go/*_test.go) hold the assertions: enqueue, get and wait,
the typed problems (422, 404, 409 lease_lost, 429 queue_full with its Retry-After), the rate
limits (queue_rate_limited and queue_overloaded with retry_after_ms, RetryOverload waiting
an enqueue rate out without losing a job), the Worker completing jobs, Retry and Discard,
heartbeats of a job longer than its lease, and a graceful stop that releases what did not
finish. Here they run with JOBQ_URL pointing at a
live service; `-v` lets this test check that none of them skipped.

The Go Worker also passes the conformance kit: clients/go/examples/conformance/ is built and
`jobq conformance` runs all its checks on the binary.

Without a `go` on the PATH these tests skip, saying so; with JOBQ_TEST_REQUIRE_GO=1 (CI sets
it after installing Debian's golang-go) they fail instead.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.conformance.kit import CHECKS, run_kit
from tests.conftest import ROOT, LiveServer

GO_MODULE = ROOT / "clients" / "go"


def go_binary() -> str:
    """The go command, or skip (fail where CI requires it)."""
    found = shutil.which("go")
    if found:
        return found
    why = "go is not installed (Debian: apt-get install golang-go; the client needs Go >= 1.19)"
    if os.environ.get("JOBQ_TEST_REQUIRE_GO") == "1":
        pytest.fail(f"{why}, and JOBQ_TEST_REQUIRE_GO=1")
    pytest.skip(why)


def go_env(**extra: str) -> dict[str, str]:
    """The environment for go: the module has no dependency, so nothing is ever downloaded
    (GOPROXY=off makes an accidental one an error instead of a network call); the build
    cache stays Go's default (~/.cache/go-build), shared between runs."""
    env = {**os.environ, "GOPROXY": "off", "GOFLAGS": "", "GOWORK": "off", **extra}
    if not any(env.get(name) for name in ("GOCACHE", "XDG_CACHE_HOME", "HOME")):
        # go refuses to build without a place for its cache (a service manager's bare
        # environment): one beside the other temporary files, kept between runs.
        env["GOCACHE"] = str(Path(tempfile.gettempdir()) / "jobq-go-build-cache")
    return env


def run_go(args: list[str], *, cwd: Path = GO_MODULE, timeout: float = 100,
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``go ARGS`` in the module; its timeout is under pytest's (120 s), so that a hung go
    command fails naming itself."""
    return subprocess.run([go_binary(), *args], cwd=cwd, env=env or go_env(), capture_output=True,
                          text=True, timeout=timeout)


def test_go_vet_is_clean() -> None:
    vet = run_go(["vet", "./..."])
    assert vet.returncode == 0, f"go vet ./...:\n{vet.stdout}{vet.stderr}"
    # gofmt ships beside go (Debian links /usr/bin/go into /usr/lib/go-1.19/bin).
    gofmt = Path(go_binary()).resolve().with_name("gofmt")
    unformatted = subprocess.run([str(gofmt), "-l", "."], cwd=GO_MODULE, capture_output=True, text=True)
    assert unformatted.returncode == 0 and unformatted.stdout == "", \
        f"not gofmt-formatted:\n{unformatted.stdout}{unformatted.stderr}"


def test_go_tests_pass_against_a_live_service(live_server: LiveServer) -> None:
    tests = run_go(["test", "-count=1", "-v", "./..."], env=go_env(JOBQ_URL=live_server.url, JOBQ_TOKEN=""))
    output = tests.stdout + tests.stderr
    assert tests.returncode == 0, f"go test ./... against {live_server.url}:\n{output}"
    passed = re.findall(r"^--- PASS: (\w+)", output, re.MULTILINE)
    skipped = re.findall(r"^--- SKIP: (\w+)", output, re.MULTILINE)
    assert not skipped, f"Go tests skipped against a live service: {skipped}\n{output}"
    # The behaviours the issue names, each a test of its own: none may go missing unnoticed.
    for name in ("TestEnqueueGetWait", "TestTypedProblems", "TestWorkerCompletesJobs",
                 "TestWorkerRetryAndDiscard", "TestWorkerHeartbeatsAJobLongerThanItsLease",
                 "TestWorkerStopReleasesWhatDidNotFinish", "TestRateSettings",
                 "TestQueueRateLimited", "TestRetryOverloadWaitsOutTheEnqueueRate", "TestOverloaded",
                 "TestRetryAfterMsWinsOverTheHeader"):
        assert name in passed, f"{name} did not run and pass:\n{output}"


def test_the_readme_programs_build_from_a_checkout(tmp_path: Path) -> None:
    """The package README's complete programs build in a module of their own that uses the
    client as the README says: `go mod edit -require … -replace …` pointing at this checkout."""
    readme = (GO_MODULE / "README.md").read_text()
    programs = [block for block in re.findall(r"^```go\n(.*?)^```", readme, re.S | re.M)
                if block.startswith("package main")]
    assert len(programs) >= 2, "the README lost its complete programs"
    command = re.search(r"^go mod edit (-require=\S+) (-replace=jobq.invalid/jobq=)\S+$", readme, re.M)
    assert command, "the README no longer says how to use the module from a checkout"
    for n, program in enumerate(programs):
        app = tmp_path / f"app{n}"
        app.mkdir()
        (app / "main.go").write_text(program)
        for args in (["mod", "init", "example.com/app"],
                     ["mod", "edit", command.group(1), command.group(2) + str(GO_MODULE)],
                     ["vet", "./..."], ["build", "-o", os.devnull, "."]):
            done = run_go(args, cwd=app)
            assert done.returncode == 0, f"go {' '.join(args)} for program {n}:\n{done.stdout}{done.stderr}\n{program}"


@pytest.mark.slow  # the kit's six checks take about 25 s, most of it their waits
def test_the_go_worker_passes_the_conformance_kit(live_server: LiveServer, tmp_path: Path) -> None:
    worker = tmp_path / "conformance-worker"
    built = run_go(["build", "-o", str(worker), "./examples/conformance"])
    assert built.returncode == 0, f"go build ./examples/conformance:\n{built.stdout}{built.stderr}"
    done = run_kit(live_server.url, [str(worker)])
    assert done.code == 0, done.output
    assert done.held() == list(CHECKS), done.output
