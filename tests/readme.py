"""README.md's shell blocks, read from the README itself (not from a copy), for the tests
that run them: tests/test_readme_walkthrough.py and tests/conformance/test_readme_worker.py."""

from __future__ import annotations

import os
import re

from tests.conftest import ROOT

README = ROOT / "README.md"
WORKER_SECTION = "Any language: a worker in curl and jq"
# The README worker's own handler, from its first line to the closing brace at the start
# of a line.
_HANDLE = re.compile(r"^handle\(\) \{.*?^\}\n", re.S | re.M)


def section(title: str) -> str:
    """The shell blocks of one README section, in order, as one script."""
    text = README.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    blocks = re.findall(r"^```sh\n(.*?)^```", text[start:end], re.S | re.M)
    assert blocks, title
    return "\n".join(blocks)


def worker_script(handle: str | None = None) -> str:
    """The README's worker loop; with ``handle``, that function in place of the README's
    (the loop around it as written), as a user plugs in their own work."""
    script = section(WORKER_SECTION)
    if handle is None:
        return script
    assert len(_HANDLE.findall(script)) == 1, "the README's worker defines handle() once"
    return _HANDLE.sub(lambda _: handle.strip() + "\n", script)


def worker_env(url: str, **extra: str) -> dict[str, str]:
    """The environment the README's worker loop reads: the service's URL in JOBQ_URL, and no
    token or queues of the test's own environment (its queue is then the default, email)."""
    env = {k: v for k, v in os.environ.items() if k not in ("JOBQ_URL", "JOBQ_TOKEN", "JOBQ_QUEUES")}
    return {**env, "JOBQ_URL": url, **extra}
