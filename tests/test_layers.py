"""The import rules of the layout (api -> core -> store; SDK and worker apart) hold."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert exe, "import-linter is part of the test extras"
    out = subprocess.run([exe], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_conformance_kit_needs_only_the_sdk_httpx_and_the_standard_library() -> None:
    # It must run in the thin install (no server extra): importing it loads nothing of the
    # server or its dependencies, nor the CLI (the import-linter contract keeps it from
    # importing the worker runner, which `import jobq` loads anyway).
    probe = ("import sys, jobq.conformance, jobq.conformance.checks, jobq.conformance.proxy; "
             "print(' '.join(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    loaded = set(out.stdout.split())
    for name in ("fastapi", "starlette", "sqlalchemy", "psycopg", "pydantic", "uvicorn", "typer",
                 "jobq.api", "jobq.core", "jobq.store", "jobq.settings", "jobq.cli"):
        assert name not in loaded, f"jobq.conformance imports {name}"
    assert "httpx" in loaded and "jobq.client" in loaded
