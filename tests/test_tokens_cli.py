"""Access tokens from the operator's side: ``jobq tokens`` on the database, ``jobq serve``
deciding whether it may bind a public address, JOBQ_ADMIN_TOKEN checked at start, and the
client commands' one-line answers to 401 and 403."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from pydantic import ValidationError

from jobq.cli.service import bind_refusal
from jobq.settings import Settings
from tests.conftest import ROOT, LiveServer, free_port
from tests.terminal import run_at_terminal
from tests.waiting import eventually

# Whatever the developer's shell holds must not decide these tests.
_AMBIENT = ("JOBQ_TOKEN", "JOBQ_ADMIN_TOKEN", "JOBQ_URL", "JOBQ_DATABASE_URL")


def jobq(*args: str, database_url: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k not in _AMBIENT}
    full.update({"COLUMNS": "200", **env})
    if database_url is not None:
        full["JOBQ_DATABASE_URL"] = database_url
    return subprocess.run([sys.executable, "-m", "jobq.cli", *args], cwd=ROOT, env=full,
                          capture_output=True, text=True, timeout=60)


def wait_for_status(url: str, token: str | None, status: int, timeout_s: float = 5.0) -> None:
    """Until GET /v1/queues with ``token`` answers ``status``: the service reads tokens from
    the database, so a change made by the CLI reaches it a moment later."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answered: list[int] = []

    def answers() -> bool:
        answered.append(httpx.get(url + "/v1/queues", headers=headers, timeout=5).status_code)
        return answered[-1] == status

    eventually(answers, timeout_s=timeout_s, poll_s=0.1,
               what=lambda: f"GET /v1/queues answering {status} (last answered {answered[-1]})")


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    live = LiveServer(database_url, env={"JOBQ_ADMIN_TOKEN": "", "JOBQ_TOKEN": ""})
    live.start()
    yield live
    live.stop()


def test_list_is_the_plain_80_column_table_of_the_other_listings(database_url: str) -> None:
    """Ids and times whole; a long name or queue pattern shortened with an ellipsis; no box."""
    made = jobq("tokens", "create", "--role", "producer", "--name", "n" * 200,
                "--queues", "tenant-a.*," * 20 + "x", database_url=database_url)
    assert made.returncode == 0, made.stderr
    token_id = made.stdout.strip().split("_")[1]
    env = {k: v for k, v in os.environ.items() if k not in _AMBIENT}
    env.update(PYTHONPATH=str(ROOT), JOBQ_DATABASE_URL=database_url)
    narrow = run_at_terminal([sys.executable, "-m", "jobq.cli", "tokens", "list"], env=env, cwd=ROOT)
    assert narrow.returncode == 0, narrow.stderr
    lines = narrow.stdout.splitlines()
    assert lines[0].split() == ["id", "name", "role", "queues", "created", "(UTC)", "revoked", "(UTC)"]
    assert all(len(line) <= 80 for line in lines), narrow.stdout
    assert not set("┏┃│└┗╇━┌┐") & set(narrow.stdout), narrow.stdout
    row = next(line for line in lines if token_id in line)
    assert "producer" in row and "…" in row and "nnnnn" in row, narrow.stdout
    # Into a pipe (and with --wide at a terminal): every value whole, whatever COLUMNS says.
    for whole in (jobq("tokens", "list", database_url=database_url, COLUMNS="80"),
                  run_at_terminal([sys.executable, "-m", "jobq.cli", "tokens", "list", "--wide"],
                                  env=env, cwd=ROOT)):
        assert whole.returncode == 0, whole.stderr
        row = next(line for line in whole.stdout.splitlines() if token_id in line)
        assert "n" * 200 in row and "tenant-a.*," * 20 + "x" in row and "…" not in row, whole.stdout


