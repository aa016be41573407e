"""/metrics stays bounded with many queues (issue 24): at most JOBQ_METRICS_QUEUES queues, of
those matching JOBQ_METRICS_QUEUE_PATTERN, get series of their own; every other queue is summed
in queue="_other", and the totals over all series stay exact."""

from __future__ import annotations

import uuid
from collections import defaultdict

import httpx
import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from pydantic import ValidationError

from tests.conftest import make_settings, running_app

pytestmark = pytest.mark.timeout(90)

GAUGES = ("jobq_waiting_jobs", "jobq_jobs", "jobq_oldest_waiting_seconds")


def fill(database_url: str) -> None:
    """40 queues: queue qNN holds NN waiting jobs (half of type a, half b, a minute old) and one
    completed job; four more queues keep-1..4 hold one waiting job each, ten minutes old."""
    with psycopg.connect(database_url) as conn:
        conn.execute("INSERT INTO queues (name) SELECT 'q' || lpad(i::text, 2, '0') FROM generate_series(0, 39) i")
        conn.execute("INSERT INTO queues (name) SELECT 'keep-' || i FROM generate_series(1, 4) i")
        conn.execute("""INSERT INTO jobs (queue, type, max_attempts, visible_at)
                        SELECT 'q' || lpad(i::text, 2, '0'), CASE WHEN k % 2 = 0 THEN 'a' ELSE 'b' END, 3,
                               now() - interval '1 minute'
                          FROM generate_series(0, 39) i, generate_series(1, i) k""")
        conn.execute("""INSERT INTO jobs (queue, type, max_attempts, status, completed_at)
                        SELECT 'q' || lpad(i::text, 2, '0'), 'a', 3, 'completed', now()
                          FROM generate_series(0, 39) i""")
        conn.execute("""INSERT INTO jobs (queue, type, max_attempts, visible_at)
                        SELECT 'keep-' || i, 'a', 3, now() - interval '10 minutes'
                          FROM generate_series(1, 4) i""")


