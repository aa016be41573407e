"""Dependencies the routes share: the core context of this app."""

from __future__ import annotations

from fastapi import Request

from app.core.context import Context


def context(request: Request) -> Context:
    ctx: Context = request.app.state.ctx
    return ctx
