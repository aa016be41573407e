"""The committed OpenAPI document is the one the service serves."""

from __future__ import annotations

import json

import httpx

from jobq.api import openapi


def test_committed_document_matches_the_code() -> None:
    committed = json.loads(openapi.DOCUMENT.read_text())
    assert committed == openapi.document(), (
        "openapi/openapi.json is stale: run `jobq openapi --write` and commit it"
    )


async def test_served_document_is_the_committed_one(client: httpx.AsyncClient) -> None:
    r = await client.get("/openapi.json")
    assert r.status_code == 200
    assert r.json() == json.loads(openapi.DOCUMENT.read_text())


def test_operation_ids_are_pinned_to_handler_names() -> None:
    ops = {
        op["operationId"]
        for path in openapi.document()["paths"].values()
        for op in path.values()
    }
    assert {"create_job", "create_jobs", "claim", "ack", "ack_many", "fail", "heartbeat"} <= ops
