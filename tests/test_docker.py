"""The Dockerfile, without a Docker engine (no machine of this project has one, so the image
is never built here): its instructions are parsed and checked for a two-stage build that runs
as a user that is not root, and its commands are run outside Docker, each as the Dockerfile
writes it: the first stage's `pip wheel` on the build context that .dockerignore leaves, the
second stage's `pip install` into a fresh virtual environment with no package index and no
pip configuration, then the image's CMD and its HEALTHCHECK against a database no one has
migrated, in a network namespace with loopback only (`unshare -n`), so that a start that
needed the network would fail."""

from __future__ import annotations

import fnmatch
import json
import os
import shlex
import shutil
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
import yaml
from packaging.utils import parse_wheel_filename

from jobq.embedded import EmbeddedPostgres
from jobq.store.migrate import head_revision
from tests import lockfile
from tests.conftest import ROOT, free_port


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [args for kw, args in self.instructions if kw == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"no {keyword} in the stage FROM {self.base}"
        return found[-1]

    def env(self) -> dict[str, str]:
        values: dict[str, str] = {}
        for args in self.all("ENV"):
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                values[key] = value
        return values

    def run_command(self, program: str) -> list[str]:
        """The one command of the stage's RUN lines that starts with ``program`` (a RUN may
        chain several with &&), split as the shell splits it."""
        found = [
            shlex.split(part)
            for args in self.all("RUN")
            for part in args.split("&&")
            if shlex.split(part)[: len(program.split())] == program.split()
        ]
        assert len(found) == 1, (program, self.all("RUN"))
        return found[0]


def parse_dockerfile(text: str) -> list[Stage]:
    """Stages of instructions (keyword, arguments), continuation lines joined, comments dropped."""
    logical: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        logical.append(pending + line)
        pending = ""
    assert not pending, "a continuation line ends the file"
    stages: list[Stage] = []
    for line in logical:
        keyword, _, args = line.partition(" ")
        keyword, args = keyword.upper(), args.strip()
        if keyword == "FROM":
            words = args.split()
            name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
            stages.append(Stage(words[0], name))
        else:
            assert stages, f"{keyword} before the first FROM"
            stages[-1].instructions.append((keyword, args))
    return stages


STAGES = parse_dockerfile((ROOT / "Dockerfile").read_text())


def _exec_form(args: str) -> list[str]:
    words = json.loads(args)  # the exec form: no shell between docker and the process
    assert isinstance(words, list) and all(isinstance(w, str) for w in words), args
    return words


def _healthcheck() -> tuple[list[str], list[str]]:
    """The HEALTHCHECK's options and its command."""
    options, _, command = STAGES[-1].last("HEALTHCHECK").partition(" CMD ")
    return options.split(), _exec_form(command)


def _cmd() -> list[str]:
    assert STAGES[-1].all("ENTRYPOINT") == []  # CMD alone: `docker run jobq jobq migrate` works
    return _exec_form(STAGES[-1].last("CMD"))


def _port() -> str:
    cmd = _cmd()
    return cmd[cmd.index("--port") + 1]


# --- fast: the Dockerfile's structure ---------------------------------------------------------


def test_two_stages_the_first_builds_wheels_of_the_checkout() -> None:
    assert len(STAGES) == 2, [s.base for s in STAGES]
    build, final = STAGES
    assert build.name and build.base.startswith("python:") and final.base.startswith("python:")
    assert build.base == final.base  # wheels built for the interpreter that installs them
    assert build.all("COPY") == [". ."]
    wheel = build.run_command("pip wheel")
    assert wheel[-1] == ".[server]" and "--wheel-dir" in wheel
    # At the versions the suite passed on: the lock, as constraints (it also pins test tools).
    assert wheel[wheel.index("--constraint") + 1] == lockfile.LOCK.name


def test_the_final_stage_installs_only_the_first_stages_wheels() -> None:
    build, final = STAGES
    wheels = build.run_command("pip wheel")
    built_into = wheels[wheels.index("--wheel-dir") + 1]
    (copy,) = final.all("COPY")
    source, target = copy.removeprefix(f"--from={build.name} ").split()
    assert copy.startswith(f"--from={build.name} ") and source == built_into
    install = final.run_command("pip install")
    assert "--no-index" in install and install[install.index("--find-links") + 1] == target
    assert install[-1] == "jobq[server]"
    # Nothing in the final stage fetches anything: no other pip, apt or download.
    for args in final.all("RUN"):
        for tool in ("apt-get", "apk", "curl", "wget", "pip download"):
            assert tool not in args, args
        for part in args.split("&&"):
            assert "pip" not in part or "--no-index" in part, part


def test_the_final_stage_runs_as_a_user_that_is_not_root() -> None:
    final = STAGES[-1]
    user = final.last("USER")
    name, _, group = user.partition(":")
    assert name not in ("root", "0") and group not in ("root", "0"), user
    # The user exists in the image, made with that uid.
    (useradd,) = [shlex.split(a) for a in final.all("RUN") if a.startswith("useradd ")]
    assert useradd[useradd.index("--uid") + 1] == name
    # Everything after USER runs as that user; nothing is installed after it.
    keywords = [kw for kw, _ in final.instructions]
    assert "RUN" not in keywords[keywords.index("USER") :]


def test_the_image_serves_on_the_port_it_exposes_and_compose_publishes() -> None:
    assert _cmd()[:2] == ["jobq", "serve"]
    cmd = _cmd()
    assert cmd[cmd.index("--host") + 1] == "0.0.0.0"  # reachable from outside its container
    assert STAGES[-1].all("EXPOSE") == [_port()]
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]
    for name in ("jobq", "jobq-a", "jobq-b"):
        assert services[name]["build"] == "."
        assert services[name]["ports"][0].split(":")[-1] == _port(), name


