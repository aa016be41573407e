"""The dashboard at /ui, driven in a real browser (Debian's chromium, through Playwright)
against a real ``jobq serve``: what the page shows matches the API, and what it does takes
effect through the API. Each test saves a screenshot of the page it checked in
tests/artifacts/ui/ (git-ignored; CI leaves them for a reviewer)."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from tests import pg
from tests.conftest import ROOT, LiveServer
from tests.waiting import eventually

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = ROOT / "tests" / "artifacts" / "ui"
ADMIN_TOKEN = "ui-test-admin-token-0123456789"

if shutil.which(CHROMIUM) is None:  # CI installs it (.ci/run); say so rather than skip
    raise RuntimeError(f"{CHROMIUM} is missing: apt-get install chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    pg = context.new_page()
    pg.set_default_timeout(10_000)
    # Assertions wait as long as actions do: on a CI machine loaded by two test workers
    # and the browser, a page that reads 1,000 queues first took longer than the default 5 s.
    expect.set_options(timeout=10_000)
    yield pg
    context.close()


@pytest.fixture(scope="module")
def live_server(admin_url: str, template_db: str) -> Iterator[LiveServer]:
    """One service in local mode (no tokens) for the module: each test uses queues of its own."""
    name = pg.clone(admin_url, template_db)
    server = LiveServer(pg.with_database(admin_url, name))
    try:
        server.start()
        yield server
    finally:
        server.stop()
        pg.drop(admin_url, name)


@pytest.fixture
def api(live_server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, timeout=10) as c:
        yield c


def shot(page: Page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def enqueue(api: httpx.Client, queue: str, type_: str = "t", **body: Any) -> dict[str, Any]:
    r = api.post("/v1/jobs", json={"type": type_, "queue": queue, **body})
    assert r.status_code == 201, r.text
    return dict(r.json())


def lease(api: httpx.Client, queue: str, worker: str = "w-1") -> dict[str, Any] | None:
    r = api.post("/v1/leases", json={"worker_id": worker, "queues": [queue], "limit": 1})
    assert r.status_code == 200, r.text
    leases = r.json()["leases"]
    return leases[0] if leases else None


def fail(api: httpx.Client, lease_: dict[str, Any], error: str, **body: Any) -> dict[str, Any]:
    r = api.post(f"/v1/leases/{lease_['lease_id']}/fail", json={"error": error, **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


def dead_job(api: httpx.Client, queue: str, error: str = "boom") -> dict[str, Any]:
    enqueue(api, queue, max_attempts=1)
    got = lease(api, queue)
    assert got is not None
    job = fail(api, got, error)
    assert job["status"] == "dead"
    return job


def job_status(api: httpx.Client, job_id: str) -> str | None:
    r = api.get(f"/v1/jobs/{job_id}")
    return str(r.json()["status"]) if r.status_code == 200 else None


def cell(page: Page, queue: str, col: str) -> str:
    return page.locator(f'tr[data-queue="{queue}"] td[data-col="{col}"]').inner_text().strip()


def test_queues_page_shows_the_counts_the_api_gives(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    # mail: 6 enqueued; 2 running, 1 completed, 1 failed waiting to retry, 1 dead, 1 pending
    for _ in range(5):
        enqueue(api, "mail", "email.send")
    enqueue(api, "mail", "email.send", max_attempts=1)
    leases = [lease(api, "mail", "w-mail") for _ in range(6)]
    assert all(leases)
    assert api.post(f"/v1/leases/{leases[0]['lease_id']}/ack", json={"result": {"ok": True}}).status_code == 200
    fail(api, leases[1], "smtp timeout", retry_in_ms=3_600_000)
    last = next(le for le in leases if le["job"]["max_attempts"] == 1)
    fail(api, last, "bounced")
    # 6 leases: 1 acked, 1 failed (retry), 1 dead; the other 3 still run; cancel one:
    running = [le for le in leases[2:] if le is not last]
    assert len(running) == 3
    r = api.post(f"/v1/jobs/{running[0]['job']['id']}/cancel")
    assert r.status_code == 200
    enqueue(api, "img", "thumb")  # a second queue, all pending

    page.goto(live_server.url + "/")
    expect(page).to_have_url(live_server.url + "/ui")  # / sends the browser to the dashboard
    expect(page.locator('tr[data-queue="mail"]')).to_be_visible()
    counts = api.get("/v1/queues/mail").json()["counts"]
    assert counts == {"pending": 0, "running": 2, "failed": 1, "completed": 1, "dead": 1, "cancelled": 1}
    # Issue 26: one column per status of the API, each job in exactly one (the failed job
    # waiting to retry was counted in Waiting and in Failed); the cancelled one has its column.
    for status, n in counts.items():
        assert cell(page, "mail", status) == str(n), status
    headings = page.locator("table.queues thead th").all_inner_texts()
    statuses = ["Pending", "Running", "Failed", "Dead", "Completed", "Cancelled"]
    assert [h for h in headings if h in {*statuses, "Waiting"}] == statuses
    assert cell(page, "img", "pending") == "1" and cell(page, "img", "running") == "0"
    # the chart: two jobs finished this minute (1 completed, 1 dead), as /v1/throughput says
    tp = {q["name"]: q for q in api.get("/v1/throughput").json()["queues"]}["mail"]
    assert tp["completed"][-1] + tp["dead"][-1] == 2
    expect(page.locator('tr[data-queue="mail"] [data-col="per-min"]')).to_have_text("peak 2/min")
    expect(page.locator('tr[data-queue="mail"] svg.spark rect.c')).to_have_count(1)
    expect(page.locator('tr[data-queue="mail"] svg.spark rect.d')).to_have_count(1)

    # it refreshes in place: a new job shows up without a reload
    page.evaluate("window.__marker = 1")
    enqueue(api, "img", "thumb")
    expect(page.locator('tr[data-queue="img"] td[data-col="pending"]')).to_have_text("2")
    assert page.evaluate("window.__marker") == 1
    shot(page, "queues")

    # the workers page: w-mail runs the 2 jobs still leased
    page.goto(live_server.url + "/ui#/workers")
    expect(page.locator('tr[data-worker="w-mail"] td[data-col="running"]')).to_have_text("2")
    shot(page, "workers")

    # the job browser, filtered, and a phone-sized view of it
    page.goto(live_server.url + "/ui#/jobs?queue=mail&status=running")
    expect(page.locator("tr[data-job]")).to_have_count(2)
    shot(page, "jobs")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + "/ui#/queues")
    expect(page.locator('tr[data-queue="mail"]')).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1
    shot(page, "queues-phone")


def test_job_browser_pages_with_the_cursor(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    ids = [enqueue(api, "bulk", "b")["id"] for _ in range(55)]
    page.goto(live_server.url + "/ui#/jobs?queue=bulk")
    expect(page.locator("tr[data-job]")).to_have_count(50)
    first_page = page.locator("tr[data-job]").evaluate_all("rows => rows.map(r => r.dataset.job)")
    assert first_page == list(reversed(ids))[:50]  # newest first, as GET /v1/jobs
    page.get_by_role("button", name="Next").click()
    expect(page.locator("tr[data-job]")).to_have_count(5)
    rest = page.locator("tr[data-job]").evaluate_all("rows => rows.map(r => r.dataset.job)")
    assert rest == list(reversed(ids))[50:]
    expect(page.get_by_role("button", name="Next")).to_be_disabled()
    page.get_by_role("button", name="Previous").click()
    expect(page.locator("tr[data-job]")).to_have_count(50)


def test_queues_page_pages_and_searches_by_prefix(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    """Issue 24: GET /v1/queues answers a page at a time; the page follows its cursor and
    searches by the start of the name. (zz-: after the other tests' queues.)"""
    import psycopg

    with psycopg.connect(live_server.database_url) as conn:
        conn.execute("INSERT INTO queues (name) SELECT 'zz-page-' || lpad(i::text, 2, '0') "
                     "FROM generate_series(0, 59) i ON CONFLICT DO NOTHING")
    enqueue(api, "zz-page-55")
    page.goto(live_server.url + "/ui#/queues?prefix=zz-page-")
    rows = page.locator("tr[data-queue]")
    expect(rows).to_have_count(50)
    names = rows.evaluate_all("rows => rows.map(r => r.dataset.queue)")
    assert names == [f"zz-page-{i:02d}" for i in range(50)]
    page.get_by_role("button", name="Next").click()
    expect(rows).to_have_count(10)
    assert rows.evaluate_all("rows => rows.map(r => r.dataset.queue)") == [f"zz-page-{i:02d}" for i in range(50, 60)]
    assert cell(page, "zz-page-55", "pending") == "1"  # a later page's counts are its own
    expect(page.get_by_role("button", name="Next")).to_be_disabled()
    page.get_by_role("button", name="Previous").click()
    expect(rows).to_have_count(50)

    page.locator('#filters input[name="prefix"]').fill("zz-page-3")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(live_server.url + "/ui#/queues?prefix=zz-page-3")
    expect(rows).to_have_count(10)
    expect(page.locator(".pager")).to_have_count(0)  # one page: no pager
    page.locator('#filters input[name="prefix"]').fill("no-such-")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("#body")).to_contain_text("No queue's name starts with no-such-")
    shot(page, "queues-search")

    # Past one page of 1000 queues the job browser's queue filter is a text box (with the
    # first page's names as suggestions) instead of a list that could not hold them all.
    page.goto(live_server.url + "/ui#/jobs")
    expect(page.locator('#filters select[name="queue"]')).to_have_count(1)
    with psycopg.connect(live_server.database_url) as conn:
        conn.execute("INSERT INTO queues (name) SELECT 'zz-many-' || lpad(i::text, 4, '0') "
                     "FROM generate_series(1, 1000) i ON CONFLICT DO NOTHING")
    page.goto(live_server.url + "/ui#/dead")  # a new frame reads the queues again
    expect(page.locator("#view h1")).to_have_text("Dead letters")
    page.goto(live_server.url + "/ui#/jobs")
    # The dead-letter page has the same text box: fill the job browser's, once it is drawn
    # (a box filled on the page being left is replaced, and Filter then sends no queue).
    expect(page.locator("#view h1")).to_have_text("Jobs")
    box = page.locator('#filters input[name="queue"]')
    expect(box).to_have_count(1)
    box.fill("zz-page-55")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(live_server.url + "/ui#/jobs?queue=zz-page-55")
    expect(page.locator("tr[data-job]")).to_have_count(1)


