"""A route's declared response is what it sends (issue 23).

The routes render their answers themselves (jobq.api.render) instead of letting FastAPI
serialize them through their ``response_model``, so nothing but this test holds the two
together. Every route is called once as a full admin, the way tests/test_access_rules.py
builds its calls, and the answer must fit what the OpenAPI document declares for its status:
the status itself, its content type, and for JSON every field the model names, of its type,
with no field the model does not name.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.test_access_rules import BUILDERS, IN, ROUTE_NAMES, ROUTES, World, world  # noqa: F401

pytestmark = pytest.mark.timeout(120)

_REF = "#/components/schemas/"
_TYPES: dict[str, Any] = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
    "integer": int, "number": (int, float),
}


def _is(value: Any, type_: str) -> bool:
    if isinstance(value, bool) and type_ in ("integer", "number"):
        return False
    return isinstance(value, _TYPES[type_])


def misfits(value: Any, schema: dict[str, Any], document: dict[str, Any],
            where: str = "body") -> list[str]:
    """Where ``value`` does not fit ``schema``: a wrong type, a missing required field, or a
    field the schema's ``properties`` do not name (and no ``additionalProperties`` allows)."""
    if "$ref" in schema:
        schema = document["components"]["schemas"][schema["$ref"].removeprefix(_REF)]
    options = schema.get("anyOf") or schema.get("oneOf")
    if options:
        found = [misfits(value, option, document, where) for option in options]
        return [] if any(not f for f in found) else min(found, key=len)
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where}: {value!r} is not one of {schema['enum']}"]
    if "const" in schema and value != schema["const"]:
        return [f"{where}: {value!r} is not {schema['const']!r}"]
    declared = schema.get("type")
    if declared is None:
        return []
    types = declared if isinstance(declared, list) else [declared]
    if not any(_is(value, t) for t in types):
        return [f"{where}: {type(value).__name__} {value!r:.60} is not {declared}"]
    out: list[str] = []
    if isinstance(value, dict):
        props: dict[str, Any] | None = schema.get("properties")
        extra = schema.get("additionalProperties")
        out += [f"{where}.{name}: missing" for name in schema.get("required", ())
                if name not in value]
        for key, item in value.items():
            if props is not None and key in props:
                out += misfits(item, props[key], document, f"{where}.{key}")
            elif isinstance(extra, dict):
                out += misfits(item, extra, document, f"{where}.{key}")
            elif props is not None and extra is not True:
                out.append(f"{where}.{key}: not in the declared model")
    elif isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += misfits(item, schema["items"], document, f"{where}[{i}]")
    return out


@pytest.mark.parametrize("name", ROUTE_NAMES)
async def test_what_a_route_sends_is_what_it_declares(world: World, name: str) -> None:  # noqa: F811
    """Each call is sent twice: the second is the other success some routes have (an
    idempotent replay, a replaced schedule, a subscription that exists: 200 after 201)."""
    rc = next(rc for rc in ROUTES if rc.name == name)
    call = await BUILDERS[name](world, IN)
    document = world.app.openapi()
    operation = document["paths"].get(rc.path_format, {}).get(call.method.lower())
    statuses = []
    for _ in range(2):
        r = await world.client.request(call.method, call.path, json=call.json,
                                       params=call.params, headers=world.headers["admin"])
        statuses.append(r.status_code)
        assert statuses[0] < 400, (name, r.status_code, r.text[:300])
        if r.status_code >= 400:  # the second call of a delete, an ack: not a success
            continue
        if operation is None:  # /openapi.json and the docs pages: FastAPI's own
            assert not getattr(rc, "include_in_schema", True), name
            return
        _fits(name, r, operation, document)


def _fits(name: str, r: httpx.Response, operation: dict[str, Any],
          document: dict[str, Any]) -> None:
    answer = operation["responses"].get(str(r.status_code))
    assert answer is not None, f"{name} answered {r.status_code}, which it does not declare"
    content = answer.get("content", {})
    if not content:
        assert r.content == b"", (name, r.status_code)
        return
    media = r.headers["content-type"].split(";")[0]
    assert media in content, f"{name} sent {media}, declared {sorted(content)}"
    schema = content[media].get("schema")
    if media != "application/json" or schema is None:
        return
    assert misfits(r.json(), schema, document) == [], (name, r.status_code)


def test_the_check_finds_a_field_the_model_does_not_name() -> None:
    document = {"components": {"schemas": {"M": {
        "type": "object", "required": ["a"],
        "properties": {"a": {"type": "integer"}, "b": {"anyOf": [{"type": "string"},
                                                                 {"type": "null"}]}}}}}}
    ref = {"$ref": "#/components/schemas/M"}
    assert misfits({"a": 1, "b": None}, ref, document) == []
    assert misfits({"a": 1, "c": 2}, ref, document) == ["body.c: not in the declared model"]
    assert misfits({"b": "x"}, ref, document) == ["body.a: missing"]
    assert misfits({"a": True}, ref, document) == ["body.a: bool True is not integer"]
