"""The README's curl sections, run as written (issue 15): the shell blocks are taken from
README.md itself, not from a copy, and run with bash against a live ``jobq serve``.

"A job's life with curl" runs twice against one database, as a user trying it again would:
the ids and lease ids come from the answers (jq), so the second run must see the same status
codes and statuses as the first. "Any language: a worker in curl and jq" runs as a worker
against a few jobs, one of which its handler fails, and against a service that is down or
answers errors, where it must pause rather than spin or exit (tests/conformance/
test_readme_worker.py runs it under `jobq conformance`)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import LiveServer, free_port
from tests.readme import README, section, worker_env, worker_script
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(autouse=True)
def curl_and_jq() -> None:
    """The README's shell needs both; a machine without them fails here, it does not skip."""
    missing = [tool for tool in ("curl", "jq", "bash") if shutil.which(tool) is None]
    assert not missing, f"the README's examples need {', '.join(missing)} installed"


URL_LINE = "JOBQ=http://127.0.0.1:8000"


def pointed_at(script: str, url: str) -> str:
    assert script.count(URL_LINE) == 1, f"the URL is set once, by {URL_LINE!r}"
    return script.replace(URL_LINE, f"JOBQ={url}")


# What "A job's life with curl" answers, call by call (curl -w prints them on stderr; the -i
# call prints its status line on stdout).
CODES = [
    "201",
    "200",
    "200",
    "200",
    "409",
    "409",
    "200",  # enqueue, claim, heartbeat, ack, fencing
    "201",
    "200",
    "200",  # the failing job: enqueue, claim, fail
    "200",
    "200",
    "200",
    "200",
    "200",  # second attempt, dead, listed, replayed, read
    "200",
    "200",  # the replayed job runs
    "201",
    "200",
    "200",
    "200",
    "200",  # a job with one attempt: enqueue, claim, release, claim, ack (issue 26)
    "200",
    "422",
]  # the queue's max_depth, the malformed body


def test_the_curl_walkthrough_runs_twice_on_one_database(live_server: LiveServer, tmp_path: Path) -> None:
    script = pointed_at(section("A job's life with curl"), live_server.url)
    for run in (1, 2):
        out = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, (run, out.stdout, out.stderr)
        assert out.stderr.split() == CODES, (run, out.stderr)
        lines = out.stdout.splitlines()
        expected = [
            '{"status":"completed","result":{"sent":true}}',
            '{"code":"lease_lost","already_completed":true}',
            "lease_lost",
            "completed",
            '{"status":"failed","attempt":1,"last_error":"timeout talking to S3"}',
            '{"status":"dead","attempt":2}',
            "timeout talking to S3",
            "still broken",
            '{"replayed":1}',
            '{"status":"pending","attempt":0}',
            '{"status":"completed","attempt":1}',
            '{"status":"pending","attempt":0,"releases":1}',
            '{"status":"completed","attempt":1}',
            "HTTP/1.1 429 Too Many Requests",
            "body: invalid JSON at line 1, column 14: expecting ',' delimiter",
        ]
        at = 0
        for want in expected:  # in this order, each on a line of its own
            assert want in lines[at:], (run, want, out.stdout)
            at = lines.index(want, at) + 1
        assert any(re.fullmatch(r"retry-after: \d+", line.strip(), re.I) for line in lines), out.stdout
        assert "dead" not in lines[-1]
    # Both runs left nothing waiting or dead behind: per run, one job of email and two of
    # reports (the failing one, the released one), all completed.
    queues = httpx.get(f"{live_server.url}/v1/queues").json()["queues"]
    counts = {q["name"]: q["counts"] for q in queues}
    assert counts["email"]["completed"] == 2 and counts["reports"]["completed"] == 4, counts
    assert sum(c["pending"] + c["failed"] + c["dead"] + c["running"] for c in counts.values()) == 0


# --- the worker loop --------------------------------------------------------------------------


def start_loop(url: str, log: Path, handle: str | None = None) -> subprocess.Popen[bytes]:
    # Its own process group, so that stopping it also stops the curl it is waiting in.
    return subprocess.Popen(["bash", "-c", worker_script(handle)], env=worker_env(url),
                            stdout=subprocess.DEVNULL, stderr=log.open("wb"), start_new_session=True)


def stop_loop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(10)


def test_the_curl_worker_acks_and_fails_jobs(live_server: LiveServer, tmp_path: Path) -> None:
    url = live_server.url
    jobs = {
        to: httpx.post(
            f"{url}/v1/jobs", json={"queue": "email", "type": "email.welcome", "payload": {"to": to}, "max_attempts": 3}
        ).json()["id"]
        for to in ("ada@example.com", "nobody", "grace@example.com")
    }
    log = tmp_path / "worker.log"
    proc = start_loop(url, log)
    try:

        def read(to: str) -> dict:  # type: ignore[type-arg]
            return httpx.get(f"{url}/v1/jobs/{jobs[to]}").json()

        # The bad address fails with status 2, which no retry can fix: dead at once, with
        # attempts left, its error in words; the others complete with the loop's result.
        dead = eventually(lambda: (j := read("nobody"))["status"] == "dead" and j, poll_s=0.1,
                          what="the bad address's job dead")
        assert dead["attempt"] == 1
        assert [(e["attempt"], e["kind"], e["error"]) for e in dead["errors"]] == [
            (1, "failed", "not an address: nobody"),
        ]
        for to in ("ada@example.com", "grace@example.com"):  # one at a time, in claim order
            job = eventually(lambda: (j := read(to))["status"] not in ("pending", "running") and j,  # noqa: B023
                             poll_s=0.1, what=f"{to}'s job finished")
            assert job["status"] == "completed" and job["result"] == {"sent_to": to}, job
            assert job["attempt"] == 1 and job["errors"] == []
        assert proc.poll() is None, log.read_text()  # still serving
    finally:
        stop_loop(proc)


