"""The six checks, in the order they run. Each drives the worker through the service (jobs
it enqueues) and the proxy (what the worker sent), and returns its evidence, or raises
``CheckFailed`` with it.

Bounds and tolerances, which the README states too:

- ``idle``: under ``MAX_IDLE_CLAIMS_PER_S`` claims per second over ``IDLE_S`` seconds with no
  work (a long-poller makes about one claim per ``wait_ms``; a spinner, hundreds);
- ``retry-after``: after a refusal with ``Retry-After: 2``, the next claim may come no sooner
  than ``RETRY_AFTER_SLACK`` (90 %) of it, 1.8 s;
- ``stop``: a claim arriving more than ``SIGNAL_SLACK_S`` after SIGTERM is one made after it.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from jobq.client import Client, Job, TransportError
from jobq.conformance.process import WorkerProcess
from jobq.conformance.proxy import Exchange, RecordingProxy

CHECKS = ("echo", "fail", "heartbeat", "idle", "retry-after", "stop")

ECHO_PAYLOADS: tuple[dict[str, Any], ...] = (
    {},
    {"n": 1, "pi": 3.25, "negative": -7, "big": 9007199254740991, "yes": True, "no": False, "none": None},
    {"text": "héllo wörld ✓ \"quoted\" \\ back\nslash, and a tab\t", "empty": ""},
    {"nested": {"list": [1, "two", None, [], {"deeper": {"x": [0.5]}}]}},
    {"long": "x" * 4000},
)
FAIL_MESSAGES = ("conformance: the disk is full",
                 "conformance: ünïcødé ✗ \"quoted\"\nand a second line")
FAIL_MAX_ATTEMPTS = 3
MIN_SLEEP_MS = 6000
IDLE_S = 5.0
MAX_IDLE_CLAIMS_PER_S = 2.0
RETRY_AFTER_S = 2
REFUSE_FOR_S = 6.0
RETRY_AFTER_SLACK = 0.9
SIGNAL_SLACK_S = 0.05
STOP_JOB_MS = 120_000
POLL_S = 0.05
ENQUEUE_TRIES = 3
# After the jobs are done, how long a stray second ack has to show up.
SETTLE_S = 0.5


class CheckFailed(Exception):
    """A check does not hold; the message is its evidence."""


@dataclass
class Run:
    """What the checks share: the kit's client (straight to the service), the proxy the worker
    goes through, the worker's process and the queue."""

    client: Client
    proxy: RecordingProxy
    worker: WorkerProcess
    queue: str
    queue_lease_ms: int
    stop_within_s: float

    def enqueue(self, type: str, payload: dict[str, Any], **options: Any) -> Job:
        """Enqueue into the run's queue. Sent again when the connection drops unanswered (the
        service closes a kept-alive connection idle for a few seconds, as in the idle check):
        the idempotency key makes that safe."""
        key = f"conformance:{secrets.token_hex(8)}"
        for _ in range(ENQUEUE_TRIES - 1):
            with contextlib.suppress(TransportError):
                return self.client.enqueue(type, payload, queue=self.queue, idempotency_key=key, **options)
        return self.client.enqueue(type, payload, queue=self.queue, idempotency_key=key, **options)

    def alive(self, when: str) -> None:
        code = self.worker.exit_code
        if code is not None:
            raise CheckFailed(f"the worker exited (code {code}) {when}{self._refusal()}")

    def _refusal(self) -> str:
        """Why the service may have turned the worker away: its last 401 or 403, the usual
        cause of a worker that stops by itself (a token of other queues, or none)."""
        for x in reversed(self.proxy.exchanges()):
            if x.status in (401, 403) and not x.refused:
                detail = x.answer.get("detail") if isinstance(x.answer, dict) else None
                return (f", after the service answered its {x.method} {x.path} {x.status}"
                        + (f" ({detail})" if detail else "")
                        + ": JOBQ_TOKEN needs a worker token of the kit's queue (--worker-token)")
        return ""

    def jobs_until(self, ids: list[str], settled: Callable[[Job], bool], timeout_s: float) -> list[Job]:
        """The jobs, read until each is ``settled`` or ``timeout_s`` passes."""
        deadline = time.monotonic() + timeout_s
        while True:
            jobs = [self.client.get(i) for i in ids]
            if all(settled(j) for j in jobs) or time.monotonic() > deadline:
                return jobs
            self.alive(f"while jobs {_ids(ids)} were not done")
            time.sleep(POLL_S)

    def leases_of(self, job_id: str) -> list[dict[str, Any]]:
        """The leases of this job the worker was handed through the proxy."""
        return [le for x in self.proxy.claims() for le in x.leases()
                if isinstance(le.get("job"), dict) and str(le["job"].get("id")) == job_id]

    def lease_ids(self, job_id: str) -> list[str]:
        return [str(le.get("lease_id")) for le in self.leases_of(job_id)]


