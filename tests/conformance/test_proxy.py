"""The kit's recording proxy is invisible to a worker: answers come back as the service gave
them, keep-alive holds, and a worker that hangs up on a waiting claim ends that claim at the
service too (or a job released just then would go to a claim nobody reads)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import httpx
import pytest

from jobq.conformance.proxy import RecordingProxy
from tests.conformance.kit import live_service
from tests.conftest import LiveServer
from tests.waiting import eventually


@pytest.fixture(scope="module")
def service(admin_url: str, template_db: str) -> Iterator[LiveServer]:
    with live_service(admin_url, template_db) as server:
        yield server


def test_answers_pass_through_and_are_recorded(service: LiveServer) -> None:
    with RecordingProxy(service.url) as proxy, httpx.Client(base_url=proxy.url) as http:
        made = http.post("/v1/jobs", json={"type": "t", "queue": "proxied", "payload": {"é": [1, None]}})
        missing = http.get("/v1/jobs/999999")
        direct = httpx.get(f"{service.url}/v1/jobs/999999")
    assert made.status_code == 201 and made.headers["location"] == f"/v1/jobs/{made.json()['id']}"
    assert made.json()["payload"] == {"é": [1, None]}
    assert missing.status_code == 404
    assert missing.headers["content-type"] == direct.headers["content-type"] == "application/problem+json"
    assert missing.json() == direct.json()
    [enqueue, get] = proxy.exchanges()
    assert (enqueue.method, enqueue.path, enqueue.status) == ("POST", "/v1/jobs", 201)
    assert enqueue.body["payload"] == {"é": [1, None]} and enqueue.answer["id"] == made.json()["id"]
    assert (get.path, get.status, get.answer["code"]) == ("/v1/jobs/999999", 404, "not_found")


def test_refused_claims_carry_retry_after_and_other_calls_go_through(service: LiveServer) -> None:
    with RecordingProxy(service.url) as proxy, httpx.Client(base_url=proxy.url) as http:
        proxy.refuse_claims(2)
        claim = {"worker_id": "w", "queues": ["refusing"]}
        answers = [http.post("/v1/leases", json=claim) for _ in range(3)]
        enqueued = http.post("/v1/jobs", json={"type": "t", "queue": "refusing"})
        proxy.forward_claims()
        after = http.post("/v1/leases", json=claim)
    assert [a.status_code for a in answers] == [503, 429, 503]
    assert all(a.headers["retry-after"] == "2" for a in answers)
    assert all(a.headers["content-type"] == "application/problem+json" for a in answers)
    assert [a.json().get("code") for a in answers] == ["unavailable", None, "too_many_long_polls"]
    assert answers[2].headers["connection"] == "close"
    assert enqueued.status_code == 201
    assert after.status_code == 200 and after.json()["leases"][0]["job"]["id"] == enqueued.json()["id"]


def test_a_worker_hanging_up_on_a_waiting_claim_ends_it_at_the_service(service: LiveServer) -> None:
    with RecordingProxy(service.url) as proxy:
        body = json.dumps({"worker_id": "w", "queues": ["hangup"], "wait_ms": 20000}).encode()
        port = int(proxy.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as worker:
            worker.sendall(b"POST /v1/leases HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
            [waiting] = eventually(proxy.claims, what="the claim reached the proxy")
        # The worker hung up: the proxy's claim at the service ends long before its 20 s.
        hung_up = time.monotonic()
        eventually(lambda: waiting.ended is not None, timeout_s=5, what="the proxy to end the claim")
        assert waiting.ended is not None and waiting.ended - hung_up < 2
        job = httpx.post(f"{service.url}/v1/jobs", json={"type": "t", "queue": "hangup"}).json()
        # No claim is left waiting to take it: a new one gets it.
        got = httpx.post(f"{service.url}/v1/leases", timeout=10,
                         json={"worker_id": "w2", "queues": ["hangup"], "wait_ms": 3000}).json()
        assert [le["job"]["id"] for le in got["leases"]] == [job["id"]]
