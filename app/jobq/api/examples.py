"""Examples for the OpenAPI document: a request body for every operation that takes one and
an answer for every success, keyed by operationId (= the handler's name). The schedules' routes
declare theirs from here (``SCHEDULE``…); ``install`` fills in the rest and a problem+json example,
with its ``code``, for every error answer. tests/test_openapi_complete.py fails on an
operation left without."""

from __future__ import annotations

import copy
from typing import Any

from jobq.store.migrate import head_revision

_AT = "2026-01-15T09:30:00.000000Z"


def _job(**changes: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "id": "1042", "queue": "emails", "type": "email.welcome",
        "payload": {"user_id": 7, "locale": "en"}, "priority": 0, "status": "pending",
        "attempt": 0, "max_attempts": 5, "idempotency_key": "signup-7",
        "created_at": _AT, "visible_at": _AT, "locked_until": None, "worker_id": None,
        "completed_at": None, "last_error": None, "errors": [], "releases": [],
    }
    job.update(changes)
    return job


_RUNNING = _job(status="running", attempt=1, worker_id="worker-a:4242",
                locked_until="2026-01-15T09:30:30.000000Z")
_COMPLETED = _job(status="completed", attempt=1, worker_id="worker-a:4242",
                  completed_at="2026-01-15T09:30:02.000000Z", result={"message_id": "m-81"})
_FAILED = _job(status="failed", attempt=1, worker_id="worker-a:4242",
               visible_at="2026-01-15T09:30:12.000000Z", last_error="SMTP timeout",
               errors=[{"attempt": 1, "at": "2026-01-15T09:30:02.000000Z",
                        "error": "SMTP timeout", "kind": "failed"}])
_RELEASED = _job(attempt=0, visible_at="2026-01-15T09:30:05.000000Z",
                 releases=[{"attempt": 1, "at": "2026-01-15T09:30:05.000000Z",
                            "worker_id": "worker-a:4242", "delay_ms": 0}])
_LEASE = {"lease_id": "1042.1", "locked_until": "2026-01-15T09:30:30.000000Z", "job": _RUNNING}
_SETTINGS = {"max_depth": 10000, "paused": False, "lease_ms": 30000, "max_attempts": 5,
             "backoff_base_ms": 1000, "backoff_max_ms": 3600000, "max_lease_expiries": 3,
             "aging_ms": None, "max_running": None, "retention_ms": 604800000,
             "dead_retention_ms": 2592000000,
             "rate_limit": {"jobs": 100, "per_ms": 60000, "key": None},
             "enqueue_rate": {"jobs": 50, "per_ms": 1000, "burst": 200},
             "soft_depth": 5000, "soft_lag_ms": 60000}
_QUEUE = {"name": "emails", "settings": _SETTINGS,
          "counts": {"pending": 12, "running": 3, "failed": 1, "completed": 940, "dead": 2,
                     "cancelled": 0},
          "waiting_by_type": {"email.welcome": 11, "email.digest": 2}, "oldest_waiting_ms": 850,
          "rate_limit_use": {"jobs": 100, "keys": 1, "keys_at_limit": 1, "free_in_ms": 420}}
_TOKEN = {"id": "tok_3f2a", "name": "billing workers", "role": "worker", "queues": "billing.*",
          "created_at": _AT, "revoked_at": None, "enqueue_rate": None}

