"""The README's worker in bash, curl and jq, taken from README.md as written (its own
``handle`` swapped for one serving the kit's job types, as a user plugs in their work), under
``jobq conformance``: every check holds but the two the README says it leaves out."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.conformance.kit import CHECKS, run_kit
from tests.conftest import LiveServer
from tests.readme import README, WORKER_SECTION, section, worker_script

# What the README says a short loop leaves out, and the test therefore skips.
LEFT_OUT = ["heartbeat", "stop"]

# The kit's three job types: echo the payload; fail for good (status 2: retry false) with the
# message; sleep ms, then say so.
HANDLE = """
handle() {
  case $(jq -r .type <<<"$1") in
    conformance.echo) jq -c .payload <<<"$1" ;;
    conformance.fail) jq -r .payload.message <<<"$1" >&2; return 2 ;;
    conformance.sleep) sleep "$(jq '.payload.ms / 1000' <<<"$1")"; jq -c '{slept: .payload.ms}' <<<"$1" ;;
    *) echo "no handler for this job type" >&2; return 2 ;;
  esac
}
"""


@pytest.fixture(autouse=True)
def curl_and_jq() -> None:
    """The README's worker needs them; a machine without them fails here, it does not skip."""
    missing = [tool for tool in ("curl", "jq", "bash") if shutil.which(tool) is None]
    assert not missing, f"the README's worker needs {', '.join(missing)} installed"


def test_the_readme_says_which_checks_its_worker_leaves_out() -> None:
    text = README.read_text()
    prose = text[text.index(f"\n## {WORKER_SECTION}\n"):]
    prose = prose[:prose.index("\n## ", 1)]
    command = re.search(r"`jobq conformance [^`]* --skip ([a-z,-]+) -- bash worker\.sh`", prose)
    assert command, "the README shows the kit's command line for its worker"
    assert command.group(1).split(",") == LEFT_OUT
    for check in LEFT_OUT:  # each with its reason, in a bullet of its own
        assert re.search(rf"^- `{check}`: \S", prose, re.M), check
    assert "bash worker.sh" in prose and section(WORKER_SECTION)


@pytest.mark.timeout(180)
def test_the_readme_worker_holds_every_check_but_those_it_leaves_out(
        kit_server: LiveServer, tmp_path: Path) -> None:
    script = tmp_path / "worker.sh"
    script.write_text(worker_script(HANDLE))
    done = run_kit(kit_server.url, ["bash", str(script)], skip=LEFT_OUT)
    assert done.code == 0, done.output
    assert done.held() == [c for c in CHECKS if c not in LEFT_OUT], done.output
