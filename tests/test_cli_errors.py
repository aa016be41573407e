"""Every mistake at the command line is one line on stderr and a non-zero exit, never a
traceback; connection errors name the URL and what chose it; the worker logs one line per
job outcome. Each test runs the real command, as a user would."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jobq import __version__
from jobq.client import Client, TransportError
from tests.conftest import ROOT, LiveServer, free_port
from tests.waiting import eventually


def jobq(*args: str, env: dict[str, str] | None = None,
         cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if k not in ("JOBQ_URL", "JOBQ_TOKEN")}
    return subprocess.run([sys.executable, "-m", "jobq.cli", *args], cwd=cwd,
                          env={**environ, "COLUMNS": "200", **(env or {})},
                          capture_output=True, text=True, timeout=60)


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    """The single stderr line of a command that failed with ``code``."""
    assert done.returncode == code, done
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def nowhere() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


@pytest.mark.parametrize("payload", ["[1,2]", "5", "[]", '"text"', "null"])
def test_a_payload_that_is_not_an_object_is_one_line(payload: str) -> None:
    line = one_line(jobq("enqueue", "t", "--payload", payload, "--url", nowhere()), 2)
    assert line.startswith("jobq: payload must be a JSON object"), line


def test_a_payload_that_is_not_json_says_where() -> None:
    line = one_line(jobq("enqueue", "t", "--payload", "{", "--url", nowhere()), 2)
    assert "--payload is not JSON" in line and "column 2" in line, line


def test_with_json_the_error_is_a_json_object_on_stderr() -> None:
    done = jobq("enqueue", "t", "--payload", "[1,2]", "--json", "--url", nowhere())
    error = json.loads(one_line(done, 2))
    assert error["error"].startswith("payload must be a JSON object")
    assert done.stdout == ""

    url = nowhere()
    error = json.loads(one_line(jobq("jobs", "--json", "--url", url), 1))
    assert error["url"] == url and error["url_source"] == "--url", error
    assert error["error"].startswith(f"cannot reach {url} (from --url)")

    error = json.loads(one_line(jobq("jobs", "--json", "--limit", "0"), 2))
    assert "--limit" in error["error"]


@pytest.mark.parametrize("spec", ["myapp.jobs", "myapp/jobs.py"])
def test_a_handler_spec_without_attribute_is_one_line(spec: str) -> None:
    line = one_line(jobq("worker", spec, "--url", nowhere()), 2)
    # the example is the dotted form, also when the spec was a file path
    assert "expected 'package.module:attribute'" in line and "'myapp.jobs:handlers'" in line, line


def test_a_missing_module_or_attribute_is_one_line() -> None:
    line = one_line(jobq("worker", "no_such_module_xyz:handlers", "--url", nowhere()), 2)
    assert "cannot import 'no_such_module_xyz'" in line, line
    line = one_line(jobq("worker", "json:no_such_attribute", "--url", nowhere()), 2)
    assert "'no_such_attribute' not found" in line, line


@pytest.mark.parametrize("spec", ["myapp/jobs.py:handlers", "myapp/jobs:handlers"])
def test_a_handler_spec_written_as_a_file_path_hints_the_dotted_name(spec: str, tmp_path: Path) -> None:
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "jobs.py").write_text("handlers = {'t': print}\n")
    line = one_line(jobq("worker", spec, "--url", nowhere(), cwd=tmp_path), 2)
    assert "not a file path: 'myapp.jobs:handlers'" in line, line


def test_a_module_that_raises_on_import_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "broken_jobs.py").write_text("handlers = {}\nraise RuntimeError('no config')\n")
    line = one_line(jobq("worker", "broken_jobs:handlers", "--url", nowhere(), cwd=tmp_path), 2)
    assert "RuntimeError: no config" in line and "broken_jobs.py:2" in line, line


@pytest.mark.parametrize("command", [["jobs"], ["enqueue", "t"], ["worker", "json:loads"]])
def test_a_url_without_a_scheme_is_one_line(command: list[str]) -> None:
    line = one_line(jobq(*command, "--url", "localhost:8100"), 2)
    assert "'localhost:8100' is not an http:// or https:// URL" in line, line
    assert "http://localhost:8100" in line and "(from --url)" in line, line


def test_a_url_that_names_the_api_s_v1_is_one_line_giving_the_root() -> None:
    line = one_line(jobq("jobs", "--url", "http://127.0.0.1:8000/v1"), 2)
    assert line == ("jobq: url 'http://127.0.0.1:8000/v1' names the API's /v1: give the service's root, "
                    "http://127.0.0.1:8000 (from --url)"), line
    # Behind a path prefix the root keeps it.
    line = one_line(jobq("jobs", env={"JOBQ_URL": "https://example.com/jobq/v1/"}), 2)
    assert "give the service's root, https://example.com/jobq (from JOBQ_URL)" in line, line


def test_a_connection_error_names_the_url_and_the_setting() -> None:
    url = nowhere()
    line = one_line(jobq("jobs", "--url", url), 1)
    assert line.startswith(f"jobq: cannot reach {url} (from --url): GET /v1/jobs"), line
    line = one_line(jobq("enqueue", "t", env={"JOBQ_URL": url}), 1)
    assert line.startswith(f"jobq: cannot reach {url} (from JOBQ_URL): POST /v1/jobs"), line
    line = one_line(jobq("queues"), 1)
    assert "(from the default; set JOBQ_URL or pass --url)" in line, line


def test_the_sdk_transport_error_names_the_url() -> None:
    url = nowhere()
    with Client(url) as client, pytest.raises(TransportError) as caught:
        client.get("1")
    assert str(caught.value).startswith(f"cannot reach {url} (from the url argument): GET /v1/jobs/1")
    assert caught.value.url == url
    with pytest.raises(ValueError, match="not an http:// or https:// URL"):
        Client("localhost:8100")


def test_usage_errors_are_one_line() -> None:
    line = one_line(jobq("enqueue"), 2)
    assert line == "jobq: Missing argument 'type'. (see `jobq enqueue --help`)", line
    line = one_line(jobq("jobs", "--bogus"), 2)
    assert "No such option: --bogus" in line, line


@pytest.mark.parametrize("command", ["job", "cancel", "retry"])
def test_a_job_id_that_is_not_a_number_is_one_line(command: str) -> None:
    # Said before any call: nowhere() answers nothing, so a call would be a connection error.
    line = one_line(jobq(command, "abc", "--url", nowhere()), 2)
    assert line == "jobq: 'abc' is not a job id: ids are numbers, as `jobq jobs` lists them", line


def test_an_unknown_status_is_one_line_naming_the_statuses() -> None:
    line = one_line(jobq("jobs", "--status", "deadd", "--url", nowhere()), 2)
    assert line == ("jobq: --status 'deadd' is not a status: one of pending, running, failed, "
                    "completed, dead, cancelled"), line


def test_version() -> None:
    done = jobq("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"jobq {__version__}", done


def test_serve_with_no_database_is_one_line_naming_it() -> None:
    port = free_port()
    url = f"postgresql://postgres:secret@127.0.0.1:{port}/shop_jobs"
    line = one_line(jobq("serve", "--port", str(free_port()), env={"JOBQ_DATABASE_URL": url}), 1)
    assert line.startswith("jobq: cannot reach the database: database 'shop_jobs' on "
                           f"127.0.0.1:{port}: "), line
    assert "start PostgreSQL there" in line and "JOBQ_DATABASE_URL" in line, line
    assert "secret" not in line


def test_serve_with_a_missing_database_says_create_it(database_url: str) -> None:
    from psycopg.conninfo import conninfo_to_dict

    url = database_url.rsplit("/", 1)[0] + "/jobq_no_such_db"
    info = conninfo_to_dict(url)
    line = one_line(jobq("serve", "--port", str(free_port()), env={"JOBQ_DATABASE_URL": url}), 1)
    assert f"database 'jobq_no_such_db' on {info.get('host')}:" in line, line
    assert "does not exist" in line and "create it (createdb)" in line, line


def test_serve_on_a_busy_port_is_one_line_naming_it() -> None:
    """Not uvicorn's `[Errno 98] address already in use` log and exit 3: one line that
    names the port and how to choose another, before any database is touched."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        unreachable = f"postgresql://postgres@127.0.0.1:{free_port()}/jobq"  # never reached
        line = one_line(jobq("serve", "--port", str(port), env={"JOBQ_DATABASE_URL": unreachable}), 1)
    assert line == (f"jobq: port {port} on 127.0.0.1 is already in use (another jobq serve?); "
                    "choose another with --port N or JOBQ_PORT"), line
    line = one_line(jobq("serve", "--port", "70000", env={"JOBQ_DATABASE_URL": unreachable}), 1)
    assert "port 70000 is not a TCP port" in line and "--port" in line, line


