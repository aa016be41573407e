"""What the operator commands show, run as a user would against a real service: tables that
fit 80 columns, listings that page past the service's 1,000-row pages, one job in full, the
dead-letter queue's default and its guarded purge, every queue setting, and help text
without placeholders."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, LiveServer
from tests.terminal import run_at_terminal


def jobq(
    server: LiveServer | None, *args: str, columns: int = 80, stdin: int | None = subprocess.DEVNULL,
    tty: bool = False,
) -> subprocess.CompletedProcess[str]:
    """``jobq ARGS`` with stdout into a pipe, or with ``tty`` on a terminal ``columns`` wide."""
    env = {k: v for k, v in os.environ.items() if k not in ("JOBQ_URL", "JOBQ_TOKEN")}
    env["COLUMNS"] = str(columns)
    if server is not None:
        env["JOBQ_URL"] = server.url
    if tty:
        done = run_at_terminal([sys.executable, "-m", "jobq.cli", *args], env=env, cwd=ROOT,
                               columns=columns)
        assert "Traceback" not in done.stdout + done.stderr, done.stderr
        return done
    done = subprocess.run(
        [sys.executable, "-m", "jobq.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def one_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    assert done.returncode == code, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def enqueue(server: LiveServer, type_: str = "t", **body: Any) -> dict[str, Any]:
    r = httpx.post(server.url + "/v1/jobs", json={"type": type_, **body})
    assert r.status_code == 201, r.text
    return r.json()


def claim(server: LiveServer, queue: str, worker: str = "w") -> dict[str, Any]:
    r = httpx.post(server.url + "/v1/leases", json={"worker_id": worker, "queues": [queue]})
    leases = r.json()["leases"]
    assert len(leases) == 1, r.text
    return leases[0]


def kill(server: LiveServer, queue: str, error: str) -> dict[str, Any]:
    """Claim the queue's job and fail it for good: it is dead."""
    lease = claim(server, queue)
    r = httpx.post(f"{server.url}/v1/leases/{lease['lease_id']}/fail", json={"error": error, "retry": False})
    assert r.json()["status"] == "dead", r.text
    return r.json()


def get(server: LiveServer, job_id: str) -> dict[str, Any]:
    return httpx.get(f"{server.url}/v1/jobs/{job_id}").json()


def assert_fits(text: str, width: int = 80) -> None:
    too_wide = [line for line in text.splitlines() if len(line) > width]
    assert not too_wide, "\n".join(too_wide)


LONG_QUEUE = "tenant-alpha.notifications.high-priority-transactional"
LONG_TYPE = "email.transactional.password-reset-reminder-with-a-long-name.v2"


def test_jobs_fit_80_columns_with_whole_ids_statuses_attempts_and_ages(
    live_server: LiveServer,
) -> None:
    short = enqueue(live_server, "ping", queue="mail")
    long = enqueue(live_server, LONG_TYPE, queue=LONG_QUEUE, max_attempts=10000)
    out = ok(jobq(live_server, "jobs", tty=True))
    assert_fits(out)
    rows = {line.split()[0]: line for line in out.splitlines() if line.split() and line.split()[0].isdigit()}
    assert set(rows) == {short["id"], long["id"]}, out
    # The short row is whole; the long one cuts only its free text, with an ellipsis.
    assert re.fullmatch(rf"\s*{short['id']}\s+mail\s+ping\s+pending\s+0/25\s+\d+s", rows[short["id"]])
    cut = rows[long["id"]]
    assert re.search(r"pending\s+0/10000\s+\d+s$", cut), cut
    assert "…" in cut and LONG_TYPE not in cut
    assert "T" not in cut.split("pending")[1], "no timestamps in the table"
    # Wider terminals show everything.
    wide = ok(jobq(live_server, "jobs", columns=200, tty=True))
    assert LONG_TYPE in wide and LONG_QUEUE in wide and "…" not in wide
    # So does --wide on a narrow one, and a pipe, whatever COLUMNS says: `jobq jobs | grep`
    # must find what a cut would hide.
    for whole in (jobq(live_server, "jobs", "--wide", tty=True), jobq(live_server, "jobs")):
        assert LONG_TYPE in ok(whole) and LONG_QUEUE in whole.stdout and "…" not in whole.stdout