def _ids(ids: Iterable[str]) -> str:
    return ", ".join(ids)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _said(wrong: list[str], most: int = 2) -> str:
    """What is wrong, the first ``most`` things in full (a line, not a page)."""
    more = f"; and {len(wrong) - most} more" if len(wrong) > most else ""
    return "; ".join(wrong[:most]) + more


def _short(value: Any, width: int = 60) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def _calls(exchanges: list[Exchange], verb: str) -> Counter[str]:
    """How many times each lease was named by a call of ``verb`` (ack, release)."""
    return Counter(lid for x in exchanges for lid in x.lease_ids(verb))


def _heartbeats(run: Run, lease_ids: set[str]) -> list[Exchange]:
    return [x for x in run.proxy.exchanges() if x.call()[0] == "heartbeat" and x.call()[1] in lease_ids]


def _done_or_retried(job: Job) -> bool:
    return job.finished or job.status == "failed" or job.attempt > 1


def _run_jobs(run: Run, type: str, payloads: Iterable[dict[str, Any]],
              **options: Any) -> tuple[list[Job], Counter[str]]:
    """Enqueue a job per payload and wait until each is done (or retried); then give a stray
    second ack time to come. The jobs as they ended, and the acks each lease got."""
    ids = [run.enqueue(type, p, **options).id for p in payloads]
    final = run.jobs_until(ids, _done_or_retried, timeout_s=15)
    time.sleep(SETTLE_S)
    return final, _calls(run.proxy.exchanges(), "ack")


def echo(run: Run) -> str:
    final, acks = _run_jobs(run, "conformance.echo", ECHO_PAYLOADS)
    ids = [j.id for j in final]
    wrong = []
    for job, payload in zip(final, ECHO_PAYLOADS, strict=True):
        if job.status != "completed":
            why = f", last_error {_short(job.last_error)}" if job.last_error else ""
            wrong.append(f"job {job.id} is {job.status} (attempt {job.attempt}{why})")
        elif job.result != payload:
            wrong.append(f"job {job.id} completed with result {_short(job.result)}, "
                         f"not its payload {_short(payload)}")
        elif job.attempt != 1:
            wrong.append(f"job {job.id} completed on attempt {job.attempt}, not 1")
        for lease_id in run.lease_ids(job.id):
            if acks[lease_id] > 1:
                wrong.append(f"job {job.id}: lease {lease_id} acked {acks[lease_id]} times")
    if wrong:
        raise CheckFailed(_said(wrong))
    return (f"{len(ids)} jobs ({_ids(ids)}) completed on attempt 1 with their payloads as "
            f"result, each lease acked once")


def fail(run: Run) -> str:
    final, acks = _run_jobs(run, "conformance.fail", ({"message": m} for m in FAIL_MESSAGES),
                            max_attempts=FAIL_MAX_ATTEMPTS)
    ids = [j.id for j in final]
    wrong = []
    for job, message in zip(final, FAIL_MESSAGES, strict=True):
        acked = sum(acks[lid] for lid in run.lease_ids(job.id))
        if job.status == "completed":
            wrong.append(f"job {job.id} completed with result {_short(job.result)}: "
                         "a failure was acked instead of failed")
        elif acked:
            wrong.append(f"job {job.id} was acked {acked} times: a failure was acked")
        elif job.status == "failed" or (job.status != "dead" and job.attempt > 1):
            wrong.append(f"job {job.id} is {job.status} on attempt {job.attempt}, to be retried: "
                         "a failure retrying cannot fix is failed with retry: false")
        elif job.status != "dead":
            wrong.append(f"job {job.id} is {job.status} (attempt {job.attempt}), not dead")
        elif job.attempt != 1:
            wrong.append(f"job {job.id} went dead on attempt {job.attempt}, not 1")
        elif job.last_error != message:
            wrong.append(f"job {job.id} went dead with last_error {_short(job.last_error)}, "
                         f"not its message {_short(message)}")
    if wrong:
        raise CheckFailed(_said(wrong))
    return f"{len(ids)} jobs ({_ids(ids)}) dead after attempt 1 with their messages, none acked"


