"""Errors (contract § Errors): problem+json everywhere, 422 with ``errors``, 413, 404, 405, 503,
and no 5xx for anything a client can send."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import psycopg
import pytest
from psycopg import sql

from jobq.settings import DEFAULT_DB_TIMEOUT_S
from tests.conftest import LiveServer, make_settings, running_app
from tests.helpers import claim, enqueue, problem, retry_after, total, validation
from tests.waiting import aeventually

pytestmark = pytest.mark.timeout(60)

MIB = 1024 * 1024
JSON = {"content-type": "application/json"}


async def post_raw(c: httpx.AsyncClient, path: str, body: bytes,
                   headers: dict[str, str] | None = None) -> httpx.Response:
    return await c.post(path, content=body, headers=JSON if headers is None else headers)


async def lease_id(c: httpx.AsyncClient) -> str:
    await enqueue(c, "leased")
    [lease] = await claim(c)
    return str(lease["lease_id"])


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# --- problem+json ----------------------------------------------------------------------------


async def test_every_kind_of_4xx_is_problem_json(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, payload={"a": 1}, idempotency_key="k")
    lid = await lease_id(client)
    await client.post(f"/v1/leases/{lid}/ack")
    await client.patch("/v1/queues/full", json={"max_depth": 0})
    cases: list[tuple[Awaitable[httpx.Response], int, str]] = [
        (client.post("/v1/jobs", json={}), 422, "validation_error"),
        (client.get("/v1/jobs/123456"), 404, "not_found"),
        (client.post(f"/v1/leases/{lid}/heartbeat"), 409, "lease_lost"),
        (client.post("/v1/jobs", json={"type": "t", "queue": "full"}), 429, "queue_full"),
        (client.post("/v1/jobs", json={"type": "u", "idempotency_key": "k"}), 409,
         "idempotency_conflict"),
        (client.post(f"/v1/jobs/{job['id']}/retry"), 409, "invalid_state"),
        (client.post("/v1/jobs", content=b"x" * (MIB + 1), headers=JSON), 413,
         "payload_too_large"),
        (client.delete("/v1/jobs"), 405, "method_not_allowed"),
    ]
    for call, status, code in cases:
        body = problem(await call, status, code)
        # RFC 9457: "type" is a URI reference; ours name the code.
        assert body["type"].endswith(code)


async def test_problem_detail_is_useful(client: httpx.AsyncClient) -> None:
    body = problem(await client.get("/v1/jobs/424242"), 404, "not_found")
    assert "424242" in body["detail"]
    errors = validation(await client.post("/v1/jobs", json={"type": "t", "priority": "high"}),
                        "body", "priority")
    assert any("priority" in str(e["loc"]) for e in errors)


# --- 422: malformed JSON, unknown fields, wrong types, missing fields ------------------------


MALFORMED = [
    b'{"type": ',
    b'{type: "t"}',
    b"{'type': 't'}",
    b'{"type": "t",}',
    b'{"type": "t"} {"type": "u"}',
    b'{"type": "t"} trailing',
    b'{"type": "t"',
    b'{"type": "\\x41"}',       # not a JSON escape
    b'{"type": "\\ud800"',      # cut short
    b'{"type": "a\nb"}',        # raw control character inside a string
    b'{"type": "\xff\xfe"}',    # not UTF-8
    b'\xff\xfe\x00\x00',
    b'{"type": "t", "payload": {"a": 01}}',
    b'{"type": "t", "payload": {"a": .5}}',
    b'{"type": "t", "payload": {"a": +1}}',
    b'{"type": "t", "payload": {"a": 0x10}}',
    b'{"type": "t", "payload": {"a": undefined}}',
    b"null x",
    b"]",
    b"\x00",
]


@pytest.mark.parametrize("path", ["/v1/jobs", "/v1/jobs/batch", "/v1/leases"])
async def test_malformed_json_is_422(client: httpx.AsyncClient, path: str) -> None:
    for raw in MALFORMED:
        r = await post_raw(client, path, raw)
        assert r.status_code == 422, (raw, r.status_code, r.text)
        validation(r)
    assert await total(client) == 0


async def test_malformed_json_on_lease_and_queue_endpoints_is_422(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    for path in (f"/v1/leases/{lid}/heartbeat", f"/v1/leases/{lid}/ack",
                 f"/v1/leases/{lid}/fail", "/v1/leases/ack", "/v1/dead/replay"):
        validation(await post_raw(client, path, b'{"result": '))
    validation(await client.patch("/v1/queues/q", content=b'{"paused": tru', headers=JSON))
    # The lease survived all that.
    assert (await client.post(f"/v1/leases/{lid}/ack")).status_code == 200


async def test_unknown_fields_are_422(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    cases = [
        ("/v1/jobs", {"type": "t", "colour": "red"}, ["body", "colour"]),
        ("/v1/jobs", {"type": "t", "delay": 5}, ["body", "delay"]),
        ("/v1/jobs/batch", {"jobs": [{"type": "t"}, {"type": "t", "prio": 1}]},
         ["body", "jobs", 1, "prio"]),
        ("/v1/jobs/batch", {"jobs": [{"type": "t"}], "atomic": True}, ["body", "atomic"]),
        ("/v1/leases", {"worker_id": "w", "queues": ["default"], "queue": "x"}, ["body", "queue"]),
        (f"/v1/leases/{lid}/heartbeat", {"extend": 1000}, ["body", "extend"]),
        (f"/v1/leases/{lid}/ack", {"result": 1, "status": "done"}, ["body", "status"]),
        (f"/v1/leases/{lid}/fail", {"error": "x", "permanent": True}, ["body", "permanent"]),
        ("/v1/leases/ack", {"acks": [{"lease_id": lid, "res": 1}]}, ["body", "acks", 0, "res"]),
        ("/v1/dead/replay", {"queue": "default", "all": True}, ["body", "all"]),
    ]
    for path, body, loc in cases:
        validation(await client.post(path, json=body), *loc)
    validation(await client.patch("/v1/queues/default", json={"max_dept": 5}),
               "body", "max_dept")
    # Nothing happened: the one leased job is still running, nothing else enqueued.
    assert (await client.post(f"/v1/leases/{lid}/ack")).status_code == 200
    assert await total(client) == 1


async def test_wrong_types_are_422(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    job_cases: list[tuple[str, Any]] = [
        ("type", 123), ("type", None), ("type", ["t"]), ("type", {"t": 1}),
        ("payload", []), ("payload", "x"), ("payload", 1),
        ("queue", 5), ("queue", None), ("queue", ["default"]),
        ("priority", "high"), ("priority", 1.5), ("priority", [1]),
        ("delay_ms", "soon"), ("delay_ms", 0.5), ("delay_ms", {}),
        ("run_at", "tomorrow"), ("run_at", []), ("run_at", "2030-13-01T00:00:00Z"),
        ("max_attempts", "many"), ("max_attempts", 2.5), ("max_attempts", 0),
        ("idempotency_key", 5), ("idempotency_key", ["k"]), ("idempotency_key", ""),
    ]
    for field, value in job_cases:
        r = await client.post("/v1/jobs", json={"type": "t", field: value})
        validation(r, "body", field)
    other: list[tuple[str, dict[str, Any], list[str | int]]] = [
        ("/v1/leases", {"worker_id": 1, "queues": ["default"]}, ["body", "worker_id"]),
        ("/v1/leases", {"worker_id": "w", "queues": "default"}, ["body", "queues"]),
        ("/v1/leases", {"worker_id": "w", "queues": ["default"], "limit": "two"}, ["body", "limit"]),
        ("/v1/leases", {"worker_id": "w", "queues": ["default"], "wait_ms": 1.5}, ["body", "wait_ms"]),
        ("/v1/leases", {"worker_id": "w", "queues": ["default"], "types": "t"}, ["body", "types"]),
        (f"/v1/leases/{lid}/heartbeat", {"extend_ms": "long"}, ["body", "extend_ms"]),
        (f"/v1/leases/{lid}/fail", {"error": 5}, ["body", "error"]),
        (f"/v1/leases/{lid}/fail", {"retry": "perhaps"}, ["body", "retry"]),
        (f"/v1/leases/{lid}/fail", {"retry": [True]}, ["body", "retry"]),
        (f"/v1/leases/{lid}/fail", {"retry_in_ms": "soon"}, ["body", "retry_in_ms"]),
        ("/v1/leases/ack", {"acks": lid}, ["body", "acks"]),
        ("/v1/jobs/batch", {"jobs": [{"type": "t", "priority": {}}]}, ["body", "jobs", 0, "priority"]),
    ]
    for path, body, loc in other:
        validation(await client.post(path, json=body), *loc)
    for setting, value in (("max_depth", "ten"), ("paused", "perhaps"), ("lease_ms", 1.5),
                           ("aging_ms", [])):
        validation(await client.patch("/v1/queues/default", json={setting: value}),
                   "body", setting)
    validation(await client.patch("/v1/queues/default", json={"max_attempts": None}), "body")
    # Bodies that are JSON but not objects.
    for raw in (b"[]", b'"t"', b"1", b"true", b"null"):
        validation(await post_raw(client, "/v1/jobs", raw))
    assert (await client.post(f"/v1/leases/{lid}/ack")).status_code == 200
    assert await total(client) == 1


async def test_missing_required_fields_are_422(client: httpx.AsyncClient) -> None:
    validation(await client.post("/v1/jobs", json={}), "body", "type")
    validation(await client.post("/v1/jobs", json={"payload": {}}), "body", "type")
    validation(await client.post("/v1/jobs/batch", json={}), "body", "jobs")
    validation(await client.post("/v1/jobs/batch", json={"jobs": [{}]}), "body", "jobs", 0, "type")
    validation(await client.post("/v1/leases", json={"queues": ["default"]}), "body", "worker_id")
    validation(await client.post("/v1/leases", json={"worker_id": "w"}), "body", "queues")
    errors = validation(await client.post("/v1/leases", json={}))
    assert {tuple(e["loc"]) for e in errors} >= {("body", "worker_id"), ("body", "queues")}
    validation(await client.post("/v1/leases/ack", json={}), "body", "acks")
    validation(await client.post("/v1/leases/ack", json={"acks": [{}]}), "body", "acks", 0, "lease_id")
    assert await total(client) == 0


BAD_QUEUE_NAMES = ["", " ", "a b", "a/b", "a\\b", "-a", ".a", "_a", ":a", "ü", "queue-ü",
                   "a" * 129, "a\u0000", "a\n", "tenant-a.*", "a?", "a,b", "a%20b", "😀"]


async def test_bad_queue_names_are_422(client: httpx.AsyncClient) -> None:
    for name in BAD_QUEUE_NAMES:
        validation(await client.post("/v1/jobs", json={"type": "t", "queue": name}),
                   "body", "queue")
        validation(await client.post("/v1/jobs/batch", json={"jobs": [{"type": "t", "queue": name}]}),
                   "body", "jobs", 0, "queue")
        validation(await client.post("/v1/leases", json={"worker_id": "w", "queues": [name]}),
                   "body", "queues", 0)
        validation(await client.post("/v1/dead/replay", json={"queue": name}), "body", "queue")
        if name.strip() and "/" not in name and "\\" not in name:  # names a single path segment
            path = f"/v1/queues/{quote(name, safe='')}"
            validation(await client.patch(path, json={"paused": True}), "path", "name")
            validation(await client.get(path), "path", "name")
        if name:  # an empty ?queue= is left to the listing's own tests
            validation(await client.get("/v1/jobs", params={"queue": name}), "query", "queue")
    listed = (await client.get("/v1/queues")).json()["queues"]
    assert listed == []
    # The edges of the valid set are accepted.
    for name in ("a" * 128, "tenant-a.jobs:v2_x-1", "0", "Z"):
        assert (await client.post("/v1/jobs", json={"type": "t", "queue": name})).status_code == 201


# --- 422: values PostgreSQL or JSON cannot hold ----------------------------------------------


@pytest.mark.parametrize("token", [b"NaN", b"Infinity", b"-Infinity"])
async def test_nan_and_infinity_are_422(client: httpx.AsyncClient, token: bytes) -> None:
    lid = await lease_id(client)
    for raw in (b'{"type": "t", "payload": {"x": %s}}' % token,
                b'{"type": "t", "payload": {"deep": [1, {"x": %s}]}}' % token,
                b'{"type": "t", "priority": %s}' % token,
                b'{"type": "t", "delay_ms": %s}' % token):
        validation(await post_raw(client, "/v1/jobs", raw))
    validation(await post_raw(client, "/v1/jobs/batch",
                              b'{"jobs": [{"type": "t"}, {"type": "t", "payload": {"x": %s}}]}' % token))
    validation(await post_raw(client, "/v1/leases",
                              b'{"worker_id": "w", "queues": ["default"], "wait_ms": %s}' % token))
    validation(await post_raw(client, f"/v1/leases/{lid}/ack", b'{"result": %s}' % token))
    validation(await post_raw(client, f"/v1/leases/{lid}/ack", b'{"result": {"r": [%s]}}' % token))
    validation(await post_raw(client, "/v1/leases/ack",
                              b'{"acks": [{"lease_id": "%s", "result": %s}]}' % (lid.encode(), token)))
    validation(await client.patch("/v1/queues/default", content=b'{"max_depth": %s}' % token,
                                  headers=JSON))
    # The lease is still held and the job was not completed with a broken result.
    r = await client.post(f"/v1/leases/{lid}/ack", json={"result": 1.5})
    assert r.status_code == 200 and r.json()["result"] == 1.5
    assert await total(client) == 1


async def test_nul_characters_are_422(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    nul = "a\u0000b"
    for body in ({"type": "t", "payload": {"s": nul}},
                 {"type": "t", "payload": {nul: 1}},
                 {"type": "t", "payload": {"list": [1, ["x", nul]]}},
                 {"type": nul},
                 {"type": "t", "idempotency_key": nul},
                 {"type": "t", "queue": nul}):
        validation(await client.post("/v1/jobs", json=body))
        validation(await client.post("/v1/jobs/batch", json={"jobs": [{"type": "ok"}, body]}))
    validation(await client.post("/v1/leases", json={"worker_id": nul, "queues": ["default"]}))
    validation(await client.post("/v1/leases", json={"worker_id": "w", "queues": ["default"],
                                                     "types": [nul]}))
    validation(await client.post(f"/v1/leases/{lid}/fail", json={"error": nul}))
    validation(await client.post(f"/v1/leases/{lid}/ack", json={"result": nul}))
    validation(await client.post(f"/v1/leases/{lid}/ack", json={"result": {nul: 1}}))
    validation(await client.post("/v1/leases/ack", json={"acks": [{"lease_id": lid,
                                                                   "result": [nul]}]}))
    validation(await client.post("/v1/dead/replay", json={"type": nul}))
    validation(await client.get("/v1/jobs", params={"type": nul}))
    # The escaped form of NUL inside a string is ordinary text, and fine.
    job = await enqueue(client, payload={"s": "a\\u0000b"})
    assert job["payload"] == {"s": "a\\u0000b"}
    # The lease is still held, and a clean ack goes through.
    assert (await client.post(f"/v1/leases/{lid}/ack", json={"result": "ok"})).status_code == 200
    assert await total(client) == 2


SURROGATES = [b"\\ud800", b"\\udfff", b"\\udc00\\ud800", b"x\\ud83d", b"\\ude00y"]


@pytest.mark.parametrize("s", SURROGATES)
async def test_lone_surrogates_are_422(client: httpx.AsyncClient, s: bytes) -> None:
    lid = await lease_id(client)
    for raw in (b'{"type": "t", "payload": {"s": "%s"}}' % s,
                b'{"type": "t", "payload": {"%s": 1}}' % s,
                b'{"type": "t", "payload": {"a": [["%s"]]}}' % s,
                b'{"type": "%s"}' % s,
                b'{"type": "t", "idempotency_key": "%s"}' % s,
                b'{"type": "t", "queue": "%s"}' % s):
        validation(await post_raw(client, "/v1/jobs", raw))
        validation(await post_raw(client, "/v1/jobs/batch", b'{"jobs": [%s]}' % raw))
    for path, raw in (
        ("/v1/leases", b'{"worker_id": "%s", "queues": ["default"]}' % s),
        ("/v1/leases", b'{"worker_id": "w", "queues": ["default"], "types": ["%s"]}' % s),
        (f"/v1/leases/{lid}/fail", b'{"error": "%s"}' % s),
        (f"/v1/leases/{lid}/ack", b'{"result": "%s"}' % s),
        (f"/v1/leases/{lid}/ack", b'{"result": {"%s": 0}}' % s),
        ("/v1/leases/ack", b'{"acks": [{"lease_id": "%s"}]}' % s),
        ("/v1/leases/ack", b'{"acks": [{"lease_id": "%s", "result": "%s"}]}' % (lid.encode(), s)),
        ("/v1/dead/replay", b'{"type": "%s"}' % s),
    ):
        validation(await post_raw(client, path, raw))
    assert (await client.post(f"/v1/leases/{lid}/ack")).status_code == 200
    assert await total(client) == 1


async def test_surrogate_pairs_are_ordinary_characters(client: httpx.AsyncClient) -> None:
    r = await post_raw(client, "/v1/jobs",
                       b'{"type": "\\ud83d\\ude00", "payload": {"\\ud83d\\ude00": "\\ud83d\\ude00"}}')
    assert r.status_code == 201, r.text
    assert r.json()["type"] == "😀" and r.json()["payload"] == {"😀": "😀"}


async def test_huge_integers_outside_a_fields_range_are_422(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    for field, value in (("priority", 2**31), ("priority", -(2**31) - 1), ("priority", 10**30),
                         ("priority", -(10**30)), ("delay_ms", 10**20), ("delay_ms", 2**63),
                         ("max_attempts", 10**100)):
        validation(await client.post("/v1/jobs", json={"type": "t", field: value}),
                   "body", field)
    claim_body = {"worker_id": "w", "queues": ["default"]}
    for field in ("limit", "wait_ms", "lease_ms"):
        validation(await client.post("/v1/leases", json={**claim_body, field: 10**30}),
                   "body", field)
    validation(await client.post(f"/v1/leases/{lid}/heartbeat", json={"extend_ms": 10**30}),
               "body", "extend_ms")
    validation(await client.post(f"/v1/leases/{lid}/fail", json={"retry_in_ms": 2**64}),
               "body", "retry_in_ms")
    for setting in ("max_depth", "lease_ms", "max_attempts", "backoff_base_ms", "backoff_max_ms",
                    "max_lease_expiries", "aging_ms", "max_running"):
        validation(await client.patch("/v1/queues/default", json={setting: 2**64}),
                   "body", setting)
    validation(await client.post("/v1/dead/replay", json={"limit": 0}), "body", "limit")
    assert (await client.post(f"/v1/leases/{lid}/ack")).status_code == 200
    assert await total(client) == 1


async def test_huge_integers_in_payloads_round_trip(client: httpx.AsyncClient) -> None:
    # Any JSON number is a valid payload value; jsonb keeps it exactly.
    payload = {"big": 10**30, "neg": -(2**70), "u64": 2**64 - 1, "wide": int("9" * 300)}
    job = await enqueue(client, payload=payload)
    assert job["payload"] == payload
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["payload"] == payload
    [lease] = await claim(client)
    assert lease["job"]["payload"] == payload
    r = await client.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": {"n": 10**40}})
    assert r.status_code == 200 and r.json()["result"] == {"n": 10**40}


async def test_numbers_too_long_to_parse_are_422(client: httpx.AsyncClient) -> None:
    digits = b"9" * 5000
    validation(await post_raw(client, "/v1/jobs", b'{"type": "t", "payload": {"n": %s}}' % digits))
    validation(await post_raw(client, "/v1/jobs", b'{"type": "t", "priority": %s}' % digits))
    assert await total(client) == 0


# Step 1 near the parser's limit: the window in which a payload parsed but could not be read
# back was a few levels wide (it moves with the stack depth of each code path).
DEPTHS = [*range(100, 300, 20), *range(300, 850, 50), *range(850, 1000), 1100, 2000, 5000]


async def _usable(c: httpx.AsyncClient, job_id: str) -> None:
    """A job the service accepted can be read, listed, claimed and acked like any other."""
    got = await c.get(f"/v1/jobs/{job_id}")
    assert got.status_code == 200, got.status_code
    assert (await c.get("/v1/jobs", params={"limit": 5})).status_code == 200
    [lease] = await claim(c)
    assert lease["job"]["id"] == job_id
    assert (await c.post(f"/v1/leases/{lease['lease_id']}/ack")).status_code == 200


async def test_deeply_nested_payloads_never_5xx(client: httpx.AsyncClient) -> None:
    ok = await post_raw(client, "/v1/jobs",
                        b'{"type": "t", "payload": {"n": %s}}' % nested(50).encode())
    assert ok.status_code == 201
    await _usable(client, ok.json()["id"])
    # The service may draw its line anywhere, but never answers 5xx, and a job it accepts
    # does not break anything later: a payload just under the parser's own limit used to be
    # stored and then fail every claim on its queue, when read back deeper in the stack.
    accepted = refused = 0
    for depth in DEPTHS:
        for raw in (b'{"type": "t", "payload": {"n": %s}}' % nested(depth).encode(),
                    b'{"type": "t", "payload": %s}' % (b'{"a":' * depth + b"1" + b"}" * depth)):
            r = await post_raw(client, "/v1/jobs", raw)
            assert r.status_code in (201, 422), (depth, r.status_code, r.text[:300])
            if r.status_code == 201:
                accepted += 1
                await _usable(client, r.json()["id"])
            else:
                refused += 1
                validation(r, "body")
            batch = await post_raw(client, "/v1/jobs/batch", b'{"jobs": [%s]}' % raw)
            assert batch.status_code in (201, 422), (depth, batch.status_code)
            if batch.status_code == 201:
                await _usable(client, batch.json()["jobs"][0]["id"])
    assert refused > 0
    # Far too deep: refused.
    for depth in (100_000, 400_000):
        validation(await post_raw(client, "/v1/jobs",
                                  b'{"type": "t", "payload": {"n": %s}}' % nested(depth).encode()))
    assert (await client.post("/v1/leases", json={"worker_id": "w", "queues": ["default"]})
            ).json() == {"leases": []}


async def test_deeply_nested_results_never_5xx(client: httpx.AsyncClient) -> None:
    depths = [50, *DEPTHS, 100_000]
    r = await client.post("/v1/jobs/batch", json={"jobs": [{"type": "t"}] * len(depths)})
    assert r.status_code == 201
    leases = await claim(client, limit=len(depths))
    assert len(leases) == len(depths)
    for depth, lease in zip(depths, leases, strict=True):
        lid, job_id = lease["lease_id"], lease["job"]["id"]
        for path, raw in ((f"/v1/leases/{lid}/ack", b'{"result": %s}' % nested(depth).encode()),
                          ("/v1/leases/ack", b'{"acks": [{"lease_id": "%s", "result": %s}]}'
                           % (lid.encode(), nested(depth).encode()))):
            r = await post_raw(client, path, raw)
            assert r.status_code in (200, 422), (depth, r.status_code, r.text[:300])
            if r.status_code == 422:
                validation(r, "body")
        if depth == 50:
            assert r.status_code == 200
        if depth == 100_000:
            assert r.status_code == 422
        assert (await client.get(f"/v1/jobs/{job_id}")).status_code == 200
        assert (await client.get("/v1/jobs", params={"limit": 3})).status_code == 200
        await client.post(f"/v1/leases/{lid}/ack")  # completes it if both were refused


# --- 422: empty bodies and content types -----------------------------------------------------


async def test_empty_body_where_one_is_required_is_422(client: httpx.AsyncClient) -> None:
    for path in ("/v1/jobs", "/v1/jobs/batch", "/v1/leases", "/v1/leases/ack"):
        validation(await post_raw(client, path, b""), "body")
        validation(await client.post(path), "body")  # no body and no content type at all
        validation(await post_raw(client, path, b"   "))
    assert await total(client) == 0


NOT_JSON = ["text/plain", "application/x-www-form-urlencoded", "application/xml",
            "multipart/form-data; boundary=x", "application/octet-stream", "text/json"]


async def test_non_json_content_type_is_422(client: httpx.AsyncClient) -> None:
    body = b'{"type": "t"}'
    for ctype in NOT_JSON:
        for path in ("/v1/jobs", "/v1/jobs/batch", "/v1/leases"):
            r = await post_raw(client, path, body, {"content-type": ctype})
            validation(r)
        r = await client.patch("/v1/queues/default", content=b'{"paused": true}',
                               headers={"content-type": ctype})
        validation(r)
    form = await client.post("/v1/jobs", data={"type": "t"})
    validation(form)
    assert await total(client) == 0
    # JSON with a charset, or a +json media type, is JSON.
    r = await post_raw(client, "/v1/jobs", body, {"content-type": "application/json; charset=utf-8"})
    assert r.status_code == 201, r.text


# --- 413 -------------------------------------------------------------------------------------


def body_of_size(n: int) -> bytes:
    head, tail = b'{"type": "t", "payload": {"pad": "', b'"}}'
    return head + b"x" * (n - len(head) - len(tail)) + tail


async def chunks(body: bytes, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    for start in range(0, len(body), size):
        yield body[start:start + size]


async def test_a_body_of_exactly_1_mib_is_accepted(client: httpx.AsyncClient) -> None:
    body = body_of_size(MIB)
    assert len(body) == MIB
    r = await post_raw(client, "/v1/jobs", body)
    assert r.status_code == 201, r.text[:300]
    assert len(r.json()["payload"]["pad"]) > MIB - 100


async def test_a_body_over_1_mib_is_413(client: httpx.AsyncClient) -> None:
    for size in (MIB + 1, 5 * MIB):
        body = problem(await post_raw(client, "/v1/jobs", body_of_size(size)), 413,
                       "payload_too_large")
        assert str(MIB) in body["detail"] or "1 MiB" in body["detail"]
        problem(await post_raw(client, "/v1/jobs/batch", b'{"jobs": [%s]}' % body_of_size(size)),
                413, "payload_too_large")
    lid = await lease_id(client)
    problem(await post_raw(client, f"/v1/leases/{lid}/ack",
                           b'{"result": "%s"}' % (b"x" * (MIB + 1))), 413, "payload_too_large")
    problem(await client.patch("/v1/queues/default", content=b" " * (MIB + 1), headers=JSON),
            413, "payload_too_large")
    assert await total(client) == 1  # only the leased one
    assert (await client.post(f"/v1/leases/{lid}/ack")).status_code == 200


async def test_a_chunked_body_over_1_mib_is_413(client: httpx.AsyncClient) -> None:
    body = body_of_size(2 * MIB)
    r = await client.post("/v1/jobs", content=chunks(body), headers=JSON)
    assert "content-length" not in r.request.headers
    problem(r, 413, "payload_too_large")
    # One byte over, in chunks that never say how long the body is.
    problem(await client.post("/v1/jobs", content=chunks(body_of_size(MIB + 1), 4096),
                              headers=JSON), 413, "payload_too_large")
    assert await total(client) == 0
    # A chunked body under the limit is an ordinary request.
    r = await client.post("/v1/jobs", content=chunks(body_of_size(MIB - 10)), headers=JSON)
    assert r.status_code == 201, r.text[:300]


async def test_a_lying_content_length_does_not_pass_the_limit(app: Any) -> None:
    # Content-Length says small; the body streamed is large.
    sent: list[dict[str, Any]] = []
    body = body_of_size(2 * MIB)
    pieces = [body[i:i + 65536] for i in range(0, len(body), 65536)]

    async def receive() -> dict[str, Any]:
        if pieces:
            return {"type": "http.request", "body": pieces.pop(0), "more_body": bool(pieces)}
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
             "scheme": "http", "path": "/v1/jobs", "raw_path": b"/v1/jobs", "query_string": b"",
             "root_path": "", "headers": [(b"host", b"jobq"), (b"content-type", b"application/json"),
                                          (b"content-length", b"10")],
             "client": ("127.0.0.1", 1), "server": ("jobq", 80), "state": {}}
    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    assert start["status"] == 413
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert json.loads(payload)["code"] == "payload_too_large"


async def test_the_size_limit_is_a_setting(database_url: str) -> None:
    async with running_app(make_settings(database_url, max_body_bytes=4096)) as small:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=small),
                                     base_url="http://jobq") as c:
            assert (await post_raw(c, "/v1/jobs", body_of_size(4096))).status_code == 201
            problem(await post_raw(c, "/v1/jobs", body_of_size(4097)), 413, "payload_too_large")
            problem(await c.post("/v1/jobs", content=chunks(body_of_size(5000), 1000),
                                 headers=JSON), 413, "payload_too_large")


def test_413_over_real_http_with_and_without_content_length(live_server: LiveServer) -> None:
    url = live_server.url + "/v1/jobs"
    with httpx.Client(timeout=10) as c:
        r = c.post(url, content=body_of_size(MIB + 1), headers=JSON)
        problem(r, 413, "payload_too_large")

        def gen() -> Any:
            body = body_of_size(MIB + 64 * 1024)
            for i in range(0, len(body), 16 * 1024):
                yield body[i:i + 16 * 1024]

        r = c.post(url, content=gen(), headers=JSON)
        assert "content-length" not in r.request.headers
        problem(r, 413, "payload_too_large")
        assert c.get(live_server.url + "/v1/queues/default").status_code == 404  # nothing enqueued
        assert c.post(url, json={"type": "t"}).status_code == 201  # and the server is fine


# --- 404 -------------------------------------------------------------------------------------


GARBAGE_JOB_IDS = ["abc", "1.2.3", "-1", "0", "00", "1e3", "+1", "0x1", " 1", "1 ", "9" * 40,
                   "9" * 19, str(2**63), str(2**63 - 1), "99999999", "١٢", "１", "²", "1_000",
                   "null", "%00", "😀", "a" * 5000]
GARBAGE_LEASE_IDS = ["abc", "1.2.3", "-1", "1.", ".1", "1.-1", "-1.1", "1..1", "9" * 40 + ".1",
                     "1." + "9" * 40, "99999.1", "1.1e3", "١.١", "1 .1", "0.0", "x" * 5000]


async def test_unknown_and_garbage_job_ids_are_404(client: httpx.AsyncClient) -> None:
    real = await enqueue(client)
    for raw in GARBAGE_JOB_IDS:
        seg = quote(raw, safe="")
        for method, path in (("GET", f"/v1/jobs/{seg}"), ("POST", f"/v1/jobs/{seg}/cancel"),
                             ("POST", f"/v1/jobs/{seg}/retry")):
            r = await client.request(method, path)
            problem(r, 404, "not_found")
    # A real id still works, and was not touched.
    assert (await client.get(f"/v1/jobs/{real['id']}")).json()["status"] == "pending"


async def test_unknown_and_garbage_lease_ids_are_404(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    for raw in GARBAGE_LEASE_IDS:
        seg = quote(raw, safe="")
        for verb, body in (("heartbeat", {}), ("ack", {"result": 1}), ("fail", {"error": "x"})):
            r = await client.post(f"/v1/leases/{seg}/{verb}", json=body)
            problem(r, 404, "not_found")
    r = await client.post("/v1/leases/ack", json={"acks": [{"lease_id": raw}
                                                            for raw in GARBAGE_LEASE_IDS[:10]]})
    assert r.status_code == 200
    assert [x["code"] for x in r.json()["results"]] == ["not_found"] * 10
    assert (await client.post(f"/v1/leases/{lid}/heartbeat")).status_code == 200


async def test_unknown_queues_and_routes_are_404(client: httpx.AsyncClient) -> None:
    problem(await client.get("/v1/queues/never-used"), 404, "not_found")
    # (/ is the dashboard's redirect to /ui: tests/test_activity.py)
    for path in ("/v1/nope", "/v2/jobs", "/v1", "/v1/jobs/1/nope", "/v1/leases/1.1", "/ui/nope"):
        problem(await client.get(path), 404, "not_found")


# --- 405 -------------------------------------------------------------------------------------


async def test_wrong_method_is_405_with_allow(client: httpx.AsyncClient) -> None:
    cases: list[tuple[str, str, set[str]]] = [
        ("DELETE", "/v1/jobs", {"GET", "POST"}), ("PUT", "/v1/jobs", {"GET", "POST"}),
        ("PATCH", "/v1/jobs", {"GET", "POST"}), ("PUT", "/v1/jobs/batch", {"POST"}),
        ("PUT", "/v1/jobs/1", {"GET", "DELETE"}),
        ("GET", "/v1/jobs/1/cancel", {"POST"}), ("GET", "/v1/leases", {"POST"}),
        ("GET", "/v1/leases/1.1/ack", {"POST"}), ("PUT", "/v1/queues/default", {"DELETE", "GET", "PATCH"}),
        ("POST", "/v1/queues", {"GET"}), ("POST", "/v1/dead", {"DELETE"}),
        ("POST", "/healthz", {"GET"}),
    ]
    for method, path, allowed in cases:
        r = await client.request(method, path)
        problem(r, 405, "method_not_allowed")
        allow = {m.strip() for m in r.headers.get("allow", "").split(",") if m.strip()}
        # Exactly: /v1/jobs/batch also fits GET /v1/jobs/{job_id}, but "batch" is no job id,
        # so GET is not a method of that resource (the OpenAPI fuzz found it advertised).
        assert allow == allowed, (method, path, r.headers)


# --- nothing a client sends makes a 5xx ------------------------------------------------------


class Garbage:
    """Random bodies from a fixed seed: bytes, JSON values, nested structures, and valid
    bodies with one field swapped for something strange."""

    STRINGS = ["", "a", "\u0000", "a\u0000b", "\ud800", "\udfff", "x\ud83d", "😀", "é", "\n",
               "default", "1.1", "-1", "9" * 30, "*", "%s", "%(queue)s", "'; DROP TABLE jobs; --",
               "\\", '"', "a" * 300, "a" * 70000, "NaN", "2030-01-01T00:00:00Z", "null", "{}"]
    NUMBERS = [0, 1, -1, 2**31, -(2**31) - 1, 2**63, -(2**63) - 1, 2**64, 10**30, -(10**40),
               0.5, -0.0, 1e308, 1e-308, float("nan"), float("inf"), float("-inf"), 100, 30000,
               30001, 1000, 1001]
    KEYS = ["type", "payload", "queue", "priority", "delay_ms", "run_at", "max_attempts",
            "idempotency_key", "jobs", "worker_id", "queues", "types", "limit", "lease_ms",
            "wait_ms", "extend_ms", "result", "error", "retry", "retry_in_ms", "acks",
            "lease_id", "max_depth", "paused", "aging_ms", "max_running", "\u0000", "\ud800", ""]

    def __init__(self, seed: int) -> None:
        self.rnd = random.Random(seed)

    def value(self, depth: int = 0) -> Any:
        r = self.rnd
        kind = r.randrange(8 if depth < 4 else 5)
        if kind == 0:
            return None
        if kind == 1:
            return r.choice([True, False])
        if kind == 2:
            return r.choice(self.NUMBERS) if r.random() < 0.7 else r.randint(-10**6, 10**6)
        if kind in (3, 4):
            if r.random() < 0.6:
                return r.choice(self.STRINGS)
            return "".join(chr(r.choice([r.randrange(0x20, 0x7f), r.randrange(0, 0x110000)]))
                           for _ in range(r.randrange(12)))
        if kind == 5:
            return [self.value(depth + 1) for _ in range(r.randrange(4))]
        if kind == 6 and r.random() < 0.1:
            return nested_list(r.choice([20, 200, 600]))
        return {r.choice(self.KEYS): self.value(depth + 1) for _ in range(r.randrange(5))}

    def mutate(self, body: dict[str, Any]) -> dict[str, Any]:
        out = json.loads(json.dumps(body))
        for _ in range(self.rnd.randrange(1, 3)):
            key = self.rnd.choice(list(out) + self.KEYS)
            if self.rnd.random() < 0.15:
                out.pop(key, None)
            else:
                out[key] = self.value(1)
        return out

    def encode(self, value: Any) -> bytes:
        r = self.rnd
        text = json.dumps(value, ensure_ascii=r.random() < 0.7, allow_nan=True)
        raw = text.encode("utf-8", "surrogatepass")
        if r.random() < 0.1 and raw:  # truncated
            raw = raw[: r.randrange(len(raw))]
        return raw

    def body(self, valid: dict[str, Any]) -> tuple[bytes, dict[str, str]]:
        r = self.rnd
        roll = r.random()
        if roll < 0.15:
            raw = r.randbytes(r.randrange(64))
        elif roll < 0.2:  # deeper than any encoder here would write
            depth = r.choice([900, 1000, 5000, 50_000])
            raw = b'{"type": "t", "payload": {"x": %s}, "result": %s}' % (
                nested(depth).encode(), nested(depth).encode())
        elif roll < 0.45:
            raw = self.encode(self.value())
        else:
            raw = self.encode(self.mutate(valid))
        headers = dict(JSON)
        ctype = r.random()
        if ctype < 0.05:
            headers = {"content-type": "text/plain"}
        elif ctype < 0.1:
            headers = {}
        return raw, headers


def nested_list(depth: int) -> Any:
    value: Any = []
    for _ in range(depth):
        value = [value]
    return value


def tame_waits(raw: bytes) -> bytes:
    """A garbage claim may be valid with a long wait_ms: keep the test fast, not the body
    tame. Values out of range stay, so the validator still sees them."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        return raw
    if isinstance(body, dict):
        wait = body.get("wait_ms")
        if isinstance(wait, int) and not isinstance(wait, bool) and 50 < wait <= 30000:
            body["wait_ms"] = 50
            return json.dumps(body, allow_nan=True).encode("utf-8", "surrogatepass")
    return raw


