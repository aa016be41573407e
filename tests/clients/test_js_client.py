"""The JavaScript client (clients/js, ``@jobq/client``): its ``node --test`` suite against a
live ``jobq serve``, the tarball ``npm pack`` makes installed into a scratch project, and
a smoke run in Deno and Bun (both from npm, pinned in clients/js/test/runtimes).

The package is copied out of the checkout with openapi/openapi.json beside it, as in the
repository, and installed there with ``npm ci`` (package-lock.json): tests on two xdist
workers never share a node_modules, and a developer's own is left alone. Without node and
npm these tests skip, saying so; JOBQ_TEST_REQUIRE_NODE=1 makes them fail instead.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conformance.kit import CHECKS, run_kit, worker_token
from tests.conftest import ROOT, LiveServer
from tests.test_docs import anchors, links

PACKAGE = ROOT / "clients" / "js"
ADMIN = "js-client-tests-admin-token-0123456789"
NPM_TIMEOUT_S = 300


def _tools_or_skip(*tools: str) -> None:
    missing = [tool for tool in tools if shutil.which(tool) is None]
    if not missing:
        return
    why = f"{', '.join(missing)} not on PATH"
    if os.environ.get("JOBQ_TEST_REQUIRE_NODE") == "1":
        pytest.fail(f"{why}, and JOBQ_TEST_REQUIRE_NODE=1")
    pytest.skip(why)


def run(args: list[str], cwd: Path, timeout_s: float = NPM_TIMEOUT_S,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command; fail the test with its whole output unless it exits 0."""
    done = subprocess.run(args, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout_s)
    if done.returncode != 0:
        pytest.fail(f"{' '.join(args)} (in {cwd}) exited {done.returncode}\n"
                    f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}")
    return done


def copy_package(into: Path) -> Path:
    """clients/js without its node_modules, with ../../openapi/openapi.json where the
    generator and its staleness test look for it."""
    target = into / "clients" / "js"
    shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("node_modules", "*.tgz"))
    (into / "openapi").mkdir()
    shutil.copy(ROOT / "openapi" / "openapi.json", into / "openapi" / "openapi.json")
    return target


@pytest.fixture(scope="session")
def js_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _tools_or_skip("node", "npm")
    package = copy_package(tmp_path_factory.mktemp("js"))
    run(["npm", "ci", "--no-audit", "--no-fund"], cwd=package)
    return package


@pytest.fixture
def server_with_token(database_url: str) -> Iterator[LiveServer]:
    """A live service with an admin token, so the client's Authorization header is used
    (and the refused-token test runs)."""
    server = LiveServer(database_url, env={"JOBQ_ADMIN_TOKEN": ADMIN})
    server.start()
    yield server
    server.stop()


def test_node_tests_pass_against_a_live_service(js_package: Path, server_with_token: LiveServer) -> None:
    tests = sorted(str(p.relative_to(js_package)) for p in (js_package / "test").glob("*.test.mjs"))
    assert len(tests) >= 3, tests
    done = run(["node", "--test", *tests], cwd=js_package, timeout_s=180,
               env={"JOBQ_URL": server_with_token.url, "JOBQ_TOKEN": ADMIN})
    summary = {line.split()[1]: int(line.split()[2]) for line in done.stdout.splitlines()
               if line.startswith("# ") and len(line.split()) == 3 and line.split()[2].isdigit()}
    # Every test ran: none skipped for want of JOBQ_URL or a token.
    assert summary.get("fail") == 0 and summary.get("skipped") == 0 and summary.get("pass", 0) >= 20, done.stdout


