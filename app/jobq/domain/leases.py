"""Lease ids: the fencing token a worker shows to heartbeat, ack or fail.

A lease id names one claim of one job: the job's id and the claim's token, drawn from a
database sequence at claim time. The sequence never goes backwards, so a lease id is never
issued twice, also after an operator's retry resets ``attempt``.
"""

from __future__ import annotations

from dataclasses import dataclass

_SEP = "."


def format_lease_id(job_id: int, token: int) -> str:
    return f"{job_id}{_SEP}{token}"


@dataclass(frozen=True, slots=True)
class LeaseRef:
    job_id: int
    token: int


def parse_lease_id(lease_id: str) -> LeaseRef | None:
    """The lease a lease id names, or None when it cannot be one of ours."""
    job, sep, token = lease_id.partition(_SEP)
    # isdigit() alone also admits digits int() refuses ("²") or reads as ours ("١"): ASCII only.
    if not sep or not (job + token).isascii() or not job.isdigit() or not token.isdigit():
        return None
    job_id, tok = int(job), int(token)
    if job_id > 2**63 - 1 or tok > 2**63 - 1:
        return None
    return LeaseRef(job_id, tok)


def parse_job_id(job_id: str) -> int | None:
    """Job ids are opaque strings on the wire; ours are positive bigints."""
    if not job_id.isdigit() or not job_id.isascii():
        return None
    value = int(job_id)
    return value if 0 < value <= 2**63 - 1 else None
