"""jobq as a user gets it: a wheel built from the repository, installed into fresh virtual
environments and run from a directory outside the checkout, with and without the server extra.

The slow tests build the wheel once per session and make each virtual environment once per
module; the fast ones check pyproject.toml against the tree, so a new subpackage or data file
cannot be left out of the wheel without a test saying so.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from packaging.requirements import Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import Version
from psycopg import sql

import jobq
from jobq.store.migrate import head_revision
from tests import lockfile, pg
from tests.conftest import ROOT, free_port

APP = ROOT / "app"
PACKAGE = APP / "jobq"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
VERSION: str = PYPROJECT["project"]["version"]
SETUPTOOLS = PYPROJECT["tool"]["setuptools"]

# What the server extra brings and the base install must not.
SERVER_ONLY = ("fastapi", "psycopg", "sqlalchemy", "uvicorn", "alembic")

# Each slow test may pay for the wheel build and a venv's install (setup counts toward
# pytest-timeout): long for a test, short for that on a shared two-core machine.
SLOW_TIMEOUT_S = 900


# --- fast: pyproject.toml against the tree ------------------------------------------------


def _code_folders() -> list[Path]:
    """Every folder under app/jobq that holds Python code."""
    found = []
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        if any(f.endswith(".py") for f in files):
            found.append(Path(folder))
    return found


def test_the_source_root_holds_one_package_found_by_discovery() -> None:
    assert SETUPTOOLS["packages"]["find"]["where"] == ["app"]
    # (pip install -e leaves jobq.egg-info beside the package; .gitignore names it.)
    assert sorted(p.name for p in APP.iterdir() if not p.name.endswith((".egg-info", "__pycache__"))) == ["jobq"]
    assert [p for p in APP.rglob("*") if p.is_symlink()] == []
    # find (not find_namespace) needs an __init__.py: a folder without one would be left
    # out of the wheel with no word said.
    folders = _code_folders()
    assert PACKAGE / "api" / "routes" in folders  # the walk does reach nested packages
    assert [f for f in folders if not (f / "__init__.py").exists()] == []


def test_every_data_file_under_app_is_package_data() -> None:
    patterns: dict[str, list[str]] = SETUPTOOLS.get("package-data", {})
    missing = []
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
        package = ".".join(Path(folder).relative_to(APP).parts)
        for name in files:
            if name.endswith((".py", ".pyc")):
                continue
            if not any(fnmatch.fnmatch(name, p) for p in patterns.get(package, [])):
                missing.append(f"{package}: {name}")
    assert missing == [], "not in the wheel: add to [tool.setuptools.package-data]"


def test_version_has_one_source() -> None:
    # The installed metadata is pyproject's version; a mismatch here means a stale install
    # (pip install -e . again), which would print the wrong version too.
    assert jobq.__version__ == VERSION
    out = subprocess.run([sys.executable, "-m", "jobq.cli", "--version"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"jobq {VERSION}\n"



# --- fast: requirements.lock against pyproject.toml and the installed packages -------------

# Dependencies without an upper bound, each with the reason none is needed.
UNBOUNDED = {"tzdata": "the time-zone database: data only, released by year"}


def test_every_dependency_has_an_upper_bound() -> None:
    unbounded = [
        str(req)
        for req in lockfile.declared()
        if canonicalize_name(req.name) not in UNBOUNDED
        and not any(spec.operator in ("<", "<=", "==", "~=", "===") for spec in req.specifier)
    ]
    assert unbounded == [], "the next release of these may break a new install: bound them"


def test_the_lock_pins_each_dependency_within_pyprojects_bounds() -> None:
    pins = lockfile.pins()
    outside = []
    for req in lockfile.declared():
        if not lockfile.applies(req, set()):
            continue  # another platform's
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is None or not req.specifier.contains(pinned, prereleases=True):
            outside.append(f"{req}: locked {pinned}")
    assert outside == [], "remake requirements.lock (see its first lines)"


def installed_closure(top: list[Requirement]) -> dict[NormalizedName, list[tuple[str, Requirement]]]:
    """Every distribution the requirements bring on this machine, through the installed
    packages' own metadata (extras and markers followed), with who asked for it and how."""
    wanted: dict[NormalizedName, list[tuple[str, Requirement]]] = {}
    walked: dict[NormalizedName, set[str]] = {}
    todo = [("jobq", req) for req in top if lockfile.applies(req, set())]
    while todo:
        who, req = todo.pop()
        name = canonicalize_name(req.name)
        wanted.setdefault(name, []).append((who, req))
        extras = set(req.extras)
        if name in walked and extras <= walked[name]:
            continue
        walked[name] = walked.get(name, set()) | extras
        requires = importlib.metadata.distribution(name).requires or []
        todo.extend((name, dep) for dep in map(Requirement, requires) if lockfile.applies(dep, extras))
    return wanted