# A schedule, and the request bodies its PUT and PATCH routes show (routes/schedules.py).
SCHEDULE: dict[str, Any] = {
    "name": "nightly-report",
    "cron": "0 2 * * *",
    "timezone": "Europe/Berlin",
    "misfire": "run_once",
    "enabled": True,
    "job": {"queue": "reports", "type": "report.nightly", "payload": {"format": "pdf"},
            "priority": 0, "max_attempts": None},
    "next_fire_at": "2026-12-05T01:00:00Z",
    "pending_fire_at": None,
    "last_fired_at": "2026-12-04T01:00:00Z",
    "last_job_id": "81723",
    "created_at": "2026-11-30T09:12:44.120931Z",
    "updated_at": "2026-11-30T09:12:44.120931Z",
}
SCHEDULE_PUTS: dict[str, Any] = {
    "nightly": {"summary": "At 02:00 Berlin time, catching up once after downtime", "value": {
        "cron": "0 2 * * *", "timezone": "Europe/Berlin", "misfire": "run_once",
        "job": {"queue": "reports", "type": "report.nightly", "payload": {"format": "pdf"}}}},
    "every-15-minutes": {"summary": "Every 15 minutes in UTC, skipping times missed", "value": {
        "cron": "*/15 * * * *", "misfire": "skip", "job": {"type": "cache.refresh"}}},
}
SCHEDULE_PATCHES: dict[str, Any] = {
    "disable": {"summary": "Stop firing (the schedule stays)", "value": {"enabled": False}},
    "enable": {"summary": "Fire again, from the next fire time after now",
               "value": {"enabled": True}},
    "retime": {"summary": "Another time and payload", "value": {
        "cron": "30 3 * * 1-5", "job": {"payload": {"format": "csv"}}}},
}

_SUBS = [{"queue": "billing", "type": "invoice.create", "created_at": _AT},
         {"queue": "emails", "type": None, "created_at": _AT},
         {"queue": "search", "type": None, "created_at": _AT}]
_TOPIC = {"name": "orders.placed", "subscriptions": _SUBS}
_PUBLISHED = {"topic": "orders.placed", "jobs": [
    _job(id=str(2001 + i), queue=s["queue"], type=s["type"] or "order.placed",
         payload={"order_id": 7}, max_attempts=25, idempotency_key="topic:orders.placed/order-7")
    for i, s in enumerate(_SUBS)]}

# operationId -> request body example (only for operations that take a body)
REQUESTS: dict[str, Any] = {
    "create_job": {"type": "email.welcome", "queue": "emails", "payload": {"user_id": 7, "locale": "en"},
                   "idempotency_key": "signup-7", "max_attempts": 5},
    "create_jobs": {"jobs": [{"type": "email.welcome", "queue": "emails", "payload": {"user_id": 7}},
                             {"type": "email.welcome", "queue": "emails", "payload": {"user_id": 8},
                              "delay_ms": 60000}]},
    "claim": {"worker_id": "worker-a:4242", "queues": ["emails", "reports"], "limit": 10,
              "lease_ms": 30000, "wait_ms": 20000},
    "ack_many": {"acks": [{"lease_id": "1042.1", "result": {"message_id": "m-81"}},
                          {"lease_id": "1043.2"}]},
    "heartbeat": {"extend_ms": 30000},
    "ack": {"result": {"message_id": "m-81"}},
    "fail": {"error": "SMTP timeout", "retry": True, "retry_in_ms": 10000},
    "release": {"delay_ms": 0},
    "release_many": {"releases": [{"lease_id": "1042.1"}, {"lease_id": "1043.2", "delay_ms": 5000}]},
    "patch_queue": {"max_depth": 10000, "paused": False, "max_attempts": 5,
                    "rate_limit": {"jobs": 100, "per_ms": 60000}},
    "patch_token": {"enqueue_rate": {"jobs": 50, "per_ms": 1000, "burst": 200}},
    "replay_dead": {"queue": "emails", "type": "email.welcome", "limit": 100},
    "create_token": {"role": "worker", "queues": "billing.*", "name": "billing workers"},
    "publish_topic": {"type": "order.placed", "payload": {"order_id": 7},
                      "idempotency_key": "order-7"},
    "beat_worker": {"host": "worker-a", "pid": 4242, "concurrency": 8, "queues": ["emails"],
                    "in_flight": 3, "started_at": "2026-01-15T08:00:00.000000Z", "state": "running"},
}