def test_queues_whose_names_differ_past_80_columns_are_told_apart_in_a_pipe(
    live_server: LiveServer,
) -> None:
    """`jobq queues | cat` printed two identical rows `tenant-a.slo…`: not a terminal, so
    every name whole (with --wide at a terminal too), and the rows stay one line each."""
    names = [f"tenant-a.slow-lane.{'x' * 70}.{end}" for end in ("one", "two")]
    for name in names:
        enqueue(live_server, queue=name)
    for done in (jobq(live_server, "queues"), jobq(live_server, "queues", "--wide", tty=True)):
        rows = [line for line in ok(done).splitlines() if line.startswith("tenant-a.")]
        assert [row.split()[0] for row in rows] == names, done.stdout
        assert all(row.split()[1:3] == ["1", "0"] for row in rows), done.stdout
    cut = ok(jobq(live_server, "queues", tty=True))
    assert_fits(cut)
    assert names[0] not in cut and "…" in cut


def test_one_job_and_what_a_command_did_are_whole_in_a_pipe(live_server: LiveServer) -> None:
    """Not a terminal: `jobq job ID | cat` broke a payload's long string and the error in two
    at 80 columns, and `jobq queues delete` its own message mid-sentence, as the listings did
    before they printed whole. A pipe gets every value on its line, as `grep` needs it."""
    address = "someone.with.a.long.name@" + "a-very-long-subdomain." * 4 + "example.com"
    error = "SMTP said no: " + "the mailbox is over its quota and refuses new mail; " * 3
    queue = "tenant-a.notifications.transactional-mail-for-the-eu-region-primary"
    job = enqueue(live_server, queue=queue, payload={"to": address, "subject": "welcome " * 8})
    kill(live_server, queue, error)
    shown = ok(jobq(live_server, "job", job["id"]))
    assert f'"to": "{address}"' in shown, shown
    assert error.strip() in shown, shown
    # At a terminal the same job still fits it.
    assert_fits(ok(jobq(live_server, "job", job["id"], tty=True)))
    enqueue(live_server, queue=queue)
    done = ok(jobq(live_server, "queues", "delete", queue, "--purge", "--yes"))
    assert done == f"deleted queue {queue} (purged 2 jobs: 1 pending, 1 dead)\n", done


def test_jobs_follow_the_pages_past_1000(live_server: LiveServer) -> None:
    for start in (0, 1000):
        n = 1000 if start == 0 else 150
        r = httpx.post(
            live_server.url + "/v1/jobs/batch",
            timeout=60,
            json={"jobs": [{"type": "bulk", "queue": "bulk", "payload": {"n": start + i}} for i in range(n)]},
        )
        assert r.status_code == 201, r.text
    every = json.loads(ok(jobq(live_server, "jobs", "--all", "--json")))
    ids = [j["id"] for j in every["jobs"]]
    assert len(ids) == 1150 and len(set(ids)) == 1150 and every["next_cursor"] is None
    assert ids == sorted(ids, key=int, reverse=True)  # newest first, across pages

    first = json.loads(ok(jobq(live_server, "jobs", "--queue", "bulk", "--limit", "1100", "--json")))
    assert [j["id"] for j in first["jobs"]] == ids[:1100] and first["next_cursor"]
    rest = json.loads(
        ok(jobq(live_server, "jobs", "--queue", "bulk", "--all", "--json", "--cursor", first["next_cursor"]))
    )
    assert [j["id"] for j in rest["jobs"]] == ids[1100:]

    default = jobq(live_server, "jobs")
    assert len([ln for ln in ok(default).splitlines() if "bulk" in ln]) == 100
    assert "100 shown; more with --limit, --all or --cursor" in default.stderr


