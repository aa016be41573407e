"""The operator and producer commands, run as a user would against a real service."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx

from tests.conftest import ROOT, LiveServer


def jobq(server: LiveServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "JOBQ_URL": server.url, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "jobq.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


def test_enqueue_inspect_cancel_retry_and_dead_letters(live_server: LiveServer) -> None:
    out = jobq(live_server, "enqueue", "email.welcome", "--payload", '{"to": "ada"}',
               "--queue", "mail", "--json")
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)
    assert job["type"] == "email.welcome" and job["payload"] == {"to": "ada"}

    shown = json.loads(jobq(live_server, "job", job["id"], "--json").stdout)
    assert shown["id"] == job["id"] and shown["status"] == "pending"

    table = jobq(live_server, "queues")
    assert table.returncode == 0 and "mail" in table.stdout

    cancelled = json.loads(jobq(live_server, "cancel", job["id"], "--json").stdout)
    assert cancelled["status"] == "cancelled"
    again = jobq(live_server, "cancel", job["id"])
    assert again.returncode == 1 and "invalid_state" in again.stdout + again.stderr
    retried = json.loads(jobq(live_server, "retry", job["id"], "--json").stdout)
    assert retried["status"] == "pending" and retried["attempt"] == 0

    # Make it dead through the worker API, then replay and purge from the terminal.
    lease = httpx.post(live_server.url + "/v1/leases",
                       json={"worker_id": "w", "queues": ["mail"]}).json()["leases"][0]
    httpx.post(f"{live_server.url}/v1/leases/{lease['lease_id']}/fail",
               json={"error": "bad address", "retry": False})
    dead = json.loads(jobq(live_server, "dead", "list", "--queue", "mail", "--json").stdout)
    assert [j["id"] for j in dead["jobs"]] == [job["id"]]
    assert json.loads(jobq(live_server, "dead", "replay", "--queue", "mail", "--json").stdout) == {
        "replayed": 1}
    listed = json.loads(jobq(live_server, "jobs", "--queue", "mail", "--json").stdout)
    assert listed["jobs"][0]["status"] == "pending"
    assert len(listed["jobs"][0]["errors"]) == 1


def test_queue_settings_and_errors(live_server: LiveServer) -> None:
    out = jobq(live_server, "queues", "set", "bulk", "--max-depth", "1", "--paused", "--json")
    assert out.returncode == 0, out.stderr
    settings = json.loads(out.stdout)["settings"]
    assert settings["max_depth"] == 1 and settings["paused"] is True
    assert jobq(live_server, "enqueue", "t", "--queue", "bulk").returncode == 0
    full = jobq(live_server, "enqueue", "t", "--queue", "bulk")
    assert full.returncode == 1 and "queue_full" in full.stdout + full.stderr
    cleared = json.loads(jobq(live_server, "queues", "set", "bulk", "--clear", "max_depth",
                              "--json").stdout)
    assert cleared["settings"]["max_depth"] is None
    bad = jobq(live_server, "enqueue", "t", "--payload", "not json")
    assert bad.returncode == 2
    missing = jobq(live_server, "job", "424242")
    assert missing.returncode == 1 and "not_found" in missing.stdout + missing.stderr


def test_queues_pages_through_every_queue_and_searches_by_prefix(live_server: LiveServer) -> None:
    """Issue 24: the service answers a page at a time; the command still lists every queue
    (1,200: two pages of the service's largest), or --limit of them, or those of --prefix."""
    import psycopg

    with psycopg.connect(live_server.database_url) as conn:
        conn.execute("INSERT INTO queues (name) SELECT 'q' || lpad(i::text, 4, '0') FROM generate_series(1, 1200) i")
        conn.execute("INSERT INTO queues (name) SELECT 'tenant-' || i FROM generate_series(1, 3) i")
    every = json.loads(jobq(live_server, "queues", "--json").stdout)
    names = [q["name"] for q in every["queues"]]
    assert len(names) == 1203 and names == sorted(names) and every["next_cursor"] is None

    some = jobq(live_server, "queues", "--limit", "5")
    assert some.returncode == 0, some.stderr
    assert "q0005" in some.stdout and "q0006" not in some.stdout
    assert "5 shown; more with --limit or --cursor" in some.stderr
    cursor = some.stderr.rsplit("--cursor ", 1)[1].strip(" )\n")
    rest = json.loads(jobq(live_server, "queues", "--limit", "2", "--cursor", cursor, "--json").stdout)
    assert [q["name"] for q in rest["queues"]] == ["q0006", "q0007"]

    found = json.loads(jobq(live_server, "queues", "--prefix", "tenant-", "--json").stdout)
    assert [q["name"] for q in found["queues"]] == ["tenant-1", "tenant-2", "tenant-3"]
    table = jobq(live_server, "queues", "--prefix", "tenant-")
    assert "tenant-2" in table.stdout and "q0001" not in table.stdout and table.stderr == ""