# The worker's log

HANDLERS = textwrap.dedent("""
    import pathlib
    import time

    from jobq.worker import Discard, Retry

    def ok(job):
        return {"done": job.payload}

    def boom(job):
        raise ValueError("boom: bad input")

    def later(job):
        raise Retry(in_ms=60_000, reason="upstream busy")

    def drop(job):
        raise Discard("not ours")

    def slow(job):
        # Runs until the test has seen its lease lost (the job was cancelled), then returns.
        # It polls a flag file: it runs in the worker's process, which the test can only
        # signal through the file system.
        flag = pathlib.Path(job.payload["flag"])
        while not flag.exists():
            time.sleep(0.05)
        return None

    handlers = {"ok": ok, "boom": boom, "later": later, "drop": drop, "slow": slow}
""")


def _wait_log(log: Path, text: str, timeout_s: float = 30.0) -> str:
    """The worker's log once it holds ``text``."""
    def logged() -> str | None:
        content = log.read_text()
        return content if text in content else None

    return eventually(logged, timeout_s=timeout_s, poll_s=0.05,
                      what=lambda: f"{text!r} logged; log:\n{log.read_text()}")


@pytest.mark.slow
def test_the_worker_logs_its_url_queues_and_one_line_per_job_outcome(
        live_server: LiveServer, tmp_path: Path) -> None:
    (tmp_path / "outcome_jobs.py").write_text(HANDLERS)
    log = tmp_path / "worker.log"
    environ = {k: v for k, v in os.environ.items() if k not in ("JOBQ_URL", "JOBQ_LOG_LEVEL")}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobq.cli", "worker", "outcome_jobs:handlers", "--url",
             live_server.url, "--queues", "logq,other", "--lease-ms", "600"],
            cwd=tmp_path, env=environ, stdout=out, stderr=out)
    try:
        _wait_log(log, "serving queues=logq,other")
        with Client(live_server.url) as client:
            ok = client.enqueue("ok", {"n": 1}, queue="logq")
            boom = client.enqueue("boom", {}, queue="logq", max_attempts=1)
            later = client.enqueue("later", {}, queue="logq", max_attempts=3)
            drop = client.enqueue("drop", {}, queue="logq", max_attempts=3)
            text = _wait_log(log, f"job {ok.id} (ok) attempt 1/")
            text = _wait_log(log, f"job {boom.id} (boom) attempt 1/1: failed for good (dead)")
            text = _wait_log(log, f"job {later.id} (later) attempt 1/3: failed, retried in ")
            text = _wait_log(log, f"job {drop.id} (drop) attempt 1/3: discarded (dead)")

            slow = client.enqueue("slow", {"flag": str(tmp_path / "flag")}, queue="logq")
            eventually(lambda: client.get(slow.id).status == "running", timeout_s=30, poll_s=0.05,
                       what="the slow job running")
            client.cancel(slow.id)
            text = _wait_log(log, f"job {slow.id} (slow) attempt 1/")
    finally:
        (tmp_path / "flag").touch()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    text = log.read_text()
    lines = text.splitlines()
    start = next(line for line in lines if "serving queues=" in line)
    assert f"serving queues=logq,other at {live_server.url} (from --url)" in start, start
    assert " INFO " in start, start
    completed = next(line for line in lines if f"job {ok.id} (ok)" in line)
    assert " INFO " in completed and ": completed (ran " in completed, completed
    assert "boom: bad input" in next(line for line in lines if f"job {boom.id}" in line)
    lost = next(line for line in lines if f"job {slow.id} (slow)" in line)
    assert "lease lost after" in lost, lost
    # One line per outcome, and no line per HTTP request at INFO.
    for job in (ok, boom, later, drop):
        assert sum(f"job {job.id} " in line for line in lines) == 1, text
    assert "HTTP Request" not in text and "Traceback" not in text, text
    assert proc.returncode == 0, text


