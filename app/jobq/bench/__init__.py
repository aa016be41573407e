"""``jobq bench``: drive a jobq service over HTTP and measure it against raw SQL.

What is measured, per mode (``single``: one job per call, one claim of limit 1 and one ack
per job; ``batch``: batch enqueues of ``--batch`` jobs, claims of ``limit`` = batch, batch
acks):

- enqueue rate: P producers fill a fresh queue;
- drain rate: W workers empty it;
- end-to-end rate: producers and workers together on another fresh queue, from the first
  enqueue to the last ack;
- the CPU time of the service per 1,000 jobs in each of those phases (the ``jobq serve``
  process and its descendants, from /proc; only when the bench started the service), and,
  for reference, that of the bench itself and of the PostgreSQL backends serving the
  service's database when PostgreSQL runs on this machine.

Then the pickup latency at a fixed offered rate: single enqueues paced by the clock while W
idle workers long-poll. Pickup is measured per job on the server's clock, from the claim
answer alone: the claim sets ``locked_until = now() + lease_ms``, so ``locked_until - lease_ms``
is the claim's ``now()``, and ``visible_at`` is the enqueue's.

With ``--baseline``, right after each mode's HTTP phases (so the pair being compared runs
under the same machine noise) the same named statements run straight on PostgreSQL with sync
psycopg, 1, 2 and 4 connections in threads, the best count kept per figure: the batch
ceiling inserts batches with JobInsertMany and drains with JobClaim + LeaseAckMany; the single
ceiling runs each job's whole life, JobInsert, JobClaim (limit 1), LeaseAck, each statement
its own transaction as in the service. The HTTP figures are reported as ratios to these.

With ``--sdk``, after those, the path Python users take is measured beside the raw client,
each pair interleaved round by round: one ``Client.enqueue`` at a time (latency p50/p99),
``AsyncClient.enqueue_many``, drains by ``jobq worker jobq.bench.noop:handlers`` processes
and by an in-process ``Worker``, pickup at 100 and 1,000 jobs/s with one and several idle
worker processes, and the CPU per job of each side; reported as sdk ÷ raw (``sdk``'s
docstring says how each is timed). It needs the database: the worker processes report
nothing, so what they did is read back from the jobs.

Between measurements the bench deletes the jobs it made and, on a server with autovacuum off,
VACUUMs the jobs table, so no measurement runs on the dead rows of the one before.

Every phase has a timeout and stops by itself. The bench talks only to loopback addresses
(or a Unix socket, for the database). Progress goes to stderr; stdout carries only the table
or the JSON. Figures from one noisy machine: compare the ratios within a run, not runs.

Where things are: ``config`` (BenchConfig, Mode, the load's constants), ``service`` (the
service under test and the loopback checks), ``database`` (its settings, tidying), ``load``
(producers and workers over HTTP, with the lean HTTP client of ``client``), ``latency``,
``baseline`` (the raw-SQL ceilings), ``cpu`` (CPU metering), ``phases`` (timing a phase),
``report`` (ratios, targets, tables), ``run`` (one run, ``main``), ``drivers``
(``--drivers``: the psycopg paths compared), ``sdk`` (``--sdk``: its phases), ``sdk_procs``
(its worker processes, CPU spans and reads of the jobs table), ``noop`` (the handlers its
workers run).
"""

from jobq.bench.config import BenchConfig, BenchError, Mode
from jobq.bench.run import main

__all__ = ["BenchConfig", "BenchError", "Mode", "main"]
