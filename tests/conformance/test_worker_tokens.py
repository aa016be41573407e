"""With access tokens, the workers this repository shows send the token the kit hands them
(JOBQ_TOKEN, a ``worker`` token of the kit's queues, not the kit's admin token): the JavaScript
reference worker and the README's worker in bash, curl and jq."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.kit import live_service, run_kit, worker_token
from tests.conformance.test_kit_js import WORKER, node
from tests.conformance.test_readme_worker import HANDLE
from tests.conftest import LiveServer
from tests.readme import worker_script

ADMIN = secrets.token_urlsafe(24)


@pytest.fixture(scope="module")
def service(admin_url: str, template_db: str) -> Iterator[LiveServer]:
    with live_service(admin_url, template_db, env={"JOBQ_ADMIN_TOKEN": ADMIN}) as server:
        yield server


def test_the_js_reference_worker_sends_its_token(service: LiveServer) -> None:
    done = run_kit(service.url, [node(), str(WORKER)], token=ADMIN,
                   worker_token=worker_token(service.url, ADMIN), only=["echo", "fail"])
    assert done.code == 0, done.output
    assert done.held() == ["echo", "fail"], done.output


def test_the_readme_worker_sends_its_token(service: LiveServer, tmp_path: Path) -> None:
    script = tmp_path / "worker.sh"
    script.write_text(worker_script(HANDLE))
    done = run_kit(service.url, ["bash", str(script)], token=ADMIN,
                   worker_token=worker_token(service.url, ADMIN), only=["echo", "fail"])
    assert done.code == 0, done.output
    assert done.held() == ["echo", "fail"], done.output


def test_a_worker_turned_away_by_the_service_is_told_why(service: LiveServer) -> None:
    """A worker token of other queues: the worker stops on its 403, and the check's line says
    what the service answered and which token to give, not only that the worker exited."""
    done = run_kit(service.url, [node(), str(WORKER)], token=ADMIN,
                   worker_token=worker_token(service.url, ADMIN, queues="email"), only=["echo"])
    assert done.code == 1, done.output
    [line] = [x for x in done.lines if x.startswith("FAIL echo:")]
    assert "the worker exited (code " in line and " 403 (" in line, line
    assert "outside this token's queues" in line and "--worker-token" in line, line