def test_create_prints_only_the_token_which_works_until_revoked(database_url: str,
                                                              server: LiveServer) -> None:
    # Local mode until the first token: anyone on loopback may call.
    wait_for_status(server.url, None, 200)

    made = jobq("tokens", "create", "--role", "admin", "--name", "ops", database_url=database_url)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    assert made.stdout == token + "\n"  # TOKEN=$(jobq tokens create ...) gets exactly it
    assert token.startswith("jq_")
    token_id = token.split("_")[1]
    assert token_id in made.stderr and "admin" in made.stderr and token not in made.stderr

    # The running service reads it from the database: local mode is over.
    wait_for_status(server.url, None, 401)
    wait_for_status(server.url, token, 200)

    listed = jobq("tokens", "list", database_url=database_url)
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if token_id in line)
    assert "ops" in row and "admin" in row and "*" in row
    as_json = json.loads(jobq("tokens", "list", "--json", database_url=database_url).stdout)
    assert [(t["id"], t["name"], t["role"], t["queues"], t["revoked_at"])
            for t in as_json["tokens"]] == [(token_id, "ops", "admin", "*", None)]
    secret = token.split("_", 2)[2]
    assert secret not in listed.stdout + listed.stderr and secret not in json.dumps(as_json)

    revoked = jobq("tokens", "revoke", token_id, database_url=database_url)
    assert revoked.returncode == 0, revoked.stderr
    assert revoked.stdout.startswith(f"revoked token {token_id} at ")
    wait_for_status(server.url, token, 401, timeout_s=3.0)  # every replica within a second
    # Revoking the last token locks the door: it does not bring local mode back.
    assert httpx.get(server.url + "/v1/queues").status_code == 401
    after = json.loads(jobq("tokens", "list", "--json", database_url=database_url).stdout)
    assert after["tokens"][0]["revoked_at"] is not None


def test_json_create_and_a_queue_pattern_seen_by_the_client_commands(
        database_url: str, server: LiveServer) -> None:
    made = jobq("tokens", "create", "--role", "producer", "--queues", "tenant-a.*, mail",
                "--json", database_url=database_url)
    assert made.returncode == 0, made.stderr
    info = json.loads(made.stdout)
    assert info["role"] == "producer" and info["queues"] == "tenant-a.*,mail"
    assert info["token"].startswith(f"jq_{info['id']}_") and info["revoked_at"] is None
    wait_for_status(server.url, None, 401)

    url = {"JOBQ_URL": server.url}
    ok = jobq("enqueue", "t", "--queue", "tenant-a.mail", "--json", JOBQ_TOKEN=info["token"], **url)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["queue"] == "tenant-a.mail"
    via_option = jobq("enqueue", "t", "--queue", "mail", "--token", info["token"], **url)
    assert via_option.returncode == 0, via_option.stderr

    outside = jobq("enqueue", "t", "--queue", "tenant-b.mail", JOBQ_TOKEN=info["token"], **url)
    assert outside.returncode == 1
    assert outside.stderr.startswith("jobq: 403 forbidden: ") and "Traceback" not in outside.stderr
    assert len(outside.stderr.strip().splitlines()) == 1

    anonymous = jobq("queues", **url)
    assert anonymous.returncode == 1
    assert anonymous.stderr.startswith("jobq: 401 unauthorized: ")
    assert anonymous.stderr.rstrip().endswith("(set JOBQ_TOKEN or pass --token)")
    wrong = jobq("jobs", "--token", "jq_000000000000_" + "x" * 43, **url)
    assert wrong.returncode == 1 and "401 unauthorized" in wrong.stderr
    assert wrong.stderr.rstrip().endswith("(check JOBQ_TOKEN or --token)")


@pytest.mark.parametrize("args, message", [
    (["--role", "boss"], "--role must be one of producer, worker, admin"),
    (["--role", "worker", "--queues", "a,,b"], "--queues 'a,,b'"),
    (["--role", "worker", "--queues", " "], "--queues"),
    (["--role", "worker", "--name", ""], "--name"),
])
def test_a_bad_argument_is_one_line_exit_2_and_writes_nothing(
        database_url: str, args: list[str], message: str) -> None:
    out = jobq("tokens", "create", *args, database_url=database_url)
    assert out.returncode == 2
    assert out.stdout == ""
    assert out.stderr.startswith(f"jobq: {message}") and len(out.stderr.splitlines()) == 1
    listed = json.loads(jobq("tokens", "list", "--json", database_url=database_url).stdout)
    assert listed == {"tokens": []}