def gauges(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name in GAUGES:
                out[s.name][tuple(sorted(s.labels.items()))] = s.value
    return out


async def scrape(database_url: str, **settings: object) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    async with running_app(make_settings(database_url, **settings)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq") as c:
            r = await c.get("/metrics")
            assert r.status_code == 200, r.text
            return gauges(r.text)


def queues_of(series: dict[tuple[tuple[str, str], ...], float]) -> set[str]:
    return {dict(labels)["queue"] for labels in series}


def by(series: dict[tuple[tuple[str, str], ...], float], label: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for labels, value in series.items():
        out[dict(labels)[label]] += value
    return dict(out)


TOTAL_WAITING = sum(range(40)) + 4
TOTAL_JOBS = TOTAL_WAITING + 40


async def test_only_the_busiest_queues_get_series_and_the_rest_sum_into_other(database_url: str) -> None:
    fill(database_url)
    g = await scrape(database_url, metrics_queues=3)
    shown = {"q39", "q38", "q37", "_other"}
    for name in GAUGES:
        assert queues_of(g[name]) == shown, name
    # 4 queues x 6 statuses, 4 queues x 2 types, 4 lags: bounded, however many queues
    assert len(g["jobq_jobs"]) == 24 and len(g["jobq_waiting_jobs"]) == 8
    # Totals are exact: nothing is lost in the bucket.
    assert sum(g["jobq_jobs"].values()) == TOTAL_JOBS
    assert sum(g["jobq_waiting_jobs"].values()) == TOTAL_WAITING
    assert by(g["jobq_jobs"], "status") == {"pending": TOTAL_WAITING, "completed": 40, "running": 0,
                                            "failed": 0, "dead": 0, "cancelled": 0}
    assert g["jobq_waiting_jobs"][(("queue", "q39"), ("type", "a"))] == 19
    assert g["jobq_jobs"][(("queue", "_other"), ("status", "completed"))] == 37
    # The bucket's lag is the worst of its queues: keep-* has waited ten minutes.
    assert 590 <= g["jobq_oldest_waiting_seconds"][(("queue", "_other"),)] <= 700
    assert 50 <= g["jobq_oldest_waiting_seconds"][(("queue", "q39"),)] <= 120


async def test_a_pattern_chooses_the_queues_shown(database_url: str) -> None:
    fill(database_url)
    g = await scrape(database_url, metrics_queue_pattern="keep-*,q0?", metrics_queues=100)
    expected = {f"keep-{i}" for i in range(1, 5)} | {f"q0{i}" for i in range(10)} | {"_other"}
    assert queues_of(g["jobq_jobs"]) == expected
    assert sum(g["jobq_jobs"].values()) == TOTAL_JOBS
    # an empty queue shown still has every status, at 0 (q00 has one completed job only)
    assert g["jobq_jobs"][(("queue", "q00"), ("status", "pending"))] == 0
    assert g["jobq_oldest_waiting_seconds"][(("queue", "q00"),)] == 0


async def test_none_shown_still_gives_exact_totals(database_url: str) -> None:
    fill(database_url)
    g = await scrape(database_url, metrics_queues=0)
    assert queues_of(g["jobq_jobs"]) == {"_other"}
    # by type too: qNN's even-numbered jobs are type a, the odd ones b; keep-* add 4 of a
    assert by(g["jobq_waiting_jobs"], "type") == {"a": sum(i // 2 for i in range(40)) + 4,
                                                  "b": sum((i + 1) // 2 for i in range(40))}
    assert sum(g["jobq_waiting_jobs"].values()) == TOTAL_WAITING
    assert sum(g["jobq_jobs"].values()) == TOTAL_JOBS


async def test_with_room_for_every_queue_other_is_there_at_zero(database_url: str) -> None:
    """The bucket's series exist even when it is empty: a bucket that vanishes when a queue
    leaves it would read as "no data", not as 0."""
    fill(database_url)
    g = await scrape(database_url)  # the default (500) shows all 44
    assert len(queues_of(g["jobq_jobs"])) == 45
    assert all(v == 0 for labels, v in g["jobq_jobs"].items() if ("queue", "_other") in labels)
    assert g["jobq_oldest_waiting_seconds"][(("queue", "_other"),)] == 0


@pytest.mark.parametrize("values", [{"metrics_queues": -1}, {"metrics_queue_pattern": ""},
                                    {"metrics_queue_pattern": "a,,b"},
                                    {"metrics_queue_pattern": "[z-a]"}])
def test_bad_settings_are_refused_at_start(values: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        make_settings("postgresql://x@127.0.0.1/db", **values)


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {tuple(sorted(s.labels.items())): s.value
            for family in text_string_to_metric_families(text) for s in family.samples if s.name == name}


async def test_counters_by_queue_keep_their_first_queues_and_count_the_rest_in_other(
        database_url: str) -> None:
    """The process's counters and histograms by queue take the same bound: the first queues
    it counts for keep their series; the others count in _other (sticky, so no series moves)."""
    tag = uuid.uuid4().hex[:8]
    names = [f"c{tag}-{i}" for i in range(5)]
    async with running_app(make_settings(database_url, metrics_queues=2,
                                         metrics_queue_pattern=f"c{tag}-*")) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://jobq") as c:
            before = _samples((await c.get("/metrics")).text, "jobq_jobs_total")
            for name in (*names, names[0], "outside"):  # "outside" does not match the pattern
                r = await c.post("/v1/jobs", json={"type": "t", "queue": name})
                assert r.status_code == 201, r.text
            r = await c.post("/v1/leases", json={"worker_id": "w", "queues": names[3:4]})
            assert r.status_code == 200 and r.json()["leases"], r.text
            text = (await c.get("/metrics")).text
    after = _samples(text, "jobq_jobs_total")

    def delta(queue: str, event: str) -> float:
        key = (("event", event), ("queue", queue))
        return after.get(key, 0) - before.get(key, 0)

    assert delta(names[0], "enqueued") == 2 and delta(names[1], "enqueued") == 1
    assert delta("_other", "enqueued") == 4  # names[2:], and outside
    assert delta("_other", "claimed") == 1
    for name in (*names[2:], "outside"):
        assert not any(("queue", name) in labels for labels in after), name
    pickup = _samples(text, "jobq_job_pickup_seconds_count")
    assert pickup.get((("queue", "_other"),), 0) >= 1
    assert not any(("queue", names[3]) in labels for labels in pickup)
