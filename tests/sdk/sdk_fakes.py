"""An in-memory stand-in for the service's worker endpoints, as an httpx async transport.

Just enough of the contract for the worker's unit tests: claim (with a long-poll that
sleeps), heartbeat, ack, batch ack, fail, release (one and batch) and the worker's own beat,
with switches to lose leases, go down, or be a service older than release and beats.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx


def _problem(status: int, code: str) -> httpx.Response:
    body = {"type": "about:blank", "title": code, "status": status, "detail": code, "code": code}
    return httpx.Response(status, json=body, headers={"content-type": "application/problem+json"})


class FakeService:
    def __init__(self, *, ack_latency: float = 0.0) -> None:
        self.waiting: list[dict[str, Any]] = []
        self.leased: dict[str, dict[str, Any]] = {}
        self.claims: list[dict[str, Any]] = []
        self.acks: dict[str, Any] = {}  # job id -> result
        self.ack_batches: list[int] = []  # size of each ack request (1 for the single call)
        self.fails: dict[str, dict[str, Any]] = {}  # job id -> fail body
        self.heartbeats: list[str] = []
        self.releases: dict[str, dict[str, Any]] = {}  # job id -> release body
        self.release_batches: list[int] = []  # size of each release request
        self.beats: list[dict[str, Any]] = []  # bodies of POST /v1/workers/{id}/beat
        # An older service: no release and no beat endpoint (404 to them).
        self.old_service = False
        # While set to an unset Event, every beat waits for it: a service slow to answer them.
        self.beat_gate: asyncio.Event | None = None
        self.lose_all_leases = False
        self.down = False
        self.refused = 0  # requests turned away while down
        self.claim_status: tuple[int, str] | None = None
        # Answer this problem to every heartbeat, ack or fail (keys: "heartbeat", "ack",
        # "fail"), as a service does to a revoked token; each refused call is recorded.
        self.refuse: dict[str, tuple[int, str]] = {}
        self.refused_calls: list[str] = []
        self.ack_latency = ack_latency
        # While set to an unset Event, every ack waits for it: an ack held in flight.
        self.ack_gate: asyncio.Event | None = None
        self.claims_open = 0  # claims being answered right now (long-polls in flight)
        self.claims_open_at_ack: list[int] = []  # claims_open when each ack arrived
        self._next_id = 0
        self.claimed = asyncio.Event()

    def add(self, type: str, payload: dict[str, Any] | None = None, **fields: Any) -> str:
        self._next_id += 1
        job = {
            "id": str(self._next_id),
            "queue": "default",
            "type": type,
            "payload": payload or {},
            "status": "pending",
            "attempt": 0,
            "max_attempts": 25,
            **fields,
        }
        self.waiting.append(job)
        return job["id"]

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if self.down:
            # The worker's own beats (start, stop) are not the retries this counts.
            if not request.url.path.endswith("/beat"):
                self.refused += 1
            raise httpx.ConnectError("connection refused", request=request)
        body = json.loads(request.content) if request.content else {}
        parts = request.url.path.strip("/").split("/")
        if parts == ["v1", "leases"]:
            return await self._claim(body)
        if parts[:2] == ["v1", "workers"] and parts[3:] == ["beat"]:
            if self.old_service:
                return _problem(404, "not_found")
            if self.beat_gate is not None:
                await self.beat_gate.wait()
            self.beats.append({"worker_id": parts[2], **body})
            return httpx.Response(200, json={"worker_id": parts[2], **body})
        if self.old_service and (parts == ["v1", "leases", "release"] or parts[3:] == ["release"]):
            return _problem(404, "not_found")
        batch = parts in (["v1", "leases", "ack"], ["v1", "leases", "release"])
        action = parts[2] if batch else parts[3] if len(parts) > 3 else ""
        if action in self.refuse:
            self.refused_calls.append(action)
            return _problem(*self.refuse[action])
        if action == "ack":
            self.claims_open_at_ack.append(self.claims_open)
            if self.ack_gate is not None:
                await self.ack_gate.wait()
        if parts == ["v1", "leases", "ack"]:
            await asyncio.sleep(self.ack_latency)
            self.ack_batches.append(len(body["acks"]))
            results = [self._ack(a["lease_id"], a.get("result")) for a in body["acks"]]
            return httpx.Response(200, json={"results": results})
        if parts == ["v1", "leases", "release"]:
            self.release_batches.append(len(body["releases"]))
            results = [self._release(r["lease_id"], r) for r in body["releases"]]
            return httpx.Response(200, json={"results": results})
        lease_id, action = parts[2], parts[3]
        if action == "ack":
            await asyncio.sleep(self.ack_latency)
            self.ack_batches.append(1)
            outcome = self._ack(lease_id, body.get("result"))
            return (
                httpx.Response(200, json={"id": "?"})
                if outcome["ok"]
                else _problem(409, outcome["code"])
            )
        if self.lose_all_leases or lease_id not in self.leased:
            return _problem(409, "lease_lost")
        if action == "heartbeat":
            self.heartbeats.append(lease_id)
            return httpx.Response(200, json={"locked_until": "2100-01-01T00:00:00Z"})
        if action == "fail":
            job = self.leased.pop(lease_id)
            self.fails[job["id"]] = body
            return httpx.Response(200, json={**job, "status": "failed"})
        if action == "release":
            self.release_batches.append(1)
            job = self.leased[lease_id]
            self._release(lease_id, body)
            return httpx.Response(200, json={**job, "status": "pending", "attempt": job["attempt"] - 1})
        return _problem(404, "not_found")

    def _release(self, lease_id: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.lose_all_leases or lease_id not in self.leased:
            return {"lease_id": lease_id, "ok": False, "code": "lease_lost"}
        job = self.leased.pop(lease_id)
        self.releases[job["id"]] = body
        # Back to waiting, the claim not counted: as the service does.
        self.waiting.append({**job, "status": "pending", "attempt": job["attempt"] - 1})
        return {"lease_id": lease_id, "ok": True}

    def _ack(self, lease_id: str, result: Any) -> dict[str, Any]:
        if self.lose_all_leases or lease_id not in self.leased:
            return {"lease_id": lease_id, "ok": False, "code": "lease_lost"}
        self.acks[self.leased.pop(lease_id)["id"]] = result
        return {"lease_id": lease_id, "ok": True}

    async def _claim(self, body: dict[str, Any]) -> httpx.Response:
        self.claims_open += 1
        try:
            return await self._answer_claim(body)
        finally:
            self.claims_open -= 1

    async def _answer_claim(self, body: dict[str, Any]) -> httpx.Response:
        self.claims.append(body)
        if self.claim_status is not None:
            return _problem(*self.claim_status)
        deadline = asyncio.get_running_loop().time() + body.get("wait_ms", 0) / 1000
        while True:
            types = body.get("types")
            ready = [j for j in self.waiting if types is None or j["type"] in types]
            ready = ready[: body.get("limit", 1)]
            if ready or asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(0.01)
        leases = []
        for job in ready:
            self.waiting.remove(job)
            job = {**job, "attempt": job["attempt"] + 1, "status": "running"}
            lease_id = f"L{job['id']}.{job['attempt']}"
            self.leased[lease_id] = job
            leases.append(
                {"lease_id": lease_id, "locked_until": "2100-01-01T00:00:00Z", "job": job}
            )
        if leases:
            self.claimed.set()
        return httpx.Response(200, json={"leases": leases})
