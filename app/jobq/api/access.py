"""Access control: who is calling (an ASGI middleware every request passes) and whether the
route allows them (one rule per route, in one table, checked by one dependency).

Authentication sits outside everything else, the body limit included, so
a request without a valid token costs a header read and a dict lookup: no body is read, no
route matched, no database touched. It answers 401 for every path but the public probes,
unknown paths too, so that probing for routes learns nothing.

Authorization needs the route, so it is a dependency (``caller``, inside ``guarded``) that
``create_app`` puts on every router but the probes'. ``check_rules`` makes
the build fail for a route without a rule, or without the dependency, so a new route cannot
answer without it. What a rule cannot say, because it depends on the body or the job (the
queues a call names, the queue of a job read by id), the routes check with ``require_queues``
and by passing ``Principal.scope_regex`` down to the SQL.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import Request
from fastapi.routing import APIRoute
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from jobq.api.bodies import refuse_nul
from jobq.api.deps import known_query
from jobq.api.problems import BEARER_CHALLENGE, problem
from jobq.api.resolved import original_route, resolved_routes
from jobq.core.tokens import TokenTable
from jobq.domain.access import Principal, Role
from jobq.domain.errors import Forbidden, Unauthorized

SCOPE_KEY = "jobq.principal"


@dataclass(frozen=True, slots=True)
class Rule:
    """Who may call a route: an admin always; these other roles too. ``all_queues``: only a
    token for every queue (server-wide reads and token management: an admin of some queues
    must not mint itself a token for all of them)."""

    roles: frozenset[Role] = frozenset()
    all_queues: bool = False
    public: bool = False

    def describe(self) -> str:
        if self.public:
            return "No token needed."
        roles = sorted(r.value for r in self.roles) + ["admin"]
        text = "Roles: " + ", ".join(f"`{r}`" for r in roles) + "."
        if self.all_queues:
            text += " The token's queue pattern must be `*`."
        return text


PUBLIC = Rule(public=True)
PRODUCER = Rule(frozenset({Role.PRODUCER}))
WORKER = Rule(frozenset({Role.WORKER}))
ADMIN = Rule()
ADMIN_ALL_QUEUES = Rule(all_queues=True)

# Every route by its endpoint's name (= its OpenAPI operationId). A route missing here makes
# create_app fail; tests/test_access_rules.py calls every route with every role.
RULES: dict[str, Rule] = {
    "healthz": PUBLIC,
    "readyz": PUBLIC,
    # The pages the problem+json ``type`` URIs point at: readable by a caller just refused.
    "problem_page": PUBLIC,
    # The dashboard's static files (no data in them; the page calls /v1 with a token).
    "ui_root": PUBLIC,
    "ui_index": PUBLIC,
    "ui_file": PUBLIC,
    "ui_favicon": PUBLIC,
    "create_job": PRODUCER,
    "create_jobs": PRODUCER,
    "list_jobs": PRODUCER,
    "get_job": PRODUCER,
    "cancel_job": ADMIN,
    "retry_job": ADMIN,
    "delete_job": ADMIN,
    "claim": WORKER,
    "ack_many": WORKER,
    "heartbeat": WORKER,
    "ack": WORKER,
    "fail": WORKER,
    "release": WORKER,
    "release_many": WORKER,
    "beat_worker": WORKER,
    "list_queues": ADMIN,
    "get_queue": ADMIN,
    "patch_queue": ADMIN,
    "delete_queue": ADMIN,
    "replay_dead": ADMIN,
    "purge_dead": ADMIN,
    "purge_dead_job": ADMIN,
    # Server-wide reads, as /metrics: they name every queue and worker.
    "list_workers": ADMIN_ALL_QUEUES,
    "get_throughput": ADMIN_ALL_QUEUES,
    # Schedules are server-wide, as tokens are: their names are one namespace for every
    # queue, so only an admin of every queue manages them.
    "list_schedules": ADMIN_ALL_QUEUES,
    "get_schedule": ADMIN_ALL_QUEUES,
    "put_schedule": ADMIN_ALL_QUEUES,
    "patch_schedule": ADMIN_ALL_QUEUES,
    "delete_schedule": ADMIN_ALL_QUEUES,
    # Topics, likewise one namespace for every queue; publishing is a producer's, and the
    # route checks the token covers every subscribed queue.
    "list_topics": ADMIN_ALL_QUEUES,
    "get_topic": ADMIN_ALL_QUEUES,
    "subscribe_queue": ADMIN_ALL_QUEUES,
    "unsubscribe_queue": ADMIN_ALL_QUEUES,
    "publish_topic": PRODUCER,
    "get_metrics": ADMIN_ALL_QUEUES,
    "create_token": ADMIN_ALL_QUEUES,
    "list_tokens": ADMIN_ALL_QUEUES,
    "revoke_token": ADMIN_ALL_QUEUES,
    "patch_token": ADMIN_ALL_QUEUES,
}


async def caller(request: Request) -> Principal:
    """The request's principal, once the route's rule allows it (403 otherwise)."""
    principal: Principal | None = request.scope.get(SCOPE_KEY)
    if principal is None:  # an app built without Authenticate: refuse rather than guess
        raise Unauthorized("no access token was checked for this request")
    route = request.scope.get("route")
    rule = RULES.get(getattr(route, "name", ""))
    if rule is None:
        raise Forbidden("this route has no access rule")
    if not principal.may(rule.roles):
        raise Forbidden(f"a {principal.role.value} token may not call "
                        f"{request.method} {request.url.path}")
    if rule.all_queues and not principal.queues.is_all:
        raise Forbidden(f"{request.method} {request.url.path} needs a token for every queue; "
                        f"this one is for {principal.queues.text!r}")
    return principal


async def guarded(request: Request) -> None:
    """The one dependency of every router behind the tokens: the route's rule (``caller``),
    then the query check (``deps.known_query``), then the body's NUL characters
    (``bodies.refuse_nul``). One dependency, not three: FastAPI solves each on every request,
    and these routers carry the service's busiest calls."""
    await caller(request)
    await known_query(request)
    await refuse_nul(request)