def granted_lease_ms(run: Run) -> tuple[int, str]:
    """The lease the worker's claims get: the ``lease_ms`` its latest claim asked for, or the
    queue's when it asks for none; and which of the two it was."""
    claims = run.proxy.claims()
    if not claims:
        return run.queue_lease_ms, "the queue's"
    asked = claims[-1].body.get("lease_ms") if isinstance(claims[-1].body, dict) else None
    if isinstance(asked, int) and not isinstance(asked, bool):
        return asked, "its claims' lease_ms"
    return run.queue_lease_ms, "the queue's, its claims give none"


def heartbeat(run: Run) -> str:
    lease_ms, source = granted_lease_ms(run)
    ms = max(3 * lease_ms, MIN_SLEEP_MS)
    job = run.enqueue("conformance.sleep", {"ms": ms})

    def settled(j: Job) -> bool:
        return _done_or_retried(j) or any(e.kind == "lease_expired" for e in j.errors)

    [final] = run.jobs_until([job.id], settled, timeout_s=ms / 1000 + 15)
    expired = [e for e in final.errors if e.kind == "lease_expired"]
    lease_ids = set(run.lease_ids(job.id))
    beats = _heartbeats(run, lease_ids)
    wrong = []
    if expired:
        wrong.append(f"job {job.id}'s lease expired {_plural(len(expired), 'time')} (errors has lease_expired)")
    if not beats:
        wrong.append("no heartbeat was sent")
    if final.status != "completed":
        wrong.append(f"job {job.id} is {final.status} (attempt {final.attempt})")
    elif final.result != {"slept": ms}:
        wrong.append(f"job {job.id} completed with {_short(final.result)}, not {_short({'slept': ms})}")
    elif final.attempt != 1:
        wrong.append(f"job {job.id} completed on attempt {final.attempt}, not 1")
    head = f"job {job.id} sleeping {ms} ms on a {lease_ms} ms lease ({source}): "
    if wrong:
        raise CheckFailed(head + _said(wrong, 3) + f"; {_plural(len(beats), 'heartbeat')}")
    claimed = [x.ended for x in run.proxy.claims() for le in x.leases()
               if str(le.get("lease_id")) in lease_ids and x.ended is not None]
    times = sorted(claimed[:1] + [x.started for x in beats])
    gap = max(b - a for a, b in zip(times, times[1:], strict=False)) if len(times) > 1 else 0.0
    return (head + f"completed on attempt 1 with no lease_expired, {len(beats)} heartbeats "
            f"at most {gap:.1f} s apart")


def idle(run: Run) -> str:
    start = time.monotonic()
    code = run.worker.wait(IDLE_S)
    if code is not None:
        raise CheckFailed(f"the worker exited (code {code}) while idle")
    claims = [x for x in run.proxy.claims(since=start) if x.started <= start + IDLE_S]
    rate = len(claims) / IDLE_S
    waits = sorted({str(x.body.get("wait_ms")) for x in claims if isinstance(x.body, dict)})
    said = f"{_plural(len(claims), 'claim')} in {IDLE_S:.0f} s with nothing to do ({rate:.1f}/s" + (
        f", wait_ms {', '.join(waits)})" if waits else ")")
    if rate >= MAX_IDLE_CLAIMS_PER_S:
        raise CheckFailed(said + f": at least {MAX_IDLE_CLAIMS_PER_S:.0f}/s is spinning; "
                          "long-poll with wait_ms")
    return said + f", under {MAX_IDLE_CLAIMS_PER_S:.0f}/s"


