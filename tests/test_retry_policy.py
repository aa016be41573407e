"""The retry backoff has one definition, jobq.domain.retry.backoff_ms, and a failed job's
retry is scheduled by it: the pure function's own rules, then the service against them."""

from __future__ import annotations

import httpx
import pytest

from jobq.domain.retry import JITTER, backoff_ms
from tests.helpers import claim, enqueue, patch_queue, ts


def no_jitter() -> float:
    return 0.0


def most_jitter() -> float:
    return 0.999999


@pytest.mark.parametrize(("attempt", "expected"), [(1, 1000), (2, 2000), (3, 4000), (4, 8000), (5, 10_000),
                                                   (6, 10_000)])
def test_backoff_doubles_from_the_base_up_to_the_cap(attempt: int, expected: int) -> None:
    assert backoff_ms(attempt, 1000, 10_000, no_jitter) == expected


def test_jitter_adds_at_most_a_tenth() -> None:
    assert backoff_ms(3, 1000, 10**9, most_jitter) == int(4000 * (1 + JITTER * most_jitter()))
    assert backoff_ms(3, 1000, 10**9, most_jitter) < 4000 * 1.1
    assert backoff_ms(3, 1000, 10**9, lambda: 0.5) == 4200


def test_backoff_is_capped_on_attempts_past_any_power_of_two() -> None:
    for attempt in (62, 63, 64, 1500, 10**6):
        assert backoff_ms(attempt, 1000, 7000, no_jitter) == 7000


def test_attempt_zero_waits_the_base_and_a_zero_base_retries_at_once() -> None:
    assert backoff_ms(0, 500, 10_000, no_jitter) == 500
    assert backoff_ms(9, 0, 10_000, most_jitter) == 0


def ms_between(later: str, earlier: str) -> float:
    return (ts(later) - ts(earlier)).total_seconds() * 1000


async def fail(client: httpx.AsyncClient, lease_id: str, **body: object) -> dict[str, object]:
    r = await client.post(f"/v1/leases/{lease_id}/fail", json={"error": "boom", **body})
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.mark.parametrize("attempt", [1, 2, 3])
async def test_a_failed_job_is_visible_again_within_the_policy_bounds(
    client: httpx.AsyncClient, attempt: int,
) -> None:
    await patch_queue(client, "rp", backoff_base_ms=1000, backoff_max_ms=2500)
    job = await enqueue(client, queue="rp")
    for _ in range(attempt - 1):  # earlier attempts fail with an immediate retry
        (lease,) = await claim(client, "rp")
        await fail(client, lease["lease_id"], retry_in_ms=0)
    (lease,) = await claim(client, "rp")
    assert lease["job"]["id"] == job["id"] and lease["job"]["attempt"] == attempt
    failed = await fail(client, lease["lease_id"])
    assert failed["status"] == "failed"
    # The error's `at` and visible_at come from one statement's now().
    errors = failed["errors"]
    assert isinstance(errors, list)
    waited = ms_between(str(failed["visible_at"]), errors[-1]["at"])
    low = backoff_ms(attempt, 1000, 2500, no_jitter)
    high = backoff_ms(attempt, 1000, 2500, most_jitter)
    assert low <= waited <= high, (attempt, waited, low, high)
    assert await claim(client, "rp") == []  # not claimable before its backoff is over