def test_the_curl_worker_retries_a_failure_of_any_other_status(live_server: LiveServer, tmp_path: Path) -> None:
    # The README's handle fails only for good (status 2); a handle of one's own that fails
    # with status 1 has its job retried after the backoff (about a second), and dead once its
    # attempts are used up, each error in words.
    url = live_server.url
    job = httpx.post(f"{url}/v1/jobs", json={"queue": "email", "type": "email.welcome",
                                             "max_attempts": 2}).json()["id"]
    log = tmp_path / "worker.log"
    proc = start_loop(url, log, handle='handle() { echo "mail server busy" >&2; return 1; }')
    try:
        dead = eventually(lambda: (j := httpx.get(f"{url}/v1/jobs/{job}").json())["status"] == "dead" and j,
                          poll_s=0.1, what="the job dead after its two attempts")
        assert [(e["attempt"], e["kind"], e["error"]) for e in dead["errors"]] == [
            (1, "failed", "mail server busy"),
            (2, "failed", "mail server busy"),
        ]
        assert proc.poll() is None, log.read_text()
    finally:
        stop_loop(proc)


def test_the_curl_worker_pauses_when_the_service_is_down_or_answers_an_error(
    live_server: LiveServer, tmp_path: Path
) -> None:
    # Down: a port nothing listens on (curl exits 7). An error: the service answers 404 to
    # every call under a path it does not have.
    cases = {
        f"http://127.0.0.1:{free_port()}": "curl exit 7, HTTP 000",
        f"{live_server.url}/nothing": "curl exit 0, HTTP 404",
    }
    for url, status in cases.items():
        log = tmp_path / "worker.log"
        proc = start_loop(url, log)
        try:
            eventually(lambda: "pausing" in log.read_text(), poll_s=0.1,  # noqa: B023 - used at once
                       what="the loop saying it pauses")
            # The time is the test: a spinning loop would write hundreds of lines meanwhile.
            time.sleep(2)
            assert proc.poll() is None, log.read_text()  # it waits, it does not exit
        finally:
            stop_loop(proc)
        lines = log.read_text().splitlines()
        assert 1 <= len(lines) <= 2, lines
        assert all(status in line and "pausing" in line for line in lines), lines


# --- recurring jobs: the curl and the command line make the same schedule ---------------------


def test_the_schedule_examples_make_the_same_schedule(live_server: LiveServer, tmp_path: Path) -> None:
    """The README's PUT and its `jobq schedules set` equivalent: the same schedule, payload
    included (`set` is a whole replace; the CLI example once dropped the payload), and the
    CLI run over the PUT's schedule says what it replaced, as the README quotes it."""
    text = README.read_text()
    start = text.index("\n## Recurring jobs\n")
    blocks = re.findall(r"^```sh\n(.*?)^```", text[start:text.find("\n## ", start + 1)], re.S | re.M)
    put = blocks[0].split("\n#", 1)[0]  # the PUT, up to its answer's comment
    assert put.startswith("curl -sS -XPUT $JOBQ/v1/schedules/nightly-report"), put
    cli = next(b for b in blocks if b.startswith("jobq schedules set "))
    env = {k: v for k, v in os.environ.items() if k not in ("JOBQ_URL", "JOBQ_TOKEN")}
    env.update(JOBQ=live_server.url, JOBQ_URL=live_server.url, ADMIN="", COLUMNS="200",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    schedule_url = f"{live_server.url}/v1/schedules/nightly-report"

    def run(script: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (done.stdout, done.stderr)
        return done

    def template() -> dict[str, object]:
        got = httpx.get(schedule_url)
        assert got.status_code == 200, got.text
        return {k: v for k, v in got.json().items() if not k.endswith("_at") and k != "last_job_id"}

    run(put)
    by_curl = template()
    assert by_curl["job"]["payload"] == {"format": "pdf"}, by_curl  # type: ignore[index]
    replaced = run(cli)
    said = ('jobq: replaced schedule nightly-report (was: cron "0 2 * * *" in Europe/Berlin, '
            'queue reports, type report.nightly, payload {"format": "pdf"})')
    assert said in replaced.stderr.splitlines(), replaced.stderr
    assert " ".join(said.split()) in " ".join(text.split()), "the README quotes the line as printed"
    assert template() == by_curl

    assert httpx.delete(schedule_url).status_code == 204
    created = run(cli)
    assert "replaced" not in created.stderr, created.stderr
    assert template() == by_curl
