"""The command groups that list when given no subcommand (``jobq dead``, ``queues``,
``schedules``, ``topics``) take the listing's options. Given before a subcommand they used to
be dropped without a word: ``jobq dead --url X --limit 5 purge --yes`` purged every dead job
on the default service. Now each such option is refused in one line (exit 2, nothing done),
naming it and where it goes; after the subcommand it works, and JOBQ_URL / JOBQ_TOKEN from
the environment are never refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT, LiveServer

ADMIN = "group-options-admin-token-0123456789"
NOWHERE = "http://127.0.0.1:9"  # nothing listens: a command that went there would fail


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    # With a token required, the tests also show that JOBQ_TOKEN reaches every subcommand.
    live = LiveServer(database_url, env={"JOBQ_ADMIN_TOKEN": ADMIN})
    live.start()
    yield live
    live.stop()


def jobq(server: LiveServer, *args: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    """The real command, with JOBQ_URL (``url`` or the server's) and JOBQ_TOKEN set."""
    env = {k: v for k, v in os.environ.items() if k not in ("JOBQ_URL", "JOBQ_TOKEN")}
    env |= {"JOBQ_URL": url or server.url, "JOBQ_TOKEN": ADMIN, "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-m", "jobq.cli", *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in done.stdout + done.stderr, done.stderr
    return done


def refused(done: subprocess.CompletedProcess[str]) -> str:
    """The one line of a refusal: exit 2, nothing on stdout."""
    assert done.returncode == 2, done
    assert done.stdout == "", done.stdout
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def api(server: LiveServer, method: str, path: str, **kwargs: Any) -> httpx.Response:
    return httpx.request(method, server.url + path, headers={"Authorization": f"Bearer {ADMIN}"}, **kwargs)


def dead_ids(server: LiveServer) -> list[str]:
    r = api(server, "GET", "/v1/jobs", params={"status": "dead"})
    assert r.status_code == 200, r.text
    return sorted(j["id"] for j in r.json()["jobs"])


def make_dead(server: LiveServer, queue: str) -> str:
    job = api(server, "POST", "/v1/jobs", json={"type": "t", "queue": queue}).json()
    leases = api(server, "POST", "/v1/leases", json={"worker_id": "w", "queues": [queue]}).json()["leases"]
    assert [lease["job"]["id"] for lease in leases] == [job["id"]]
    r = api(server, "POST", f"/v1/leases/{leases[0]['lease_id']}/fail", json={"error": "x", "retry": False})
    assert r.json()["status"] == "dead", r.text
    return str(job["id"])


def test_dead_refuses_listing_options_before_purge_or_replay(server: LiveServer) -> None:
    for queue in ("a", "a", "b"):
        make_dead(server, queue)
    before = dead_ids(server)
    assert len(before) == 3

    # The reviewer's two cases: another service, and a limit that would have been dropped.
    line = refused(jobq(server, "dead", "--url", NOWHERE, "--limit", "3", "purge", "--queue", "x", "--yes"))
    assert line == "jobq: --limit, --url must go after the subcommand: jobq dead purge --limit ... --url ..."
    line = refused(jobq(server, "dead", "--limit", "1", "purge", "--yes"))
    assert line == "jobq: --limit must go after the subcommand: jobq dead purge --limit ..."
    line = refused(jobq(server, "dead", "--token", ADMIN, "replay", "--queue", "a"))
    assert line == "jobq: --token must go after the subcommand: jobq dead replay --token ..."
    line = refused(jobq(server, "dead", "--queue", "b", "--type", "t", "purge", "--yes"))
    assert line == "jobq: --queue, --type must go after the subcommand: jobq dead purge --queue ... --type ..."
    # Options only the listing has: moving them would not help, and the line says so.
    line = refused(jobq(server, "dead", "--all", "--cursor", "5", "purge", "--yes"))
    assert line == (
        "jobq: jobq dead purge takes no --all, --cursor: they are for the listing alone (jobq dead --all --cursor ...)"
    )
    # --json before the subcommand: refused too, and the refusal is the JSON it asked for.
    error = json.loads(refused(jobq(server, "dead", "--json", "purge", "--yes")))
    assert error == {"error": "--json must go after the subcommand: jobq dead purge --json"}
    assert dead_ids(server) == before  # nothing purged, nothing replayed

    # After the subcommand the same options work; --url after beats a wrong JOBQ_URL.
    assert json.loads(ok(jobq(server, "dead", "purge", "--limit", "1", "--yes", "--json"))) == {"purged": 1}
    assert len(dead_ids(server)) == 2
    replayed = jobq(server, "dead", "replay", "--queue", "a", "--url", server.url, "--token", ADMIN, url=NOWHERE)
    assert ok(replayed).strip() == "replayed 1"  # purge took the oldest: one of a's two
    listed = json.loads(ok(jobq(server, "dead", "list", "--queue", "b", "--json")))
    assert [j["id"] for j in listed["jobs"]] == dead_ids(server)  # b's alone is left
    # The group's own listing still takes them all.
    assert json.loads(ok(jobq(server, "dead", "--queue", "b", "--limit", "1", "--json")))["jobs"] == listed["jobs"]


def test_queues_schedules_and_topics_refuse_their_options_before_a_subcommand(server: LiveServer) -> None:
    cases = [
        (
            ["queues", "--url", NOWHERE, "set", "q", "--max-depth", "5"],
            "jobq: --url must go after the subcommand: jobq queues set --url ...",
        ),
        (
            ["schedules", "--token", ADMIN, "set", "s", "--cron", "@hourly", "--type", "t"],
            "jobq: --token must go after the subcommand: jobq schedules set --token ...",
        ),
        (
            ["topics", "--url", NOWHERE, "subscribe", "news", "q"],
            "jobq: --url must go after the subcommand: jobq topics subscribe --url ...",
        ),
    ]
    for args, message in cases:
        assert refused(jobq(server, *args)) == message
    for group, sub in (("queues", "set"), ("schedules", "list"), ("topics", "list")):
        error = json.loads(refused(jobq(server, group, "--json", sub, *(["q"] if sub == "set" else []))))
        assert error == {"error": f"--json must go after the subcommand: jobq {group} {sub} --json"}
    # Nothing was done: no queue q, no schedule, no topic.
    assert api(server, "GET", "/v1/queues/q").status_code == 404
    assert api(server, "GET", "/v1/schedules").json()["schedules"] == []
    assert api(server, "GET", "/v1/topics").json()["topics"] == []

    # The same options after the subcommand work (JOBQ_URL and JOBQ_TOKEN from the environment
    # included, for the commands that do not give --url or --token).
    q = json.loads(
        ok(jobq(server, "queues", "set", "q", "--max-depth", "5", "--url", server.url, "--json", url=NOWHERE))
    )
    assert q["settings"]["max_depth"] == 5
    s = json.loads(
        ok(jobq(server, "schedules", "set", "s", "--cron", "@hourly", "--type", "t", "--token", ADMIN, "--json"))
    )
    assert s["name"] == "s"
    sub = json.loads(ok(jobq(server, "topics", "subscribe", "news", "q", "--json")))
    assert (sub["topic"], sub["queue"]) == ("news", "q")
    assert [t["name"] for t in json.loads(ok(jobq(server, "topics", "--json")))["topics"]] == ["news"]
    assert [x["name"] for x in json.loads(ok(jobq(server, "schedules", "--json")))["schedules"]] == ["s"]

    # ``jobq tokens`` has no listing of its own, so click refuses any option there already.
    done = jobq(server, "tokens", "--json", "list")
    assert done.returncode == 2 and "No such option: --json" in done.stderr, done