@pytest.mark.locked
def test_the_installed_packages_are_the_locks_and_it_pins_nothing_else() -> None:
    pins = lockfile.pins()
    wanted = installed_closure(lockfile.declared())
    # Every package the extras bring is pinned, and every pin is one of them (none stale).
    unpinned, stale = sorted(wanted.keys() - pins.keys()), sorted(pins.keys() - wanted.keys())
    assert (unpinned, stale) == ([], []), "remake requirements.lock (see its first lines)"
    # Installed at the pinned version (the README installs with -c requirements.lock), which
    # every package that asks for it accepts: pip would resolve the lock as it stands.
    installed = {name: Version(importlib.metadata.version(name)) for name in wanted}
    assert {n: v for n, v in installed.items() if v != pins[n]} == {}, "install with -c requirements.lock"
    refused = [f"{who} wants {req}, locked {pins[name]}" for name, asks in wanted.items() for who, req in asks
               if not req.specifier.contains(pins[name], prereleases=True)]
    assert refused == []


# --- slow: the wheel and fresh virtual environments -----------------------------------------


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # From a copy of the working tree: setuptools reuses a build/ folder left in the
    # checkout, and would ship modules deleted since (seen: a stale build/lib file lands in
    # the wheel). Built as `python -m build` does by default: an sdist first, and the wheel
    # from that sdist, so the sdist must carry alembic/ and openapi/ for setup.py to copy.
    src = tmp_path_factory.mktemp("src") / "jobq"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".jobq", ".*_cache"))
    out = tmp_path_factory.mktemp("dist")
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(out), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (path,) = out.glob("jobq-*.whl")
    return path


@dataclass(frozen=True)
class Venv:
    root: Path

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def jobq(self) -> Path:
        return self.root / "bin" / "jobq"

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a user's shell with this venv active: nothing of the checkout
        (no PYTHONPATH) and no JOBQ_* settings of ours."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("JOBQ_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env["PATH"] = f"{self.root / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env["VIRTUAL_ENV"] = str(self.root)
        return {**env, **extra}

    def run(self, *args: str | Path, cwd: Path, timeout: float = 120,
            **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(a) for a in args], cwd=cwd, env=self.env(**env),
                              capture_output=True, text=True, timeout=timeout)


def make_venv(root: Path, requirement: str) -> Venv:
    # No pip inside (ensurepip costs seconds): this interpreter's pip installs into it.
    # pip's cache is used as usual; --no-compile skips byte-compiling every dependency.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    venv = Venv(root)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv.python), "install",
                           "--quiet", "--no-compile", requirement],
                          env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return venv


