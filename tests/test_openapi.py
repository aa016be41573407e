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


def test_every_operation_but_the_probes_declares_the_bearer_scheme_and_its_401_and_403() -> None:
    doc = openapi.document()
    assert doc["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer",
        "description": doc["components"]["securitySchemes"]["bearer"]["description"]}
    assert doc["security"] == [{"bearer": []}]
    seen = set()
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            seen.add(path)
            if path in ("/healthz", "/readyz"):
                assert op["security"] == [], (method, path)
                assert "401" not in op["responses"]
                continue
            assert "security" not in op, (method, path)  # the document's default: bearer
            for status in ("401", "403"):
                content = op["responses"][status]["content"]
                assert list(content) == ["application/problem+json"], (method, path, status)
            assert "Roles: " in op["description"], (method, path)
    assert {"/v1/jobs", "/v1/leases", "/metrics", "/v1/tokens", "/healthz"} <= seen


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


def _resolve(doc: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return doc["components"]["schemas"][ref.rsplit("/", 1)[-1]] if ref else schema


def test_every_json_answer_declares_a_schema() -> None:
    """An answer declared with an empty schema (`{}`) gives a generated client nothing to
    parse: its `parsed` is None (/healthz, /readyz and a schedule PUT's 200 did)."""
    doc = openapi.document()
    empty = [f"{method.upper()} {path} {status}"
             for path, item in doc["paths"].items() for method, op in item.items()
             for status, answer in op["responses"].items()
             for media_type, media in (answer.get("content") or {}).items()
             if media_type.endswith("json") and not media.get("schema")]
    assert empty == []


async def test_the_probes_answer_what_their_schemas_declare(client: httpx.AsyncClient) -> None:
    doc = openapi.document()
    for path in ("/healthz", "/readyz"):
        answers = doc["paths"][path]["get"]["responses"]
        schema = _resolve(doc, answers["200"]["content"]["application/json"]["schema"])
        assert schema["type"] == "object" and "status" in schema["required"], (path, schema)
        body = (await client.get(path)).json()
        assert set(body) == set(schema["properties"]) and set(schema["required"]) <= set(body), body
        assert body["status"] == schema["properties"]["status"]["const"], body
    ready = _resolve(doc, doc["paths"]["/readyz"]["get"]["responses"]["200"]["content"]["application/json"]["schema"])
    assert ready["properties"]["schema"]["type"] == "string"
    unavailable = doc["paths"]["/readyz"]["get"]["responses"]["503"]["content"]["application/problem+json"]
    assert unavailable["schema"] == {"$ref": "#/components/schemas/Problem"}