def test_a_replayed_then_completed_job_shows_no_stale_error(live_server: LiveServer) -> None:
    job = enqueue(live_server, "email.welcome", queue="mail", payload={"to": "ada"})
    dead = kill(live_server, "mail", "smtp [bold]refused[/bold]\nstack line")
    assert dead["last_error"] == "smtp [bold]refused[/bold]\nstack line"
    shown = ok(jobq(live_server, "job", job["id"]))
    assert re.search(r"last error\s+smtp \[bold\]refused\[/bold\]", shown), shown
    assert re.search(r"1\s+failed\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ\s+smtp \[bold\]refused", shown)

    ok(jobq(live_server, "dead", "replay", "--queue", "mail"))
    lease = claim(live_server, "mail", worker="worker-7")
    r = httpx.post(f"{live_server.url}/v1/leases/{lease['lease_id']}/ack", json={"result": {"sent": True}})
    done = r.json()
    # The service: completed, no current error, the history kept.
    assert done["status"] == "completed" and done["last_error"] is None, done
    assert [e["error"] for e in done["errors"]] == ["smtp [bold]refused[/bold]\nstack line"]
    assert get(live_server, job["id"]) == done

    shown = ok(jobq(live_server, "job", job["id"], columns=100))
    assert "last error" not in shown, shown
    for label, value in [
        ("status", "completed"),
        ("worker", "worker-7"),
        ("attempt", "1 of 25"),
        ("payload", '{"to": "ada"}'),
        ("result", '{"sent": true}'),
    ]:
        assert re.search(rf"^{label}\s+{re.escape(value)}", shown, re.M), (label, shown)
    for label in ("created", "visible", "finished"):
        assert re.search(rf"^{label}\s+\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\dZ \(\d+s ago\)", shown, re.M), (label, shown)
    assert "errors (1)" in shown and "stack line" not in shown  # the first line of each
    assert json.loads(ok(jobq(live_server, "job", job["id"], "--json"))) == done


def test_a_batch_ack_also_clears_the_last_error(live_server: LiveServer) -> None:
    enqueue(live_server, queue="q")
    lease = claim(live_server, "q")
    httpx.post(f"{live_server.url}/v1/leases/{lease['lease_id']}/fail", json={"error": "flaky", "retry_in_ms": 0})
    assert get(live_server, lease["job"]["id"])["last_error"] == "flaky"  # failed: current
    lease = claim(live_server, "q")
    r = httpx.post(f"{live_server.url}/v1/leases/ack", json={"acks": [{"lease_id": lease["lease_id"]}]})
    assert r.json()["results"][0]["ok"] is True, r.text
    stored = get(live_server, lease["job"]["id"])
    assert stored["status"] == "completed" and stored["last_error"] is None
    assert [e["error"] for e in stored["errors"]] == ["flaky"]


def test_dead_alone_lists_the_dead_jobs(live_server: LiveServer) -> None:
    job = enqueue(live_server, "report", queue="reports")
    enqueue(live_server, "alive", queue="reports")
    kill(live_server, "reports", "no data")
    alone = json.loads(ok(jobq(live_server, "dead", "--json")))
    listed = json.loads(ok(jobq(live_server, "dead", "list", "--json")))
    assert [j["id"] for j in alone["jobs"]] == [j["id"] for j in listed["jobs"]] == [job["id"]]
    table = ok(jobq(live_server, "dead"))
    assert_fits(table)
    assert re.search(rf"{job['id']}\s+reports\s+report\s+dead\s+1/25", table), table
    assert "alive" not in table