@pytest.fixture(scope="module")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A working directory that is not the checkout and holds nothing of it."""
    cwd = tmp_path_factory.mktemp("user")
    assert not cwd.resolve().is_relative_to(ROOT)
    return cwd


@pytest.fixture(scope="module")
def server_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return make_venv(tmp_path_factory.mktemp("venv") / "server", f"{wheel}[server]")


@pytest.fixture(scope="module")
def base_venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return make_venv(tmp_path_factory.mktemp("venv") / "base", str(wheel))


# Run by the venv's interpreter from `outside`: where jobq and its data come from.
PROBE = """
import importlib.util, json, os, sys, sysconfig
import jobq
from jobq import AsyncClient, Client, Discard, Retry, Worker
info = {
    "version": jobq.__version__,
    "file": jobq.__file__,
    "purelib": sysconfig.get_paths()["purelib"],
    "path": [os.path.abspath(p) for p in sys.path],
    "absent": [m for m in json.loads(sys.argv[1]) if importlib.util.find_spec(m) is None],
}
if "--data" in sys.argv:
    from importlib import resources
    from jobq import bundled
    from jobq.api.openapi import DOCUMENT
    info["data"] = [str(resources.files("jobq.store") / "queries.sql"),
                    str(bundled.migrations() / "env.py"), str(DOCUMENT)]