# operationId -> {status: answer example}
RESPONSES: dict[str, dict[str, Any]] = {
    "create_job": {"201": _job(), "200": _job()},
    "list_jobs": {"200": {"jobs": [_COMPLETED, _job(id="1043")],
                          "next_cursor": "MjAyNi0wMS0xNVQwOTozMDowMFp8MTA0Mw"}},
    "create_jobs": {"201": {"jobs": [_job(), _job(id="1043", idempotency_key=None,
                                                  payload={"user_id": 8},
                                                  visible_at="2026-01-15T09:31:00.000000Z")]}},
    "get_job": {"200": _FAILED},
    "cancel_job": {"200": _job(status="cancelled", completed_at="2026-01-15T09:30:05.000000Z")},
    "retry_job": {"200": _job(attempt=0, last_error="SMTP timeout", errors=_FAILED["errors"])},
    "claim": {"200": {"leases": [_LEASE]}},
    "ack_many": {"200": {"results": [{"lease_id": "1042.1", "ok": True},
                                     {"lease_id": "1043.2", "ok": False, "code": "lease_lost"}]}},
    "heartbeat": {"200": {"locked_until": "2026-01-15T09:31:00.000000Z"}},
    "ack": {"200": _COMPLETED},
    "fail": {"200": _FAILED},
    "release": {"200": _RELEASED},
    "release_many": {"200": {"results": [{"lease_id": "1042.1", "ok": True},
                                         {"lease_id": "1043.2", "ok": False, "code": "lease_lost"}]}},
    "list_queues": {"200": {"queues": [_QUEUE], "next_cursor": "cTplbWFpbA"}},
    "get_queue": {"200": _QUEUE},
    "patch_queue": {"200": _QUEUE},
    "replay_dead": {"200": {"replayed": 2}},
    "purge_dead": {"200": {"purged": 2}},
    "list_workers": {"200": {"window_s": 300, "workers": [
        {"worker_id": "worker-a:4242", "running": 3, "queues": ["emails"],
         "last_seen_at": "2026-01-15T09:30:00.000000Z", "host": "worker-a", "pid": 4242,
         "concurrency": 8, "in_flight": 3, "started_at": "2026-01-15T08:00:00.000000Z",
         "state": "running"},
        {"worker_id": "cron-box:77", "running": 0, "queues": ["reports"],
         "last_seen_at": "2026-01-15T09:29:41.000000Z", "host": None, "pid": None,
         "concurrency": None, "in_flight": None, "started_at": None, "state": None}]}},
    "beat_worker": {"200": {"worker_id": "worker-a:4242", "host": "worker-a", "pid": 4242,
                            "concurrency": 8, "queues": ["emails"], "in_flight": 3,
                            "started_at": "2026-01-15T08:00:00.000000Z", "state": "running",
                            "last_seen_at": "2026-01-15T09:30:00.000000Z"}},
    "get_throughput": {"200": {"minutes": 3, "queues": [
        {"name": "emails", "completed": [118, 131, 42], "dead": [0, 1, 0]}]}},
    "get_metrics": {"200": '# HELP jobq_waiting_jobs Jobs waiting (pending + failed), by queue and type\n'
                           '# TYPE jobq_waiting_jobs gauge\n'
                           'jobq_waiting_jobs{queue="emails",type="email.welcome"} 11.0\n'},
    "list_tokens": {"200": {"tokens": [_TOKEN]}},
    "create_token": {"201": {**_TOKEN, "token": "jobq_w_8Jt1cQ3...(shown once)"}},
    "revoke_token": {"200": {**_TOKEN, "revoked_at": "2026-01-16T10:00:00.000000Z"}},
    "patch_token": {"200": {**_TOKEN, "enqueue_rate": {"jobs": 50, "per_ms": 1000, "burst": 200}}},
    "list_schedules": {"200": {"schedules": [SCHEDULE]}},
    "get_schedule": {"200": SCHEDULE},
    "put_schedule": {"201": SCHEDULE, "200": SCHEDULE},
    "patch_schedule": {"200": SCHEDULE},
    "list_topics": {"200": {"topics": [_TOPIC]}},
    "get_topic": {"200": _TOPIC},
    "subscribe_queue": {"201": {"topic": "orders.placed", **_SUBS[0]},
                        "200": {"topic": "orders.placed", **_SUBS[0]}},
    "publish_topic": {"201": _PUBLISHED, "200": _PUBLISHED},
    "healthz": {"200": {"status": "ok"}},
    "readyz": {"200": {"status": "ready", "schema": head_revision()}},
}


