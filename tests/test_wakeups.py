"""Who a new job wakes. Enqueuing ``n`` jobs rings idle long-polls until their limits cover
``n``, not every waiter on the queue (a thundering herd: eight idle workers ran eight claims
per job, seven of them empty). The bell must never be dropped on the way: a rung long-poll
whose worker has hung up passes it on.

The first tests drive the in-process switchboard itself; the rest go through the API. They
order events with the switchboard's own probe (``until_idle``: the long-polls looked, found
nothing and sleep), not with sleeps; the wall-clock bounds that remain are the behaviour (a
bell passed on arrives long before the 5 s safety re-check would)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from jobq.api.app import create_app
from jobq.core import wakeups
from jobq.core.wakeups import GENERATIONS_KEPT, Waiter, Wakeups
from jobq.store.db import Database
from jobq.store.notify import HELLO, HERE, parse_payload
from tests.conftest import LiveServer, free_port, make_settings, running_app
from tests.helpers import claim_looked_since, database_now, long_polls_idle
from tests.helpers_workers import Claims, Stopwatch, claim, enqueue, enqueue_many, sql
from tests.waiting import aeventually

# The safety re-check of an idle long-poll is 5 s; a bell that is passed on arrives well
# before that, even on a busy machine.
PASSED_ON_S = 2.0


def new_board() -> Wakeups:
    # Never started: only its local waiters are used, and what it would send stays in its outbox.
    return Wakeups(Database("postgresql://unused", pool_size=1, timeout_s=1, retry_after_s=1))


@pytest.fixture
def board() -> Wakeups:
    # One that has heard from another process: what others are not told is what it chose not to tell.
    board = new_board()
    board.notifications.peers.add("another")
    return board


def waiters(board: Wakeups, queue: str, limits: list[int], stack: contextlib.ExitStack,
            filtered: bool = False) -> list[Waiter]:
    return [stack.enter_context(board._subscribe([queue], limit, filtered)) for limit in limits]


@pytest.fixture
def stack() -> Iterator[contextlib.ExitStack]:
    with contextlib.ExitStack() as s:
        yield s


def rung(ws: list[Waiter]) -> list[bool]:
    return [w.rung for w in ws]


def test_one_job_rings_one_waiter_the_longest_waiting(board: Wakeups, stack: contextlib.ExitStack) -> None:
    ws = waiters(board, "q", [1] * 8, stack)
    board.publish({"q": 1})
    assert rung(ws) == [True] + [False] * 7
    board.publish({"q": 1})  # the next job goes to the next idle waiter
    assert rung(ws) == [True, True] + [False] * 6


def test_a_batch_rings_waiters_until_their_limits_cover_it(board: Wakeups, stack: contextlib.ExitStack) -> None:
    ws = waiters(board, "q", [100, 100, 100, 100], stack)
    board.publish({"q": 150})
    assert rung(ws) == [True, True, False, False]
    small = waiters(board, "s", [1, 1, 1, 1], stack)
    board.publish({"s": 3})
    assert rung(small) == [True, True, True, False]


def test_more_jobs_than_waiters_rings_them_all(board: Wakeups, stack: contextlib.ExitStack) -> None:
    ws = waiters(board, "q", [10, 10], stack)
    board.publish({"q": 1000})
    assert rung(ws) == [True, True]


def test_an_unknown_count_rings_everyone(board: Wakeups, stack: contextlib.ExitStack) -> None:
    ws = waiters(board, "q", [1, 1, 1], stack)
    board.publish(["q"])
    assert rung(ws) == [True, True, True]
    other = waiters(board, "r", [1, 1], stack)
    board.publish({"r": None})
    assert rung(other) == [True, True]


def test_type_filtered_waiters_are_always_rung_and_cover_nothing(
        board: Wakeups, stack: contextlib.ExitStack) -> None:
    # The board does not know the new job's type: a filtered waiter may not want it, so it
    # cannot stand in for an unfiltered one.
    typed = waiters(board, "q", [5], stack, filtered=True)
    plain = waiters(board, "q", [1, 1], stack)
    board.publish({"q": 1})
    assert rung(typed + plain) == [True, True, False]


def test_other_queues_waiters_are_not_rung(board: Wakeups, stack: contextlib.ExitStack) -> None:
    mine = waiters(board, "a", [1], stack)
    theirs = waiters(board, "b", [1], stack)
    board.publish({"a": 5})
    assert rung(mine + theirs) == [True, False]


def test_a_waiter_that_left_is_not_rung(board: Wakeups) -> None:
    with board._subscribe(["q"], 1) as gone:
        pass
    with board._subscribe(["q"], 1) as staying:
        board.publish({"q": 1})
        assert staying.rung and not gone.rung
    assert not board.has_waiters("q")


def test_jobs_our_idle_waiters_cover_are_not_announced(board: Wakeups, stack: contextlib.ExitStack) -> None:
    # Other processes hear only of what nobody here will claim: a NOTIFY is a round trip.
    waiters(board, "q", [1, 1], stack)
    board.publish({"q": 2})
    assert board.notifications.outbox == {}
    board.publish({"q": 3})  # both are rung already: these three go out
    assert board.notifications.outbox == {"q": 3}
    waiters(board, "r", [10], stack)
    board.publish({"r": 25})
    assert board.notifications.outbox == {"q": 3, "r": 15}
    waiters(board, "s", [10], stack)
    board.publish(["s"])  # a count we do not know always goes out
    assert board.notifications.outbox["s"] is None


def test_a_rung_waiter_remembers_its_queues(board: Wakeups, stack: contextlib.ExitStack) -> None:
    (w,) = [stack.enter_context(board._subscribe(["a", "b", "c"], 1))]
    board.publish({"b": 1})
    assert w.rung_for == {"b": 1}
    board.publish({"c": 1})  # already rung: passed over
    assert w.rung_for == {"b": 1}


def test_a_rung_waiter_knows_how_many_jobs_it_was_counted_for(
        board: Wakeups, stack: contextlib.ExitStack) -> None:
    # What a waiter that does not answer passes on: all it stood for, not one job.
    big, small = waiters(board, "q", [100, 10], stack)
    board.publish({"q": 30})
    assert big.rung_for == {"q": 30} and not small.rung
    board.publish({"q": 500})
    assert small.rung_for == {"q": 10}
    unknown = waiters(board, "r", [5], stack)[0]
    board.publish(["r"])
    assert unknown.rung_for == {"r": None}


def test_generations_only_grow_and_stay_bounded(board: Wakeups) -> None:
    board.publish({"first": 1})
    seen = board.generation("first")
    for i in range(GENERATIONS_KEPT + 5):
        board.publish({f"q{i}": 1})
    assert len(board._generation) <= GENERATIONS_KEPT
    board.publish({"first": 1})  # forgotten on the way, and still newer than before
    assert board.generation("first") > seen


def test_counts_for_other_processes_add_up_until_sent(board: Wakeups) -> None:
    board.publish({"q": 2})
    board.publish({"q": 3, "r": 1})
    board.publish(["s"])
    board.publish({"s": 4})
    assert board.notifications.outbox == {"q": 5, "r": 1, "s": None}


def test_a_process_alone_tells_nobody_until_another_greets_it(stack: contextlib.ExitStack) -> None:
    board = new_board()
    notes = board.notifications
    board.publish({"q": 3})
    assert notes.outbox == {}  # no other process known: no NOTIFY for nobody
    (w,) = waiters(board, "q", [1], stack)
    notes._from("b", HELLO, None)
    # It answers, so that the newcomer counts it, and every waiter looks again: what this
    # process enqueued unannounced may be the newcomer's to take, and the other way round.
    assert notes.outbox == {HERE: None} and w.rung
    board.publish({"r": 2})
    assert notes.outbox == {HERE: None, "r": 2}


def test_greetings_are_answered_once_and_every_one_makes_waiters_look(
        stack: contextlib.ExitStack) -> None:
    board = new_board()
    notes = board.notifications
    notes._from("a", HERE, None)  # an answer from a process not known yet: answer it too
    assert notes.outbox == {HERE: None} and notes.peers == {"a"}
    notes.outbox.clear()
    (w,) = waiters(board, "q", [1], stack)
    notes._from("a", HERE, None)  # its answer to ours: no reply, or they would never stop
    assert notes.outbox == {} and w.rung
    (w2,) = waiters(board, "q2", [1], stack)
    notes._from("a", "q2", 1)  # an ordinary bell from a known process
    assert notes.outbox == {} and w2.rung_for == {"q2": 1}


def test_a_bell_from_an_unknown_process_counts_it(stack: contextlib.ExitStack) -> None:
    # A process of an older release sends no greeting; its bells make it known.
    board = new_board()
    (w,) = waiters(board, "q", [1], stack)
    board.notifications._from("old", "q", 2)
    assert board.notifications.peers == {"old"} and w.rung
    assert board.notifications.outbox == {HERE: None}


@pytest.mark.parametrize(("payload", "parsed"), [
    (f"{HELLO} * abc123", (HELLO, None, "abc123")),
    ("jobs.email 12 abc123", ("jobs.email", 12, "abc123")),
    ("q * abc123", ("q", None, "abc123")),
    ("q abc123", ("q", None, "abc123")),  # no count: wake everyone
    ("q -3 abc123", ("q", None, "abc123")),
    ("q \u00b2 abc123", ("q", None, "abc123")),  # a digit to str.isdigit, not to int()
])
def test_notification_payloads(payload: str, parsed: tuple[str, int | None, str]) -> None:
    assert parse_payload(payload) == parsed


# ------------------------------------------------------------------------- through the API


def asgi_client(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://jobq", timeout=30)


def board_of(app: FastAPI) -> Wakeups:
    return app.state.ctx.wakeups  # type: ignore[no-any-return]


class Served:
    """The service on a real socket, in this process: a worker that hangs up is a closed
    connection, as in production, and the test can still read the service's switchboard."""

    def __init__(self, app: FastAPI, server: uvicorn.Server, url: str) -> None:
        self.app, self.server, self.url = app, server, url

    @property
    def board(self) -> Wakeups:
        return board_of(self.app)

    @property
    def connections(self) -> int:
        return len(self.server.server_state.connections)


