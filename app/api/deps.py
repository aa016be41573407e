"""Dependencies the routes share: the core context of this app."""

from __future__ import annotations

from fastapi import Request

from jobq.core.context import Context


async def context(request: Request) -> Context:
    # async on purpose: FastAPI runs a plain def dependency in a thread pool, per request.
    ctx: Context = request.app.state.ctx
    return ctx
