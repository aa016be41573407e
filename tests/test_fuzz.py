"""A property-based fuzz of the whole HTTP API from its own OpenAPI document (schemathesis).

For every operation of the committed document, requests that fit it and requests that do not
(schemathesis' positive and negative modes) go to a real ``jobq serve`` on a real database.
No answer may be a 5xx, and every answer must keep to the document: its status is one the
operation declares, with the declared content type, a body of the declared schema and the
declared headers (``Retry-After`` on 429 and 503, ...); a wrong method is a 405 whose Allow
names the documented methods. When an answer breaks the document and the document is what
is wrong, fix the route's ``responses=`` (``jobq.api.document.answers``), not this test.

Three ways in: local mode (no token at all), with an admin token (``JOBQ_ADMIN_TOKEN``) sent
on every call, and with tokens but calls that carry none or a wrong one, each of which must
be a 401 (``/healthz`` and ``/readyz`` aside).

The fuzz is derandomized (the same cases every run) and keeps no Hypothesis database. When
the module finishes it writes ``fuzz: N cases, M 5xx (...)``: ``pytest tests/test_fuzz.py``
shows it (under xdist, only with ``-s``).
"""

from __future__ import annotations

import json
import secrets
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from hypothesis.configuration import set_hypothesis_home_dir
from schemathesis.config import SchemathesisConfig

from jobq.api import openapi
from tests import pg
from tests.conftest import LiveServer

# Cases per operation and way in. The whole fuzz stays near a minute on two cores: each case
# is one HTTP request, and most operations have far fewer distinct cases than this anyway.
MAX_EXAMPLES = 60
# A claim long-polls up to wait_ms when nothing is claimable, which with random queue names
# is nearly always: cap it, or a few claims would take the fuzz's whole time.
MAX_FUZZ_WAIT_MS = 50

# Hypothesis caches what it learns of the code and of Unicode under .hypothesis/ in the working
# directory: elsewhere, so that a test run writes nothing into the checkout.
set_hypothesis_home_dir(Path(tempfile.gettempdir()) / "jobq-hypothesis")

CONFIG = SchemathesisConfig.from_dict({
    "generation": {
        "mode": "all",
        "max-examples": MAX_EXAMPLES,
        "deterministic": True,
        # No example database: nothing is written into the checkout, and every run is the same.
        "database": "none",
    },
    "checks": {
        # Named one by one, so that what the fuzz holds the service to does not move with
        # schemathesis' defaults.
        "enabled": False,
        "not_a_server_error": {"enabled": True},
        "status_code_conformance": {"enabled": True},
        "content_type_conformance": {"enabled": True},
        "response_schema_conformance": {"enabled": True},
        "response_headers_conformance": {"enabled": True},
        # A wrong method is a 405 whose Allow lists exactly the documented methods.
        "unsupported_method": {"enabled": True},
        "allow_header_conformance": {"enabled": True},
        # Left out: positive_data_acceptance takes every request that fits the document as
        # one the service must accept, but the document cannot say all our rules (delay_ms
        # and run_at are exclusive, settings that may not be null, nesting depth), and such
        # requests are rightly 422.
        # A request that breaks the document is a 4xx: bodies are strict, no coercion.
        "negative_data_rejection": {"enabled": True},
    },
})
SCHEMA = schemathesis.openapi.from_path(openapi.DOCUMENT, config=CONFIG)
# The document without its security requirement, for the cases that send no header of their
# own: in local mode none is needed, and with a token the harness adds it to every call. (A
# case made to break the document by leaving the header out would otherwise count as
# accepted when the harness puts it back.)
_PLAIN_DOCUMENT = json.loads(openapi.DOCUMENT.read_text())
del _PLAIN_DOCUMENT["security"]
PLAIN_SCHEMA = schemathesis.openapi.from_dict(_PLAIN_DOCUMENT, config=CONFIG)
# Creating a token ends local mode, so that call is fuzzed with a token only.
LOCAL_SCHEMA = PLAIN_SCHEMA.exclude(method="POST", path="/v1/tokens")
PROBES = ("/healthz", "/readyz")
GUARDED_SCHEMA = SCHEMA.exclude(path=list(PROBES))