async def test_garbage_never_makes_a_5xx(client: httpx.AsyncClient) -> None:
    job = await enqueue(client, "victim")
    lid = await lease_id(client)
    valid_job = {"type": "t", "payload": {"a": 1}, "queue": "default", "priority": 1,
                 "delay_ms": 0, "max_attempts": 3, "idempotency_key": "k"}
    endpoints: list[tuple[str, Callable[[], str], dict[str, Any]]] = [
        ("POST", lambda: "/v1/jobs", valid_job),
        ("POST", lambda: "/v1/jobs/batch", {"jobs": [valid_job, {"type": "u"}]}),
        ("POST", lambda: f"/v1/jobs/{job['id']}/cancel", {}),
        ("POST", lambda: f"/v1/jobs/{job['id']}/retry", {}),
        ("POST", lambda: "/v1/leases", {"worker_id": "w", "queues": ["default"], "limit": 2,
                                        "lease_ms": 1000, "types": ["t"]}),
        ("POST", lambda: "/v1/leases/ack", {"acks": [{"lease_id": lid, "result": {"r": 1}}]}),
        ("POST", lambda: f"/v1/leases/{lid}/heartbeat", {"extend_ms": 1000}),
        ("POST", lambda: f"/v1/leases/{lid}/ack", {"result": {"r": 1}}),
        ("POST", lambda: f"/v1/leases/{lid}/fail", {"error": "e", "retry": True,
                                                    "retry_in_ms": 10}),
        ("POST", lambda: "/v1/dead/replay", {"queue": "default", "type": "t", "limit": 5}),
        ("PATCH", lambda: "/v1/queues/default", {"max_depth": None, "paused": False,
                                                 "lease_ms": 30000}),
        ("PATCH", lambda: "/v1/queues/other", {"aging_ms": 1000, "max_running": 5}),
    ]
    g = Garbage(seed=20240611)
    seen: dict[int, int] = {}
    for round_ in range(30):
        for method, path, valid in endpoints:
            raw, headers = g.body(valid)
            if path().startswith("/v1/leases") and path().endswith("leases"):
                raw = tame_waits(raw)
            r = await client.request(method, path(), content=raw, headers=headers)
            seen[r.status_code] = seen.get(r.status_code, 0) + 1
            assert r.status_code < 500, (method, path(), raw[:300], r.status_code, r.text[:300])
            if r.status_code >= 400:
                assert r.headers["content-type"].startswith("application/problem+json"), r.text
                assert r.json()["status"] == r.status_code
        if round_ % 10 == 9:  # keep something to claim and a fresh lease to poke at
            await enqueue(client, "t")
            lid = await lease_id(client)
    # The bodies reached deep: some were accepted, most refused.
    assert seen.get(422, 0) > 100 and sum(v for k, v in seen.items() if k < 300) > 20, seen
    assert (await client.get("/healthz")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200


async def test_garbage_query_strings_and_paths_never_5xx(client: httpx.AsyncClient) -> None:
    rnd = random.Random(7)
    values = ["", "-1", "0", "1001", "abc", "\u0000", "%00", "%ff", "%ud800", "9" * 40, "😀",
              "pending,running", "x" * 300]
    for _ in range(80):
        params = {rnd.choice(["queue", "status", "type", "limit", "cursor", "x"]): rnd.choice(values)
                  for _ in range(rnd.randrange(1, 4))}
        r = await client.get("/v1/jobs", params=params)
        assert r.status_code in (200, 422), (params, r.status_code, r.text[:300])
        if r.status_code == 422:
            validation(r)
    for _ in range(40):
        seg = "".join(rnd.choice(["%00", "%ff", "%2F", "a", "1", ".", "%20", "%", "~"])
                      for _ in range(rnd.randrange(1, 8)))
        for path in (f"/v1/jobs/{seg}", f"/v1/queues/{seg}", f"/v1/leases/{seg}/ack"):
            method = "POST" if "leases" in path else "GET"
            r = await client.request(method, path)
            assert r.status_code < 500, (path, r.status_code, r.text[:300])
            if r.status_code >= 400:  # "." segments may become a redirect to a listing
                assert r.headers["content-type"].startswith("application/problem+json"), path
    r = await client.delete("/v1/dead", params={"limit": "-5", "queue": "\u0000"})
    assert r.status_code == 422


# --- 503 -------------------------------------------------------------------------------------


DB_CALLS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/jobs", {"type": "t"}),
    ("POST", "/v1/jobs", {"type": "t", "queue": "fresh-queue", "idempotency_key": "k"}),
    ("POST", "/v1/jobs/batch", {"jobs": [{"type": "t"}]}),
    ("GET", "/v1/jobs/1", None),
    ("GET", "/v1/jobs", None),
    ("POST", "/v1/jobs/1/cancel", None),
    ("POST", "/v1/leases", {"worker_id": "w", "queues": ["default"]}),
    ("POST", "/v1/leases", {"worker_id": "w", "queues": ["default"], "wait_ms": 30000}),
    ("POST", "/v1/leases/1.1/ack", {"result": 1}),
    ("POST", "/v1/leases/1.1/heartbeat", None),
    ("POST", "/v1/leases/ack", {"acks": [{"lease_id": "1.1"}]}),
    ("GET", "/v1/queues", None),
    ("GET", "/v1/queues/default", None),
    ("PATCH", "/v1/queues/default", {"paused": True}),
    ("POST", "/v1/dead/replay", {}),
    ("GET", "/readyz", None),
]


