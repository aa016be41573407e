"""Job rows to the domain's Job and Lease: the one place that reads a job row by column name.

On the hot path (a claim of 100 jobs builds 100 of them), so the slots are set directly: a
frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``, which made a
Job cost four times the row's own dict. Nothing is validated: the row is the database's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jobq.domain.jobs import Job, JobStatus
from jobq.domain.leases import Lease, format_lease_id
from jobq.store.db import Row

_new = object.__new__


def _setter(cls: type, slot: str) -> Callable[[Any, Any], None]:
    return getattr(cls, slot).__set__  # type: ignore[no-any-return]


_STATUS = {s.value: s for s in JobStatus}

_id = _setter(Job, "id")
_queue = _setter(Job, "queue")
_type = _setter(Job, "type")
_payload = _setter(Job, "payload")
_priority = _setter(Job, "priority")
_status = _setter(Job, "status")
_attempt = _setter(Job, "attempt")
_max_attempts = _setter(Job, "max_attempts")
_idempotency_key = _setter(Job, "idempotency_key")
_created_at = _setter(Job, "created_at")
_visible_at = _setter(Job, "visible_at")
_locked_until = _setter(Job, "locked_until")
_worker_id = _setter(Job, "worker_id")
_completed_at = _setter(Job, "completed_at")
_last_error = _setter(Job, "last_error")
_errors = _setter(Job, "errors")
_result = _setter(Job, "result")

_lease_id = _setter(Lease, "lease_id")
_lease_locked_until = _setter(Lease, "locked_until")
_lease_job = _setter(Lease, "job")


def job(row: Row) -> Job:
    """The Job of a row with all of the jobs table's columns (``SELECT *``, ``RETURNING *``)."""
    j = _new(Job)
    _id(j, row["id"])
    _queue(j, row["queue"])
    _type(j, row["type"])
    _payload(j, row["payload"])
    _priority(j, row["priority"])
    _status(j, _STATUS[row["status"]])
    _attempt(j, row["attempt"])
    _max_attempts(j, row["max_attempts"])
    _idempotency_key(j, row["idempotency_key"])
    _created_at(j, row["created_at"])
    _visible_at(j, row["visible_at"])
    _locked_until(j, row["locked_until"])
    _worker_id(j, row["worker_id"])
    _completed_at(j, row["completed_at"])
    _last_error(j, row["last_error"])
    _errors(j, row["errors"])
    _result(j, row["result"])
    return j


def lease(row: Row) -> Lease:
    """The Lease of a row a claim returned."""
    le = _new(Lease)
    _lease_id(le, format_lease_id(row["id"], row["lease_token"]))
    _lease_locked_until(le, row["locked_until"])
    _lease_job(le, job(row))
    return le