SEEDED_JOBS = 12
# Where the leases come from that cases with a lease id use; no fuzzed claim names it.
LEASES_QUEUE = "fuzz-leases-7f3a"

LEASE_BATCH = 20

# A long random secret, as an operator would set it.
ADMIN_TOKEN = secrets.token_urlsafe(48)
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}

TALLY: Counter[str] = Counter()

HYPOTHESIS = settings(
    deadline=None,
    # Server fixtures are module scoped; the function-scoped health check does not apply.
    suppress_health_check=list(HealthCheck),
)


class Target:
    """A running ``jobq serve`` on its own database, with the admin's headers (if any), and a
    spare supply of live leases for the cases that name one."""

    def __init__(self, server: LiveServer, headers: dict[str, str]) -> None:
        self.server = server
        self.url = server.url
        self.client = httpx.Client(base_url=server.url, headers=headers, timeout=10)
        self.spare: list[str] = []

    def lease(self) -> str:
        if not self.spare:
            # Claimed a batch at a time, and long enough that none ends before it is used.
            jobs = [{"type": "fuzz", "queue": LEASES_QUEUE}] * LEASE_BATCH
            assert self.client.post("/v1/jobs/batch", json={"jobs": jobs}).status_code == 201
            r = self.client.post("/v1/leases", json={
                "worker_id": "fuzz", "queues": [LEASES_QUEUE], "limit": LEASE_BATCH,
                "lease_ms": 3_600_000})
            self.spare = [lease["lease_id"] for lease in r.json()["leases"]]
            assert self.spare, r.text
        return self.spare.pop()

    def seed(self) -> None:
        """Jobs 1 to SEEDED_JOBS, in every status, for the cases that name a real job."""
        c = self.client
        for i in range(SEEDED_JOBS):
            r = c.post("/v1/jobs", json={"type": f"t{i % 3}", "payload": {"i": i},
                                         "queue": "default" if i % 2 else "other"})
            assert r.status_code == 201, r.text
        r = c.post("/v1/leases", json={"worker_id": "seed", "queues": ["default", "other"],
                                       "limit": 6})
        leases = [lease["lease_id"] for lease in r.json()["leases"]]
        assert len(leases) == 6, r.text
        assert c.post(f"/v1/leases/{leases[0]}/ack", json={"result": {"ok": True}}).status_code == 200
        assert c.post(f"/v1/leases/{leases[1]}/fail", json={"error": "boom"}).status_code == 200
        assert c.post(f"/v1/leases/{leases[2]}/fail",
                      json={"error": "fatal", "retry": False}).status_code == 200
        assert c.post(f"/v1/jobs/{SEEDED_JOBS}/cancel").status_code == 200


def _started(admin_url: str, template_db: str, env: dict[str, str],
             headers: dict[str, str]) -> Iterator[Target]:
    name = pg.clone(admin_url, template_db)
    server = LiveServer(pg.with_database(admin_url, name), env=env)
    try:
        server.start()
        target = Target(server, headers)
        with target.client:
            target.seed()
            yield target
    finally:
        server.stop()
        pg.drop(admin_url, name)


@pytest.fixture(scope="module")
def local_server(admin_url: str, template_db: str) -> Iterator[Target]:
    yield from _started(admin_url, template_db, {}, {})


@pytest.fixture(scope="module")
def token_server(admin_url: str, template_db: str) -> Iterator[Target]:
    yield from _started(admin_url, template_db, {"JOBQ_ADMIN_TOKEN": ADMIN_TOKEN}, ADMIN)