async def _timed(c: httpx.AsyncClient, method: str, path: str,
                 body: dict[str, Any] | None) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    r = await c.request(method, path, json=body)
    return r, time.monotonic() - started


async def assert_all_unavailable(c: httpx.AsyncClient) -> None:
    results = await asyncio.gather(*(_timed(c, m, p, b) for m, p, b in DB_CALLS))
    for (method, path, _), (r, took) in zip(DB_CALLS, results, strict=True):
        assert took < 10, (method, path, took)
        problem(r, 503, "unavailable")
        retry_after(r)


@pytest.fixture
async def unreachable_client() -> AsyncIterator[httpx.AsyncClient]:
    settings = make_settings("postgresql://postgres@127.0.0.1:1/nope")
    async with running_app(settings) as dead:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=dead),
                                     base_url="http://jobq", timeout=30) as c:
            yield c


async def test_unreachable_database_answers_503_within_10_s(
    unreachable_client: httpx.AsyncClient,
) -> None:
    await assert_all_unavailable(unreachable_client)
    # The process itself is up.
    assert (await unreachable_client.get("/healthz")).status_code == 200
    # And stays consistent on a second round (no state left broken by the first).
    r, took = await _timed(unreachable_client, "POST", "/v1/jobs", {"type": "t"})
    assert took < 10
    problem(r, 503, "unavailable")


