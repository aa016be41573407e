"""Every limit on what a request may hold answers a 4xx problem whose ``errors[].loc`` names
the field (the body size: a 413 whose detail names the limit), and changes nothing. One row
per limit, each side of it where it has two; the edges themselves are accepted."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from tests.helpers import claim, enqueue, problem, total, validation

pytestmark = pytest.mark.timeout(120)

MIB = 1024 * 1024
DAY_MS = 24 * 3600 * 1000
TEN_YEARS_MS = 10 * 365 * DAY_MS
MAX_INT32 = 2**31 - 1
JSON = {"content-type": "application/json"}
CLAIM = {"worker_id": "w", "queues": ["default"]}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def body_of_size(n: int) -> bytes:
    head, tail = b'{"type": "t", "payload": {"pad": "', b'"}}'
    return head + b"x" * (n - len(head) - len(tail)) + tail


# (what, method, path, body: a JSON value or raw bytes, query, loc). "{lease}" is a held lease.
Case = tuple[str, str, str, Any, dict[str, str] | None, list[str | int]]

CASES: list[Case] = [
    # batches and lists
    ("batch over 1000", "POST", "/v1/jobs/batch", {"jobs": [{"type": "t"}] * 1001}, None,
     ["body", "jobs"]),
    ("empty batch", "POST", "/v1/jobs/batch", {"jobs": []}, None, ["body", "jobs"]),
    ("no queues", "POST", "/v1/leases", {**CLAIM, "queues": []}, None, ["body", "queues"]),
    ("over 100 queues", "POST", "/v1/leases", {**CLAIM, "queues": ["q"] * 101}, None,
     ["body", "queues"]),
    ("no types", "POST", "/v1/leases", {**CLAIM, "types": []}, None, ["body", "types"]),
    ("over 1000 types", "POST", "/v1/leases", {**CLAIM, "types": ["t"] * 1001}, None,
     ["body", "types"]),
    ("no acks", "POST", "/v1/leases/ack", {"acks": []}, None, ["body", "acks"]),
    ("over 1000 acks", "POST", "/v1/leases/ack", {"acks": [{"lease_id": "1.1"}] * 1001}, None,
     ["body", "acks"]),
    # nesting depth of payloads and results (128 levels, the payload object being the first)
    ("payload too deep", "POST", "/v1/jobs",
     b'{"type": "t", "payload": {"n": %s}}' % nested(128).encode(), None, ["body", "payload"]),
    ("batch payload too deep", "POST", "/v1/jobs/batch",
     b'{"jobs": [{"type": "t"}, {"type": "t", "payload": {"n": %s}}]}' % nested(128).encode(),
     None, ["body", "jobs", 1, "payload"]),
    ("result too deep", "POST", "/v1/leases/{lease}/ack",
     b'{"result": %s}' % nested(129).encode(), None, ["body", "result"]),
    ("batch result too deep", "POST", "/v1/leases/ack",
     b'{"acks": [{"lease_id": "1.1", "result": %s}]}' % nested(129).encode(), None,
     ["body", "acks", 0, "result"]),
    # names: length and alphabet
    ("empty type", "POST", "/v1/jobs", {"type": ""}, None, ["body", "type"]),
    ("type over 255", "POST", "/v1/jobs", {"type": "t" * 256}, None, ["body", "type"]),
    ("queue over 128", "POST", "/v1/jobs", {"type": "t", "queue": "q" * 129}, None,
     ["body", "queue"]),
    ("queue alphabet", "POST", "/v1/jobs", {"type": "t", "queue": "a b"}, None, ["body", "queue"]),
    ("batch queue alphabet", "POST", "/v1/jobs/batch", {"jobs": [{"type": "t", "queue": "a/b"}]},
     None, ["body", "jobs", 0, "queue"]),
    ("idempotency key over 255", "POST", "/v1/jobs", {"type": "t", "idempotency_key": "k" * 256},
     None, ["body", "idempotency_key"]),
    ("worker id over 255", "POST", "/v1/leases", {**CLAIM, "worker_id": "w" * 256}, None,
     ["body", "worker_id"]),
    ("claimed queue alphabet", "POST", "/v1/leases", {**CLAIM, "queues": ["ok", "*"]}, None,
     ["body", "queues", 1]),
    ("claimed type over 255", "POST", "/v1/leases", {**CLAIM, "types": ["t" * 256]}, None,
     ["body", "types", 0]),
    ("lease id over 100", "POST", "/v1/leases/ack", {"acks": [{"lease_id": "1" * 101}]}, None,
     ["body", "acks", 0, "lease_id"]),
    ("error over 64 KiB", "POST", "/v1/leases/{lease}/fail", {"error": "e" * 65_537}, None,
     ["body", "error"]),
    ("NUL in an error", "POST", "/v1/leases/{lease}/fail", {"error": "a\u0000b"}, None,
     ["body", "error"]),
    ("queue name in path", "PATCH", "/v1/queues/" + "q" * 129, {"paused": True}, None,
     ["path", "name"]),
    ("queue name in path", "GET", "/v1/queues/a%20b", None, None, ["path", "name"]),
    ("listed queue", "GET", "/v1/jobs", None, {"queue": "a b"}, ["query", "queue"]),
    ("listed type over 255", "GET", "/v1/jobs", None, {"type": "t" * 256}, ["query", "type"]),
    ("cursor over 200", "GET", "/v1/jobs", None, {"cursor": "c" * 201}, ["query", "cursor"]),
    ("replayed queue", "POST", "/v1/dead/replay", {"queue": "a b"}, None, ["body", "queue"]),
    ("purged queue", "DELETE", "/v1/dead", None, {"queue": "a b"}, ["query", "queue"]),
    # limit and wait_ms
    ("claim limit 0", "POST", "/v1/leases", {**CLAIM, "limit": 0}, None, ["body", "limit"]),
    ("claim limit over 1000", "POST", "/v1/leases", {**CLAIM, "limit": 1001}, None,
     ["body", "limit"]),
    ("list limit 0", "GET", "/v1/jobs", None, {"limit": "0"}, ["query", "limit"]),
    ("list limit over 1000", "GET", "/v1/jobs", None, {"limit": "1001"}, ["query", "limit"]),
    ("replay limit 0", "POST", "/v1/dead/replay", {"limit": 0}, None, ["body", "limit"]),
    ("purge limit 0", "DELETE", "/v1/dead", None, {"limit": "0"}, ["query", "limit"]),
    ("negative wait", "POST", "/v1/leases", {**CLAIM, "wait_ms": -1}, None, ["body", "wait_ms"]),
    ("wait over 30 s", "POST", "/v1/leases", {**CLAIM, "wait_ms": 30_001}, None,
     ["body", "wait_ms"]),
    # numbers of a job
    ("priority over 32 bits", "POST", "/v1/jobs", {"type": "t", "priority": MAX_INT32 + 1},
     None, ["body", "priority"]),
    ("priority under 32 bits", "POST", "/v1/jobs", {"type": "t", "priority": -MAX_INT32 - 1},
     None, ["body", "priority"]),
    ("max_attempts 0", "POST", "/v1/jobs", {"type": "t", "max_attempts": 0}, None,
     ["body", "max_attempts"]),
    ("max_attempts over 10000", "POST", "/v1/jobs", {"type": "t", "max_attempts": 10_001}, None,
     ["body", "max_attempts"]),
    ("negative delay", "POST", "/v1/jobs", {"type": "t", "delay_ms": -1}, None,
     ["body", "delay_ms"]),
    ("delay over 10 years", "POST", "/v1/jobs", {"type": "t", "delay_ms": TEN_YEARS_MS + 1},
     None, ["body", "delay_ms"]),
    ("run_at past year 9999 in UTC", "POST", "/v1/jobs",
     {"type": "t", "run_at": "9999-12-31T23:59:59-14:00"}, None, ["body", "run_at"]),
    # numbers of a lease
    ("lease under 100 ms", "POST", "/v1/leases", {**CLAIM, "lease_ms": 99}, None,
     ["body", "lease_ms"]),
    ("lease over a day", "POST", "/v1/leases", {**CLAIM, "lease_ms": DAY_MS + 1}, None,
     ["body", "lease_ms"]),
    ("extend under 100 ms", "POST", "/v1/leases/{lease}/heartbeat", {"extend_ms": 99}, None,
     ["body", "extend_ms"]),
    ("extend over a day", "POST", "/v1/leases/{lease}/heartbeat", {"extend_ms": DAY_MS + 1},
     None, ["body", "extend_ms"]),
    ("negative retry_in_ms", "POST", "/v1/leases/{lease}/fail",
     {"error": "e", "retry_in_ms": -1}, None, ["body", "retry_in_ms"]),
    ("retry_in_ms over 10 years", "POST", "/v1/leases/{lease}/fail",
     {"error": "e", "retry_in_ms": TEN_YEARS_MS + 1}, None, ["body", "retry_in_ms"]),
]

# Queue settings: (setting, below its range, above it); None where there is no such side.
SETTINGS: list[tuple[str, int | None, int | None]] = [
    ("max_depth", -1, 2**62 + 1),
    ("lease_ms", 99, DAY_MS + 1),
    ("max_attempts", 0, 10_001),
    ("backoff_base_ms", -1, TEN_YEARS_MS + 1),
    ("backoff_max_ms", -1, TEN_YEARS_MS + 1),
    ("max_lease_expiries", 0, 10_001),
    ("aging_ms", 0, TEN_YEARS_MS + 1),
    ("max_running", -1, 1_000_001),
    ("retention_ms", -1, TEN_YEARS_MS + 1),
    ("dead_retention_ms", -1, TEN_YEARS_MS + 1),
]
NOT_NULL = ["paused", "lease_ms", "max_attempts", "backoff_base_ms", "backoff_max_ms",
            "max_lease_expiries", "retention_ms", "dead_retention_ms"]

for _setting, _low, _high in SETTINGS:
    for _value in (_low, _high):
        if _value is not None:
            CASES.append((f"queue setting {_setting}={_value}", "PATCH", "/v1/queues/default",
                          {_setting: _value}, None, ["body", _setting]))
for _setting in NOT_NULL:
    CASES.append((f"queue setting {_setting}=null", "PATCH", "/v1/queues/default",
                  {_setting: None}, None, ["body", _setting]))


async def send(c: httpx.AsyncClient, method: str, path: str, body: Any,
               query: dict[str, str] | None) -> httpx.Response:
    if body is None:
        return await c.request(method, path, params=query)
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return await c.request(method, path, content=raw, headers=JSON, params=query)


async def test_every_limit_answers_a_problem_naming_the_field(client: httpx.AsyncClient) -> None:
    await enqueue(client, "held")
    [lease] = await claim(client)
    settings = (await client.get("/v1/queues/default")).json()["settings"]
    seen: set[str] = set()
    for what, method, path, body, query, loc in CASES:
        r = await send(client, method, path.format(lease=lease["lease_id"]), body, query)
        errors = validation(r)
        assert any(e["loc"] == loc for e in errors), (what, loc, errors)
        seen.add(what)
    # The body size: a 413 whose detail names the limit, on the hot and the plain routes.
    for path in ("/v1/jobs", "/v1/jobs/batch", f"/v1/leases/{lease['lease_id']}/ack",
                 "/v1/dead/replay"):
        body = problem(await client.post(path, content=body_of_size(MIB + 1), headers=JSON),
                       413, "payload_too_large")
        assert str(MIB) in body["detail"], body
    body = problem(await client.patch("/v1/queues/default", content=b" " * (MIB + 1),
                                      headers=JSON), 413, "payload_too_large")
    assert str(MIB) in body["detail"], body
    # Nothing any of them sent changed anything: one job, still held; the settings as they were.
    assert await total(client) == 1
    assert (await client.get("/v1/queues/default")).json()["settings"] == settings
    r = await client.post(f"/v1/leases/{lease['lease_id']}/heartbeat", json={"extend_ms": 1000})
    assert r.status_code == 200, r.text


async def test_the_edges_of_every_limit_are_accepted(client: httpx.AsyncClient) -> None:
    ok = [
        ("POST", "/v1/jobs/batch", {"jobs": [{"type": "t"}] * 1000}, 201),
        ("POST", "/v1/jobs", b'{"type": "t", "payload": {"n": %s}}' % nested(127).encode(), 201),
        ("POST", "/v1/jobs", {"type": "t" * 255, "queue": "q" * 128, "idempotency_key": "k" * 255,
                              "priority": MAX_INT32, "max_attempts": 10_000,
                              "delay_ms": TEN_YEARS_MS}, 201),
        ("POST", "/v1/jobs", {"type": "t", "priority": -MAX_INT32, "max_attempts": 1,
                              "run_at": "9999-12-31T23:59:59.999999Z"}, 201),
        ("POST", "/v1/leases", {"worker_id": "w" * 255, "queues": ["empty"] * 100,
                                "types": ["t"] * 1000, "limit": 1000, "lease_ms": DAY_MS,
                                "wait_ms": 0}, 200),
        ("GET", "/v1/jobs?limit=1000", None, 200),
    ]
    for method, path, body, status in ok:
        r = await send(client, method, path, body, None)
        assert r.status_code == status, (path, r.text[:300])
    leases = await claim(client, limit=3)
    assert len(leases) == 3
    first, second, third = (le["lease_id"] for le in leases)
    r = await send(client, "POST", f"/v1/leases/{first}/ack",
                   b'{"result": %s}' % nested(128).encode(), None)
    assert r.status_code == 200, r.text[:300]
    r = await client.post(f"/v1/leases/{second}/heartbeat", json={"extend_ms": 100})
    assert r.status_code == 200, r.text
    r = await client.post(f"/v1/leases/{third}/fail", json={"error": "e" * 65_536,
                                                            "retry_in_ms": TEN_YEARS_MS})
    assert r.status_code == 200, r.text[:300]
    for setting, low, high in SETTINGS:
        for value in (low, high):
            if value is not None:
                edge = value + 1 if value == low else value - 1
                r = await client.patch("/v1/queues/edges", json={setting: edge})
                assert r.status_code == 200, (setting, edge, r.text)
                assert r.json()["settings"][setting] == edge
