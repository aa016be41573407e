"""The OpenAPI document's declarations of answers, and the passes that complete the document.

Every route lists, with ``responses=answers(...)``, the error statuses it can answer; each is
declared as problem+json with the schemas below. The property-based fuzz
(tests/test_fuzz.py) holds the service to these declarations: an undeclared status, content
type or header fails it. The runtime side, the table from errors to answers, is
jobq.api.problems: routes import this module for their declarations and the examples, which
import no route.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI
from fastapi.encoders import jsonable_encoder
from fastapi.openapi.models import Schema

from jobq.api import examples
from jobq.api.bodies import component_schemas
from jobq.api.problems import CODES, KINDS, PROBLEM, TYPE_BASE

_REF = "#/components/schemas/"

SCHEMAS: dict[str, dict[str, Any]] = {
    "Problem": {
        "title": "Problem",
        "description": "RFC 9457 problem details with our own `code`: the body of every 4xx and 5xx.",
        "type": "object",
        "required": ["type", "title", "status", "detail", "code"],
        "properties": {
            "type": {"type": "string", "format": "uri-reference",
                     "description": f"`{TYPE_BASE}{{code}}`, relative to the request's URL: "
                     "`GET` it for a page (HTML, or JSON with `Accept: application/json`) on "
                     "what the code means and what to do; no token needed"},
            "title": {"type": "string"},
            "status": {"type": "integer", "description": "the HTTP status of the answer"},
            "detail": {"type": "string"},
            "code": {"type": "string", "enum": list(CODES)},
            "errors": {"type": "array", "items": {"$ref": _REF + "ProblemItem"},
                       "description": "`validation_error` only: each thing wrong, and where"},
            "counts": {
                "type": "object", "additionalProperties": {"type": "integer"},
                "description": "`queue_not_empty` only: the queue's jobs that keep it from being "
                "deleted, by status (`pending`, `running`, `failed`, `dead`; nonzero only)"},
            "schedules": {
                "type": "array", "items": {"type": "string"},
                "description": "`queue_not_empty` only: the schedules whose job targets the queue"},
            "topics": {
                "type": "array", "items": {"type": "string"},
                "description": "`queue_not_empty` only: the topics the queue is subscribed to"},
            "retry_after_ms": {
                "type": "integer", "minimum": 0,
                "description": "`queue_full`, `queue_rate_limited`, `token_rate_limited`, "
                "`queue_overloaded` only: how long to wait before sending the same request "
                "again, in ms (`Retry-After` says the same in whole seconds, rounded up); for a "
                "rate, when its bucket holds the whole request (a batch: all of it)"},
            "already_completed": {
                "type": "boolean",
                "description": "`lease_lost` only, and only when true: this very lease completed "
                "the job, whose result is stored (a retried ack whose first answer was lost)"},
        },
    },
    "ProblemItem": {
        "title": "ProblemItem",
        "type": "object",
        "required": ["loc", "msg"],
        "properties": {
            "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                    "description": "`body`, `query` or `path`, then names and list indexes"},
            "msg": {"type": "string"},
        },
    },
}

# What each status means wherever it is answered; a route may say more (``notes``).
MEANING: dict[int, str] = {
    401: "`unauthorized`: once any access token exists, a call without a known bearer token",
    403: "`forbidden`: the token's role may not make this call, or the queue is outside its pattern",
    404: "`not_found`",
    409: "`invalid_state`",
    413: "`payload_too_large`: the body is over the size limit (default 1 MiB)",
    422: "`validation_error`: the request does not fit this document; `errors` says where",
    429: "`queue_full` (max_depth), `queue_rate_limited` (the queue's `enqueue_rate`), "
         "`token_rate_limited` (the token's `enqueue_rate`) or `queue_overloaded` (past "
         "`soft_depth` or `soft_lag_ms`): nothing enqueued; wait `Retry-After` (whole "
         "seconds) or the body's `retry_after_ms`",
    503: "`unavailable`: the database did not answer in time; try again after `Retry-After` seconds",
}

_RETRY_AFTER = {"Retry-After": {"description": "whole seconds, at least 1", "required": True,
                                "schema": {"type": "string", "pattern": "^[0-9]+$"}}}
HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "`Bearer`", "required": True,
                               "schema": {"type": "string"}}},
    429: _RETRY_AFTER,
    503: _RETRY_AFTER,
}

# Every call but the probes is behind the access tokens and reads the database.
GUARDED = (401, 403, 503)


def answers(*statuses: int, notes: Mapping[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: each status as problem+json, described by ``notes`` or by
    ``MEANING``."""
    notes = notes or {}
    declared: dict[int | str, dict[str, Any]] = {}
    for status in sorted(set(statuses) | set(notes)):
        answer: dict[str, Any] = {
            "description": notes.get(status) or MEANING[status],
            "content": {PROBLEM: {"schema": {"$ref": _REF + "Problem"}}},
        }
        if status in HEADERS:
            answer["headers"] = HEADERS[status]
        declared[status] = answer
    return declared


def install_document(app: FastAPI) -> None:
    """Adds the problem schemas to the app's OpenAPI document, and takes out the 422 FastAPI
    declares on its own for every route with a parameter: that one names a body we never send
    (``HTTPValidationError``), and routes whose parameters cannot be wrong (a job id is any
    string; an unknown one is a 404) never answer 422 at all. Routes that can declare it with
    ``answers(422)``."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = build()  # FastAPI's, cached on the app: adjusted once, in place
            for path in document.get("paths", {}).values():
                for operation in path.values():
                    responses = operation.get("responses", {})
                    schema = responses.get("422", {}).get("content", {}).get("application/json", {})
                    if schema.get("schema", {}).get("$ref") == _REF + "HTTPValidationError":
                        del responses["422"]
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            schemas.pop("HTTPValidationError", None)
            schemas.pop("ValidationError", None)
            schemas.update(SCHEMAS)
            # The bodies the hot endpoints read themselves (jobq.api.bodies): FastAPI does not
            # know their models, so their schemas join the document's here, encoded as
            # FastAPI encodes its own (numbers as the model's floats, no null defaults).
            for name, schema in component_schemas().items():
                schemas.setdefault(name, jsonable_encoder(Schema(**schema), by_alias=True,
                                                          exclude_none=True))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


_UNKNOWN_QUERY = ("`validation_error`: a query parameter this route does not take (or, where it "
                  "takes some, a value that does not fit); `errors` says which")


def complete_document(document: dict[str, Any]) -> dict[str, Any]:
    """The last pass over the OpenAPI document, once the access rules are in it: every
    operation behind a token declares the 422 that any unknown query parameter gets
    (``deps.known_query``), and ``examples.install`` gives every body, success and error an
    example (the errors with their ``code``)."""
    for item in document.get("paths", {}).values():
        for op in item.values():
            if op.get("security") == []:  # the probes: declared by hand in routes/health.py
                continue
            responses = op.setdefault("responses", {})
            if "422" not in responses:
                responses["422"] = answers(422, notes={422: _UNKNOWN_QUERY})[422]
    examples.install(document, KINDS, TYPE_BASE)
    return document
