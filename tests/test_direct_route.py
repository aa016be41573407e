"""jobq.api.direct: the route class that calls the worker's and producer's endpoints itself
keeps FastAPI's handler wherever that would do more than call ``guarded`` and the endpoint,
and the app cannot be built with such a route behind any other dependency."""

from __future__ import annotations

import httpx
import pytest
from fastapi import APIRouter, Depends, FastAPI, Request
from starlette.responses import JSONResponse, Response

from jobq.api.access import SCOPE_KEY, guarded
from jobq.api.app import create_app
from jobq.api.direct import DirectRoute, check_direct, takes_only_request
from jobq.api.resolved import original_route, resolved_routes
from jobq.domain.access import LOCAL
from tests.conftest import make_settings

pytestmark = pytest.mark.timeout(60)


def test_the_workers_and_producers_posts_are_called_directly() -> None:
    url = "postgresql://nobody@127.0.0.1:1/none"
    app = create_app(make_settings(url), url)
    direct = sorted(original_route(r).name for r in resolved_routes(app.router.routes)
                    if takes_only_request(original_route(r)))
    assert direct == ["ack", "ack_many", "claim", "create_job", "create_jobs", "fail",
                      "heartbeat", "release", "release_many"]


async def _stamp(request: Request) -> None:
    pass


def test_a_direct_route_behind_another_dependency_fails_the_build() -> None:
    router = APIRouter(prefix="/x", route_class=DirectRoute)

    @router.post("/{item}")
    async def create_job(item: str, request: Request) -> Response:
        return JSONResponse({"item": item})

    app = FastAPI()
    app.include_router(router, dependencies=[Depends(guarded), Depends(_stamp)])
    with pytest.raises(TypeError, match="DirectRoute"):
        check_direct(app.router.routes)
    app = FastAPI()
    app.include_router(router, dependencies=[Depends(guarded)])
    check_direct(app.router.routes)


async def test_other_endpoints_keep_fastapis_handler() -> None:
    router = APIRouter(prefix="/v1/jobs", route_class=DirectRoute)

    @router.get("/{job_id}")
    async def get_job(job_id: int, request: Request, limit: int = 5) -> Response:
        return JSONResponse({"job_id": job_id, "limit": limit})

    @router.post("/{lease_id}/ack")
    async def ack(lease_id: str, request: Request) -> Response:
        return JSONResponse({"lease_id": lease_id, "path": request.url.path})

    app = FastAPI()
    app.include_router(router, dependencies=[Depends(guarded)])
    check_direct(app.router.routes)
    routes = {original_route(r).name: original_route(r) for r in resolved_routes(app.router.routes)}
    assert not takes_only_request(routes["get_job"])  # an int path parameter, a query one
    assert takes_only_request(routes["ack"])

    async def with_principal(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            scope[SCOPE_KEY] = LOCAL  # what Authenticate leaves
        await app(scope, receive, send)

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=with_principal),
                                 base_url="http://t") as client:
        got = await client.get("/v1/jobs/7", params={"limit": "9"})
        assert got.json() == {"job_id": 7, "limit": 9}  # parsed by FastAPI
        got = await client.post("/v1/jobs/l-1/ack")
        assert got.json() == {"lease_id": "l-1", "path": "/v1/jobs/l-1/ack"}
