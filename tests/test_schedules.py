"""Schedules over HTTP (issue 13): create, replace, read, list, change, delete; every bad
request a problem+json 422 naming the field; admin only once tokens exist."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from jobq.core import tokens
from jobq.domain.access import Role
from tests.helpers import problem, ts, validation

BODY: dict[str, Any] = {"cron": "0 2 * * *", "timezone": "Europe/Berlin", "misfire": "skip",
                        "job": {"queue": "reports", "type": "report.nightly", "payload": {"f": "pdf"}}}


async def test_put_creates_then_replaces_and_get_shows_it(client: httpx.AsyncClient) -> None:
    r = await client.put("/v1/schedules/nightly", json=BODY)
    assert r.status_code == 201, r.text
    assert r.headers["location"] == "/v1/schedules/nightly"
    body = r.json()
    assert body["name"] == "nightly" and body["cron"] == "0 2 * * *"
    assert body["timezone"] == "Europe/Berlin" and body["misfire"] == "skip" and body["enabled"] is True
    assert body["job"] == {"queue": "reports", "type": "report.nightly", "payload": {"f": "pdf"},
                           "priority": 0, "max_attempts": None}
    nxt = ts(body["next_fire_at"])
    assert nxt.minute == 0 and nxt.hour in (0, 1)  # 02:00 in Berlin is 01:00 or 00:00 UTC
    assert body["last_fired_at"] is None and body["last_job_id"] is None
    assert body["pending_fire_at"] is None

    r = await client.put("/v1/schedules/nightly", json={"cron": "*/5  *  * * *", "job": {"type": "x"}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["cron"] == "*/5 * * * *" and body["timezone"] == "UTC" and body["misfire"] == "run_once"
    assert body["job"] == {"queue": "default", "type": "x", "payload": {}, "priority": 0, "max_attempts": None}
    got = await client.get("/v1/schedules/nightly")
    assert got.status_code == 200 and got.json() == body


async def test_list_shape_is_the_sdks(client: httpx.AsyncClient) -> None:
    assert (await client.get("/v1/schedules")).json() == {"schedules": []}
    for name in ("b", "a"):
        assert (await client.put(f"/v1/schedules/{name}", json=BODY)).status_code == 201
    r = await client.get("/v1/schedules")
    assert [s["name"] for s in r.json()["schedules"]] == ["a", "b"]


async def test_patch_disables_enables_and_changes_parts_of_the_job(client: httpx.AsyncClient) -> None:
    await client.put("/v1/schedules/p", json={**BODY, "job": {**BODY["job"], "priority": 5, "max_attempts": 3}})
    r = await client.patch("/v1/schedules/p", json={"enabled": False})
    assert r.status_code == 200 and r.json()["enabled"] is False and r.json()["next_fire_at"] is None
    r = await client.patch("/v1/schedules/p", json={"enabled": True, "job": {"payload": {"g": 1}, "priority": None}})
    body = r.json()
    assert r.status_code == 200 and body["enabled"] is True and body["next_fire_at"] is not None
    assert body["job"] == {"queue": "reports", "type": "report.nightly", "payload": {"g": 1},
                           "priority": 0, "max_attempts": 3}
    r = await client.patch("/v1/schedules/p", json={"cron": "@hourly", "timezone": "Asia/Tokyo",
                                                     "misfire": "run_once"})
    body = r.json()
    assert (body["cron"], body["timezone"], body["misfire"]) == ("@hourly", "Asia/Tokyo", "run_once")
    assert ts(body["next_fire_at"]).minute == 0
    assert (await client.patch("/v1/schedules/p", json={})).json()["cron"] == "@hourly"


async def test_delete_then_404(client: httpx.AsyncClient) -> None:
    await client.put("/v1/schedules/gone", json=BODY)
    r = await client.delete("/v1/schedules/gone")
    assert r.status_code == 204 and r.content == b""
    for method in ("GET", "DELETE"):
        problem(await client.request(method, "/v1/schedules/gone"), 404, "not_found")
    problem(await client.patch("/v1/schedules/gone", json={"enabled": False}), 404, "not_found")


def _with(**changes: Any) -> dict[str, Any]:
    body = {**BODY, "job": dict(BODY["job"])}
    for key, value in changes.items():
        if key.startswith("job_"):
            body["job"][key[4:]] = value
        else:
            body[key] = value
    return body


@pytest.mark.parametrize(("body", "loc"), [
    (_with(cron="0 2 * *"), ["body", "cron"]),
    (_with(cron="61 * * * *"), ["body", "cron"]),
    (_with(cron="0 2 * * * * *"), ["body", "cron"]),
    (_with(cron=""), ["body", "cron"]),
    (_with(cron=5), ["body", "cron"]),
    (_with(timezone="Mars/Olympus"), ["body", "timezone"]),
    (_with(timezone="../../etc/passwd"), ["body", "timezone"]),
    (_with(misfire="always"), ["body", "misfire"]),
    (_with(enabled="yes"), ["body", "enabled"]),
    (_with(enabled=None), ["body", "enabled"]),
    (_with(job_queue="no spaces"), ["body", "job", "queue"]),
    (_with(job_type=""), ["body", "job", "type"]),
    (_with(job_payload=[1]), ["body", "job", "payload"]),
    (_with(job_priority=2**40), ["body", "job", "priority"]),
    (_with(job_max_attempts=0), ["body", "job", "max_attempts"]),
    (_with(job_idempotency_key="k"), ["body", "job", "idempotency_key"]),
    (_with(every="1h"), ["body", "every"]),
    ({"cron": "0 2 * * *"}, ["body", "job"]),
    ({"job": {"type": "x"}}, ["body", "cron"]),
])
async def test_put_refuses_bad_fields_naming_them(client: httpx.AsyncClient, body: Any,
                                                  loc: list[str]) -> None:
    validation(await client.put("/v1/schedules/bad", json=body), *loc)
    problem(await client.get("/v1/schedules/bad"), 404, "not_found")  # nothing was written


@pytest.mark.parametrize(("body", "loc"), [
    ({"cron": "every day"}, ["body", "cron"]),
    ({"cron": None}, ["body", "cron"]),
    ({"timezone": "Nowhere"}, ["body", "timezone"]),
    ({"misfire": None}, ["body", "misfire"]),
    ({"enabled": 1}, ["body", "enabled"]),
    ({"job": None}, ["body", "job"]),
    ({"job": {"type": None}}, ["body", "job", "type"]),
    ({"job": {"queue": "-bad"}}, ["body", "job", "queue"]),
    ({"next_fire_at": "2030-01-01T00:00:00Z"}, ["body", "next_fire_at"]),
])
async def test_patch_refuses_bad_fields_naming_them(client: httpx.AsyncClient, body: Any,
                                                    loc: list[str]) -> None:
    await client.put("/v1/schedules/pb", json=BODY)
    before = (await client.get("/v1/schedules/pb")).json()
    validation(await client.patch("/v1/schedules/pb", json=body), *loc)
    assert (await client.get("/v1/schedules/pb")).json() == before


@pytest.mark.parametrize("name", ["-x", "a b", "x" * 129, "ä"])
async def test_names_follow_the_queue_name_rules(client: httpx.AsyncClient, name: str) -> None:
    validation(await client.put(f"/v1/schedules/{name}", json=BODY), "path", "name")
    validation(await client.get(f"/v1/schedules/{name}"), "path", "name")


async def test_a_body_that_is_not_json_is_a_422(client: httpx.AsyncClient) -> None:
    r = await client.put("/v1/schedules/x", content=b"{nope", headers={"content-type": "application/json"})
    validation(r)


async def test_admin_of_every_queue_only_once_tokens_exist(app: FastAPI, client: httpx.AsyncClient) -> None:
    db = app.state.ctx.db
    made = {}
    for name, role, queues in [("admin", Role.ADMIN, "*"), ("scoped", Role.ADMIN, "reports"),
                               ("producer", Role.PRODUCER, "*"), ("worker", Role.WORKER, "*")]:
        _, made[name] = await tokens.create(db, role, queues, name=name)
    await app.state.tokens.refresh()

    def auth(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {made[who]}"}

    assert (await client.put("/v1/schedules/s", json=BODY, headers=auth("admin"))).status_code == 201
    for who in ("producer", "worker", "scoped"):
        for method, body in [("GET", None), ("PUT", BODY), ("PATCH", {"enabled": False}), ("DELETE", None)]:
            r = await client.request(method, "/v1/schedules/s", json=body, headers=auth(who))
            problem(r, 403, "forbidden")
        problem(await client.get("/v1/schedules", headers=auth(who)), 403, "forbidden")
    problem(await client.get("/v1/schedules"), 401, "unauthorized")
    r = await client.get("/v1/schedules/s", headers=auth("admin"))
    assert r.status_code == 200 and r.json()["enabled"] is True


async def test_cron_and_timezone_errors_read_as_words(client: httpx.AsyncClient) -> None:
    r = await client.put("/v1/schedules/bad", json={"cron": "61 * * * *", "timezone": "Mars/Base",
                                                    "job": {"queue": "q", "type": "t"}})
    assert r.status_code == 422
    assert r.json()["errors"] == [
        {"loc": ["body", "cron"], "msg": "minute field '61': values are 0-59"},
        {"loc": ["body", "timezone"], "msg": "timezone 'Mars/Base': unknown IANA time zone"},
    ]
