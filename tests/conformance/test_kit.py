"""``jobq conformance`` tells a good worker from a bad one: the reference worker
(workers/ref_worker.py, plain httpx) passes every check, and each of its broken variants
fails the check made for it, with the evidence named; mistakes on the command line, a service
that does not answer and a token that may not run the kit are one line and exit 2."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conformance.kit import CHECKS, WORKERS, live_service, run_kit, worker_token
from tests.conftest import ROOT, LiveServer

REF_WORKER = [sys.executable, str(WORKERS / "ref_worker.py")]


@pytest.fixture(scope="module")
def service(admin_url: str, template_db: str) -> Iterator[LiveServer]:
    with live_service(admin_url, template_db) as server:
        yield server


@pytest.mark.slow  # the six checks take about 20 s, as they must (idle 5 s, refusals 6 s, a 6 s job)
def test_the_reference_worker_passes_every_check(service: LiveServer) -> None:
    done = run_kit(service.url, REF_WORKER)
    assert done.code == 0, done.output
    assert done.held() == list(CHECKS), done.output
    assert done.lines[-1] == "conformance: 6 of 6 checks hold", done.output
    assert len(done.lines) == 7, done.output
    # The worker's own output comes through, prefixed.
    assert "worker| ref_worker: stopped" in done.stderr, done.output


# Each broken variant, the check made to catch it, and what its FAIL line must name.
BROKEN = [
    ("wrong-result", "echo", "not its payload"),
    ("double-ack", "echo", "acked 2 times"),
    ("ack-failures", "fail", "a failure was acked instead of failed"),
    ("no-heartbeat", "heartbeat", "lease_expired"),
    ("spin", "idle", "is spinning"),
    ("ignore-retry-after", "retry-after", "followed by a claim sooner than 1.8 s"),
    ("exit-without-release", "stop", "was not released: running, attempt 1"),
    ("claim-after-term", "stop", "after SIGTERM"),
]


@pytest.mark.parametrize(("broken", "check", "evidence"), BROKEN, ids=[b for b, _, _ in BROKEN])
def test_each_broken_variant_fails_its_check(service: LiveServer, broken: str, check: str, evidence: str) -> None:
    done = run_kit(service.url, REF_WORKER, only=[check], env={"JOBQ_BROKEN": broken})
    assert done.code == 1, done.output
    assert done.lines[0].startswith(f"FAIL {check}: "), done.output
    assert evidence in done.lines[0], done.output
    # Evidence names the job or counts what it saw.
    assert any(ch.isdigit() for ch in done.lines[0]), done.output
    assert done.lines[-1] == f"conformance: 1 of 1 checks failed ({check})", done.output


def test_only_and_skip_choose_the_checks_run_in_their_order(service: LiveServer) -> None:
    done = run_kit(service.url, REF_WORKER, only=["fail", "echo", "stop"], skip=["stop"])
    assert done.code == 0, done.output
    assert [ln.split()[1] for ln in done.lines[:-1]] == ["echo:", "fail:"], done.output
    assert done.lines[-1] == "conformance: 2 of 2 checks hold", done.output


def test_a_worker_that_exits_fails_the_checks_left_saying_so(service: LiveServer) -> None:
    done = run_kit(service.url, [sys.executable, "-c", "import sys; sys.exit(3)"], only=["echo", "idle"])
    assert done.code == 1, done.output
    assert done.failed() == ["echo", "idle"], done.output
    assert all("exited (code 3)" in done.line(c) for c in ("echo", "idle")), done.output


def test_with_access_tokens_the_worker_gets_its_own_token(admin_url: str, template_db: str) -> None:
    admin = secrets.token_urlsafe(24)
    with live_service(admin_url, template_db, env={"JOBQ_ADMIN_TOKEN": admin}) as server:
        worker = worker_token(server.url, admin)
        done = run_kit(server.url, REF_WORKER, token=admin, worker_token=worker, only=["echo", "stop"])
        assert done.code == 0, done.output
        assert done.held() == ["echo", "stop"], done.output

        # A token that cannot set the queue's settings is refused before anything runs.
        refused = run_kit(server.url, REF_WORKER, token=worker, only=["echo"])
        assert refused.code == 2, refused.output
        assert refused.lines == [], refused.output
        assert "needs an admin token" in refused.stderr.strip().splitlines()[-1], refused.output

        # As is none at all.
        missing = run_kit(server.url, REF_WORKER, only=["echo"])
        assert missing.code == 2, missing.output
        assert "has access tokens and none was given" in missing.stderr, missing.output


@pytest.mark.parametrize(("args", "says"), [
    (dict(command=[]), "no worker command"),
    (dict(command=REF_WORKER, only=["echo", "spinning"]), "no check named 'spinning'"),
    (dict(command=REF_WORKER, skip=list(CHECKS)), "leave no check"),
], ids=["no-command", "unknown-check", "nothing-left"])
def test_usage_errors_are_one_line_and_exit_2(args: dict, says: str) -> None:
    done = run_kit("http://127.0.0.1:9", **args)
    assert done.code == 2, done.output
    assert done.lines == [], done.output
    assert done.stderr.count("\n") == 1 and says in done.stderr, done.output


def test_an_unreachable_service_is_a_usage_error() -> None:
    done = run_kit("http://127.0.0.1:9", REF_WORKER)
    assert done.code == 2, done.output
    assert done.lines == [], done.output
    [line] = done.stderr.splitlines()
    assert line.startswith("jobq: cannot reach http://127.0.0.1:9 (from --url)"), done.output


def test_an_unreachable_service_names_what_chose_its_url() -> None:
    """Without --url the kit takes JOBQ_URL: the line says so (it said "from --url")."""
    args = [sys.executable, "-m", "jobq.cli", "conformance", "--only", "echo", "--", *REF_WORKER]
    env = {k: v for k, v in os.environ.items() if k not in ("JOBQ_TOKEN", "JOBQ_URL")}
    done = subprocess.run(args, cwd=ROOT, env={**env, "JOBQ_URL": "http://127.0.0.1:9"},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("jobq: cannot reach http://127.0.0.1:9 (from JOBQ_URL)"), done.stderr
