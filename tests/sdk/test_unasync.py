"""The blocking Client is generated from the AsyncClient: the committed file must be what the
generator writes, so an edit of one face alone fails here instead of drifting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from jobq.client import _unasync


def test_the_committed_blocking_client_is_the_generated_one() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "jobq.client._unasync", "--check"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_check_refuses_a_hand_edit_and_a_run_repairs_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    committed = _unasync.TARGET.read_text(encoding="utf-8")
    target = tmp_path / "_client.py"
    edited = committed.replace("def get(", "def fetch(")
    target.write_text(edited, encoding="utf-8")
    monkeypatch.setattr(_unasync, "TARGET", target)

    assert _unasync.main(["--check"]) == 1
    assert target.read_text(encoding="utf-8") == edited  # --check changes nothing
    assert _unasync.main([]) == 0
    assert _unasync.main(["--check"]) == 0
    assert target.read_text(encoding="utf-8") == committed != edited


def test_the_blocking_client_has_no_coroutine_left() -> None:
    text = _unasync.unasync(_unasync.SOURCE.read_text(encoding="utf-8"))
    code = text[len(_unasync.HEADER) :]  # the header names the async client it comes from
    for word in ("async ", "await ", "asyncio", "AsyncClient", "aclose", "# noqa: ASYNC"):
        assert word not in code
    assert text.startswith("# Generated from _async_client.py")
