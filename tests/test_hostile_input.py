"""Hostile input (issue 11): times that fit no reader, values of the wrong JSON type, and rows
no API call could have written. Each was found by fuzzing; each case here broke something a
user would see (a 422 for a committed job, a queue nobody could list or claim from, leases
committed for a claim that then failed, a value silently coerced)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest

from tests.helpers import claim, enqueue, now, problem, total, ts, validation

pytestmark = pytest.mark.timeout(60)

TEN_YEARS_MS = 10 * 365 * 24 * 3600 * 1000

# Inside the years 1-9999 as written, outside them once in UTC; and the edges that still fit.
OUTSIDE_UTC_YEARS = ["9999-12-31T23:59:59-14:00", "9999-12-31T23:00:00-01:00",
                     "0001-01-01T00:00:00+14:00", "0001-01-01T00:59:59+01:00"]
EDGES = ["9999-12-31T23:59:59.999999Z", "9999-12-31T23:59:59+00:00",
         "0001-01-01T00:00:00Z", "0001-01-01T14:00:00+14:00", "9999-12-31T09:59:59-14:00"]


async def lease_id(c: httpx.AsyncClient, queue: str = "default") -> str:
    await enqueue(c, "leased", queue=queue)
    [lease] = await claim(c, queue)
    return str(lease["lease_id"])


async def usable(c: httpx.AsyncClient, queue: str) -> None:
    """The queue can be listed, read and claimed from: what the worker runner needs."""
    listed = await c.get("/v1/jobs", params={"queue": queue})
    assert listed.status_code == 200, listed.text
    assert (await c.get("/v1/queues")).status_code == 200
    got = await c.post("/v1/leases", json={"worker_id": "w", "queues": [queue], "limit": 10})
    assert got.status_code == 200, got.text


# --- times that fit no reader ----------------------------------------------------------------


@pytest.mark.parametrize("run_at", OUTSIDE_UTC_YEARS)
async def test_run_at_outside_the_utc_years_is_refused_and_nothing_is_written(
        client: httpx.AsyncClient, run_at: str) -> None:
    # It used to be committed, then answered 422 as the row could not be read back; from then
    # on every listing of and claim from its queue answered 422.
    errors = validation(await client.post("/v1/jobs", json={"type": "noop", "queue": "pz",
                                                            "run_at": run_at}), "body", "run_at")
    assert any("9999" in e["msg"] for e in errors), errors
    validation(await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "ok", "queue": "pz"}, {"type": "noop", "queue": "pz", "run_at": run_at}]}),
        "body", "jobs", 1, "run_at")
    assert await total(client, "pz") == 0
    await enqueue(client, "fine", queue="pz")
    await usable(client, "pz")


async def test_run_at_at_the_edges_of_the_years_is_kept(client: httpx.AsyncClient) -> None:
    for i, run_at in enumerate(EDGES):
        r = await client.post("/v1/jobs", json={"type": f"t{i}", "queue": "edge", "run_at": run_at})
        assert r.status_code == 201, (run_at, r.text)
        want = datetime.fromisoformat(run_at.replace("Z", "+00:00")).astimezone(UTC)
        assert ts(r.json()["visible_at"]) == want
        got = await client.get(f"/v1/jobs/{r.json()['id']}")
        assert ts(got.json()["visible_at"]) == want
    r = await client.post("/v1/jobs/batch", json={"jobs": [
        {"type": "b", "queue": "edge", "run_at": run_at} for run_at in EDGES]})
    assert r.status_code == 201, r.text
    listed = (await client.get("/v1/jobs", params={"queue": "edge"})).json()["jobs"]
    assert len(listed) == 2 * len(EDGES)
    # The year-1 jobs are long due: claimable now, oldest first; the year-9999 ones are not.
    leases = await claim(client, "edge", limit=100)
    assert sorted(le["job"]["type"] for le in leases) == ["b", "b", "t2", "t3"]
    assert {ts(le["job"]["visible_at"]).year for le in leases} == {1}
    queue = (await client.get("/v1/queues/edge")).json()
    assert queue["counts"]["pending"] == 2 * len(EDGES) - 4
    # A long-poll on a queue whose next job is due in year 9999 times out as usual.
    r = await client.post("/v1/leases", json={"worker_id": "w", "queues": ["edge"],
                                              "wait_ms": 200})
    assert r.status_code == 200 and r.json() == {"leases": []}


async def test_run_at_is_rfc_3339_text_only(client: httpx.AsyncClient) -> None:
    for run_at in (123, 1.5, "123", "1700000000", True, "2030-01-01", "2030-01-01T00:00:00",
                   "2030-01-01T00:00Z", "20300101T000000Z", "2030-01-01T00:00:00+0200",
                   "2030-01-01T00:00:00 Z", " 2030-01-01T00:00:00Z", "2030-02-30T00:00:00Z",
                   "2030-01-01T24:00:00Z", "2030-01-01T00:00:00+24:00", "10000-01-01T00:00:00Z",
                   "0000-01-01T00:00:00Z", {"at": "2030-01-01T00:00:00Z"}):
        validation(await client.post("/v1/jobs", json={"type": "t", "run_at": run_at}),
                   "body", "run_at")
        validation(await client.post("/v1/jobs/batch", json={"jobs": [{"type": "t",
                                                                       "run_at": run_at}]}),
                   "body", "jobs", 0, "run_at")
    assert await total(client) == 0
    # RFC 3339's own variants: lower-case t and z, a space, any number of fraction digits.
    for run_at in ("2030-01-01t00:00:00z", "2030-01-01 00:00:00Z", "2030-01-01T00:00:00.1Z",
                   "2030-01-01T00:00:00.123456789+00:00", "2030-01-01T01:30:00+01:30"):
        r = await client.post("/v1/jobs", json={"type": "t", "run_at": run_at})
        assert r.status_code == 201, (run_at, r.text)
        assert ts(r.json()["visible_at"]).replace(microsecond=0) == datetime(2030, 1, 1, tzinfo=UTC)


async def test_delay_ms_is_refused_past_ten_years(client: httpx.AsyncClient) -> None:
    # Refused rather than capped: a producer asking for more should hear it was not done.
    # Ten years from any date before 9989 stays within year 9999.
    for delay in (TEN_YEARS_MS + 1, 2**63 - 1):
        validation(await client.post("/v1/jobs", json={"type": "t", "delay_ms": delay}),
                   "body", "delay_ms")
        validation(await client.post("/v1/jobs/batch", json={"jobs": [{"type": "t",
                                                                       "delay_ms": delay}]}),
                   "body", "jobs", 0, "delay_ms")
    lid = await lease_id(client)
    validation(await client.post(f"/v1/leases/{lid}/fail",
                                 json={"error": "e", "retry_in_ms": TEN_YEARS_MS + 1}),
               "body", "retry_in_ms")
    before = now()
    job = await enqueue(client, delay_ms=TEN_YEARS_MS)
    visible = ts(job["visible_at"])
    assert before + timedelta(milliseconds=TEN_YEARS_MS) <= visible
    assert visible <= now() + timedelta(milliseconds=TEN_YEARS_MS)
    r = await client.post(f"/v1/leases/{lid}/fail", json={"error": "e",
                                                          "retry_in_ms": TEN_YEARS_MS})
    assert r.status_code == 200 and r.json()["status"] == "failed"
    await usable(client, "default")


STORED = ["10000-01-01 13:59:59+00", "294276-12-31 23:59:59+00", "infinity",
          "0001-12-31 10:00:00+00 BC", "4713-01-01 00:00:00+00 BC", "-infinity"]


async def test_rows_no_api_call_could_write_never_break_a_read(
        client: httpx.AsyncClient, database_url: str) -> None:
    """Rows written before the API refused such times (or by hand): every read still works,
    and a claim hands out every lease it commits. Times past year 9999 read as its last
    instant, times before year 1 as its first."""
    ids = [(await enqueue(client, f"t{i}", queue="pz"))["id"] for i in range(len(STORED))]
    done = await enqueue(client, "done", queue="pz")
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        for job_id, value in zip(ids, STORED, strict=True):
            await conn.execute("UPDATE jobs SET visible_at = %s::timestamptz, "
                               "created_at = %s::timestamptz WHERE id = %s",
                               (value, value, job_id))
        await conn.execute("UPDATE jobs SET status = 'completed', completed_at = 'infinity' "
                           "WHERE id = %s", (done["id"],))
    for job_id, value in zip(ids, STORED, strict=True):
        r = await client.get(f"/v1/jobs/{job_id}")
        assert r.status_code == 200, (value, r.text)
        want = "0001-01-01T00:00:00Z" if value.endswith(("BC", "-infinity")) else \
            "9999-12-31T23:59:59.999999Z"
        assert r.json()["visible_at"] == want and r.json()["created_at"] == want
    assert (await client.get(f"/v1/jobs/{done['id']}")).json()["completed_at"] == \
        "9999-12-31T23:59:59.999999Z"
    listed = await client.get("/v1/jobs", params={"queue": "pz"})
    assert listed.status_code == 200 and len(listed.json()["jobs"]) == len(STORED) + 1
    for path in ("/v1/queues", "/v1/queues/pz", "/metrics"):
        assert (await client.get(path)).status_code == 200, path
    assert (await client.get("/v1/queues/pz")).json()["oldest_waiting_ms"] > 0
    # The three in the past are claimable, and all three leases reach the worker.
    r = await client.post("/v1/leases", json={"worker_id": "w", "queues": ["pz"], "limit": 10})
    assert r.status_code == 200, r.text
    leases = r.json()["leases"]
    assert sorted(le["job"]["type"] for le in leases) == ["t3", "t4", "t5"]
    for le in leases:
        assert (await client.post(f"/v1/leases/{le['lease_id']}/ack")).status_code == 200
    r = await client.post("/v1/leases", json={"worker_id": "w", "queues": ["pz"],
                                              "wait_ms": 200})
    assert r.status_code == 200 and r.json() == {"leases": []}


# --- no coercion -----------------------------------------------------------------------------


async def test_values_of_the_wrong_json_type_are_not_coerced(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    job_cases: list[tuple[str, Any]] = [
        ("priority", "1"), ("priority", True), ("priority", 1.0), ("priority", "0x1"),
        ("delay_ms", "5"), ("delay_ms", False), ("delay_ms", 5.0),
        ("max_attempts", "3"), ("max_attempts", True), ("max_attempts", 3.0),
        ("run_at", 123), ("run_at", 0), ("type", 1), ("queue", 1), ("idempotency_key", 1),
        ("payload", [["a", 1]]),
    ]
    for field, value in job_cases:
        validation(await client.post("/v1/jobs", json={"type": "t", field: value}), "body", field)
        validation(await client.post("/v1/jobs/batch", json={"jobs": [{"type": "t", field: value}]}),
                   "body", "jobs", 0, field)
    base = {"worker_id": "w", "queues": ["default"]}
    cases: list[tuple[str, dict[str, Any], list[str | int]]] = [
        ("/v1/leases", {**base, "limit": "1"}, ["body", "limit"]),
        ("/v1/leases", {**base, "limit": True}, ["body", "limit"]),
        ("/v1/leases", {**base, "limit": 1.0}, ["body", "limit"]),
        ("/v1/leases", {**base, "wait_ms": False}, ["body", "wait_ms"]),
        ("/v1/leases", {**base, "wait_ms": "0"}, ["body", "wait_ms"]),
        ("/v1/leases", {**base, "lease_ms": "1000"}, ["body", "lease_ms"]),
        ("/v1/leases", {**base, "worker_id": 7}, ["body", "worker_id"]),
        ("/v1/leases", {**base, "queues": ["default", 1]}, ["body", "queues", 1]),
        ("/v1/leases", {**base, "types": [1]}, ["body", "types", 0]),
        (f"/v1/leases/{lid}/heartbeat", {"extend_ms": "1000"}, ["body", "extend_ms"]),
        (f"/v1/leases/{lid}/heartbeat", {"extend_ms": 1000.0}, ["body", "extend_ms"]),
        (f"/v1/leases/{lid}/fail", {"error": "e", "retry": 0}, ["body", "retry"]),
        (f"/v1/leases/{lid}/fail", {"error": "e", "retry": "false"}, ["body", "retry"]),
        (f"/v1/leases/{lid}/fail", {"error": "e", "retry_in_ms": "10"}, ["body", "retry_in_ms"]),
        (f"/v1/leases/{lid}/fail", {"error": 1}, ["body", "error"]),
        ("/v1/leases/ack", {"acks": [{"lease_id": 1}]}, ["body", "acks", 0, "lease_id"]),
        ("/v1/dead/replay", {"limit": "1"}, ["body", "limit"]),
    ]
    for path, body, loc in cases:
        validation(await client.post(path, json=body), *loc)
    for setting, value in (("paused", "yes"), ("paused", 1), ("paused", "true"),
                           ("max_depth", "5"), ("lease_ms", 1000.0), ("max_attempts", True),
                           ("max_running", "2"), ("aging_ms", False), ("retention_ms", "1")):
        validation(await client.patch("/v1/queues/default", json={setting: value}),
                   "body", setting)
    # Nothing changed: one job, still running under its lease, the queue as it was.
    assert await total(client) == 1
    assert (await client.get("/v1/queues/default")).json()["settings"]["paused"] is False
    assert (await client.post(f"/v1/leases/{lid}/ack")).status_code == 200


async def test_query_parameters_are_text_and_stay_parsed(client: httpx.AsyncClient) -> None:
    for i in range(3):
        await enqueue(client, f"t{i}")
    r = await client.get("/v1/jobs?limit=2")
    assert r.status_code == 200 and len(r.json()["jobs"]) == 2
    assert (await client.delete("/v1/dead?limit=1")).json() == {"purged": 0}
    validation(await client.get("/v1/jobs?limit=two"), "query", "limit")


# --- fail needs an error ---------------------------------------------------------------------


async def test_fail_without_an_error_is_422_and_changes_nothing(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    for body in ({}, {"retry": False}, {"retry_in_ms": 10}, {"error": None}):
        validation(await client.post(f"/v1/leases/{lid}/fail", json=body), "body", "error")
    for raw in (b"", b"null"):
        r = await client.post(f"/v1/leases/{lid}/fail", content=raw,
                              headers={"content-type": "application/json"})
        validation(r, "body")
    validation(await client.post(f"/v1/leases/{lid}/fail"), "body")
    [job] = (await client.get("/v1/jobs")).json()["jobs"]
    assert job["status"] == "running" and job["errors"] == []
    # An empty error is still an error; it is recorded as sent.
    r = await client.post(f"/v1/leases/{lid}/fail", json={"error": "", "retry": False})
    assert r.status_code == 200, r.text
    assert r.json()["status"] == "dead" and r.json()["errors"][0]["error"] == ""
    problem(await client.post(f"/v1/leases/{lid}/fail", json={"error": "again"}), 409,
            "lease_lost")


# --- payloads read back from jsonb -----------------------------------------------------------


async def test_an_exact_retry_with_any_number_is_an_idempotent_replay(
        client: httpx.AsyncClient) -> None:
    # jsonb keeps 1e300 as an exact decimal and hands it back as a 301-digit integer, which
    # Python's == tells apart from the float: the retry was refused as a conflict.
    for i, number in enumerate((b"1e300", b"-1.5e300", b"1e22", b"5e-324", b"0.1", b"-0.0",
                                b"123456789.123456789", b"1E+2")):
        raw = b'{"type": "t", "idempotency_key": "k%d", "payload": {"x": [%s]}}' % (i, number)
        first = await client.post("/v1/jobs", content=raw,
                                  headers={"content-type": "application/json"})
        assert first.status_code == 201, (number, first.text[:200])
        again = await client.post("/v1/jobs", content=raw,
                                  headers={"content-type": "application/json"})
        assert again.status_code == 200, (number, again.text[:200])
        assert again.json()["id"] == first.json()["id"]
        batch = await client.post("/v1/jobs/batch", content=b'{"jobs": [%s]}' % raw,
                                  headers={"content-type": "application/json"})
        assert batch.status_code == 201 and batch.json()["jobs"][0]["id"] == first.json()["id"]
    # true is not 1, and 1 is 1.0, as jsonb has them.
    await enqueue(client, idempotency_key="b", payload={"x": True})
    problem(await client.post("/v1/jobs", json={"type": "t", "idempotency_key": "b",
                                                "payload": {"x": 1}}), 409, "idempotency_conflict")
    await enqueue(client, idempotency_key="n", payload={"x": 1})
    r = await client.post("/v1/jobs", json={"type": "t", "idempotency_key": "n",
                                            "payload": {"x": 1.0}})
    assert r.status_code == 200, r.text
    assert await total(client) == 10


# --- NUL characters, which PostgreSQL cannot store ----------------------------------------------

NUL_MSG = "a NUL character (\\u0000) is not accepted: PostgreSQL cannot store it"


def nul_at(r: httpx.Response, *loc: str | int) -> None:
    """A 422 whose only error names exactly ``loc``, said before the database saw anything
    (it used to be "value not accepted by the database" at ["body"])."""
    errors = validation(r)
    assert [e["loc"] for e in errors] == [list(loc)], errors
    assert "NUL" in errors[0]["msg"] and "database" not in r.json()["detail"], r.json()


async def test_a_nul_character_is_refused_naming_its_field(client: httpx.AsyncClient) -> None:
    for body, loc in [
        ({"type": "t", "queue": "nul", "payload": {"a": "x\x00y"}}, ("payload", "a")),
        ({"type": "t", "queue": "nul", "payload": {"a": {"b": ["ok", "\x00"]}}}, ("payload", "a", "b", 1)),
        ({"type": "t", "queue": "nul", "payload": {"k\x00": 1}}, ("payload", "k\x00")),
        ({"type": "t\x00", "queue": "nul"}, ("type",)),
        ({"type": "t", "queue": "nul", "idempotency_key": "k\x00"}, ("idempotency_key",)),
    ]:
        nul_at(await client.post("/v1/jobs", json=body), "body", *loc)
    r = await client.post("/v1/jobs", json={"type": "t", "queue": "nul", "payload": {"k\x00": 1}})
    assert validation(r)[0]["msg"] == NUL_MSG.replace("is not", "in a key is not")
    assert validation(await client.post("/v1/jobs", json={"type": "t", "payload": {"a": "\x00"}}))[0]["msg"] == NUL_MSG
    # A batch names the job by its index; none of the batch is written.
    batch = {"jobs": [{"type": "t", "queue": "nul"}, {"type": "t", "queue": "nul"},
                      {"type": "t", "queue": "nul", "payload": {"a": ["\x00"]}}]}
    nul_at(await client.post("/v1/jobs/batch", json=batch), "body", "jobs", 2, "payload", "a", 0)
    assert await total(client, "nul") == 0
    # A backslash before "u0000" is no NUL: the text \u0000 is an ordinary string.
    kept = await enqueue(client, "t", queue="nul", payload={"a": "\\u0000"})
    assert kept["payload"] == {"a": "\\u0000"}
    # Nor is JSON sent in UTF-16 a way round it (the standard library reads that too).
    r = await client.post("/v1/jobs", content='{"type": "t", "queue": "nul", "payload": {"a": "\\u0000"}}'
                          .encode("utf-16"), headers={"content-type": "application/json"})
    nul_at(r, "body", "payload", "a")
    assert await total(client, "nul") == 1


async def test_a_nul_character_in_an_ack_result_or_a_fail_error_leaves_the_lease_alone(
        client: httpx.AsyncClient) -> None:
    lid = await lease_id(client, "nul-lease")
    nul_at(await client.post(f"/v1/leases/{lid}/ack", json={"result": {"r": "\x00"}}), "body", "result", "r")
    nul_at(await client.post(f"/v1/leases/{lid}/fail", json={"error": "boom\x00"}), "body", "error")
    nul_at(await client.post("/v1/leases/ack", json={"acks": [{"lease_id": lid, "result": {"x": ["\x00"]}}]}),
           "body", "acks", 0, "result", "x", 0)
    [job] = (await client.get("/v1/jobs", params={"queue": "nul-lease"})).json()["jobs"]
    assert job["status"] == "running" and job["errors"] == [] and job["result"] is None, job
    done = await client.post(f"/v1/leases/{lid}/ack", json={"result": {"r": "fine"}})
    assert done.status_code == 200, done.text


async def test_a_nul_character_in_a_schedule_or_a_publish_is_named(client: httpx.AsyncClient) -> None:
    put = {"cron": "@daily", "job": {"type": "t", "queue": "nul-s", "payload": {"a": "\x00"}}}
    nul_at(await client.put("/v1/schedules/nightly", json=put), "body", "job", "payload", "a")
    assert (await client.get("/v1/schedules/nightly")).status_code == 404
    put["job"]["payload"] = {"a": "ok"}  # type: ignore[index]
    assert (await client.put("/v1/schedules/nightly", json=put)).status_code == 201
    nul_at(await client.patch("/v1/schedules/nightly", json={"job": {"payload": {"b": "\x00"}}}),
           "body", "job", "payload", "b")
    # A PATCH without one still works, and the refused one changed nothing.
    patched = await client.patch("/v1/schedules/nightly", json={"enabled": False})
    assert patched.status_code == 200, patched.text
    assert patched.json()["job"]["payload"] == {"a": "ok"} and patched.json()["enabled"] is False
    sub = await client.put("/v1/topics/news/subscriptions/nul-s")
    assert sub.status_code in (200, 201), sub.text
    nul_at(await client.post("/v1/topics/news/publish", json={"type": "t", "payload": {"a": "\x00"}}),
           "body", "payload", "a")
    assert await total(client, "nul-s") == 0
