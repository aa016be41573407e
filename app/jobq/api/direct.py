"""A route class for the endpoints that take only the Request: FastAPI's documented way to
own a route's request handling (an ``APIRoute`` subclass overriding ``get_route_handler``).

Why: the worker's and producer's POSTs (enqueue, claim, heartbeat, ack, fail) are nearly all
of a busy service's requests, and read their own body (jobq.api.bodies) and answer their own
``Response``. For them FastAPI's request handler only solves the router's one dependency
(``access.guarded``) and passes the Request on; solving it costs about as much CPU as the
rest of the handler (py-spy: 6% of the service's CPU in ``jobq bench`` single mode). The
handler here calls ``guarded`` and the endpoint directly.

A route of this class keeps FastAPI's own handler unless its endpoint takes nothing but a
``request: Request`` and its path parameters as ``str`` (FastAPI passes those through as
they are), and it declares no dependency of its own: then FastAPI's handler would do
exactly what this one does. The router's dependency must be ``guarded`` alone;
``check_direct`` (run by ``create_app``) makes sure of that for every route taking this
path, so a dependency added to such a router later cannot be silently skipped.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.convertors import StringConvertor
from starlette.responses import Response
from starlette.routing import BaseRoute

from jobq.api.access import guarded
from jobq.api.resolved import original_route, resolved_routes

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class DirectRoute(APIRoute):
    """See the module's docstring."""

    def get_route_handler(self) -> Handler:
        return self.direct_handler() or super().get_route_handler()

    def direct_handler(self) -> Handler | None:
        """The handler that calls ``guarded`` and the endpoint itself; None for a route whose
        endpoint takes more than the Request (FastAPI's handler serves it). jobq.api.hot
        calls it too, past FastAPI's routing."""
        if not takes_only_request(self):
            return None
        endpoint = self.endpoint
        path_names = tuple(self.param_convertors)

        async def handler(request: Request) -> Response:
            await guarded(request)
            if path_names:
                params = request.path_params
                response: Response = await endpoint(
                    request=request, **{name: params[name] for name in path_names})
                return response
            response = await endpoint(request)
            return response

        return handler


def takes_only_request(route: APIRoute) -> bool:
    """Whether ``DirectRoute`` calls this route's endpoint itself (see the module)."""
    if not isinstance(route, DirectRoute) or route.dependencies:
        return False
    if not inspect.iscoroutinefunction(route.endpoint):
        return False
    path_names = set(route.param_convertors)
    if not all(isinstance(c, StringConvertor) for c in route.param_convertors.values()):
        return False
    hints = inspect.get_annotations(route.endpoint, eval_str=True)
    for name, param in inspect.signature(route.endpoint).parameters.items():
        if param.kind not in (param.POSITIONAL_OR_KEYWORD, param.KEYWORD_ONLY):
            return False
        if param.default is not param.empty:
            return False
        hint = hints.get(name)
        if name == "request" and hint is Request:
            continue
        if name in path_names and hint is str:
            path_names.discard(name)
            continue
        return False
    return not path_names and "request" in inspect.signature(route.endpoint).parameters


def check_direct(routes: list[BaseRoute]) -> None:
    """Raise unless every route whose endpoint ``DirectRoute`` calls itself depends, as
    resolved (the routers' dependencies included), on ``guarded`` and nothing else: the
    one dependency its handler runs."""
    for route in resolved_routes(routes):
        declared = original_route(route)
        if not isinstance(declared, APIRoute) or not takes_only_request(declared):
            continue
        calls = [d.call for d in route.dependant.dependencies]
        if calls != [guarded]:
            raise TypeError(f"route {route.name} ({route.path}) is a DirectRoute, whose handler "
                            f"runs access.guarded alone, but depends on {calls}")
