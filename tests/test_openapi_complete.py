"""The OpenAPI document is complete (issue 15): every body and every success has an example,
every error an operation can answer is declared as problem+json with examples naming its
`code`, and FastAPI's `{detail: [...]}` shape appears nowhere."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from jobq.api import openapi, schemas
from jobq.api.problems import KINDS, TYPE_BASE

DOC = openapi.document()
PUBLIC = {"/healthz", "/readyz"}
OPERATIONS = [(method.upper(), path, op) for path, item in DOC["paths"].items()
              for method, op in item.items()]
IDS = [f"{m} {p}" for m, p, _ in OPERATIONS]


def _model(media: dict[str, Any]) -> type[BaseModel] | None:
    """The pydantic model behind a media type's schema, when it names one."""
    schema = media.get("schema", {})
    refs = [schema.get("$ref")] + [a.get("$ref") for a in schema.get("anyOf", [])]
    for ref in refs:
        if ref:
            model = getattr(schemas, ref.rsplit("/", 1)[-1], None)
            if isinstance(model, type) and issubclass(model, BaseModel):
                return model
    return None


def _values(media: dict[str, Any]) -> list[Any]:
    if "example" in media:
        return [media["example"]]
    return [e["value"] for e in media.get("examples", {}).values()]


def _required_errors(method: str, path: str, op: dict[str, Any]) -> set[str]:
    """What the issue asks each operation to declare, written from the routes' behaviour."""
    if path == "/healthz":
        return set()
    if path == "/readyz":
        return {"503"}
    want = {"401", "403", "422", "503"}  # tokens; an unknown query parameter; the database
    if "requestBody" in op:
        want |= {"413"}
    if path.startswith("/v1/jobs/{job_id}") or path.startswith("/v1/leases/{lease_id}"):
        want |= {"404"}
    if path.endswith(("/cancel", "/retry")) or path.startswith("/v1/leases/{lease_id}"):
        want |= {"409"}
    if (method, path) in {("POST", "/v1/jobs"), ("POST", "/v1/jobs/batch")}:
        want |= {"409", "429"}  # idempotency_conflict, queue_full
    return want


@pytest.mark.parametrize(("method", "path", "op"), OPERATIONS, ids=IDS)
def test_every_request_body_has_an_example_that_fits(method: str, path: str, op: dict[str, Any]) -> None:
    body = op.get("requestBody")
    if body is None:
        return
    for media_type, media in body["content"].items():
        values = _values(media)
        assert values, (method, path, media_type, "no request example")
        model = _model(media)
        for value in values:
            if model is not None:
                model.model_validate_json(json.dumps(value))


@pytest.mark.parametrize(("method", "path", "op"), OPERATIONS, ids=IDS)
def test_every_success_has_an_example_that_fits(method: str, path: str, op: dict[str, Any]) -> None:
    successes = {s: a for s, a in op["responses"].items() if int(s) < 400}
    assert successes, (method, path)
    for status, answer in successes.items():
        if status == "204":
            assert not answer.get("content"), (method, path)
            continue
        assert answer.get("content"), (method, path, status)
        for media_type, media in answer["content"].items():
            values = _values(media)
            assert values, (method, path, status, media_type, "no response example")
            model = _model(media)
            for value in values:
                if model is not None:
                    model.model_validate_json(json.dumps(value))


@pytest.mark.parametrize(("method", "path", "op"), OPERATIONS, ids=IDS)
def test_every_error_is_declared_as_problem_json_with_its_codes(
        method: str, path: str, op: dict[str, Any]) -> None:
    declared = {s for s in op["responses"] if int(s) >= 400}
    missing = _required_errors(method, path, op) - declared
    assert not missing, (method, path, missing)
    enum = set(DOC["components"]["schemas"]["Problem"]["properties"]["code"]["enum"])
    assert enum == set(KINDS)
    for status in declared:
        content = op["responses"][status]["content"]
        assert list(content) == ["application/problem+json"], (method, path, status)
        media = content["application/problem+json"]
        assert media["schema"] == {"$ref": "#/components/schemas/Problem"}, (method, path, status)
        values = _values(media)
        assert values, (method, path, status, "no problem example")
        for value in values:
            assert value["code"] in enum, (method, path, status, value)
            assert value["status"] == int(status), (method, path, value)
            assert int(status) in KINDS[value["code"]].statuses, (method, path, value)
            assert value["type"] == TYPE_BASE + value["code"]
            assert value["title"] == KINDS[value["code"]].title
            assert {"type", "title", "status", "detail", "code"} <= set(value)


def test_the_lease_and_enqueue_conflicts_name_their_own_codes() -> None:
    def codes(path: str, status: str, method: str = "post") -> set[str]:
        media = DOC["paths"][path][method]["responses"][status]["content"]["application/problem+json"]
        return {v["code"] for v in _values(media)}

    assert codes("/v1/leases/{lease_id}/ack", "409") == {"lease_lost"}
    assert codes("/v1/jobs/{job_id}/cancel", "409") == {"invalid_state"}
    assert "idempotency_conflict" in codes("/v1/jobs", "409")
    limits = {"queue_full", "queue_rate_limited", "token_rate_limited", "queue_overloaded"}
    assert codes("/v1/jobs", "429") == limits
    assert codes("/v1/jobs/batch", "429") == limits


def test_no_fastapi_validation_shape_anywhere() -> None:
    text = json.dumps(DOC)
    assert "HTTPValidationError" not in text and '"ValidationError"' not in text
    assert "#/components/schemas/ValidationError" not in text
    # the {detail: [...]} body: no schema anywhere has an array `detail`
    def walk(node: Any) -> None:
        if isinstance(node, dict):
            detail = node.get("properties", {}).get("detail") if isinstance(node.get("properties"), dict) else None
            assert not (isinstance(detail, dict) and detail.get("type") == "array"), node
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)
    walk(DOC)


def test_problem_types_point_at_the_served_pages() -> None:
    description = DOC["components"]["schemas"]["Problem"]["properties"]["type"]["description"]
    assert "/problems/{code}" in description
    assert "jobq.dev" not in json.dumps(DOC)