def test_dead_purge_without_a_filter_needs_yes_or_a_yes_at_the_terminal(
    live_server: LiveServer,
) -> None:
    for queue in ("a", "b", "c"):
        enqueue(live_server, queue=queue)
        kill(live_server, queue, "x")

    def dead_count() -> int:
        return len(json.loads(ok(jobq(live_server, "dead", "--json")))["jobs"])

    line = one_line(jobq(live_server, "dead", "purge"), 2)
    assert "pass --yes" in line and "every dead job" in line, line
    line = one_line(jobq(live_server, "dead", "purge", "--limit", "1"), 2)
    assert "this would delete the oldest dead job in every queue" in line, line
    line = one_line(jobq(live_server, "dead", "purge", "--limit", "2"), 2)
    assert "this would delete the 2 oldest dead jobs in every queue" in line, line
    error = json.loads(one_line(jobq(live_server, "dead", "purge", "--json"), 2))
    assert "pass --yes" in error["error"]
    assert dead_count() == 3

    def at_terminal(answer: str) -> subprocess.CompletedProcess[str]:
        main, other = pty.openpty()
        try:
            os.write(main, answer.encode())
            return jobq(live_server, "dead", "purge", stdin=other)
        finally:
            os.close(main)
            os.close(other)

    declined = at_terminal("n\n")
    assert declined.returncode == 1 and "Delete every dead job in every queue?" in declined.stderr
    assert "nothing purged" in declined.stderr and dead_count() == 3

    line = one_line(jobq(live_server, "dead", "--queue", "a", "purge", "--yes"), 2)
    assert "go after the subcommand: jobq dead purge --queue" in line, line  # not a purge of all
    assert dead_count() == 3
    assert ok(jobq(live_server, "dead", "purge", "--queue", "a")).strip() == "purged 1"  # a filter
    assert dead_count() == 2
    accepted = at_terminal("y\n")
    assert ok(accepted).strip() == "purged 2"
    assert dead_count() == 0

    enqueue(live_server, queue="d")
    kill(live_server, "d", "x")
    assert json.loads(ok(jobq(live_server, "dead", "purge", "--yes", "--json"))) == {"purged": 1}


def test_queues_set_takes_every_setting_and_shows_the_queue(live_server: LiveServer) -> None:
    args = [
        "--max-depth",
        "500",
        "--paused",
        "--lease-ms",
        "60000",
        "--max-attempts",
        "7",
        "--backoff-base-ms",
        "2000",
        "--backoff-max-ms",
        "600000",
        "--max-lease-expiries",
        "3",
        "--aging-ms",
        "30000",
        "--max-running",
        "4",
        "--retention-ms",
        "86400000",
        "--dead-retention-ms",
        "172800000",
        "--rate-limit",
        "10/1s",
        "--rate-key",
        "payload.tenant",
        "--enqueue-rate",
        "50/1000:100",
        "--soft-depth",
        "300",
        "--soft-lag-ms",
        "60000",
    ]
    settings = json.loads(ok(jobq(live_server, "queues", "set", "reports", *args, "--json")))["settings"]
    assert settings == {
        "max_depth": 500,
        "paused": True,
        "lease_ms": 60000,
        "max_attempts": 7,
        "backoff_base_ms": 2000,
        "backoff_max_ms": 600000,
        "max_lease_expiries": 3,
        "aging_ms": 30000,
        "max_running": 4,
        "retention_ms": 86400000,
        "dead_retention_ms": 172800000,
        "rate_limit": {"jobs": 10, "per_ms": 1000, "key": "payload.tenant"},
        "enqueue_rate": {"jobs": 50, "per_ms": 1000, "burst": 100},
        "soft_depth": 300,
        "soft_lag_ms": 60000,
    }
    assert httpx.get(live_server.url + "/v1/queues/reports").json()["settings"] == settings

    # At a terminal it fits; into a pipe each value is whole on its line.
    table = ok(jobq(live_server, "queues", "set", "reports", "--resumed", "--clear", "max_running", tty=True))
    assert_fits(table)
    whole = ok(jobq(live_server, "queues", "set", "reports"))
    assert re.search(r"counts\s+pending 0, running 0, failed 0, completed 0, dead 0, cancelled 0\n", whole), whole
    for pattern in [
        r"queue\s+reports",
        r"paused\s+no",
        r"max_running\s+no limit",
        r"dead_retention_ms\s+172800000 \(2d\)",
        r"retention_ms\s+86400000 \(1d\)",
        r"max_attempts\s+7",
        r"counts\s+pending 0, running 0",
        r"rate_limit\s+10 per 1s, per payload.tenant",
        r"enqueue_rate\s+50 per 1s, burst 100",
        r"rate use\s+0/10 in the window, keys 0 \(0 at the limit\)",
    ]:
        assert re.search(pattern, table), (pattern, table)

    enqueue(live_server, queue="reports")
    listed = ok(jobq(live_server, "queues"))
    assert_fits(listed)
    # The rate column: the limit's use now (none of the job's tenant yet).
    assert re.search(r"^reports\s+1\s+0\s+0\s+0\s+0\s+0\s+\d+s\s+0/10\s*$", listed, re.M), listed
    ok(jobq(live_server, "queues", "set", "reports", "--clear", "rate_limit"))
    listed = ok(jobq(live_server, "queues"))
    assert re.search(r"^reports\s+1\s+0\s+0\s+0\s+0\s+0\s+\d+s\s*$", listed, re.M), listed
    assert "rate" not in listed.splitlines()[0]