def test_the_healthcheck_asks_readyz_with_the_standard_library() -> None:
    options, command = _healthcheck()
    assert command[:2] == ["python", "-c"], command  # the slim image has no curl
    assert f"http://127.0.0.1:{_port()}/readyz" in command[2]
    assert any(o.startswith("--start-period=") for o in options)


def _dockerignored(rel: str, patterns: list[str]) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return any(fnmatch.fnmatch(rel, p) or (p.startswith("**/") and fnmatch.fnmatch(name, p[3:])) for p in patterns)


DOCKERIGNORE = [
    line.strip()
    for line in (ROOT / ".dockerignore").read_text().splitlines()
    if line.strip() and not line.startswith("#")
]


def build_context(dest: Path) -> Path:
    """What `docker build .` sends: the checkout less what .dockerignore names."""

    def ignore(folder: str, names: list[str]) -> set[str]:
        rel = Path(folder).relative_to(ROOT).as_posix()
        return {n for n in names if _dockerignored(n if rel == "." else f"{rel}/{n}", DOCKERIGNORE)}

    shutil.copytree(ROOT, dest, ignore=ignore)
    return dest


def test_the_build_context_holds_the_package_and_none_of_the_local_state(tmp_path: Path) -> None:
    context = build_context(tmp_path / "context")
    present = {p.name for p in context.iterdir()}
    # README: pyproject's readme; setup.py: the build step that copies alembic/ and openapi/ in
    assert {"pyproject.toml", "setup.py", "README.md", "requirements.lock", "app", "alembic", "openapi"} <= present
    for local in (".venv", ".jobq", "tests", ".git", "build", ".ci"):
        assert local not in present
    assert not list(context.rglob("__pycache__")) and not list(context.rglob("*.egg-info"))
    assert (context / "app" / "jobq" / "__init__.py").is_file()


# --- slow: the Dockerfile's commands, run outside Docker ---------------------------------------


# Run inside the "container" (a network namespace with loopback only, when the machine allows
# one): the image's CMD, its HEALTHCHECK before and after, one authenticated request, and a
# probe that nothing outside is reachable. Standard library only; prints what it saw as JSON.
CONTAINER = r"""
import json, os, socket, subprocess, sys, time, urllib.error, urllib.request
spec = json.loads(sys.argv[1])
def healthy():
    return subprocess.run(spec["health"], env=spec["env"], capture_output=True, timeout=30).returncode == 0
seen = {"healthy_before": healthy()}
try:
    socket.create_connection(("192.0.2.1", 443), timeout=3).close()  # TEST-NET-1: never answers
    seen["outside"] = "connected"
except OSError as exc:
    seen["outside"] = type(exc).__name__ + ":" + os.strerror(exc.errno or 0)
with open(spec["log"], "wb") as log:
    proc = subprocess.Popen(spec["cmd"], cwd=spec["cwd"], env=spec["env"], stdout=subprocess.DEVNULL, stderr=log)
deadline = time.monotonic() + 90
while proc.poll() is None and not healthy() and time.monotonic() < deadline:
    time.sleep(0.5)
seen["healthy"] = proc.poll() is None and healthy()
def post(headers):
    request = urllib.request.Request(spec["url"] + "/v1/jobs", method="POST", headers=headers,
                                     data=b'{"type": "docker.check", "queue": "docker", "payload": {}}')
    try:
        return urllib.request.urlopen(request, timeout=10).status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError as exc:
        return repr(exc)
json_body = {"content-type": "application/json"}
seen["enqueue"] = post({**json_body, "authorization": "Bearer " + spec["env"]["JOBQ_ADMIN_TOKEN"]})
seen["anonymous"] = post(json_body)
proc.terminate()
try:
    seen["exit"] = proc.wait(20)
except subprocess.TimeoutExpired:
    proc.kill()
    seen["exit"] = proc.wait(10)
print(json.dumps(seen))
"""


