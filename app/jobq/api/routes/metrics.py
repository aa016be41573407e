"""GET /metrics, Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter, Depends
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.core import metrics
from jobq.core.context import Context

router = APIRouter(tags=["metrics"])


_TEXT = {200: {"description": "Prometheus text exposition format",
               "content": {"text/plain": {"schema": {"type": "string"}}}}}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={**_TEXT, **answers(*GUARDED)})
async def get_metrics(ctx: Context = Depends(context)) -> Response:
    """Counters and histograms of this service (all its worker processes), and gauges of
    waiting depth, counts by status and oldest-waiting age read from the database."""
    return Response(await metrics.exposition(ctx), media_type=CONTENT_TYPE_LATEST)