def test_revoking_an_unknown_id_is_one_line_exit_1(database_url: str) -> None:
    out = jobq("tokens", "revoke", "0123456789ab", database_url=database_url)
    assert out.returncode == 1
    assert out.stderr == "jobq: token '0123456789ab' does not exist\n"


def test_tokens_commands_migrate_a_fresh_database_first(admin_url: str) -> None:
    from tests import pg

    name = f"jobq_tokens_fresh_{os.getpid()}_{time.monotonic_ns() % 10**9}"
    pg.admin_execute(admin_url, f'CREATE DATABASE "{name}"')
    try:
        url = pg.with_database(admin_url, name)
        made = jobq("tokens", "create", "--role", "worker", database_url=url)
        assert made.returncode == 0, made.stderr
        listed = json.loads(jobq("tokens", "list", "--json", database_url=url).stdout)
        assert [t["role"] for t in listed["tokens"]] == ["worker"]
    finally:
        pg.drop(admin_url, name)


# jobq serve: may it bind a public address?


def test_bind_decision() -> None:
    assert bind_refusal("127.0.0.1", secured=False, insecure=False) is None
    assert bind_refusal("::1", secured=False, insecure=False) is None
    assert bind_refusal("localhost", secured=False, insecure=False) is None
    refusal = bind_refusal("0.0.0.0", secured=False, insecure=False)
    assert refusal is not None and "0.0.0.0" in refusal and "--insecure" in refusal
    assert bind_refusal("0.0.0.0", secured=True, insecure=False) is None
    assert bind_refusal("0.0.0.0", secured=False, insecure=True) is None