def retry_after(run: Run) -> str:
    start = time.monotonic()
    run.proxy.refuse_claims(RETRY_AFTER_S)
    try:
        # Ends a long-poll the worker has waiting at the service (which the proxy forwarded
        # before it began refusing), so that its next claim comes now.
        run.enqueue("conformance.echo", {"wake": "the waiting claim"})
        code = run.worker.wait(REFUSE_FOR_S - (time.monotonic() - start))
    finally:
        run.proxy.forward_claims()
    if code is not None:
        raise CheckFailed(f"the worker exited (code {code}) while its claims were refused")
    claims = run.proxy.claims(since=start)
    refused = [x for x in claims if x.refused and x.ended is not None]
    if not refused:
        raise CheckFailed(f"no claim came in the {REFUSE_FOR_S:.0f} s the kit refused claims")
    least = RETRY_AFTER_S * RETRY_AFTER_SLACK
    gaps: list[tuple[float, Exchange]] = []
    for r in refused:
        assert r.ended is not None
        later = [c.started for c in claims if c.started >= r.ended]
        if later:
            gaps.append((min(later) - r.ended, r))
    kinds = Counter(x.status for x in refused)
    said = (f"{_plural(len(refused), 'claim')} refused in {REFUSE_FOR_S:.0f} s ("
            + ", ".join(f"{s} ×{n}" for s, n in sorted(kinds.items())) + f") with Retry-After: {RETRY_AFTER_S}")
    soon = [(g, r) for g, r in gaps if g < least]
    if soon:
        g, r = min(soon, key=lambda p: p[0])
        raise CheckFailed(f"{said}; {len(soon)} were followed by a claim sooner than {least:.1f} s, "
                          f"the soonest {g:.2f} s after a {r.status}")
    if not gaps:
        return said + "; no claim followed within the window"
    low, high = f"{min(g for g, _ in gaps):.1f}", f"{max(g for g, _ in gaps):.1f}"
    spread = low if low == high else f"{low} to {high}"
    return said + f"; each next claim came {spread} s later (at least {least:.1f} s)"


def stop(run: Run) -> str:
    job = run.enqueue("conformance.sleep", {"ms": STOP_JOB_MS})
    handed = run.proxy.wait_for(lambda: run.leases_of(job.id), timeout_s=15)
    run.alive("before SIGTERM")
    if not handed:
        raise CheckFailed(f"job {job.id} was not claimed within 15 s")
    lease_id = str(handed[-1].get("lease_id"))
    # Signalled the moment the claim is answered, a worker would stop before it starts the
    # job; its first heartbeat says the job runs (a worker that sends none is the heartbeat
    # check's to fail: it is signalled once its lease's time has passed).
    run.proxy.wait_for(lambda: _heartbeats(run, {lease_id}), timeout_s=granted_lease_ms(run)[0] / 1000)
    sent = time.monotonic()
    run.worker.signal(signal.SIGTERM)
    code = run.worker.wait(run.stop_within_s)
    took = time.monotonic() - sent
    after = run.proxy.claims(since=sent + SIGNAL_SLACK_S)
    final = run.client.get(job.id)
    released = [x for x in run.proxy.exchanges() if lease_id in x.lease_ids("release") and x.ended]
    wrong = []
    if code is None:
        wrong.append(f"still running {run.stop_within_s:g} s after SIGTERM (--stop-within)")
        run.worker.stop(0)
    if after:
        first = min(x.started for x in after) - sent
        wrong.append(f"{_plural(len(after), 'claim')} after SIGTERM, the first {first:.2f} s after it")
    if not final.releases:
        wrong.append(f"job {job.id} was not released: {final.status}, attempt {final.attempt}"
                     + (" (its lease would run out and spend the attempt)" if final.status == "running" else ""))
    else:
        last = final.releases[-1]
        late = (final.visible_at is not None and last.at is not None
                and final.visible_at - last.at > timedelta(seconds=1))
        if final.status != "pending" or final.attempt != 0 or len(final.releases) != 1 or late:
            wrong.append(f"job {job.id} is {final.status}, attempt {final.attempt}, "
                         f"{len(final.releases)} releases, visible at {final.visible_at}: "
                         "released once it is pending, visible now, attempt 0")
    if wrong:
        raise CheckFailed(_said(wrong))
    when = f" {released[0].ended - sent:.1f} s after SIGTERM" if released and released[0].ended else ""
    return (f"job {job.id} released{when} (pending, visible now, attempt 0, 1 release), no claim "
            f"after SIGTERM, exited with code {code} after {took:.1f} s")


RUNS: dict[str, Callable[[Run], str]] = {
    "echo": echo, "fail": fail, "heartbeat": heartbeat, "idle": idle,
    "retry-after": retry_after, "stop": stop,
}
