"""GET /v1/workers, GET /v1/throughput and DELETE /v1/dead/{id}: what the dashboard reads
and does beyond the queue counts, through the public API."""

from __future__ import annotations

import httpx

from tests.conftest import make_settings, running_app
from tests.helpers import claim, enqueue, problem, validation


async def _lease(c: httpx.AsyncClient, queue: str, worker: str) -> dict:
    r = await c.post("/v1/leases", json={"worker_id": worker, "queues": [queue], "limit": 1})
    assert r.status_code == 200, r.text
    (lease,) = r.json()["leases"]
    return lease


async def test_workers_lists_running_counts_and_recent_finishers(client: httpx.AsyncClient) -> None:
    r = await client.get("/v1/workers")
    assert r.status_code == 200 and r.json() == {"window_s": 300, "workers": []}
    for _ in range(3):
        await enqueue(client, queue="mail")
    await enqueue(client, queue="img")
    await _lease(client, "mail", "w-a")
    await _lease(client, "mail", "w-a")
    await _lease(client, "img", "w-a")
    done = await _lease(client, "mail", "w-b")
    assert (await client.post(f"/v1/leases/{done['lease_id']}/ack")).status_code == 200

    workers = {w["worker_id"]: w for w in (await client.get("/v1/workers")).json()["workers"]}
    assert workers.keys() == {"w-a", "w-b"}
    assert workers["w-a"]["running"] == 3 and workers["w-a"]["queues"] == ["img", "mail"]
    # w-b runs nothing now but finished a job within the window: still seen
    assert workers["w-b"]["running"] == 0 and workers["w-b"]["queues"] == ["mail"]
    assert workers["w-b"]["last_seen_at"].endswith("Z")


async def test_workers_window_is_bounded(client: httpx.AsyncClient) -> None:
    validation(await client.get("/v1/workers", params={"window_s": 0}), "query", "window_s")
    validation(await client.get("/v1/workers", params={"window_s": 3601}), "query", "window_s")


async def test_throughput_counts_finished_jobs_in_the_current_minute(client: httpx.AsyncClient) -> None:
    for _ in range(3):
        await enqueue(client, queue="mail")
    await enqueue(client, queue="mail", max_attempts=1)
    await enqueue(client, queue="idle")
    for _ in range(3):
        lease = await _lease(client, "mail", "w")
        if lease["job"]["max_attempts"] == 1:
            r = await client.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": "boom"})
        else:
            r = await client.post(f"/v1/leases/{lease['lease_id']}/ack")
        assert r.status_code == 200, r.text

    r = await client.get("/v1/throughput", params={"minutes": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["minutes"] == 5
    by_name = {q["name"]: q for q in body["queues"]}
    assert by_name["idle"] == {"name": "idle", "completed": [0] * 5, "dead": [0] * 5}
    mail = by_name["mail"]
    # The jobs finished within the last second or so: this minute's entry, or (across a
    # minute's turn) the one before it.
    assert sum(mail["completed"][-2:]) + sum(mail["dead"][-2:]) == 3
    assert len(mail["completed"]) == len(mail["dead"]) == 5
    # what the queue counts say finished matches what the chart says
    counts = (await client.get("/v1/queues/mail")).json()["counts"]
    assert sum(mail["completed"]) == counts["completed"] and sum(mail["dead"]) == counts["dead"]


async def test_throughput_window_is_bounded(client: httpx.AsyncClient) -> None:
    validation(await client.get("/v1/throughput", params={"minutes": 0}), "query", "minutes")
    validation(await client.get("/v1/throughput", params={"minutes": 61}), "query", "minutes")


async def test_purge_one_dead_job(client: httpx.AsyncClient) -> None:
    dead = await enqueue(client, queue="q", max_attempts=1)
    other = await enqueue(client, queue="q", max_attempts=1)
    for _ in range(2):
        (lease,) = await claim(client, "q")
        r = await client.post(f"/v1/leases/{lease['lease_id']}/fail", json={"error": "boom"})
        assert r.json()["status"] == "dead"
    waiting = await enqueue(client, queue="q")

    r = await client.delete(f"/v1/dead/{dead['id']}")
    assert r.status_code == 204 and r.content == b""
    problem(await client.get(f"/v1/jobs/{dead['id']}"), 404, "not_found")
    assert (await client.get(f"/v1/jobs/{other['id']}")).json()["status"] == "dead"  # only that one
    problem(await client.delete(f"/v1/dead/{dead['id']}"), 404, "not_found")
    problem(await client.delete(f"/v1/dead/{waiting['id']}"), 409, "invalid_state")
    assert (await client.get(f"/v1/jobs/{waiting['id']}")).json()["status"] == "pending"
    problem(await client.delete("/v1/dead/not-a-job"), 404, "not_found")


async def test_dashboard_files_are_served_without_a_token_and_data_is_not(database_url: str) -> None:
    settings = make_settings(database_url, admin_token="dashboard-test-admin-token")
    async with running_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq") as c:
            r = await c.get("/")
            assert r.status_code == 307 and r.headers["location"] == "/ui"
            page = await c.get("/ui")
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            assert "script-src 'self'" in page.headers["content-security-policy"]
            js = await c.get("/ui/app.js")
            assert js.status_code == 200 and js.headers["content-type"].startswith("text/javascript")
            assert (await c.get("/ui/style.css")).headers["content-type"].startswith("text/css")
            problem(await c.get("/ui/nope.js"), 404, "not_found")
            problem(await c.get("/ui/__init__.py"), 404, "not_found")  # only the page's own files
            # the data stays behind the token, whatever the page asks
            for path in ("/v1/queues", "/v1/workers", "/v1/throughput"):
                problem(await c.get(path), 401, "unauthorized")
            admin = {"Authorization": "Bearer dashboard-test-admin-token"}
            assert (await c.get("/v1/workers", headers=admin)).status_code == 200


async def test_only_an_admin_of_every_queue_reads_workers_and_throughput(database_url: str) -> None:
    settings = make_settings(database_url, admin_token="dashboard-test-admin-token")
    async with running_app(settings) as app:
        transport = httpx.ASGITransport(app=app)
        admin = {"Authorization": "Bearer dashboard-test-admin-token"}
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq", headers=admin) as c:
            made = {}
            for role, queues in (("producer", "*"), ("worker", "*"), ("admin", "team-a.*")):
                r = await c.post("/v1/tokens", json={"role": role, "queues": queues})
                assert r.status_code == 201, r.text
                made[(role, queues)] = {"Authorization": f"Bearer {r.json()['token']}"}
            for headers in made.values():
                for path in ("/v1/workers", "/v1/throughput"):
                    problem(await c.get(path, headers=headers), 403, "forbidden")
