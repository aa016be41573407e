"""JSON request bodies that an endpoint reads itself: orjson and a pydantic ``TypeAdapter``,
with FastAPI's rules and FastAPI's errors, declared to the OpenAPI document through the
route's ``openapi_extra``.

Why: the worker's and producer's POSTs (enqueue, claim, heartbeat, ack, fail) are nearly all
of a busy service's requests. FastAPI reads a declared body with the standard library's JSON
parser; orjson is several times faster on the payloads jobs carry. Such a route declares
itself once, as usual, but takes the ``Request`` instead of a body parameter::

    CLAIM = JsonBody(ClaimBody)

    @router.post("", response_model=LeaseList, openapi_extra=CLAIM.openapi)
    async def claim(request: Request, ...) -> Response:
        body = await CLAIM.read(request)

``read`` answers every body as FastAPI would answer it for a parameter of that type (strict
content type, the default): a body sent without a JSON content type is validated as bytes, an
empty one is the parameter's default or missing, a syntax error is FastAPI's ``json_invalid``
with the standard library's position and words, a body it cannot decode at all is FastAPI's
400; each is raised as FastAPI's public ``RequestValidationError`` or ``HTTPException``, so
the app's exception handlers (jobq.api.problems) word it as they word FastAPI's own. Where
orjson could read a value otherwise than the standard library (a number it would round:
jobq.domain.jsontext), or refuses a text, the standard library reads it.

One difference from a body parameter: FastAPI reads a body before running the route's
dependencies, this runs in the endpoint, after them. A request that the access check refuses
(403) or that names an unknown query parameter is refused for that, even when its body is
not JSON either.
"""

from __future__ import annotations

import email.message
import json
from itertools import islice
from typing import Any, Generic, TypeVar

import orjson
from fastapi import HTTPException, Request
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError
from pydantic.json_schema import GenerateJsonSchema

from jobq.domain.jsontext import may_hold_nul, nul_paths, orjson_would_round

T = TypeVar("T")

_REF_TEMPLATE = "#/components/schemas/{model}"
# Every body declared, for the OpenAPI document's components (``component_schemas``).
_DECLARED: list[JsonBody[Any]] = []


class JsonBody(Generic[T]):
    """The JSON body of one route: ``annotation`` is what a body parameter's would be. Not
    ``required``: an empty body is None (FastAPI's ``Body(default=None)``)."""

    def __init__(self, annotation: Any, *, required: bool = True) -> None:
        self.annotation = annotation
        self.adapter: TypeAdapter[T] = TypeAdapter(annotation)
        self.required = required
        schema = _schemas([self.adapter])[0][0]
        if "$ref" not in schema:
            schema["title"] = "Body"  # FastAPI titles a body parameter's schema by its name
        body: dict[str, Any] = {"content": {"application/json": {"schema": schema}}}
        if required:
            body["required"] = True
        # For the route's ``openapi_extra``: FastAPI merges it into the operation.
        self.openapi: dict[str, Any] = {"requestBody": body}
        _DECLARED.append(self)

    async def read(self, request: Request) -> T:
        """The body, validated; raises RequestValidationError or HTTPException as FastAPI
        does for a body parameter."""
        raw = await request.body()
        if not raw:
            if self.required:
                raise RequestValidationError([{"type": "missing", "loc": ("body",),
                                               "msg": "Field required", "input": None}])
            return None  # type: ignore[return-value]
        value: Any = _json(raw) if _is_json(request.headers.get("content-type")) else raw
        try:
            return self.adapter.validate_python(value, from_attributes=True)
        except ValidationError as exc:
            errors = [{**err, "loc": ("body", *err.get("loc", ()))}
                      for err in exc.errors(include_url=False)]
            raise RequestValidationError(errors, body=value) from None


# Methods whose requests carry a body here (DELETE and GET take none).
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})
NUL_NAMED = 20  # paths named in one answer, at most


async def refuse_nul(request: Request) -> None:
    """422 naming each place (``["body", "payload", "a"]``, ``["body", "jobs", 3, "type"]``)
    where a JSON body holds a NUL character, which PostgreSQL stores in neither text nor
    jsonb: otherwise the database driver refuses the whole statement, and the answer could
    only say "the body". For every body of every route behind the tokens (``guarded`` calls
    it): a byte scan, and only a body holding the escape is parsed and walked again.

    A body that is not JSON, or does not parse, is left to the route's own reading, which
    says what is wrong with it."""
    if request.method not in _BODY_METHODS:
        return
    raw = await request.body()  # read once: the route's reading gets the same bytes
    if not may_hold_nul(raw) or not _is_json(request.headers.get("content-type")):
        return
    try:
        value = json.loads(raw)
    except Exception:  # not JSON, not UTF-8, nested too deeply: the route's reading words it
        return
    errors = [{"type": "string_nul", "loc": ("body", *path), "input": None,
               "msg": ("a NUL character (\\u0000) in a key is not accepted: PostgreSQL cannot store it"
                       if path and isinstance(path[-1], str) and "\x00" in path[-1] else
                       "a NUL character (\\u0000) is not accepted: PostgreSQL cannot store it")}
              for path in islice(nul_paths(value), NUL_NAMED)]
    if errors:
        raise RequestValidationError(errors, body=value)


def _is_json(content_type: str | None) -> bool:
    """FastAPI's test: ``application/json`` or ``application/*+json``, parameters allowed;
    no content type is not JSON (FastAPI's strict content type, its default)."""
    if not content_type:
        return False
    if content_type == "application/json":  # nearly every request: no parsing for it
        return True
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def _json(raw: bytes) -> Any:
    if not orjson_would_round(raw):
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass  # the standard library's verdict and words, below
    try:
        return json.loads(raw)
    except json.JSONDecodeError as exc:
        raise RequestValidationError(
            [{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error",
              "input": {}, "ctx": {"error": exc.msg}}], body=exc.doc) from exc
    except Exception as exc:  # not UTF-8, nested too deeply, an integer too long
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


def _schemas(adapters: list[TypeAdapter[Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The JSON schemas of these bodies (references into the components) and the components
    they refer to, as FastAPI writes them (validation mode)."""
    generator = GenerateJsonSchema(ref_template=_REF_TEMPLATE)
    keyed, definitions = generator.generate_definitions(
        [(i, "validation", a.core_schema) for i, a in enumerate(adapters)])
    return [dict(keyed[(i, "validation")]) for i in range(len(adapters))], dict(definitions)


def component_schemas() -> dict[str, Any]:
    """The schemas the declared bodies refer to, by name, for the document's components."""
    return _schemas([b.adapter for b in _DECLARED])[1]
