"""Admins: access tokens, /v1/tokens. The same as ``jobq tokens``, over HTTP."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from starlette.responses import Response

from jobq.api import render
from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.api.schemas import TokenCreate, TokenCreated, TokenList, TokenPatch, TokenPublic
from jobq.core import tokens as core
from jobq.core.context import Context
from jobq.core.tokens import TokenTable
from jobq.domain.access import Role

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


def _table(request: Request) -> TokenTable:
    table: TokenTable = request.app.state.tokens
    return table


@router.post("", status_code=201, response_model=TokenCreated, summary="Create a token",
             responses=answers(*GUARDED, 413, 422))
async def create_token(body: TokenCreate, request: Request,
                       ctx: Context = Depends(context)) -> Response:
    """The answer holds the token itself, this once; the service keeps only its hash. It
    works on this replica at once and on every other within a second. Creating the first
    token ends local mode."""
    rate = None if body.enqueue_rate is None else body.enqueue_rate.to_domain()
    info, token = await core.create(ctx.db, Role(body.role), body.queues, body.name, rate)
    await _table(request).refresh()
    return render.json_response(info.public() | {"token": token}, 201,
                                {"Location": f"/v1/tokens/{info.id}"})


@router.get("", response_model=TokenList, summary="List tokens", responses=answers(*GUARDED))
async def list_tokens(ctx: Context = Depends(context)) -> Response:
    """Every token ever created, revoked ones included, newest first; never a secret."""
    return render.json_response({"tokens": [i.public() for i in await core.list_all(ctx.db)]})


@router.patch("/{token_id}", response_model=TokenPublic, summary="Set a token's enqueue rate",
              responses=answers(*GUARDED, 413, 422, notes={404: "`not_found`: no such token"}))
async def patch_token(token_id: str, body: TokenPatch, request: Request,
                      ctx: Context = Depends(context)) -> Response:
    """`enqueue_rate`: the token's own token bucket of enqueues (null clears it). It applies
    on this replica at once and on every other within a second; the bucket's tokens are kept."""
    rate = None if body.enqueue_rate is None else body.enqueue_rate.to_domain()
    info = await core.set_rate(ctx.db, token_id, rate)
    await _table(request).refresh()
    return render.json_response(info.public())


@router.delete("/{token_id}", response_model=TokenPublic, summary="Revoke a token",
               responses=answers(*GUARDED, notes={404: "`not_found`: no such token"}))
async def revoke_token(token_id: str, request: Request, ctx: Context = Depends(context)) -> Response:
    """The token stops working on this replica at once and on every other within a second.
    Revoking a revoked token changes nothing and answers it again."""
    info = await core.revoke(ctx.db, token_id)
    await _table(request).forget(token_id)
    return render.json_response(info.public())