@pytest.fixture(scope="module", autouse=True)
def summary(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    ways = ", ".join(f"{way} {TALLY[way]}" for way in ("local mode", "with token", "without token"))
    line = f"fuzz: {TALLY['cases']} cases, {TALLY['5xx']} 5xx ({ways})"
    # Past the output capture to the terminal, so that a plain run shows it too; an xdist
    # worker has no terminal, and its output shows with -s only.
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print("\n" + line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line("\n" + line)


def _aimed(case: Any, target: Target, turn: int) -> None:
    """Every other case names a real job or a live lease instead of the random id it was
    generated with, which would only ever be a 404: so that the fuzzed bodies of ack, fail and
    heartbeat reach a lease, and reads, cancels and retries reach a job."""
    if turn % 2:
        return
    params = case.path_parameters or {}
    if "job_id" in params:
        params["job_id"] = str(1 + turn // 2 % SEEDED_JOBS)
    if "lease_id" in params:
        params["lease_id"] = target.lease()
    if case.path == "/v1/leases/ack" and isinstance(case.body, dict):
        acks = case.body.get("acks")
        if isinstance(acks, list) and acks and isinstance(acks[0], dict):
            acks[0]["lease_id"] = target.lease()


def _call(case: Any, target: Target, way: str, headers: dict[str, str], *, aim: bool = True) -> Any:
    if case.path == "/v1/leases" and isinstance(case.body, dict):
        wait = case.body.get("wait_ms")  # any case: a negative one may still be a valid claim
        # Only a wait the service would honour: one past the documented 30 s is the case's
        # point (a 422), not a long-poll to shorten.
        if type(wait) is int and MAX_FUZZ_WAIT_MS < wait <= 30_000:
            case.body["wait_ms"] = MAX_FUZZ_WAIT_MS
    # Only cases that fit the document are aimed: a case made to break it must stay broken.
    negative = case.meta is not None and case.meta.generation.mode.is_negative
    if aim and not negative:
        _aimed(case, target, TALLY[way])
    response = case.call(base_url=target.url, headers=headers)
    TALLY["cases"] += 1
    TALLY[way] += 1
    if response.status_code >= 500:
        TALLY["5xx"] += 1
    return response


@pytest.mark.slow
@LOCAL_SCHEMA.parametrize()
@HYPOTHESIS
def test_local_mode(case: Any, local_server: Target) -> None:
    response = _call(case, local_server, "local mode", {})
    case.validate_response(response)


@pytest.mark.slow
@PLAIN_SCHEMA.parametrize()
@HYPOTHESIS
def test_with_token(case: Any, token_server: Target) -> None:
    response = _call(case, token_server, "with token", ADMIN)
    case.validate_response(response, headers=ADMIN)


# The cases take turns: no Authorization header, or one of these, none of them the admin's.
WRONG = [None, f"Bearer {ADMIN_TOKEN[:-1]}", "Bearer ", f"Basic {ADMIN_TOKEN}",
         f"Bearer {secrets.token_urlsafe(48)}", ADMIN_TOKEN]


@pytest.mark.slow
@GUARDED_SCHEMA.parametrize()
# Not shrunk: a failing case is reported as it was found (the check is one status).
@settings(HYPOTHESIS, phases=[Phase.explicit, Phase.reuse, Phase.generate], report_multiple_bugs=False)
def test_without_a_valid_token_every_call_is_401(case: Any, token_server: Target) -> None:
    authorization = WRONG[TALLY["without token"] % len(WRONG)]
    headers = {} if authorization is None else {"Authorization": authorization}
    # No aiming at real ids: every call, whatever it names, must stop at the token.
    response = _call(case, token_server, "without token", headers, aim=False)
    assert response.status_code == 401, (response.status_code, response.content[:300])
    # schemathesis' answer: header names in lower case, each with a list of values.
    assert response.headers["content-type"][0].split(";")[0] == "application/problem+json"
    assert response.json()["code"] == "unauthorized"
    assert response.headers.get("www-authenticate", [""])[0].startswith("Bearer"), response.headers
    if case.method.upper() == case.operation.method.upper():
        # Not for the cases that try a wrong method: the document's checks want a 405 there,
        # but without a token the 401 comes first.
        case.validate_response(response, headers=headers)


@pytest.mark.parametrize("path", PROBES)
def test_probes_need_no_token(token_server: Target, path: str) -> None:
    r = httpx.get(token_server.url + path, timeout=10)
    assert r.status_code == 200, r.text
