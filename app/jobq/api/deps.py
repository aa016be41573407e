"""Dependencies the routes share: the core context of this app, and the query check."""

from __future__ import annotations

from fastapi import Request

from jobq.core.context import Context
from jobq.domain.errors import InvalidInput


async def context(request: Request) -> Context:
    # async on purpose: FastAPI runs a plain def dependency in a thread pool, per request.
    ctx: Context = request.app.state.ctx
    return ctx


def context_of(request: Request) -> Context:
    """The same, for an endpoint that takes the Request anyway: no dependency to solve."""
    ctx: Context = request.app.state.ctx
    return ctx


_KNOWN = "_jobq_query_names"


async def known_query(request: Request) -> None:
    """422 for a query parameter the route does not take. Ignoring one would turn a typo into
    a wider request than meant: ``DELETE /v1/dead?queue=q&tpye=t`` would purge every dead
    job of ``q``. Costs nothing without a query string (the hot routes' case)."""
    if not request.scope.get("query_string"):
        return
    route = request.scope.get("route")
    known: frozenset[str] | None = getattr(route, _KNOWN, None)
    if known is None:
        dependant = getattr(route, "dependant", None)
        known = frozenset(p.alias for p in dependant.query_params) if dependant else frozenset()
        setattr(route, _KNOWN, known)  # kept on the route: it lives as long as its app
    unknown = sorted(set(request.query_params) - known)
    if unknown:
        raise InvalidInput(
            f"unknown query parameter {unknown[0]!r}"
            + (f"; this route takes {', '.join(sorted(known))}" if known else "; this route takes none"),
            ["query", unknown[0]])