def test_queues_set_errors_name_the_setting_in_words(live_server: LiveServer) -> None:
    # Refused by the service: exit 1, as for any of its answers.
    line = one_line(jobq(live_server, "queues", "set", "q", "--max-attempts", "20000"), 1)
    assert line.startswith("jobq: refused: --max-attempts: ") and "10000" in line, line
    line = one_line(jobq(live_server, "queues", "set", "q", "--clear", "lease_ms"), 1)
    assert line == "jobq: refused: --lease-ms: lease_ms cannot be null", line
    error = json.loads(one_line(jobq(live_server, "queues", "set", "q", "--max-running", "2000000", "--json"), 1))
    assert error["error"].startswith("refused: --max-running: ") and error["status"] == 422
    line = one_line(jobq(live_server, "queues", "set", "q", "--lease-ms", "5"), 2)
    assert "--lease-ms" in line and "100" in line, line  # checked before it is sent


def test_schedules_list_fits_80_columns(live_server: LiveServer) -> None:
    ok(
        jobq(
            live_server,
            "schedules",
            "set",
            "nightly-backup-of-the-customer-database-in-eu",
            "--cron",
            "0 30 3 * * 1-5",
            "--type",
            "backup.database.customers.full",
            "--queue",
            "maintenance-long-running",
            "--timezone",
            "Europe/Amsterdam",
        )
    )
    ok(jobq(live_server, "schedules", "set", "tick", "--cron", "@hourly", "--type", "tick"))
    out = ok(jobq(live_server, "schedules", tty=True))
    assert_fits(out)
    assert re.search(r"^tick\s+@hourly\s+default:tick\s+yes\s+in \d+[smh]\s*$", out, re.M), out
    assert "nightly-backup" in out and "0 30 3 * * 1-5" in out and "…" in out
    assert out == ok(jobq(live_server, "schedules", "list", tty=True))
    whole = ok(jobq(live_server, "schedules"))
    assert "nightly-backup-of-the-customer-database-in-eu" in whole and "…" not in whole
    shown = ok(jobq(live_server, "schedules", "get", "nightly-backup-of-the-customer-database-in-eu"))
    for pattern in [
        r"timezone\s+Europe/Amsterdam",
        r"queue\s+maintenance-long-running",
        r"type\s+backup\.database\.customers\.full",
        r"next fire\s+\d{4}-.*\(in ",
    ]:
        assert re.search(pattern, shown), (pattern, shown)


def _commands() -> list[list[str]]:
    """Every command path of ``jobq``, from the command tree itself."""
    import typer

    from jobq import cli

    paths: list[list[str]] = []

    def walk(command: Any, path: list[str]) -> None:
        paths.append(path)
        for name, sub in getattr(command, "commands", {}).items():
            walk(sub, [*path, name])

    walk(typer.main.get_command(cli.app), [])
    return paths


def test_help_has_no_placeholders() -> None:
    paths = _commands()
    assert ["dead", "purge"] in paths and ["queues", "set"] in paths and len(paths) > 20
    with ThreadPoolExecutor(4) as pool:
        helps = list(pool.map(lambda p: jobq(None, *p, "--help", columns=100), paths))
    for path, done in zip(paths, helps, strict=True):
        text = ok(done)
        assert "Usage: jobq" in text, path
        assert not re.search(r"\{[A-Za-z_][^}]*\}", text), (path, text)
        assert not re.search(r"<[a-z][a-z_ \[\]]*>", text), (path, text)
        assert "[default: None]" not in text, (path, text)
    usage = ok(jobq(None, "job", "--help"))
    assert "Usage: jobq job [OPTIONS] JOB_ID" in usage