def _has_example(media: dict[str, Any]) -> bool:
    return "example" in media or "examples" in media


def install(document: dict[str, Any], kinds: dict[str, Any], problem_type: str) -> None:
    """Fills the examples in ``document``, in place. ``kinds``: ``problems.KINDS``."""
    for path, item in document.get("paths", {}).items():
        for method, op in item.items():
            op_id = op.get("operationId", "")
            body = op.get("requestBody")
            if body is not None:
                for media in body.get("content", {}).values():
                    if not _has_example(media) and op_id in REQUESTS:
                        media["example"] = REQUESTS[op_id]
            for status, answer in op.get("responses", {}).items():
                # Answers may share their content dicts (access.document_access's 401 and
                # 403): each operation's examples go into its own copy.
                if "content" not in answer:
                    continue  # 204: no body
                content = answer["content"] = copy.deepcopy(answer["content"])
                if int(status) < 400:
                    for media in content.values():
                        # Ours win over a route's own: FastAPI drops the nulls out of the
                        # examples routes declare (its document encoder excludes None).
                        if status in RESPONSES.get(op_id, {}):
                            media.pop("examples", None)
                            media["example"] = RESPONSES[op_id][status]
                    continue
                for media in content.values():
                    if _has_example(media):
                        continue
                    examples = {code: {"summary": kinds[code].title, "value": {
                        "type": problem_type + code, "title": kinds[code].title,
                        "status": int(status), "detail": _detail(code, method, path),
                        "code": code}} for code in _codes(int(status), answer, kinds)}
                    media["examples"] = examples


def _codes(status: int, answer: dict[str, Any], kinds: dict[str, Any]) -> list[str]:
    """The codes an error answer comes with: those its description names in backquotes,
    else every code of that status."""
    named = [c for c in kinds if f"`{c}`" in answer.get("description", "")
             and status in kinds[c].statuses]
    return named or [c for c, k in kinds.items() if status in k.statuses]


def _detail(code: str, method: str, path: str) -> str:
    return {
        "validation_error": "body.type: Field required",
        "not_found": "no such " + ("lease" if "/leases/" in path else "job" if "/jobs/" in path
                                   else "queue" if "/queues/" in path else "token"
                                   if "/tokens/" in path else "subscription" if "/topics/" in path
                                   else "schedule"),
        "lease_lost": "the lease 1042.1 is no longer the job's: it expired or the job moved on",
        "invalid_state": "job 1042 is completed: this call does not apply to it",
        "idempotency_conflict": "idempotency_key 'signup-7' was used for another body",
        "queue_full": "queue 'emails' holds its max_depth of 10000 waiting jobs",
        "queue_rate_limited": "queue 'emails' takes at most 50 jobs per 1000 ms (burst 200); 1 "
                              "more would be accepted in 20 ms",
        "token_rate_limited": "this access token may enqueue at most 50 jobs per 1000 ms (burst "
                              "50); 1 more would be accepted in 20 ms",
        "queue_overloaded": "queue 'emails' is past its soft thresholds (7500 waiting, oldest "
                            "12000 ms; 1.50 times the threshold): 33% of enqueues are refused; "
                            "retry in 500 ms",
        "queue_not_empty": "queue 'emails' holds 3 pending and 1 dead jobs: delete with "
                           "purge=true to delete them too",
        "unauthorized": "this service needs an access token: Authorization: Bearer <token>",
        "forbidden": f"a producer token may not call {method.upper()} {path}",
        "payload_too_large": "the body is over 1048576 bytes",
        "unavailable": "the database did not answer within 3 s",
    }.get(code, code)