def _netns() -> list[str]:
    """`unshare -rn` (a network namespace of its own, loopback only) if this machine allows
    it; else nothing, with a warning: the rest of the test still runs."""
    unshare, ip = shutil.which("unshare"), shutil.which("ip") or "/usr/sbin/ip"
    # -n alone where it is allowed (root): -r would make root a stranger to the embedded
    # server's socket, owned by the unprivileged user PostgreSQL runs as.
    for flags in ("-n", "-rn"):
        netns = [str(unshare), flags, "sh", "-c", f'{ip} link set lo up && exec "$0" "$@"']
        if unshare and Path(ip).exists():
            if subprocess.run([*netns, "true"], capture_output=True, timeout=30).returncode == 0:
                return netns
    warnings.warn("no network namespace here (unshare -rn): the image's start runs with the network", stacklevel=2)
    return []


def _remap(words: list[str], paths: dict[str, Path]) -> list[str]:
    return [str(paths[w]) if w in paths else w for w in words]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_images_commands_install_offline_then_migrate_and_serve_with_no_network(tmp_path: Path) -> None:
    build, final = STAGES
    # Stage 1, as written, in a copy of the build context (with this machine's package index,
    # as a `docker build` has PyPI).
    context = build_context(tmp_path / "context")
    wheels = tmp_path / "wheels"
    wheel = build.run_command("pip wheel")
    built_into = wheel[wheel.index("--wheel-dir") + 1]
    done = subprocess.run(
        [sys.executable, "-m", *_remap(wheel, {built_into: wheels})],
        cwd=context,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert list(wheels.glob("jobq-*.whl"))
    # Each dependency's wheel is at the version the lock pins.
    pins = lockfile.pins()
    built = {name: version for name, version, _, _ in map(parse_wheel_filename, (w.name for w in wheels.glob("*.whl")))}
    assert {n: v for n, v in built.items() if n != "jobq" and pins.get(n) != v} == {}

    # Stage 2, as written, into a fresh venv: no index, and no pip configuration or PIP_*
    # setting of this machine (its find-links would hide a wheel missing from stage 1's).
    venv = tmp_path / "image"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    install = final.run_command("pip install")
    target = install[install.index("--find-links") + 1]
    no_config = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "VIRTUAL_ENV"}
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), *_remap(install[1:], {target: wheels})],
        env={**no_config, **final.env(), "PIP_CONFIG_FILE": os.devnull, "PIP_NO_COMPILE": "1"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    # The container: the image's ENV and what compose gives it, nothing of this machine's; its
    # database a fresh, unmigrated one, reached through a Unix socket (no network needed).
    port = str(free_port())
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    _, health = _healthcheck()
    netns = _netns()
    with EmbeddedPostgres.temporary(database="jobq") as database:
        spec = {
            "isolated": bool(netns),
            "cmd": [str(venv / "bin" / c) if i == 0 else (port if c == _port() else c) for i, c in enumerate(_cmd())],
            "health": [str(venv / "bin" / "python"), *health[1:-1], health[-1].replace(f":{_port()}/", f":{port}/")],
            "env": {
                "PATH": f"{venv / 'bin'}:/usr/bin:/bin",
                "HOME": str(workdir),
                **final.env(),
                "JOBQ_DATABASE_URL": database.url,
                "JOBQ_ADMIN_TOKEN": "docker-test-admin-token-0123456789",
            },
            "cwd": str(workdir),
            "url": f"http://127.0.0.1:{port}",
            "log": str(tmp_path / "serve.log"),
        }
        ran = subprocess.run(
            [*netns, sys.executable, "-c", CONTAINER, json.dumps(spec)], capture_output=True, text=True, timeout=300
        )
        log = (tmp_path / "serve.log").read_text()
        assert ran.returncode == 0, ran.stderr + log
        seen = json.loads(ran.stdout)
        with psycopg.connect(database.url) as conn:
            migrated = conn.execute("SELECT version_num FROM alembic_version").fetchone()

    if netns:
        assert seen["outside"].startswith("OSError:Network is unreachable"), seen  # the namespace is real
    assert seen["healthy_before"] is False  # nothing served yet: the check can fail
    assert seen["healthy"] is True, log
    assert migrated is not None and migrated[0] == head_revision()  # jobq serve migrated it at start
    # It bound every address, which it does only with the admin token the environment gave it.
    assert (seen["enqueue"], seen["anonymous"]) == (201, 401), seen
    assert seen["exit"] == 0, log
    assert list(workdir.iterdir()) == []  # no embedded server of its own, nothing written where it runs