def _serve_public(database_url: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    return _serve(database_url, "0.0.0.0", *extra)


def _serve(database_url: str, host: str, *extra: str) -> tuple[subprocess.Popen[str], str]:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in _AMBIENT}
    env["JOBQ_DATABASE_URL"] = database_url
    proc = subprocess.Popen(
        [sys.executable, "-m", "jobq.cli", "serve", "--host", host, "--port", str(port),
         *extra], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return proc, f"http://127.0.0.1:{port}"


def _ready(proc: subprocess.Popen[str], url: str) -> None:
    def ready() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"jobq serve exited {proc.returncode}: {proc.stderr.read()}")  # type: ignore[union-attr]
        try:
            return httpx.get(url + "/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    eventually(ready, timeout_s=30, poll_s=0.1, what=f"jobq serve ready on {url}")


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def test_serve_refuses_a_public_bind_until_a_database_token_exists(database_url: str) -> None:
    proc, _ = _serve_public(database_url)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "refusing to bind 0.0.0.0 with no access tokens" in err

    admin = jobq("tokens", "create", "--role", "admin", database_url=database_url).stdout.strip()
    proc, url = _serve_public(database_url)
    try:
        _ready(proc, url)
        assert httpx.get(url + "/v1/queues").status_code == 401
        assert httpx.get(url + "/v1/queues", headers={"Authorization": f"Bearer {admin}"}
                         ).status_code == 200
    finally:
        _stop(proc)
    assert "local mode" not in proc.stderr.read()  # type: ignore[union-attr]

    # With every token revoked the service is locked, not open: it may bind, and refuses all.
    jobq("tokens", "revoke", admin.split("_")[1], database_url=database_url)
    proc, url = _serve_public(database_url)
    try:
        _ready(proc, url)
        assert httpx.get(url + "/v1/queues").status_code == 401
        assert httpx.get(url + "/v1/queues", headers={"Authorization": f"Bearer {admin}"}
                         ).status_code == 401
    finally:
        _stop(proc)


def test_serve_says_local_mode_on_loopback(database_url: str) -> None:
    proc, url = _serve(database_url, "127.0.0.1")
    try:
        _ready(proc, url)
        assert httpx.get(url + "/v1/queues").status_code == 200  # no token: anyone local
    finally:
        _stop(proc)
    assert "local mode (no access tokens): serving on 127.0.0.1 only" in proc.stderr.read()  # type: ignore[union-attr]


def test_insecure_serves_a_public_address_without_tokens(database_url: str) -> None:
    proc, url = _serve_public(database_url, "--insecure")
    try:
        _ready(proc, url)
        assert httpx.get(url + "/v1/queues").status_code == 200  # no token: anyone
    finally:
        _stop(proc)
    assert "INSECURE" in proc.stderr.read()  # type: ignore[union-attr]


# JOBQ_ADMIN_TOKEN


@pytest.mark.parametrize("value, why", [
    ("short-secret", "at least 16 characters"),
    ("a long secret with spaces", "printable ASCII without spaces"),
    ("tab\tinside-a-long-secret", "printable ASCII without spaces"),
    ("non-ascii-secret-é-long", "printable ASCII without spaces"),
])
def test_settings_refuse_a_weak_or_unsendable_admin_token(value: str, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        Settings(admin_token=value)


def test_settings_accept_a_long_admin_token_and_treat_empty_as_none() -> None:
    assert Settings(admin_token="0123456789abcdef").admin_token == "0123456789abcdef"
    assert Settings(admin_token="").admin_token is None


def test_serve_names_a_bad_admin_token_at_start() -> None:
    out = jobq("serve", JOBQ_ADMIN_TOKEN="change-me")
    assert out.returncode == 2
    assert out.stderr.startswith("jobq: JOBQ_ADMIN_TOKEN must be at least 16 characters")
    assert "Traceback" not in out.stderr


def test_a_token_with_an_enqueue_rate_from_the_command_line(database_url: str,
                                                            server: LiveServer) -> None:
    """``--enqueue-rate N/P[:B]`` at creation, ``tokens limit`` to change or clear it; the
    service refuses past it with 429 token_rate_limited (issue 29)."""
    bad = jobq("tokens", "create", "--role", "producer", "--enqueue-rate", "5/0",
               database_url=database_url)
    assert bad.returncode == 2 and "--enqueue-rate" in bad.stderr, bad.stderr
    made = jobq("tokens", "create", "--role", "producer", "--enqueue-rate", "2/1m:2", "--json",
                database_url=database_url)
    assert made.returncode == 0, made.stderr
    info = json.loads(made.stdout)
    assert info["enqueue_rate"] == {"jobs": 2, "per_ms": 60000, "burst": 2}
    wait_for_status(server.url, None, 401)  # local mode is over: the token is read
    auth = {"Authorization": f"Bearer {info['token']}"}
    codes = [httpx.post(server.url + "/v1/jobs", json={"type": "t"}, headers=auth).status_code
             for _ in range(3)]
    assert codes == [201, 201, 429]
    cleared = jobq("tokens", "limit", info["id"], "--clear", database_url=database_url)
    assert cleared.returncode == 0 and "enqueue rate none" in cleared.stdout, cleared.stderr

    def accepted() -> bool:
        return httpx.post(server.url + "/v1/jobs", json={"type": "t"}, headers=auth).status_code == 201

    eventually(accepted, timeout_s=5, poll_s=0.1, what="the cleared rate reaching the service")
    again = jobq("tokens", "limit", info["id"], "--enqueue-rate", "10/1s", "--json",
                 database_url=database_url)
    assert json.loads(again.stdout)["enqueue_rate"] == {"jobs": 10, "per_ms": 1000, "burst": 10}
    neither = jobq("tokens", "limit", info["id"], database_url=database_url)
    assert neither.returncode == 2 and "--clear" in neither.stderr