def test_replay_and_purge_dead_jobs_from_the_page(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    one = dead_job(api, "dl-mail", "bounced")
    two = dead_job(api, "dl-mail", "bounced again")
    other = dead_job(api, "dl-img", "corrupt")
    page.on("dialog", lambda d: d.accept())  # the confirmations
    page.goto(live_server.url + "/ui#/dead")  # every dead job: other tests' too
    for j in (one, two, other):
        expect(page.locator(f'tr[data-job="{j["id"]}"]')).to_be_visible()
    shot(page, "dead")

    page.locator(f'tr[data-job="{one["id"]}"] button[data-act="replay-one"]').click()
    eventually(lambda: job_status(api, one["id"]) == "pending", poll_s=0.1, what="the replayed job pending")
    expect(page.locator(f'tr[data-job="{one["id"]}"]')).to_have_count(0)

    page.locator(f'tr[data-job="{two["id"]}"] button[data-act="purge-one"]').click()
    eventually(lambda: job_status(api, two["id"]) is None, poll_s=0.1, what="the purged job gone")

    # filtered: purge every dead job of dl-img, with the confirmation accepted
    dead_job(api, "dl-mail", "kept")
    page.goto(live_server.url + "/ui#/dead?queue=dl-img")
    expect(page.locator("tr[data-job]")).to_have_count(1)
    page.get_by_role("button", name="Purge all matching").click()
    eventually(lambda: job_status(api, other["id"]) is None, poll_s=0.1, what="dl-img's dead job purged")
    dead_mail = api.get("/v1/jobs", params={"status": "dead", "queue": "dl-mail"}).json()["jobs"]
    assert len(dead_mail) == 1  # the other queue's dead job is still there


def test_declined_confirmation_purges_nothing(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    job = dead_job(api, "dl-keep")
    page.on("dialog", lambda d: d.dismiss())
    page.goto(live_server.url + "/ui#/dead?queue=dl-keep")
    expect(page.locator("tr[data-job]")).to_have_count(1)
    page.get_by_role("button", name="Purge all matching").click()
    page.locator(f'tr[data-job="{job["id"]}"] button[data-act="purge-one"]').click()
    # Both dialogs were dismissed before the clicks returned; the time is the window in which
    # a purge wrongly sent anyway would land.
    page.wait_for_timeout(500)
    assert job_status(api, job["id"]) == "dead"


def test_pause_and_resume_from_the_page(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    job = enqueue(api, "pz")
    page.goto(live_server.url + "/ui")
    row = page.locator('tr[data-queue="pz"]')
    row.get_by_role("button", name="Pause").click()
    eventually(lambda: api.get("/v1/queues/pz").json()["settings"]["paused"], poll_s=0.1, what="pz paused")
    expect(row.locator(".badge.paused")).to_be_visible()
    # paused: a claim gets nothing (the pause reaches claims within 1 s; the time is the test)
    time.sleep(1.2)
    assert lease(api, "pz") is None
    shot(page, "queues-paused")
    row.get_by_role("button", name="Resume").click()
    eventually(lambda: not api.get("/v1/queues/pz").json()["settings"]["paused"], poll_s=0.1,
               what="pz resumed")
    got = eventually(lambda: lease(api, "pz"), poll_s=0.1, what="pz's job claimable again")
    assert got["job"]["id"] == job["id"]


def test_job_page_shows_payload_attempts_and_error_history(
    page: Page, api: httpx.Client, live_server: LiveServer
) -> None:
    job = enqueue(api, "jp", "email.send", payload={"to": "a@example.com"}, max_attempts=3)
    for err in ("first: smtp timeout", "second: <b>refused</b>"):
        got = lease(api, "jp")
        assert got is not None
        fail(api, got, err, retry_in_ms=0)
        eventually(lambda: job_status(api, job["id"]) == "failed", poll_s=0.1, what="the job failed")
    page.goto(live_server.url + f"/ui#/job/{job['id']}")
    expect(page.locator("#errors tbody tr")).to_have_count(2)
    errors = page.locator("#errors tbody tr td.wrap").all_inner_texts()
    assert errors == ["first: smtp timeout", "second: <b>refused</b>"]  # shown as text, not markup
    expect(page.locator('[data-field="attempts"]')).to_have_text("2 of 3")
    expect(page.get_by_text('"to": "a@example.com"')).to_be_visible()
    shot(page, "job")

    # the schedules page lists a schedule with its next fire time
    r = api.put("/v1/schedules/nightly", json={"cron": "0 2 * * *", "job": {"type": "report", "queue": "jp"}})
    assert r.status_code == 201, r.text
    page.goto(live_server.url + "/ui#/schedules")
    next_fire = r.json()["next_fire_at"]
    expect(page.locator('tr[data-schedule="nightly"] td[data-col="next"] span[title]')).to_have_attribute(
        "title", next_fire
    )
    shot(page, "schedules")


@pytest.fixture
def secured_server(database_url: str) -> Iterator[LiveServer]:
    server = LiveServer(database_url, env={"JOBQ_ADMIN_TOKEN": ADMIN_TOKEN})
    server.start()
    yield server
    server.stop()


def test_with_tokens_the_page_needs_an_admin_token(page: Page, secured_server: LiveServer) -> None:
    admin = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
    with httpx.Client(base_url=secured_server.url, headers=admin, timeout=10) as api:
        r = api.post("/v1/tokens", json={"role": "producer", "queues": "*"})
        assert r.status_code == 201, r.text
        producer = r.json()["token"]
        enqueue(api, "mail")

    page.goto(secured_server.url + "/ui")
    expect(page.locator("#login")).to_be_visible()
    expect(page.locator("#view")).to_be_hidden()
    shot(page, "login")

    page.fill("#token", producer)
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#login-error")).to_contain_text("not an admin token")
    expect(page.locator("#view")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('jobq.token')") is None

    page.fill("#token", "jq_000000000000_" + "A" * 43)
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#login-error")).to_contain_text("not valid")

    page.fill("#token", ADMIN_TOKEN)
    page.get_by_role("button", name="Use token").click()
    expect(page.locator('tr[data-queue="mail"] td[data-col="pending"]')).to_have_text("1")
    # kept for this tab only
    assert page.evaluate("sessionStorage.getItem('jobq.token')") == ADMIN_TOKEN
    assert page.evaluate("localStorage.length") == 0
    assert "ui-test-admin" not in page.context.cookies().__repr__()


# ---- issue 26: the dashboard's rough edges, and what Sidekiq's and Oban Web's users expect ----


def sql(server: LiveServer, statement: str, *args: Any) -> None:
    """Move a job's times back (what a test cannot wait for): straight in the database."""
    import psycopg

    with psycopg.connect(server.database_url) as conn:
        conn.execute(statement, args)


def finished(api: httpx.Client, queue: str, n: int) -> list[str]:
    """n jobs of ``queue`` completed; their ids."""
    ids = []
    for _ in range(n):
        job = enqueue(api, queue)
        got = lease(api, queue)
        assert got is not None and got["job"]["id"] == job["id"]
        assert api.post(f"/v1/leases/{got['lease_id']}/ack", json={}).status_code == 200
        ids.append(job["id"])
    return ids


def test_a_quiet_minute_does_not_label_the_chart_0_per_min(
    page: Page, api: httpx.Client, live_server: LiveServer
) -> None:
    """Every chart said '0/min' beside visible bars: the label was the minute under way."""
    ids = finished(api, "tp-quiet", 2)
    # they finished 3 minutes ago: bars, and nothing in the minute under way
    sql(live_server, "UPDATE jobs_history SET completed_at = now() - interval '3 minutes' WHERE id = ANY(%s)",
        [int(i) for i in ids])
    tp = {q["name"]: q for q in api.get("/v1/throughput").json()["queues"]}["tp-quiet"]
    assert tp["completed"][-1] == 0 and tp["completed"][-4] == 2
    page.goto(live_server.url + "/ui#/queues?prefix=tp-quiet")
    row = page.locator('tr[data-queue="tp-quiet"]')
    expect(row.locator("svg.spark rect.c")).to_have_count(1)
    expect(row.locator('[data-col="per-min"]')).to_have_text("peak 2/min")
    expect(row.locator("svg.spark title")).to_have_text("2 finished in 15 min; peak 2/min; 0 so far this minute")


def test_dead_letters_say_when_the_job_died_and_times_say_how_long_ago(
    page: Page, api: httpx.Client, live_server: LiveServer
) -> None:
    job = dead_job(api, "dl-when")
    # created two days before it died: the list showed the creation time
    sql(live_server, "UPDATE jobs_history SET created_at = now() - interval '2 days' WHERE id = %s", int(job["id"]))
    died = api.get(f"/v1/jobs/{job['id']}").json()["completed_at"]
    page.goto(live_server.url + "/ui#/dead?queue=dl-when")
    expect(page.locator("thead th", has_text="Died")).to_have_count(1)
    when = page.locator(f'tr[data-job="{job["id"]}"] td[data-col="died"] span[title]')
    expect(when).to_have_attribute("title", died)
    expect(when.locator(".rel")).to_have_text(re.compile(r"^\((just now|\d+ s ago)\)$"))
    shot(page, "dead-died")

    # the job browser still says when a job was created, and how long ago
    page.goto(live_server.url + "/ui#/jobs?queue=dl-when")
    expect(page.locator(f'tr[data-job="{job["id"]}"] td[data-col="created"] .rel')).to_have_text("(2 d ago)")

    # and the job page: the UTC time with the relative one beside it
    other = enqueue(api, "rel-times")
    sql(live_server, "UPDATE jobs SET created_at = now() - interval '3 minutes' WHERE id = %s", int(other["id"]))
    page.goto(live_server.url + f"/ui#/job/{other['id']}")
    created = page.locator('dd[data-field="created"]')
    expect(created).to_contain_text("(3 min ago)")
    expect(created).to_contain_text(re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ"))


def test_at_phone_width_pause_and_the_chart_are_on_screen(
    page: Page, api: httpx.Client, live_server: LiveServer
) -> None:
    finished(api, "ph-q", 1)
    enqueue(api, "ph-q")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url + "/ui#/queues?prefix=ph-q")
    row = page.locator('tr[data-queue="ph-q"]')
    pause = row.get_by_role("button", name="Pause")
    chart = row.locator("svg.spark")
    for what in (pause, chart, row.locator('[data-col="cancelled"]'), row.locator('[data-col="per-min"]')):
        expect(what).to_be_visible()
        # scrolled to vertically only (as a thumb does): then wholly on screen, not cut off
        # at the right of the table nor reachable only by scrolling the table sideways
        what.evaluate("e => window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 100)")
        expect(what).to_be_in_viewport(ratio=1)
        box = what.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
    assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1  # no wider than the screen
    shot(page, "queues-phone-card")
    # the overview fits too
    expect(page.locator("#history svg")).to_be_visible()
    box = page.locator("#history svg").bounding_box()
    assert box is not None and box["x"] + box["width"] <= 390
    # the job browser's table scrolls inside its frame, not the page
    page.goto(live_server.url + "/ui#/jobs?queue=ph-q")
    expect(page.locator("tr[data-job]")).to_have_count(2)
    assert page.evaluate("document.documentElement.scrollWidth") <= 390 + 1


@pytest.mark.parametrize("width", [800, 1280])
def test_pause_and_the_chart_are_on_screen_at_any_width_with_long_names(
    page: Page, api: httpx.Client, live_server: LiveServer, width: int
) -> None:
    """Only the phone width became cards: at 800 px (a tablet, half a laptop's screen) the
    table was 934 px wide in a 766 px frame, and at 1280 px one long queue name pushed the
    last column out as well, so Pause and the chart sat behind a sideways scroll of the
    table. A long name now wraps, and a table that still does not fit becomes cards."""
    short = f"wd{width}"  # the live server is shared: a prefix of this case's own
    long_name = f"{short}.tenant-alpha.notifications.transactional-mail-for-the-eu-region-primary"
    for name in (short, long_name):
        finished(api, name, 1)
    for name in (short, long_name):
        enqueue(api, name)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(live_server.url + f"/ui#/queues?prefix={short}")
    expect(page.locator("tr[data-queue]")).to_have_count(2)
    frame = page.locator("#body .table-wrap").bounding_box()
    assert frame is not None
    for name in (short, long_name):
        row = page.locator(f'tr[data-queue="{name}"]')
        for what in (row.get_by_role("button", name="Pause"), row.locator("svg.spark"),
                     row.locator('[data-col="cancelled"]')):
            what.evaluate("e => window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 100)")
            expect(what).to_be_in_viewport(ratio=1)
            box = what.bounding_box()
            # inside the table's frame, not past its right edge (where it scrolls sideways)
            assert box is not None, name
            assert frame["x"] <= box["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"], (name, box)
    assert page.evaluate("(() => { const w = document.querySelector('#body .table-wrap');"
                         " return w.scrollWidth <= w.clientWidth + 1; })()")
    assert page.evaluate("document.documentElement.scrollWidth") <= width + 1
    shot(page, f"queues-{width}")


@pytest.fixture
def own_server(database_url: str) -> Iterator[LiveServer]:
    """A service on a database of its own: totals across queues are this test's alone."""
    server = LiveServer(database_url)
    server.start()
    yield server
    server.stop()


def test_overview_totals_and_the_per_minute_history(page: Page, own_server: LiveServer) -> None:
    with httpx.Client(base_url=own_server.url, timeout=10) as api:
        finished(api, "ov-a", 2)
        dead_job(api, "ov-a")
        for _ in range(3):
            enqueue(api, "ov-a")
        enqueue(api, "ov-a")
        assert lease(api, "ov-a") is not None  # 1 running
        enqueue(api, "ov-b")
        got = lease(api, "ov-b")
        assert got is not None
        fail(api, got, "later", retry_in_ms=3_600_000)  # 1 failed, waiting to retry
        gone = enqueue(api, "ov-b")
        assert api.post(f"/v1/jobs/{gone['id']}/cancel").status_code == 200
        want: dict[str, int] = {}
        for q in api.get("/v1/queues").json()["queues"]:
            for k, n in q["counts"].items():
                want[k] = want.get(k, 0) + n
    assert want == {"pending": 3, "running": 1, "failed": 1, "dead": 1, "completed": 2, "cancelled": 1}

    page.goto(own_server.url + "/ui")
    stats = page.locator("#stats")
    for key, n in want.items():
        expect(stats.locator(f'[data-total="{key}"]')).to_have_text(str(n))
    expect(stats.locator('[data-total="processed"]')).to_have_text("2")
    expect(stats.locator('[data-total="failed-for-good"]')).to_have_text("1")
    # this minute's bar: 2 processed, 1 failed for good, across both queues
    history = page.locator("#history")
    expect(history.locator("rect.c")).to_have_count(1)
    expect(history.locator("rect.d")).to_have_count(1)
    expect(history.locator("figcaption")).to_contain_text("last 60 minutes: peak 3/min")
    expect(history.locator("rect.d title")).to_have_text("this minute: 2 completed, 1 dead")
    shot(page, "overview")


def test_with_tokens_no_console_errors_and_a_favicon(page: Page, secured_server: LiveServer) -> None:
    """/favicon.ico answered 401 once tokens existed: an error in the console of every page."""
    r = httpx.get(secured_server.url + "/favicon.ico")
    assert r.status_code == 200 and r.headers["content-type"].startswith("image/")
    errors: list[str] = []
    logged_in = False

    def on_console(m: Any) -> None:
        if m.type != "error":
            return
        where = m.location.get("url", "")
        # The page's first read, without a token, is refused: that is how it knows to ask.
        if "401" in m.text and where.endswith("/v1/queues?limit=1") and not logged_in:
            return
        errors.append(f"{m.text} ({where})")

    page.on("console", on_console)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(secured_server.url + "/ui")
    page.fill("#token", ADMIN_TOKEN)
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#stats")).to_be_visible()
    logged_in = True
    page.reload()
    expect(page.locator("#stats")).to_be_visible()
    for view in ("jobs", "dead", "schedules", "workers", "queues"):
        page.goto(secured_server.url + f"/ui#/{view}")
        expect(page.locator("#body")).not_to_have_text("loading…")
    page.wait_for_timeout(300)  # a late error would land here
    assert errors == []


def test_job_history_shows_released_claims(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    """A released claim (handed back without spending the attempt) is in the job's history,
    between its failures, by time."""
    job = enqueue(api, "rel-hist", max_attempts=3)
    got = lease(api, "rel-hist", "w-stop")
    assert got is not None
    r = api.post(f"/v1/leases/{got['lease_id']}/release", json={"delay_ms": 0})
    assert r.status_code == 200, r.text
    got = eventually(lambda: lease(api, "rel-hist", "w-2"), poll_s=0.1, what="the released job claimable")
    fail(api, got, "smtp timeout", retry_in_ms=0)
    got = eventually(lambda: lease(api, "rel-hist", "w-stop"), poll_s=0.1, what="the failed job claimable")
    r = api.post(f"/v1/leases/{got['lease_id']}/release", json={"delay_ms": 60_000})
    assert r.status_code == 200, r.text
    stored = api.get(f"/v1/jobs/{job['id']}").json()
    assert [x["attempt"] for x in stored["releases"]] == [1, 2] and len(stored["errors"]) == 1

    page.goto(live_server.url + f"/ui#/job/{job['id']}")
    rows = page.locator("#errors tbody tr")
    expect(rows).to_have_count(3)
    kinds = rows.evaluate_all("rows => rows.map(r => r.dataset.kind)")
    assert kinds[0] == "released" and kinds[2] == "released" and kinds[1] != "released"
    texts = rows.locator("td.wrap").all_inner_texts()
    assert "w-stop" in texts[0] and texts[1] == "smtp timeout"
    assert "visible again after 60 s" in texts[2]
    expect(page.locator('[data-field="attempts"]')).to_have_text(f"{stored['attempt']} of 3")
    shot(page, "job-released")



# --- Issue 26: worker processes, search, bulk selection ---------------------------------------

def rows_of(page: Page) -> list[str]:
    return [str(x) for x in page.locator("tr[data-job]").evaluate_all("rows => rows.map(r => r.dataset.job)")]


def test_workers_page_shows_idle_beating_workers_and_those_seen_from_jobs(
        page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    r = api.post("/v1/workers/ui-idle-1/beat", json={
        "host": "box-7", "pid": 31337, "concurrency": 4, "queues": ["ui-wq"], "in_flight": 0,
        "started_at": "2026-01-15T09:30:00Z", "state": "running"})
    assert r.status_code == 200, r.text
    enqueue(api, "ui-wq")
    assert lease(api, "ui-wq", worker="ui-busy-1") is not None  # known from its job only
    page.goto(live_server.url + "/ui#/workers")
    idle = page.locator('tr[data-worker="ui-idle-1"]')
    expect(idle).to_be_visible()  # idle: no job, yet listed
    for col, text in (("host", "box-7"), ("pid", "31337"), ("concurrency", "4"), ("in-flight", "0"),
                      ("running", "0"), ("queues", "ui-wq"), ("state", "running")):
        expect(idle.locator(f'td[data-col="{col}"]')).to_have_text(text)
    expect(idle.locator('td[data-col="last-seen"]')).to_contain_text("ago")
    busy = page.locator('tr[data-worker="ui-busy-1"]')
    expect(busy.locator('td[data-col="running"]')).to_have_text("1")
    expect(busy.locator('td[data-col="host"]')).to_have_text("–")
    # a worker that says it is stopping is shown so at the next refresh
    assert api.post("/v1/workers/ui-idle-1/beat", json={"state": "stopping"}).status_code == 200
    expect(idle.locator('td[data-col="state"]')).to_have_text("stopping")
    shot(page, "workers")


def test_search_box_finds_jobs_by_payload_and_error(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    hit = enqueue(api, "ui-search", "order", payload={"customer": "Zebulon Quartz"})
    enqueue(api, "ui-search", "order", payload={"customer": "someone else"})
    failed = dead_job(api, "ui-search-err", "card of ZEBULON declined")
    page.goto(live_server.url + "/ui#/jobs")
    page.locator('#filters input[name="search"]').fill("zebulon")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(live_server.url + "/ui#/jobs?search=zebulon")
    expect(page.locator("tr[data-job]")).to_have_count(2)
    assert rows_of(page) == [failed["id"], hit["id"]]
    expect(page.locator("#search-note")).to_contain_text("zebulon")
    expect(page.locator('#filters input[name="search"]')).to_have_value("zebulon")  # kept in the box
    # with another filter
    page.goto(live_server.url + "/ui#/jobs?queue=ui-search&search=zebulon")
    expect(page.locator("tr[data-job]")).to_have_count(1)
    assert rows_of(page) == [hit["id"]]
    shot(page, "jobs-search")


def test_bulk_selection_cancels_retries_and_deletes_and_reports_each_failure(
        page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    running_id = enqueue(api, "ui-bulk")["id"]
    running = lease(api, "ui-bulk", worker="ui-bulk-w")
    assert running is not None and running["job"]["id"] == running_id
    waiting = [enqueue(api, "ui-bulk")["id"] for _ in range(3)]
    page.on("dialog", lambda d: d.accept())  # the confirmations
    page.goto(live_server.url + "/ui#/jobs?queue=ui-bulk")
    expect(page.locator("tr[data-job]")).to_have_count(4)

    # cancel two of the waiting jobs
    for job_id in waiting[:2]:
        page.locator(f'tr[data-job="{job_id}"] input[data-select]').check()
    expect(page.locator("#bulk-count")).to_have_text("2 selected")
    page.get_by_role("button", name="Cancel selected").click()
    eventually(lambda: [job_status(api, j) for j in waiting[:2]] == ["cancelled"] * 2, poll_s=0.1,
               what="the two selected jobs cancelled")
    expect(page.locator("#bulk-report")).to_have_text("2 cancelled")
    expect(page.locator("#bulk-count")).to_have_text("0 selected")
    # the page takes one action at a time: the next once this one's button is back
    expect(page.get_by_role("button", name="Cancel selected")).to_be_enabled()
    assert job_status(api, waiting[2]) == "pending"  # not selected: untouched

    # retry them
    for job_id in waiting[:2]:
        page.locator(f'tr[data-job="{job_id}"] input[data-select]').check()
    expect(page.locator("#bulk-count")).to_have_text("2 selected")
    page.get_by_role("button", name="Retry selected").click()
    eventually(lambda: [job_status(api, j) for j in waiting[:2]] == ["pending"] * 2, poll_s=0.1,
               what="the two selected jobs retried")
    expect(page.locator("#bulk-report")).to_have_text("2 retried")
    expect(page.get_by_role("button", name="Retry selected")).to_be_enabled()

    # select the whole page and delete: the running job cannot be, and says why
    page.locator("input[data-select-all]").check()
    expect(page.locator("#bulk-count")).to_have_text("4 selected")
    shot(page, "jobs-bulk-selected")
    page.get_by_role("button", name="Delete selected").click()
    eventually(lambda: [job_status(api, j) for j in waiting] == [None] * 3, poll_s=0.1,
               what="the three waiting jobs deleted")
    failure = page.locator(f'#bulk-report li[data-job="{running_id}"]')
    expect(failure).to_contain_text("running")
    expect(page.locator("#bulk-report")).to_contain_text("3 deleted, 1 failed")
    assert job_status(api, running_id) == "running"
    expect(page.locator("tr[data-job]")).to_have_count(1)
    # the job that failed stays selected, through the refreshes
    expect(page.locator(f'tr[data-job="{running_id}"] input[data-select]')).to_be_checked()
    expect(page.locator("#bulk-count")).to_have_text("1 selected")
    shot(page, "jobs-bulk-report")


def test_bulk_retry_of_dead_letters(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    dead = [dead_job(api, "ui-bulk-dead")["id"] for _ in range(2)]
    kept = dead_job(api, "ui-bulk-dead")["id"]
    page.goto(live_server.url + "/ui#/dead?queue=ui-bulk-dead")
    expect(page.locator("tr[data-job]")).to_have_count(3)
    for job_id in dead:
        page.locator(f'tr[data-job="{job_id}"] input[data-select]').check()
    page.get_by_role("button", name="Retry selected").click()
    eventually(lambda: [job_status(api, j) for j in dead] == ["pending"] * 2, poll_s=0.1,
               what="the selected dead jobs replayed")
    expect(page.locator("tr[data-job]")).to_have_count(1)
    assert job_status(api, kept) == "dead"


def test_delete_queue_from_its_page(page: Page, api: httpx.Client, live_server: LiveServer) -> None:
    """A button on the queue's page, with a confirmation; a queue holding jobs is refused
    with the API's message (409 queue_not_empty), and the page offers to purge it."""
    finished(api, "del-empty", 1)  # a completed job does not keep a queue
    answers: list[bool] = []
    page.on("dialog", lambda d: d.accept() if answers.pop(0) else d.dismiss())

    page.goto(live_server.url + "/ui#/queues?prefix=del-empty")
    page.locator('tr[data-queue="del-empty"] td.name a').click()
    expect(page).to_have_url(live_server.url + "/ui#/queue/del-empty")
    answers.append(False)  # declined: nothing happens
    page.get_by_role("button", name="Delete queue").click()
    page.wait_for_timeout(500)  # the window in which a delete wrongly sent anyway would land
    assert api.get("/v1/queues/del-empty").status_code == 200
    answers.append(True)
    page.get_by_role("button", name="Delete queue").click()
    expect(page).to_have_url(live_server.url + "/ui#/queues")
    assert api.get("/v1/queues/del-empty").status_code == 404
    expect(page.locator('tr[data-queue="del-empty"]')).to_have_count(0)

    dead = dead_job(api, "del-full")
    waiting = [enqueue(api, "del-full")["id"] for _ in range(2)]
    refused = api.delete("/v1/queues/del-full")  # what the page will be told (it changes nothing)
    assert refused.status_code == 409 and refused.json()["code"] == "queue_not_empty"
    page.goto(live_server.url + "/ui#/queue/del-full")
    answers.append(True)
    page.get_by_role("button", name="Delete queue").click()
    expect(page.locator("#queue-delete")).to_contain_text(refused.json()["detail"])
    assert api.get("/v1/queues/del-full").status_code == 200
    shot(page, "queue-delete-refused")
    answers.append(True)
    page.get_by_role("button", name="Delete the queue with its jobs").click()
    expect(page).to_have_url(live_server.url + "/ui#/queues")
    assert api.get("/v1/queues/del-full").status_code == 404
    for job_id in (*waiting, dead["id"]):
        assert job_status(api, job_id) is None


def test_a_queue_a_schedule_names_is_not_offered_a_purge(
    page: Page, api: httpx.Client, live_server: LiveServer
) -> None:
    enqueue(api, "del-sched")
    nightly = {"cron": "0 2 * * *", "job": {"type": "r", "queue": "del-sched"}}
    r = api.put("/v1/schedules/del-sched-nightly", json=nightly)
    assert r.status_code == 201, r.text
    page.on("dialog", lambda d: d.accept())
    page.goto(live_server.url + "/ui#/queue/del-sched")
    page.get_by_role("button", name="Delete queue").click()
    box = page.locator("#queue-delete")
    expect(box).to_contain_text("del-sched-nightly")
    expect(box.get_by_role("button", name="Delete the queue with its jobs")).to_have_count(0)
    assert api.get("/v1/queues/del-sched").status_code == 200


def test_rate_limits_and_their_use_on_the_queues_list_and_the_queue_page(
    page: Page, api: httpx.Client, live_server: LiveServer
) -> None:
    """Issue 29: the list shows a paced queue's use of its limit now (as `jobq queues`'s
    rate column: used/limit), its enqueue rate and soft thresholds; the queue's page says
    each, and the use follows the claims."""
    paced, plain = "rate-ui.paced", "rate-ui.plain"
    r = api.patch(f"/v1/queues/{paced}", json={
        "rate_limit": {"jobs": 5, "per_ms": 60_000, "key": "payload.tenant"},
        "enqueue_rate": {"jobs": 50, "per_ms": 1_000, "burst": 200},
        "soft_depth": 100, "soft_lag_ms": 60_000})
    assert r.status_code == 200, r.text
    for tenant in ("a", "a", "b"):
        enqueue(api, paced, payload={"tenant": tenant})
    r = api.post("/v1/leases", json={"worker_id": "w-rate", "queues": [paced], "limit": 10})
    assert len(r.json()["leases"]) == 3, r.text
    enqueue(api, plain)
    use = api.get(f"/v1/queues/{paced}").json()["rate_limit_use"]
    assert use == {"jobs": 2, "keys": 2, "keys_at_limit": 0, "free_in_ms": None}  # tenant a's 2 of 5

    page.goto(live_server.url + "/ui#/queues?prefix=rate-ui.")
    expect(page.locator(f'tr[data-queue="{paced}"]')).to_be_visible()
    rates = page.locator(f'tr[data-queue="{paced}"] td[data-col="rate"]')
    expect(rates.locator('[data-rate="pace"]')).to_have_text(re.compile(r"pace\s+2/5\s+per 60 s, per payload\.tenant"))
    expect(rates.locator('[data-rate="enqueue"]')).to_have_text("enqueue 50 per 1 s, burst 200")
    expect(rates.locator('[data-rate="soft"]')).to_have_text("slowed past 100 waiting or 60 s of lag")
    assert cell(page, plain, "rate") == "–"
    shot(page, "queues-rate-limits")

    page.locator(f'a[href="#/queue/{paced}"]').click()
    section = page.locator('[data-section="rates"]')
    expect(section.locator('[data-rate="pace"]')).to_have_text("5 per 60 s, per payload.tenant")
    expect(section.locator('[data-rate="use"]')).to_have_text("2/5 in the last 60 s; 2 keys, 0 at the limit")
    expect(section.locator('[data-rate="enqueue"]')).to_have_text("50 per 1 s, burst 200")
    expect(section.locator('[data-rate="soft"]')).to_have_text("enqueues slowed past 100 waiting or 60 s of lag")

    # Tenant a takes its whole allowance: the page, refreshing itself, says the window is
    # full and when it has room again.
    for _ in range(3):
        enqueue(api, paced, payload={"tenant": "a"})
    r = api.post("/v1/leases", json={"worker_id": "w-rate", "queues": [paced], "limit": 10})
    assert len(r.json()["leases"]) == 3, r.text
    assert api.get(f"/v1/queues/{paced}").json()["rate_limit_use"]["keys_at_limit"] == 1
    expect(section.locator('[data-rate="use"]')).to_have_text(
        re.compile(r"^5/5 in the last 60 s; 2 keys, 1 at the limit; room again in \d+ s$"))
    shot(page, "queue-rate-limits")

    # A queue without any: its page says so.
    page.goto(live_server.url + f"/ui#/queue/{plain}")
    expect(page.locator('[data-section="rates"] [data-rate="pace"]')).to_have_text("none")
    expect(page.locator('[data-section="rates"] [data-rate="use"]')).to_have_text("–")
    expect(page.locator('[data-section="rates"] [data-rate="soft"]')).to_have_text("off")