@contextlib.asynccontextmanager
async def served(database_url: str) -> AsyncIterator[Served]:
    app = create_app(make_settings(database_url))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        await aeventually(lambda: server.started or task.done(), timeout_s=30, poll_s=0.005,
                          what="uvicorn started")
        if task.done():
            task.result()  # raises why it did not start
        yield Served(app, server, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await task


async def test_a_batch_reaches_every_idle_worker(app: FastAPI, client: httpx.AsyncClient) -> None:
    # Six jobs at once, six idle workers taking one each: the bell rings for six.
    polls = [asyncio.create_task(claim(client, ["herd"], worker_id=f"w{i}", wait_ms=10_000))
             for i in range(6)]
    await long_polls_idle(board_of(app), "herd", 6)
    await enqueue_many(client, [{"type": "t", "queue": "herd"}] * 6)
    clock = Stopwatch()
    got = await asyncio.wait_for(asyncio.gather(*polls), 12)
    assert sorted(len(leases) for leases in got) == [1] * 6
    assert clock.elapsed < PASSED_ON_S


async def test_one_job_goes_to_one_waiter_and_the_rest_wait_on(app: FastAPI, client: httpx.AsyncClient) -> None:
    board = board_of(app)
    polls = [asyncio.create_task(claim(client, ["one"], worker_id=f"w{i}", wait_ms=10_000))
             for i in range(4)]
    await long_polls_idle(board, "one", 4)
    first = await enqueue(client, queue="one")
    done, waiting = await asyncio.wait(polls, timeout=PASSED_ON_S, return_when=asyncio.FIRST_COMPLETED)
    assert [[le["job"]["id"] for le in t.result()] for t in done] == [[first["id"]]]
    await long_polls_idle(board, "one", 3)
    assert all(not t.done() for t in waiting), "the others go on waiting"
    second = await enqueue(client, queue="one")
    done, waiting = await asyncio.wait(waiting, timeout=PASSED_ON_S, return_when=asyncio.FIRST_COMPLETED)
    assert [[le["job"]["id"] for le in t.result()] for t in done] == [[second["id"]]]
    for t in waiting:
        t.cancel()
    await asyncio.gather(*waiting, return_exceptions=True)


async def test_a_hung_up_long_poll_passes_the_bell_on(database_url: str) -> None:
    async with served(database_url) as server, \
            httpx.AsyncClient(base_url=server.url, timeout=30) as quitter, \
            httpx.AsyncClient(base_url=server.url, timeout=30) as stayer:
        # The quitter waits longest, so the next job's bell rings it first.
        dead = asyncio.create_task(claim(quitter, ["hang"], worker_id="quitter", wait_ms=20_000))
        await long_polls_idle(server.board, "hang", 1)
        alive = asyncio.create_task(claim(stayer, ["hang"], worker_id="stayer", wait_ms=20_000))
        await long_polls_idle(server.board, "hang", 2)
        dead.cancel()  # the worker hangs up; the server finds out when the bell rings it
        await asyncio.gather(dead, return_exceptions=True)
        await quitter.aclose()
        # the server saw the quitter's socket close
        await aeventually(lambda: server.connections == 1, poll_s=0.005, what="one connection left")
        job = await enqueue(stayer, queue="hang")
        clock = Stopwatch()
        leases = await asyncio.wait_for(alive, 25)
        assert [le["job"]["id"] for le in leases] == [job["id"]]
        assert clock.elapsed < PASSED_ON_S, "the bell stopped at the hung-up long-poll"


async def test_a_claim_filled_from_an_earlier_queue_passes_the_bell_on(
        app: FastAPI, client: httpx.AsyncClient) -> None:
    # "a" waits on [first, second], "b" on [second]. One batch puts a job in "second" (its
    # bell rings "a", the longest waiting) and one in "first" ("a" is rung already). "a"
    # claims "first" before "second" and is full: the bell for "second" must go to "b".
    board = board_of(app)
    a = asyncio.create_task(claim(client, ["first", "second"], worker_id="a", wait_ms=10_000))
    await long_polls_idle(board, "second", 1)
    b = asyncio.create_task(claim(client, ["second"], worker_id="b", wait_ms=10_000))
    await long_polls_idle(board, "second", 2)
    jobs = await enqueue_many(client, [{"type": "t", "queue": "second"}, {"type": "t", "queue": "first"}])
    clock = Stopwatch()
    got_a, got_b = await asyncio.wait_for(asyncio.gather(a, b), 12)
    assert [le["job"]["id"] for le in got_a] == [jobs[1]["id"]]
    assert [le["job"]["id"] for le in got_b] == [jobs[0]["id"]]
    assert clock.elapsed < PASSED_ON_S, "the bell for the second queue stopped at the full claim"


async def test_a_bell_no_local_waiter_answers_reaches_another_replica(database_url: str) -> None:
    """The enqueuing replica does not NOTIFY for jobs its own idle waiters cover; when the
    waiter it counted on has hung up, the bell it passes on must still reach the other one."""
    async with served(database_url) as here, \
            running_app(make_settings(database_url)) as there, \
            httpx.AsyncClient(base_url=here.url, timeout=30) as quitter, \
            httpx.AsyncClient(base_url=here.url, timeout=30) as producer, \
            httpx.AsyncClient(transport=httpx.ASGITransport(app=there), base_url="http://there",
                              timeout=30) as stayer:
        await board_of(there).notifications.listening.wait()
        dead = asyncio.create_task(claim(quitter, ["xh"], worker_id="quitter", wait_ms=20_000))
        alive = asyncio.create_task(claim(stayer, ["xh"], worker_id="stayer", wait_ms=20_000))
        await long_polls_idle(here.board, "xh", 1)
        await long_polls_idle(board_of(there), "xh", 1)
        dead.cancel()
        await asyncio.gather(dead, return_exceptions=True)
        await quitter.aclose()
        await aeventually(lambda: here.connections == 0, poll_s=0.005, what="no connection left")
        job = await enqueue(producer, queue="xh")
        clock = Stopwatch()
        leases = await asyncio.wait_for(alive, 25)
        assert [le["job"]["id"] for le in leases] == [job["id"]]
        assert clock.elapsed < PASSED_ON_S, "the other replica's waiter was never told"


async def test_a_delayed_job_reaches_a_waiter_its_bell_skipped(app: FastAPI, client: httpx.AsyncClient) -> None:
    # The enqueue's bell rings "short" (the longest waiting), whose wait ends before the job
    # is due; "long" looked before the job existed and sleeps towards its 5 s re-check. A
    # timer at the job's visible time rings "long" then.
    board = board_of(app)
    short = asyncio.create_task(claim(client, ["later"], worker_id="short", wait_ms=700))
    await long_polls_idle(board, "later", 1)
    long = asyncio.create_task(claim(client, ["later"], worker_id="long", wait_ms=15_000))
    await long_polls_idle(board, "later", 2)
    job = await enqueue(client, queue="later", delay_ms=1500)
    clock = Stopwatch()
    assert await asyncio.wait_for(short, 5) == []
    leases = await asyncio.wait_for(long, 15)
    assert [le["job"]["id"] for le in leases] == [job["id"]]
    assert clock.elapsed < 1.5 + PASSED_ON_S, "the waiter the bell skipped waited for its re-check"


async def test_replicas_greet_each_other_and_wake_each_others_waiters(
        replicas: tuple[LiveServer, LiveServer]) -> None:
    """Two ``jobq serve`` processes: each started alone (sending no NOTIFY), greeted the
    other, and from then on a job enqueued on one wakes a long-poll waiting on the other
    well before its 5 s re-check."""
    a_srv, b_srv = replicas
    async with httpx.AsyncClient(base_url=a_srv.url, timeout=30) as a, \
            httpx.AsyncClient(base_url=b_srv.url, timeout=30) as b:
        servers = {a: a_srv, b: b_srv}
        for here, there, queue in ((a, b, "ra"), (b, a, "rb"), (a, b, "ra2")):
            since = database_now(a_srv.database_url)
            waiting = asyncio.create_task(claim(there, [queue], worker_id="w", wait_ms=15_000))
            # Until the long-poll has looked and found nothing: it sleeps, and only a bell
            # from the other replica wakes it before its 5 s re-check.
            await aeventually(lambda: claim_looked_since(servers[there], since), poll_s=0.02,  # noqa: B023
                              what=f"the long-poll on {queue} having looked")
            assert not waiting.done()
            job = await enqueue(here, queue=queue)
            clock = Stopwatch()
            leases = await asyncio.wait_for(waiting, 20)
            assert [le["job"]["id"] for le in leases] == [job["id"]]
            assert clock.elapsed < PASSED_ON_S, f"the NOTIFY for {queue} never arrived"


# ------------------------------------------------------------------- what waiting costs


@pytest.fixture
def quick_rounds(monkeypatch: pytest.MonkeyPatch) -> float:
    # The safety round every 0.3 s instead of 5 s, set before the app starts: a test can then
    # watch several rounds pass in a second and a half.
    monkeypatch.setattr(wakeups, "SAFETY_RECHECK_S", 0.3)
    return 0.3


async def test_idle_long_polls_run_no_claim_while_nothing_happens(
        database_url: str, monkeypatch: pytest.MonkeyPatch, quick_rounds: float) -> None:
    """Twenty idle long-polls over five rounds of the safety net: no claim at all (each one
    used to re-run its claim every round), the rounds one reading each for the queue; then
    one job goes to exactly one of them (handed over in the enqueue: no claim at all) and the
    others wait on."""
    claims = Claims(monkeypatch)
    async with running_app(make_settings(database_url)) as app, asgi_client(app) as c:
        board = board_of(app)
        polls = [asyncio.create_task(claim(c, ["quiet"], worker_id=f"w{i}", wait_ms=20_000))
                 for i in range(20)]
        await long_polls_idle(board, "quiet", 20)
        looked, readings = claims.n, board.readings
        await asyncio.sleep(5 * quick_rounds)
        assert claims.n == looked, "idle long-polls claimed while nothing happened"
        assert 2 <= board.readings - readings <= 7, "one reading per round, not one per waiter"
        job = await enqueue(c, queue="quiet")
        done, waiting = await asyncio.wait(polls, timeout=PASSED_ON_S, return_when=asyncio.FIRST_COMPLETED)
        assert [[le["job"]["id"] for le in t.result()] for t in done] == [[job["id"]]]
        await long_polls_idle(board, "quiet", 19)
        assert claims.n == looked, "the job was handed over, yet a long-poll claimed"
        for t in waiting:
            t.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


async def test_a_long_poll_that_times_out_runs_no_last_claim(
        app: FastAPI, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch) -> None:
    # The LISTEN connection, once up, rings every waiter (notifications may have been missed
    # before it listened): that would be a bell, and a second look.
    await board_of(app).notifications.listening.wait()
    claims = Claims(monkeypatch)
    assert await claim(client, ["empty"], wait_ms=300) == []
    assert claims.n == 1, "nothing rang it: there was nothing to claim at the end"


async def test_the_safety_round_rings_as_many_waiters_as_there_are_jobs(
        database_url: str, monkeypatch: pytest.MonkeyPatch, quick_rounds: float) -> None:
    """Jobs that became claimable without a bell (a NOTIFY lost with the process that sent
    it; here two delayed jobs made visible by hand) are found by the next safety round,
    which rings two of the ten idle long-polls, not all ten."""
    claims = Claims(monkeypatch)
    async with running_app(make_settings(database_url)) as app, asgi_client(app) as c:
        board = board_of(app)
        # Once up, the LISTEN connection rings one waiter per queue (it may have missed
        # notifications): that bell is not the round's.
        await board.notifications.listening.wait()
        jobs = await enqueue_many(c, [{"type": "t", "queue": "lost", "delay_ms": 3_600_000}] * 2)
        polls = [asyncio.create_task(claim(c, ["lost"], worker_id=f"w{i}", wait_ms=20_000))
                 for i in range(10)]
        await long_polls_idle(board, "lost", 10)
        looked, readings = claims.n, board.readings
        sql(database_url, "UPDATE jobs SET visible_at = now() WHERE queue = 'lost'")
        done: set[asyncio.Task[list[dict[str, Any]]]] = set()
        waiting = set(polls)
        while len(done) < 2:
            more, waiting = await asyncio.wait(waiting, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            assert more, "the safety round did not find the jobs"
            done |= more
        assert sorted(le["job"]["id"] for t in done for le in t.result()) == sorted(j["id"] for j in jobs)
        await long_polls_idle(board, "lost", 8)
        # A round rings as many waiters as it counts jobs. On a loaded machine (rounds here
        # are 0.3 s apart) a second round can count the jobs again before the first round's
        # waiters have claimed them, and rings as many more: bounded by the rounds, never all.
        rounds = board.readings - readings
        assert claims.n - looked == 2 or 2 < claims.n - looked <= 2 * rounds, (
            f"{claims.n - looked} claims after {rounds} rounds: the rounds rang more waiters than there were jobs")
        for t in waiting:
            t.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


async def test_a_job_enqueued_while_a_thousand_long_polls_wait_is_picked_up(
        app: FastAPI, client: httpx.AsyncClient) -> None:
    board = board_of(app)
    polls = [asyncio.create_task(claim(client, ["fleet"], worker_id=f"w{i}", wait_ms=30_000))
             for i in range(1000)]
    try:
        await long_polls_idle(board, "fleet", 1000)
        jobs = await enqueue_many(client, [{"type": "t", "queue": "fleet"}] * 3)
        got: list[str] = []
        waiting = set(polls)
        while len(got) < 3:
            done, waiting = await asyncio.wait(waiting, timeout=10, return_when=asyncio.FIRST_COMPLETED)
            assert done, "the jobs were not picked up"
            got += [le["job"]["id"] for t in done for le in t.result()]
        assert sorted(got) == sorted(j["id"] for j in jobs)
        assert len(waiting) == 997
    finally:
        for t in polls:
            t.cancel()
        await asyncio.gather(*polls, return_exceptions=True)


async def test_a_newcomer_behind_a_quiet_waiter_does_not_look() -> None:
    """The board alone: the first long-poll looks and finds nothing; the next one, behind it,
    would find nothing either (a job would ring the first), so it goes straight to sleep;
    a bell then costs one look, and a wait that ends unrung costs none."""
    board = new_board()
    looks = 0
    jobs: list[str] = []

    async def take() -> list[str]:
        nonlocal looks
        looks += 1
        return [jobs.pop()] if jobs else []

    def poll(wait_s: float) -> asyncio.Task[list[str]]:
        return asyncio.create_task(board.wait_for_work(["q"], None, 1, wait_s, take, lambda _: "q"))

    first = poll(10)
    await board.until_idle("q", 1)
    second = poll(0.3)
    await board.until_idle("q", 2)
    assert looks == 1
    jobs.append("j1")
    board.publish({"q": 1})
    assert await first == ["j1"] and looks == 2
    assert await second == [] and looks == 2


def test_a_reading_rings_one_type_filtered_waiter_per_group_counted_for_all(
        board: Wakeups, stack: contextlib.ExitStack) -> None:
    # Jobs a reading finds waiting may be of types the filtered waiters do not take (why
    # they still wait): one of each group looks, counted for them all, so a full claim passes
    # the rest on and an empty one costs one claim, not one per job.
    typed = waiters(board, "q", [1] * 5, stack, filtered=True)
    plain = waiters(board, "q", [1, 1, 1], stack)
    board._wake("q", 2, scout=True)
    assert rung(typed) == [True, False, False, False, False] and typed[0].rung_for == {"q": 2}
    assert rung(plain) == [True, True, False]


async def test_a_job_delayed_past_its_timer_is_found_by_the_watcher_when_due(
        database_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Jobs delayed by more than DELAYED_WAKE_MAX_S get no timer of their own: the watcher,
    # which knows when each queue's next one is due, rings a waiter then.
    monkeypatch.setattr(wakeups, "DELAYED_WAKE_MAX_S", 0.2)
    async with running_app(make_settings(database_url)) as app, asgi_client(app) as c:
        waiting = asyncio.create_task(claim(c, ["later2"], worker_id="w", wait_ms=15_000))
        await long_polls_idle(board_of(app), "later2", 1)
        job = await enqueue(c, queue="later2", delay_ms=1000)
        clock = Stopwatch()
        leases = await asyncio.wait_for(waiting, 15)
        assert [le["job"]["id"] for le in leases] == [job["id"]]
        assert 0.9 <= clock.elapsed < 1.0 + PASSED_ON_S
