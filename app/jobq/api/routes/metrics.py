"""GET /metrics, Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from prometheus_client import CONTENT_TYPE_LATEST
from starlette.responses import Response

from jobq.api.deps import context
from jobq.api.document import GUARDED, answers
from jobq.core import metrics
from jobq.core.context import Context
from jobq.domain.access import QueuePattern
from jobq.settings import Settings

router = APIRouter(tags=["metrics"])


_TEXT = {200: {"description": "Prometheus text exposition format",
               "content": {"text/plain": {"schema": {"type": "string"}}}}}


@router.get("/metrics", summary="Prometheus metrics", response_class=Response,
            responses={**_TEXT, **answers(*GUARDED)})
async def get_metrics(request: Request, ctx: Context = Depends(context)) -> Response:
    """Counters and histograms of this service (all its worker processes), and gauges of
    waiting depth, counts by status and oldest-waiting age read from the database.

    Per-queue gauges are bounded: at most `JOBQ_METRICS_QUEUES` queues (default 500; the
    ones with the most waiting jobs, of those matching `JOBQ_METRICS_QUEUE_PATTERN`) have
    series of their own; every other queue is summed into `queue="_other"`, so totals over
    all series stay exact."""
    return Response(await metrics.exposition(ctx, bound_of(request.app.state.settings)),
                    media_type=CONTENT_TYPE_LATEST)


def bound_of(settings: Settings) -> metrics.QueueBound:
    """Which queues get series of their own (JOBQ_METRICS_QUEUES, JOBQ_METRICS_QUEUE_PATTERN)."""
    pattern = QueuePattern(settings.metrics_queue_pattern)
    return metrics.QueueBound(limit=settings.metrics_queues,
                              pattern=None if pattern.is_all else pattern.regex)
