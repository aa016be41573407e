"""Validation messages a person can act on (issue 15): a body that does not parse says where
(line and column) and what the parser expected; a body sent without
``content-type: application/json`` says so; a body that is missing or not an object says that.
Each on an enqueue, a lease call and a queue PATCH, the three ways into the service."""

from __future__ import annotations

import httpx
import pytest

from tests.helpers import claim, enqueue, total, validation

pytestmark = pytest.mark.timeout(60)

JSON = {"content-type": "application/json"}


async def lease_id(c: httpx.AsyncClient) -> str:
    await enqueue(c, "leased")
    [lease] = await claim(c)
    return str(lease["lease_id"])


def message(r: httpx.Response) -> str:
    [item] = validation(r, "body")
    assert r.json()["detail"] == f"body: {item['msg']}"
    return str(item["msg"])


async def send(c: httpx.AsyncClient, method: str, path: str, body: bytes, headers: dict[str, str]) -> httpx.Response:
    return await c.request(method, path, content=body, headers=headers)


async def targets(c: httpx.AsyncClient) -> list[tuple[str, str]]:
    lid = await lease_id(c)
    return [
        ("POST", "/v1/jobs"),
        ("POST", f"/v1/leases/{lid}/fail"),
        ("POST", f"/v1/leases/{lid}/ack"),
        ("PATCH", "/v1/queues/default"),
    ]


async def test_malformed_json_says_line_column_and_what(client: httpx.AsyncClient) -> None:
    for method, path in await targets(client):
        r = await send(client, method, path, b'{"type": "t" "error": 1}', JSON)
        assert message(r) == "invalid JSON at line 1, column 14: expecting ',' delimiter", path
        r = await send(client, method, path, b'{\n  "error": "x",\n  "retry": tru\n}', JSON)
        assert message(r) == "invalid JSON at line 3, column 12: expecting value", path
        r = await send(client, method, path, b'{"error": ', JSON)
        assert message(r) == "invalid JSON at line 1, column 11: expecting value", path
        assert "decode" not in r.text


async def test_a_body_that_is_not_sent_as_json_says_so(client: httpx.AsyncClient) -> None:
    for method, path in await targets(client):
        for ctype in ("text/plain", "application/x-www-form-urlencoded"):
            r = await send(client, method, path, b'{"type": "t", "error": "e"}', {"content-type": ctype})
            assert message(r) == (
                "the body must be JSON sent with content-type: "
                f"application/json; this one came with content-type {ctype}"
            )
        r = await send(client, method, path, b'{"type": "t", "error": "e"}', {})
        assert message(r) == (
            "the body must be JSON sent with content-type: application/json; this one came with no content-type"
        ), path


async def test_a_missing_or_non_object_body_says_so(client: httpx.AsyncClient) -> None:
    lid = await lease_id(client)
    for path in ("/v1/jobs", f"/v1/leases/{lid}/fail"):
        assert message(await send(client, "POST", path, b"", JSON)) == "a JSON object body is required"
        assert message(await send(client, "POST", path, b"[1, 2]", JSON)) == "the body must be a JSON object ({...})"
    assert (
        message(await send(client, "PATCH", "/v1/queues/default", b"5", JSON))
        == "the body must be a JSON object ({...})"
    )
    # None of it enqueued anything or touched the lease.
    assert await total(client) == 1
    assert (await client.post(f"/v1/leases/{lid}/ack")).status_code == 200


async def test_a_bad_path_is_still_named_beside_a_body_not_sent_as_json(client: httpx.AsyncClient) -> None:
    r = await send(client, "PATCH", "/v1/queues/-bad", b'{"paused": true}', {"content-type": "text/plain"})
    assert r.status_code == 422
    locs = [item["loc"] for item in r.json()["errors"]]
    assert ["path", "name"] in locs and ["body"] in locs, r.json()