async def test_a_database_that_never_answers_gets_503_within_10_s() -> None:
    # A server that accepts connections and then says nothing (a black-holed network, a
    # frozen database): with the shipped default timeout the answer still comes in time.
    conns: list[asyncio.StreamWriter] = []

    async def silent(_: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conns.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        settings = make_settings(f"postgresql://postgres@127.0.0.1:{port}/nope",
                                 db_timeout_s=DEFAULT_DB_TIMEOUT_S)
        async with running_app(settings) as dead:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=dead),
                                         base_url="http://jobq", timeout=30) as c:
                calls = [DB_CALLS[0], DB_CALLS[3], DB_CALLS[7], DB_CALLS[12], DB_CALLS[-1]]
                results = await asyncio.gather(*(_timed(c, m, p, b) for m, p, b in calls))
                for (method, path, _), (r, took) in zip(calls, results, strict=True):
                    assert took < 10, (method, path, took)
                    problem(r, 503, "unavailable")
                    retry_after(r)
    finally:
        for w in conns:
            w.close()
        server.close()
        await server.wait_closed()


async def _set_connections(admin_url: str, name: str, allow: bool) -> None:
    async with await psycopg.AsyncConnection.connect(admin_url, autocommit=True) as conn:
        await conn.execute(sql.SQL("ALTER DATABASE {} ALLOW_CONNECTIONS {}").format(
            sql.Identifier(name), sql.Literal(allow)))
        if not allow:
            await conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                               "WHERE datname = %s AND pid <> pg_backend_pid()", (name,))