@pytest.mark.parametrize(
    "args", [["dead"], ["dead", "list"], ["jobs"], ["job", "1"], ["queues", "set", "q"], ["schedules"]]
)
def test_json_errors_from_the_new_commands(args: list[str]) -> None:
    done = jobq(None, *args, "--json", "--url", "http://127.0.0.1:9")
    error = json.loads(one_line(done, 1))
    assert error["error"].startswith("cannot reach http://127.0.0.1:9"), error
    assert done.stdout == ""


def test_queues_delete_asks_refuses_with_counts_and_purges(live_server: LiveServer) -> None:
    def exists(name: str) -> bool:
        return httpx.get(f"{live_server.url}/v1/queues/{name}").status_code == 200

    def at_terminal(answer: str, *args: str) -> subprocess.CompletedProcess[str]:
        main, other = pty.openpty()
        try:
            os.write(main, answer.encode())
            return jobq(live_server, "queues", "delete", *args, stdin=other)
        finally:
            os.close(main)
            os.close(other)

    enqueue(live_server, queue="typo")
    lease = claim(live_server, "typo")
    httpx.post(f"{live_server.url}/v1/leases/{lease['lease_id']}/ack", json={})
    # No terminal, no --yes: one line, nothing deleted.
    line = one_line(jobq(live_server, "queues", "delete", "typo"), 2)
    assert "pass --yes" in line and "typo" in line, line
    assert exists("typo")
    declined = at_terminal("n\n", "typo")
    assert declined.returncode == 1 and "Delete queue 'typo' with its 1 completed job?" in declined.stderr
    assert "nothing deleted" in declined.stderr and exists("typo")
    accepted = at_terminal("y\n", "typo")
    assert ok(accepted).strip() == "deleted queue typo (deleted 1 completed job)"
    assert not exists("typo")

    for _ in range(3):
        enqueue(live_server, queue="busy")
    kill(live_server, "busy", "x")
    line = one_line(jobq(live_server, "queues", "delete", "busy", "--yes"), 1)
    assert "3 jobs: 2 pending, 1 dead" in line and "--purge" in line, line
    refused = json.loads(one_line(jobq(live_server, "queues", "delete", "busy", "--yes", "--json"), 1))
    assert refused["code"] == "queue_not_empty" and refused["counts"] == {"pending": 2, "dead": 1}
    assert exists("busy")
    done = json.loads(ok(jobq(live_server, "queues", "delete", "busy", "--purge", "--yes", "--json")))
    assert done == {"deleted": "busy", "purged": {"pending": 2, "dead": 1}, "finished": {}}
    assert not exists("busy")
    line = one_line(jobq(live_server, "queues", "delete", "busy", "--yes"), 1)
    assert "404" in line and "busy" in line, line


def test_queues_delete_refused_for_a_schedule_or_topic_says_the_command_to_run(live_server: LiveServer) -> None:
    """The refusal names what holds the queue and the command that frees it, as the
    service's own detail does in its words (purge=true) for HTTP callers."""
    ok(jobq(live_server, "schedules", "set", "nightly", "--cron", "@daily", "--type", "t", "--queue", "held"))
    ok(jobq(live_server, "topics", "subscribe", "orders.placed", "held"))
    line = one_line(jobq(live_server, "queues", "delete", "held", "--yes"), 1)
    assert "schedules nightly enqueue to it (`jobq schedules delete SCHEDULE`" in line, line
    assert "subscribed to topics orders.placed (`jobq topics unsubscribe TOPIC held`)" in line, line
    ok(jobq(live_server, "schedules", "delete", "nightly"))
    ok(jobq(live_server, "topics", "unsubscribe", "orders.placed", "held"))
    assert ok(jobq(live_server, "queues", "delete", "held", "--yes")) == "deleted queue held\n"