print(json.dumps(info))
"""


def probe(venv: Venv, cwd: Path, *args: str) -> dict[str, Any]:
    out = venv.run(venv.python, "-c", PROBE, json.dumps(SERVER_ONLY), *args, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def assert_installed_not_checkout(venv: Venv, info: dict[str, Any]) -> None:
    site = Path(info["purelib"])
    assert site.is_relative_to(venv.root)
    assert Path(info["file"]) == site / "jobq" / "__init__.py"
    assert [p for p in info["path"] if Path(p).resolve().is_relative_to(ROOT)] == []


@pytest.mark.slow
@pytest.mark.timeout(SLOW_TIMEOUT_S)
def test_wheel_holds_the_package_its_data_and_nothing_of_the_checkout(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {n.split("/")[0] for n in names} == {"jobq", f"jobq-{VERSION}.dist-info"}
    required = {
        "jobq/store/queries.sql",
        "jobq/migrations/env.py",
        "jobq/migrations/script.py.mako",
        "jobq/openapi/openapi.json",
        *(f"jobq/migrations/versions/{p.name}" for p in (ROOT / "alembic" / "versions").glob("*.py")),
    }
    assert "jobq/migrations/versions/0001_initial.py" in required
    assert required - names == set()
    # Every file of the source folder is in it, under the import name.
    for folder, dirs, files in os.walk(PACKAGE):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        rel = Path(folder).relative_to(APP)
        for name in files:
            assert "/".join((*rel.parts, name)) in names
    entry_points = zipfile.ZipFile(wheel).read(f"jobq-{VERSION}.dist-info/entry_points.txt").decode()
    assert "jobq = jobq.cli:main" in entry_points


@pytest.fixture
def fresh_database(admin_url: str) -> Iterator[str]:
    name = f"jobq_pkg_{uuid.uuid4().hex[:12]}"
    pg.admin_execute(admin_url, sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield pg.with_database(admin_url, name)
    pg.drop(admin_url, name)


@pytest.mark.slow
@pytest.mark.timeout(SLOW_TIMEOUT_S)
def test_server_wheel_runs_from_site_packages_with_its_data(server_venv: Venv, outside: Path) -> None:
    info = probe(server_venv, outside, "--data")
    assert_installed_not_checkout(server_venv, info)
    assert info["version"] == VERSION and info["absent"] == []
    site = Path(info["purelib"])
    for path in map(Path, info["data"]):
        assert path.is_file() and path.is_relative_to(site), path
    # The console script runs the venv's interpreter (pip may wrap a long path in a sh line).
    assert str(server_venv.python) in "".join(server_venv.jobq.read_text().splitlines(True)[:3])


@pytest.mark.slow
@pytest.mark.timeout(SLOW_TIMEOUT_S)
def test_server_wheel_migrates_serves_and_runs_a_job(
    server_venv: Venv, outside: Path, fresh_database: str,
) -> None:
    version = server_venv.run(server_venv.jobq, "--version", cwd=outside)
    assert (version.returncode, version.stdout) == (0, f"jobq {VERSION}\n"), version.stderr

    migrated = server_venv.run(server_venv.jobq, "migrate", cwd=outside, JOBQ_DATABASE_URL=fresh_database)
    assert migrated.returncode == 0, migrated.stderr
    assert "schema is up to date" in migrated.stdout
    with psycopg.connect(fresh_database) as conn:
        row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
    assert row is not None and row[0] == head_revision()  # the checkout's newest migration

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = outside / f"serve-{port}.log"
    with log.open("wb") as log_file:
        proc = subprocess.Popen([str(server_venv.jobq), "serve", "--port", str(port)], cwd=outside,
                                env=server_venv.env(JOBQ_DATABASE_URL=fresh_database),
                                stdout=subprocess.DEVNULL, stderr=log_file)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "jobq serve did not become ready:\n" + log.read_text()
            time.sleep(0.1)

        with httpx.Client(base_url=url, timeout=10) as http:
            r = http.post("/v1/jobs", json={"type": "pkg.check", "queue": "pkg", "payload": {"n": 1}})
            assert r.status_code == 201, r.text
            job_id = r.json()["id"]
            r = http.post("/v1/leases", json={"worker_id": "pkg-test", "queues": ["pkg"]})
            assert r.status_code == 200, r.text
            (lease,) = r.json()["leases"]
            assert lease["job"]["id"] == job_id
            r = http.post(f"/v1/leases/{lease['lease_id']}/ack", json={"result": {"ok": True}})
            assert r.status_code == 200, r.text
            job = http.get(f"/v1/jobs/{job_id}").json()
            # the dashboard's files, read from the installed package's data
            page = http.get("/ui")
            assert page.status_code == 200 and '<script src="/ui/app.js"' in page.text, page.text
            for name in ("app.js", "style.css"):
                assert http.get(f"/ui/{name}").status_code == 200, name
        assert job["status"] == "completed" and job["result"] == {"ok": True}
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 0, log.read_text()


@pytest.mark.slow
@pytest.mark.timeout(SLOW_TIMEOUT_S)
def test_base_wheel_is_the_sdk_without_the_server(base_venv: Venv, outside: Path) -> None:
    info = probe(base_venv, outside)  # imports Client, AsyncClient, Worker, Retry, Discard
    assert_installed_not_checkout(base_venv, info)
    assert info["version"] == VERSION
    assert info["absent"] == list(SERVER_ONLY)


@pytest.mark.slow
@pytest.mark.timeout(SLOW_TIMEOUT_S)
@pytest.mark.parametrize("command", ["serve", "migrate", "bench", "openapi"])
def test_server_commands_without_the_extra_name_it_in_one_line(
    base_venv: Venv, outside: Path, command: str,
) -> None:
    out = base_venv.run(base_venv.jobq, command, cwd=outside)
    assert out.returncode != 0 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert "jobq[server]" in line and command in line


@pytest.mark.slow
@pytest.mark.timeout(SLOW_TIMEOUT_S)
def test_client_commands_without_a_service_fail_in_one_line(base_venv: Venv, outside: Path) -> None:
    out = base_venv.run(base_venv.jobq, "jobs", "--url", "http://127.0.0.1:1", "--json", cwd=outside)
    assert out.returncode == 1 and out.stdout == ""  # stdout is for the answer's JSON only
    (line,) = out.stderr.splitlines()  # with --json, the error is a JSON object too
    error = json.loads(line)
    assert error["error"].startswith("cannot reach http://127.0.0.1:1 (from --url)")
    assert error["reason"] == "ConnectError" and error["url"] == "http://127.0.0.1:1"
    out = base_venv.run(base_venv.jobq, "jobs", "--url", "http://127.0.0.1:1", cwd=outside)
    assert out.returncode == 1 and out.stdout == ""
    (line,) = out.stderr.splitlines()
    assert line.startswith("jobq: cannot reach http://127.0.0.1:1") and "Connect" in line

    # A handler spec that does not import is a typo, not a crash.
    out = base_venv.run(base_venv.jobq, "worker", "no_such_module:handlers", "--url", "http://127.0.0.1:1",
                        cwd=outside)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert "no_such_module" in line and "Traceback" not in out.stdout