def admitted(request: Request) -> Principal:
    """The principal ``caller`` admitted: for the endpoints that take the Request anyway (the
    worker's and producer's POSTs), instead of ``Depends(caller)`` again, which FastAPI would
    solve a second time on every request only to find it cached. ``caller`` runs before any
    endpoint of a router with a rule (``check_rules`` makes sure), so this only reads what
    it let through."""
    principal: Principal | None = request.scope.get(SCOPE_KEY)
    if principal is None:  # not behind Authenticate and caller: refuse rather than guess
        raise Unauthorized("no access token was checked for this request")
    return principal


def require_queues(principal: Principal, queues: Iterable[str], where: str = "queue") -> None:
    """403 for the first queue a call names that the token's pattern does not cover."""
    if principal.queues.is_all:
        return
    for queue in queues:
        if not principal.sees(queue):
            raise Forbidden(f"{where} {queue!r} is outside this token's queues "
                            f"({principal.queues.text!r})")


def check_rules(routes: Sequence[BaseRoute]) -> frozenset[str]:
    """Raise unless every API route has a rule, and every one not public runs ``caller``.
    Returns the public routes' paths, for ``Authenticate``."""
    public: set[str] = set()
    for route in resolved_routes(routes):  # as resolved: with the routers' dependencies
        if not isinstance(original_route(route), APIRoute):
            continue  # /openapi.json and the docs pages: any valid token reads them
        rule = RULES.get(route.name)
        if rule is None:
            raise TypeError(f"route {route.name} ({route.path}) has no rule in jobq.api.access.RULES")
        if rule.public:
            public.add(_public_path(route.path))
        elif not (_runs(route.dependant, guarded) or _runs(route.dependant, caller)):
            raise TypeError(f"route {route.name} ({route.path}) does not depend on access.caller")
    return frozenset(public)


def _public_path(path: str) -> str:
    """A public route's path as ``Authenticate`` matches it: a fixed path, or for a path whose
    only parameter is its last segment (``/problems/{code}``) its prefix and a star,
    ``/problems/*``, which then opens one more segment and no deeper path. The star keeps a
    fixed path ending in a slash (``/``) from reading as a prefix that opens every segment."""
    head, brace, tail = path.partition("{")
    if not brace:
        return path
    if not head.endswith("/") or "{" in head or not tail.endswith("}") or "/" in tail:
        raise TypeError(f"public route {path} must be a fixed path or end in one parameter")
    return head + "*"


def _runs(dependant: Any, call: Any) -> bool:
    return any(d.call is call or _runs(d, call) for d in dependant.dependencies)


