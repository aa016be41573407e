"""An app's routes as FastAPI resolved them, for the checks and documents built from them
(access rules, the OpenAPI document's access notes, the ``Allow`` header of a 405)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from starlette.routing import BaseRoute

try:
    # Recent FastAPI keeps an included router whole; this yields its routes as resolved
    # (prefix, router dependencies), each with its ``original_route``.
    from fastapi.routing import iter_route_contexts
except ImportError:  # pragma: no cover - older FastAPI copies included routes into the app
    def iter_route_contexts(routes: Sequence[Any]) -> Any:
        return iter(routes)


def resolved_routes(routes: Sequence[BaseRoute]) -> list[Any]:
    """An app's routes in routing order, as FastAPI resolved them: each with its full path,
    regex, methods, endpoint and dependant (router dependencies included)."""
    return list(iter_route_contexts(routes))


def original_route(rc: Any) -> BaseRoute:
    """The route as declared (its endpoint, its OpenAPI entry)."""
    route: BaseRoute = getattr(rc, "original_route", rc)
    return route