@pytest.mark.parametrize(("queues", "served"), [
    # No --queues: it serves the queue default, and says that this is why.
    ({}, "default (no --queues or JOBQ_QUEUES given)"),
    # JOBQ_QUEUES is --queues from the environment, as JOBQ_URL is --url (jobq conformance
    # hands a worker its queue so).
    ({"JOBQ_QUEUES": "email,other"}, "email,other"),
])
def test_the_worker_log_names_the_url_it_cannot_reach(
        tmp_path: Path, queues: dict[str, str], served: str) -> None:
    (tmp_path / "outcome_jobs.py").write_text(HANDLERS)
    url = nowhere()
    log = tmp_path / "worker.log"
    environ = {k: v for k, v in os.environ.items() if k not in ("JOBQ_LOG_LEVEL", "JOBQ_QUEUES")}
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "jobq.cli", "worker", "outcome_jobs:handlers"],
            cwd=tmp_path, env={**environ, "JOBQ_URL": url, **queues}, stdout=out, stderr=out)
    try:
        _wait_log(log, f"serving queues={served} at {url} (from JOBQ_URL)")
        _wait_log(log, f"claim failed (cannot reach {url} (from JOBQ_URL): POST /v1/leases: ")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    assert proc.returncode == 0 and "Traceback" not in log.read_text(), log.read_text()


def test_tokens_errors_are_json_with_json() -> None:
    error = json.loads(one_line(jobq("tokens", "create", "--role", "bogus", "--json"), 2))
    assert error == {"error": "--role must be one of producer, worker, admin, not 'bogus'"}


def test_the_worker_keeps_httpx_request_lines_for_debug() -> None:
    import logging

    from jobq.worker import run_worker

    quiet = logging.getLogger("httpx")
    before = quiet.level
    try:
        with pytest.raises(ValueError, match="cannot import"):
            run_worker("http://127.0.0.1:1", "no_such_module_xyz:handlers", "q", app_dir=None)
        assert quiet.level == logging.WARNING
        assert logging.getLogger("httpcore").level == logging.WARNING
    finally:
        quiet.setLevel(before)
        logging.getLogger("httpcore").setLevel(logging.NOTSET)