def bearer(scope: Scope) -> str | None:
    """The token of an ``Authorization: Bearer`` header; "" for a header of another form,
    None for no header."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            token = token.strip()
            if scheme.lower() != "bearer" or not token or " " in token:
                return ""
            return token
    return None


class Authenticate:
    def __init__(self, app: ASGIApp, tokens: TokenTable, public_paths: frozenset[str],
                 retry_after_s: int) -> None:
        self.app = app
        self.tokens = tokens
        # "/x/*" in public_paths: "/x/<one segment>" is public (``_public_path``).
        self.public_paths = frozenset(p for p in public_paths if not p.endswith("*"))
        self.public_prefixes = tuple(p[:-1] for p in public_paths if p.endswith("*"))
        self.retry_after_s = retry_after_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):  # lifespan
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        if path in self.public_paths or self._public_segment(path):
            await self.app(scope, receive, send)
            return
        tokens = self.tokens
        if scope["type"] == "websocket":
            # None is served today; the first one added is behind the same door. Closed
            # before it is accepted: the server answers the handshake with a 403.
            principal = tokens.caller(bearer(scope)) if tokens.loaded else None
            if principal is None:
                await send({"type": "websocket.close", "code": 1008})
                return
            scope[SCOPE_KEY] = principal
            await self.app(scope, receive, send)
            return
        if not tokens.loaded:
            response = problem(503, "unavailable", "Service unavailable",
                               "the access tokens have not been read from the database yet",
                               headers={"Retry-After": str(self.retry_after_s)})
            await response(scope, receive, send)
            return
        token = bearer(scope)
        principal = tokens.caller(token)
        if principal is None:
            if token is None:
                detail = "this service needs an access token: Authorization: Bearer <token>"
                challenge = BEARER_CHALLENGE
            else:
                detail = ("the access token is not valid (unknown, revoked, or not "
                          "Authorization: Bearer <token>)")
                challenge = f'{BEARER_CHALLENGE}, error="invalid_token"'
            response = problem(401, "unauthorized", "Unauthorized", detail,
                               headers={"WWW-Authenticate": challenge})
            await response(scope, receive, send)
            return
        scope[SCOPE_KEY] = principal
        await self.app(scope, receive, send)

    def _public_segment(self, path: str) -> bool:
        for prefix in self.public_prefixes:
            if path.startswith(prefix):
                rest = path[len(prefix):]
                return bool(rest) and "/" not in rest
        return False


_PROBLEM_SCHEMA = {
    "type": "object",
    "description": "RFC 9457 problem details",
    "required": ["type", "title", "status", "detail", "code"],
    "properties": {
        "type": {"type": "string"}, "title": {"type": "string"}, "status": {"type": "integer"},
        "detail": {"type": "string"}, "code": {"type": "string"},
    },
}
SECURITY_SCHEME = "bearer"


def document_access(schema: dict[str, Any], routes: Sequence[BaseRoute]) -> dict[str, Any]:
    """The OpenAPI document with the access rules in it: the bearer scheme, required by
    every operation but the probes, and on each operation its 401 and 403 answers and the
    roles it admits. Written from RULES, so the document cannot disagree with the check."""
    components = schema.setdefault("components", {})
    components.setdefault("securitySchemes", {})[SECURITY_SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "An access token (`jobq tokens create`, or `JOBQ_ADMIN_TOKEN`). Not "
                       "needed in local mode, when the service has no token at all.",
    }
    components.setdefault("schemas", {}).setdefault("Problem", _PROBLEM_SCHEMA)
    problem_content = {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}}
    schema["security"] = [{SECURITY_SCHEME: []}]
    for route in resolved_routes(routes):
        if not isinstance(original_route(route), APIRoute) or not route.include_in_schema:
            continue
        rule = RULES[route.name]
        for method in route.methods:
            op = schema["paths"].get(route.path_format, {}).get(method.lower())
            if op is None:
                continue
            op["description"] = (op.get("description", "").rstrip() + "\n\n" + rule.describe()).lstrip()
            if rule.public:
                op["security"] = []
                continue
            responses = op.setdefault("responses", {})
            responses["401"] = responses.get("401") or {
                "description": "`unauthorized`: no token, or not a valid one (with `WWW-Authenticate: Bearer`)",
                "headers": {"WWW-Authenticate": {"schema": {"type": "string"}}},
                "content": problem_content,
            }
            responses["403"] = {
                "description": "`forbidden`: the token's role may not make this call"
                               + ("" if rule.all_queues else ", or a queue it names is outside the "
                                  "token's queue pattern"),
                "content": problem_content,
            }
    return schema