def test_npm_pack_installs_into_a_scratch_project_and_imports(js_package: Path, tmp_path: Path) -> None:
    packed = run(["npm", "pack", "--json", "--pack-destination", str(tmp_path)], cwd=js_package)
    tarball = tmp_path / json.loads(packed.stdout)[0]["filename"]
    with tarfile.open(tarball) as tar:
        names = set(tar.getnames())
    assert {"package/package.json", "package/README.md", "package/src/index.js",
            "package/src/index.d.ts", "package/src/openapi.d.ts"} <= names, names
    assert not any("/test/" in name or "node_modules" in name for name in names), names

    project = tmp_path / "app"
    project.mkdir()
    (project / "package.json").write_text(json.dumps({"name": "app", "private": True, "type": "module"}))
    run(["npm", "install", "--no-audit", "--no-fund", str(tarball)], cwd=project)
    assert not (project / "node_modules" / "@jobq" / "client" / "node_modules").exists()
    script = (
        "import { Client, Worker, QueueFull, Retry, Discard, VERSION } from '@jobq/client';"
        "const c = new Client({ url: 'http://127.0.0.1:8000' });"
        "const w = new Worker({ url: c.url, queues: ['q'], handlers: { t: async () => 1 } });"
        "console.log(VERSION, typeof QueueFull, typeof Retry, typeof Discard, w.url);"
    )
    done = run(["node", "--input-type=module", "-e", script], cwd=project)
    assert done.stdout.split() == ["0.1.0", "function", "function", "function", "http://127.0.0.1:8000"]

    # A TypeScript user of the installed package gets its types through "exports".
    (project / "use.ts").write_text(
        "import { Client, QueueFull, type Job } from '@jobq/client';\n"
        "const c = new Client({ url: 'http://127.0.0.1:8000' });\n"
        "export async function f(): Promise<string> {\n"
        "  try { const job: Job = await c.enqueue('t', { a: 1 }, { delayMs: 5 }); return job.status; }\n"
        "  catch (e) { if (e instanceof QueueFull) return String(e.retryAfterMs); throw e; }\n"
        "}\n"
    )
    (project / "tsconfig.json").write_text(json.dumps({
        "compilerOptions": {"strict": True, "noEmit": True, "module": "nodenext",
                            "moduleResolution": "nodenext", "target": "es2022",
                            "lib": ["es2022", "dom"], "types": []},
        "files": ["use.ts"],
    }))
    run(["node", str(js_package / "node_modules" / "typescript" / "bin" / "tsc"), "-p", "."], cwd=project)


@pytest.mark.slow
def test_the_client_works_in_deno_and_bun(server_with_token: LiveServer, tmp_path: Path) -> None:
    """Deno and Bun from npm (pinned in clients/js/test/runtimes/package-lock.json): the
    package loads without a `node:` import at load time, and a Client and a Worker do one
    job's round trip. Deno runs without --allow-sys, so the host name's guard is exercised."""
    _tools_or_skip("node", "npm")
    package = copy_package(tmp_path)
    runtimes = package / "test" / "runtimes"
    run(["npm", "ci", "--no-audit", "--no-fund"], cwd=runtimes)
    env = {"JOBQ_URL": server_with_token.url, "JOBQ_TOKEN": ADMIN}
    bun = run([str(runtimes / "node_modules" / ".bin" / "bun"), "smoke.mjs"], cwd=runtimes, env=env, timeout_s=60)
    assert "smoke ok bun" in bun.stdout, bun.stdout + bun.stderr
    deno = run([str(runtimes / "node_modules" / ".bin" / "deno"), "run", "--allow-net",
                "--allow-env=JOBQ_URL,JOBQ_TOKEN", "--allow-read", "smoke.mjs"],
               cwd=runtimes, env={**env, "DENO_NO_UPDATE_CHECK": "1", "NO_COLOR": "1"}, timeout_s=60)
    assert "smoke ok deno" in deno.stdout, deno.stdout + deno.stderr


@pytest.mark.slow  # the kit's six checks take about 25 s, as they must (idle 5 s, refusals 6 s, a 6 s job, a 5 s grace)
def test_the_js_worker_passes_the_conformance_kit(server_with_token: LiveServer) -> None:
    """clients/js/examples/conformance-worker.mjs, @jobq/client's Worker with the kit's three
    handlers, passes every check of ``jobq conformance``, with a worker token of its own.
    It imports the package by its name from inside it (Node resolves a package's own name
    through its "exports"), so it needs no npm install."""
    _tools_or_skip("node")
    worker = [shutil.which("node") or "node", str(PACKAGE / "examples" / "conformance-worker.mjs")]
    done = run_kit(server_with_token.url, worker, token=ADMIN,
                   worker_token=worker_token(server_with_token.url, ADMIN))
    assert done.code == 0, done.output
    assert done.held() == list(CHECKS), done.output
    assert done.lines[-1] == "conformance: 6 of 6 checks hold", done.output
    assert "worker| jobq worker: job " in done.stderr and "released (shutdown)" in done.stderr, done.output


def test_the_package_readme_links_only_into_the_repository() -> None:
    """clients/js/README.md stands alone: each relative link reaches a file or heading of
    the repository (as tests/test_docs.py checks for the README and the guide)."""
    readme = PACKAGE / "README.md"
    broken = []
    for link in links(readme):
        assert not link.startswith(("http:", "https:")), f"links out of the repository: {link}"
        target, _, anchor = link.partition("#")
        file = (readme.parent / target).resolve() if target else readme
        if not file.exists() or (anchor and anchor not in anchors(file)):
            broken.append(link)
    assert not broken, broken
    assert "clients/js/README.md" in (ROOT / "README.md").read_text()