async def test_database_going_away_answers_503_then_recovers(
    client: httpx.AsyncClient, database_url: str, admin_url: str,
) -> None:
    job = await enqueue(client, "before")
    name = urlsplit(database_url).path.lstrip("/")
    await _set_connections(admin_url, name, allow=False)
    try:
        # Pooled connections were cut: the first calls find them broken, later ones cannot
        # connect at all. Both are 503, never 500.
        await assert_all_unavailable(client)
    finally:
        await _set_connections(admin_url, name, allow=True)

    async def back() -> bool:
        r = await client.post("/v1/jobs", json={"type": "after"})
        assert r.status_code in (201, 503), r.text
        return r.status_code == 201

    await aeventually(back, poll_s=0.2, what="enqueue answered 201 once the database is back")
    assert (await client.get(f"/v1/jobs/{job['id']}")).status_code == 200
    [lease] = await claim(client)
    assert lease["job"]["id"] == job["id"]


async def test_an_unknown_query_parameter_is_422_and_changes_nothing(client: httpx.AsyncClient) -> None:
    # A typo must not widen the request: this purge would otherwise take every dead job of q.
    for t in ("a", "b"):
        job = (await client.post("/v1/jobs", json={"type": t, "queue": "q", "max_attempts": 1})).json()
        lease = (await client.post("/v1/leases", json={"worker_id": "w", "queues": ["q"]})).json()
        await client.post(f"/v1/leases/{lease['leases'][0]['lease_id']}/fail", json={"error": "x"})
        assert (await client.get(f"/v1/jobs/{job['id']}")).json()["status"] == "dead"
    r = await client.delete("/v1/dead", params={"queue": "q", "tpye": "a"})
    assert r.status_code == 422
    assert r.json()["errors"] == [{"loc": ["query", "tpye"], "msg": r.json()["detail"]}]
    assert r.json()["detail"] == "unknown query parameter 'tpye'; this route takes limit, queue, type"
    dead = (await client.get("/v1/jobs", params={"queue": "q", "status": "dead"})).json()["jobs"]
    assert len(dead) == 2
    # The hot routes too (they take no query at all), and the probes.
    r = await client.post("/v1/jobs?queue=elsewhere", json={"type": "t"})
    assert r.status_code == 422 and r.json()["errors"][0]["loc"] == ["query", "queue"]
    assert (await client.get("/healthz?verbose=1")).status_code == 422
    assert (await client.get("/v1/jobs", params={"limit": 1})).status_code == 200
