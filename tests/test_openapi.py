"""The committed OpenAPI document is the one the service serves."""

from __future__ import annotations

import json
from typing import Any

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


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, op)
            for path, item in openapi.document()["paths"].items()
            for method, op in item.items()]


def test_every_error_answer_is_declared_as_problem_json() -> None:
    for method, path, op in _operations():
        for status, answer in op["responses"].items():
            if int(status) < 400:
                continue
            assert list(answer.get("content", {})) == ["application/problem+json"], (method, path, status)
            assert answer["content"]["application/problem+json"]["schema"] == {
                "$ref": "#/components/schemas/Problem"}, (method, path, status)


def test_every_operation_declares_the_errors_any_call_can_get() -> None:
    # The probes aside, every call is behind the access tokens and reads the database; every
    # call with a body can send one too large or one that does not fit.
    for method, path, op in _operations():
        declared = set(op["responses"])
        if path == "/healthz":
            assert not {s for s in declared if int(s) >= 400}, (method, path, declared)
            continue
        assert "503" in declared, (method, path)
        if path != "/readyz":
            assert {"401", "403"} <= declared, (method, path, declared)
        if "requestBody" in op:
            assert {"413", "422"} <= declared, (method, path, declared)
        assert "HTTPValidationError" not in json.dumps(op), (method, path)
